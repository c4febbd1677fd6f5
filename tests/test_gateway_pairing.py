"""Pairing a `--gateway URL` laptop's device, command by command, against the scripted fake in
its `pairing: "remote"` mode (OpenClaw 2026.9.6 off loopback, as measured on the real gateway:
tests/interop_openclaw/test_remote_netns.py). After each `openclaw devices approve` (a first
pairing, a scope upgrade) the next command without the shared secret cannot get in, and says
what happened and what to run; one command with the secret fetches the device token and every
later one needs none. A device token asked to write names the scope it lacks. The identity
file's scopes follow the approval."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

from tests.helpers import run_cli

from .fakes import gateway as fake

TOKEN = "s3cret-pairing-T0ken"


class Laptop:
    def __init__(self, tmp: Path, port: int) -> None:
        self.state = tmp / "laptop"
        self.url = f"ws://127.0.0.1:{port}"

    def run(self, *args: str, secret: bool = False) -> subprocess.CompletedProcess[str]:
        env = {
            "SESSIONTOOL_STATE_DIR": str(self.state),
            "SESSIONTOOL_OPENCLAW_BIN": "",
            "OPENCLAW_GATEWAY_TOKEN": TOKEN if secret else "",
        }
        proc = run_cli("--gateway", self.url, *args, env=env, timeout=120)
        assert TOKEN not in proc.stdout + proc.stderr
        assert "internal error" not in proc.stderr
        return proc

    def refused(self, *args: str, secret: bool = False) -> dict[str, Any]:
        proc = self.run(*args, "--json", secret=secret)
        assert proc.returncode == 4, proc.stdout + proc.stderr
        got = json.loads(proc.stdout)
        assert isinstance(got, dict)
        hint = proc.stderr.partition("\nhint: ")[2].strip()
        assert hint, proc.stderr  # the error line, then what to run
        got["hint"] = hint
        assert "AUTH_" not in got["error"] and "gateway.auth" not in hint
        assert "openclaw.json" not in got["error"] + hint  # this laptop has none
        return got

    def tokens(self) -> dict[str, Any]:
        (ident,) = self.state.rglob("gateway-device.json")
        tokens = json.loads(ident.read_text())["tokens"]
        assert isinstance(tokens, dict)
        return tokens


def request_of(err: dict[str, Any]) -> str:
    m = re.search(r"pairing request ([0-9a-f-]{36})", err["error"])
    assert m, err
    assert f"openclaw devices approve {m.group(1)}" in err["hint"]
    return m.group(1)


def test_after_each_approval_the_next_command_without_the_secret_says_what_to_run(
    tmp_path: Path,
) -> None:
    with fake.running(
        tmp_path / "gw", token=TOKEN, pairing="remote", clear_deviceless_scopes=True
    ) as gw:
        me = Laptop(tmp_path, gw.port)
        never = me.refused("list")
        assert never["error"].endswith(
            "needs its shared secret: sessiontool has none for it, and no device token from an "
            "earlier pairing"
        )
        assert "set OPENCLAW_GATEWAY_TOKEN" in never["hint"]

        first = me.refused("list", secret=True)
        rid = request_of(first)
        assert "has not approved sessiontool's device yet" in first["error"]
        assert "again with the shared secret set" in first["hint"]
        gw.set(approved=[rid])
        # The approval is done, but the token comes only on a connection with the secret.
        after = me.refused("list")
        assert f"has no device token for sessiontool yet (pairing request {rid})" in after["error"]
        assert "run this command once with OPENCLAW_GATEWAY_TOKEN" in after["hint"]
        doctor = me.run("doctor", "--json")
        assert doctor.returncode == 1
        remote = json.loads(doctor.stdout)["gateway"]["remote"]
        assert remote["pairing"] == f"requested (request {rid})"
        assert me.run("list", secret=True).returncode == 0
        assert [t["scopes"] for t in me.tokens().values()] == [["operator.read"]]
        assert me.run("list").returncode == 0  # the device token alone now


def test_a_scope_upgrade_names_the_scope_lacking_and_the_file_follows_the_approval(
    tmp_path: Path,
) -> None:
    with fake.running(
        tmp_path / "gw", token=TOKEN, pairing="remote", clear_deviceless_scopes=True
    ) as gw:
        me = Laptop(tmp_path, gw.port)
        rid = request_of(me.refused("list", secret=True))
        gw.set(approved=[rid])
        assert me.run("list", secret=True).returncode == 0  # paired for operator.read

        lacking = me.refused("label", "main", "one")
        assert lacking["error"].endswith(
            "approved sessiontool's device for operator.read; this command also needs "
            "operator.write"
        )
        assert lacking["lackingScopes"] == ["operator.write"]
        assert "run this command once with OPENCLAW_GATEWAY_TOKEN" in lacking["hint"]
        upgrade = me.refused("label", "main", "one", secret=True)
        rid2 = request_of(upgrade)
        assert (
            "for operator.read; this command also needs operator.write (pairing"
            in (upgrade["error"])
        )
        gw.set(approved=[rid, rid2])
        replaced = me.refused("label", "main", "one")
        assert "no longer takes the device token sessiontool kept" in replaced["error"]
        assert f"(pairing request {rid2}) replaced it" in replaced["error"]
        assert "run this command once with OPENCLAW_GATEWAY_TOKEN" in replaced["hint"]
        assert list(me.tokens().values())[0]["scopes"] == ["operator.read"]  # kept, not dropped

        assert me.run("label", "main", "two", secret=True).returncode == 0
        want = ["operator.read", "operator.write"]
        assert [sorted(t["scopes"]) for t in me.tokens().values()] == [want]
        assert me.run("label", "main", "three").returncode == 0
        assert me.run("list").returncode == 0
        # A read on the token approved for writes does not narrow what the file says.
        assert [sorted(t["scopes"]) for t in me.tokens().values()] == [want]
    labels = [c["params"]["label"] for c in gw.calls("sessions.patch")]
    assert labels == ["two", "three"]


def test_without_cryptography_a_pairing_names_the_extra_and_a_shared_secret_needs_none(
    tmp_path: Path,
) -> None:
    """`cryptography` is the optional extra `gateway` (README line 1 installs without it): a
    command that must pair says so in one line naming the extra (exit 2), nothing half-written;
    one a shared secret lets in needs no device and works without it."""
    stub = tmp_path / "no-cryptography"
    (stub / "cryptography").mkdir(parents=True)
    (stub / "cryptography" / "__init__.py").write_text("raise ImportError('not installed')\n")
    hidden = {"PYTHONPATH": str(stub)}
    with fake.running(
        tmp_path / "gw", token=TOKEN, pairing="remote", clear_deviceless_scopes=True
    ) as gw:
        me = Laptop(tmp_path, gw.port)
        proc = run_cli(
            "--gateway", me.url, "list",
            env={**hidden, "SESSIONTOOL_STATE_DIR": str(me.state), "SESSIONTOOL_OPENCLAW_BIN": "",
                 "OPENCLAW_GATEWAY_TOKEN": TOKEN},
            timeout=120,
        )  # fmt: skip
        assert proc.returncode == 2, proc.stdout + proc.stderr
        (line,) = proc.stderr.splitlines()
        assert line.endswith(
            "not installed: install the `gateway` extra "
            "(pip install 'cryptography>=42' into sessiontool's environment)"
        ), line
        assert "Traceback" not in proc.stderr and proc.stdout == ""
        assert not list(me.state.rglob("gateway-device.json"))
    with fake.running(tmp_path / "gw2", token=TOKEN) as gw:  # loopback: the secret is enough
        proc = run_cli(
            "--gateway", f"ws://127.0.0.1:{gw.port}", "--json", "list",
            env={**hidden, "SESSIONTOOL_STATE_DIR": str(tmp_path / "other"),
                 "SESSIONTOOL_OPENCLAW_BIN": "", "OPENCLAW_GATEWAY_TOKEN": TOKEN},
            timeout=120,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert "sessions" in json.loads(proc.stdout)
