"""The real OpenClaw 2026.9.6 gateway on another host: a network namespace this test makes, joined
by a veth pair, the gateway bound to the namespace's address (tests/interop_openclaw/netns.py).
sessiontool starts from an empty local state dir, as on a laptop that has never seen the gateway:
- ws://: the first connection exits 4 with the pairing request and the `openclaw devices approve`
  line; after the approval (run on the gateway's host) list/history/send work, on the device
  token sessiontool stored (0600); a write asks once more (operator.write, a scope upgrade);
  after each approval the first command runs without the shared secret: the real gateway
  hands a device token only to a connection with it, so that command exits 4 saying so and
  what to run (once with OPENCLAW_GATEWAY_TOKEN), and every command after that one needs no
  secret; `gateway forget URL` forgets the device and the next connection needs pairing again;
- wss:// with the certificate the gateway generated (gateway.tls): the right
  gateway.remote.tlsFingerprint connects, a wrong one is refused (exit 4, one line) and no
  pairing request reaches the gateway; with no pin the self-signed certificate is not trusted;
- across both: the shared token, the device's private key and its device token appear in no
  output and in no file under the local state dir but the 0600 identity file itself.

Needs root and `ip` (skipped with that reason otherwise). The namespace, the gateways and their
fake LLM are removed in the fixture's finalizer, whatever happened.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import START_TIMEOUT, TOKEN, openclaw_bin, unavailable
from .netns import Gateway, Netns, why_not


class Net:
    def __init__(self, plain: Gateway, tls: Gateway) -> None:
        self.plain, self.tls = plain, tls


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Net]:
    if not os.access(openclaw_bin(), os.X_OK):  # a missing install fails under STRICT
        unavailable(f"no openclaw at {openclaw_bin()} (tests/fixtures/tools/setup-openclaw.sh)")
    reason = why_not()  # no root, no `ip`, namespaces not allowed: this machine cannot
    if reason is not None:
        pytest.skip(reason)
    ns = Netns(tmp_path_factory.mktemp("netns"))
    try:
        plain, tls = ns.start("plain"), ns.start("tls", tls=True)
        deadline = time.monotonic() + START_TIMEOUT
        plain.wait_listening(deadline)
        tls.wait_listening(deadline)
        yield Net(plain, tls)
    finally:
        ns.close()


def client_env(state: Path, **more: str) -> dict[str, str]:
    """A machine with no OpenClaw: no `openclaw` on PATH, no OpenClaw config or state of the
    gateway's, only sessiontool's own (empty) state dir."""
    env = {
        "PATH": os.pathsep.join(
            d
            for d in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep)
            if d and not os.access(os.path.join(d, "openclaw"), os.X_OK)
        ),
        "HOME": str(state.parent / "home"),
        "TZ": "UTC",
        "SESSIONTOOL_STATE_DIR": str(state),
        "SESSIONTOOL_OPENCLAW_BIN": "",
    }
    env.update(more)
    return env


class Laptop:
    """sessiontool runs from one empty state dir; every output kept for the secret check."""

    def __init__(self, state: Path) -> None:
        state.mkdir(parents=True)
        self.state = state
        self.texts: list[str] = []

    def run(self, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [sys.executable, "-m", "sessiontool", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        self.texts += [proc.stdout, proc.stderr]
        assert "internal error" not in proc.stderr, proc.stderr
        return proc

    def json(self, env: dict[str, str], *args: str) -> Any:
        proc = self.run(env, *args, "--json")
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    def identity(self) -> Path:
        found = list(self.state.rglob("gateway-device.json"))
        assert len(found) == 1, found
        return found[0]

    def assert_secret_free(self, secrets: list[str]) -> int:
        """No secret in any output, nor in any file of the state dir (run records, worker logs,
        lanes) but the identity file, which is 0600."""
        ident = self.identity()
        assert ident.stat().st_mode & 0o777 == 0o600
        raw = [s.encode() for s in secrets if s]
        assert raw, "nothing to look for"
        for text in self.texts:
            for s in secrets:
                assert s not in text
        looked = 0
        for p in self.state.rglob("*"):
            if p.is_file() and p != ident:
                data = p.read_bytes()
                looked += 1
                for s in raw:
                    assert s not in data, p
        return looked


def device_secrets(ident: Path) -> list[str]:
    """The device's private key (as stored, and raw as hex) and the device tokens it holds."""
    data = json.loads(ident.read_text())
    key = data["privateKey"]
    out = [key, base64.urlsafe_b64decode(key + "==").hex()]
    return out + [t["token"] for t in data.get("tokens", {}).values() if "token" in t]


def pairing_request(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 4, proc.stderr
    m = re.search(r"pairing request ([0-9a-f-]{8,})", proc.stderr)
    assert m, proc.stderr
    assert f"openclaw devices approve {m.group(1)}" in proc.stderr
    return m.group(1)


def approve(gw: Gateway, request_id: str) -> None:
    proc = gw.oc("devices", "approve", request_id)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def local_read(gw: Gateway, *args: str) -> Any:
    """The same state read directly on the gateway's host."""
    proc = subprocess.run(
        [sys.executable, "-m", "sessiontool", "--state-dir", str(gw.state), *args, "--json"],
        env=gw.env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_a_new_machine_pairs_then_reads_and_sends_then_forgets(net: Net, tmp_path: Path) -> None:
    gw = net.plain
    me = Laptop(tmp_path / "laptop")
    env = client_env(me.state, OPENCLAW_GATEWAY_TOKEN=TOKEN)
    bare = client_env(me.state)  # the same laptop without the shared secret
    at = ("--gateway", gw.url)

    never = me.run(bare, *at, "list")
    assert never.returncode == 4, never.stderr
    assert "sessiontool has none for it, and no device token from an earlier pairing" in (
        never.stderr
    )
    first = me.run(env, *at, "list", "--all-agents")
    rid = pairing_request(first)
    assert gw.url in first.stderr and first.stdout == ""
    approve(gw, rid)

    # The first command after the approval, without the secret: the real gateway hands a
    # device token only to a connection that sends the secret, so it cannot get in; it says so.
    after = me.run(bare, *at, "list")
    assert after.returncode == 4, after.stderr
    assert f"has no device token for sessiontool yet (pairing request {rid})" in after.stderr
    assert "run this command once with OPENCLAW_GATEWAY_TOKEN" in after.stderr
    assert "openclaw.json" not in after.stderr and "AUTH_" not in after.stderr
    got = me.json(env, *at, "list", "--all-agents")
    want = local_read(gw, "list", "--all-agents")
    assert got["count"] == want["count"] > 0
    assert [r["key"] for r in got["sessions"]] == [r["key"] for r in want["sessions"]]
    # From now on the stored device token alone gets in.
    assert me.json(bare, *at, "history", "main") == local_read(gw, "history", "main")
    ident = me.identity()
    assert ident.stat().st_mode & 0o777 == 0o600
    tokens = json.loads(ident.read_text())["tokens"]
    assert list(tokens) == [gw.url] and tokens[gw.url]["scopes"] == ["operator.read"]

    # A write needs operator.write, which a device paired by a read was not approved for.
    send = ("send", "main", "hello over the veth", "--timeout", "300")
    lacking = me.run(bare, *at, *send)
    assert lacking.returncode == 4, lacking.stderr
    assert "device for operator.read; this command also needs operator.write\n" in (lacking.stderr)
    assert "AUTH_SCOPE_MISMATCH" not in lacking.stderr and "gateway.auth" not in lacking.stderr
    upgrade = me.run(env, *at, *send)
    rid2 = pairing_request(upgrade)
    assert rid2 != rid
    assert "device for operator.read; this command also needs operator.write (pairing" in (
        upgrade.stderr
    )
    approve(gw, rid2)
    # The approval replaced the device token: the first command after it, without the secret,
    # is refused as such (measured: AUTH_TOKEN_MISMATCH), and the old token is kept, not lost.
    replaced = me.run(bare, *at, *send)
    assert replaced.returncode == 4, replaced.stderr
    assert "no longer takes the device token sessiontool kept for it" in replaced.stderr
    assert f"(pairing request {rid2}) replaced it" in replaced.stderr
    assert "run this command once with OPENCLAW_GATEWAY_TOKEN" in replaced.stderr
    out = me.json(env, *at, *send)
    assert out["status"] == "ok" and "hello over the veth" in out["reply"]
    scopes = json.loads(ident.read_text())["tokens"][gw.url]["scopes"]
    assert sorted(scopes) == ["operator.read", "operator.write"]  # the file follows the approval
    second = me.json(bare, *at, "send", "main", "again without a secret", "--timeout", "300")
    assert second["status"] == "ok"
    msgs = me.json(bare, *at, "history", "main", "--limit", "2")["messages"]
    assert msgs[0]["content"] == "again without a secret"
    assert sorted(json.loads(ident.read_text())["tokens"][gw.url]["scopes"]) == sorted(scopes)
    doctor = me.run(bare, *at, "doctor")
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert "  pairing: paired (the gateway issued a device token)\n" in doctor.stdout
    assert (
        "  spawn: emulated; add sessions_spawn, sessions_send to gateway.tools.allow on the "
        "gateway's host for OpenClaw's own\n"
    ) in doctor.stdout

    secrets = [TOKEN, *device_secrets(ident)]
    assert me.assert_secret_free(secrets) > 0  # the send left run records and logs

    forgot = me.run(env, "gateway", "forget", gw.url)
    assert forgot.returncode == 0 and "removed" in forgot.stdout, forgot.stderr
    assert not ident.exists()
    again = me.run(env, *at, "list")
    assert pairing_request(again) not in (rid, rid2)
    for text in me.texts:
        for s in secrets:
            assert s not in text


def wrong(pin: str) -> str:
    other = f"{int(pin.replace(':', ''), 16) ^ 0xFF:064X}"
    return ":".join(other[i : i + 2] for i in range(0, 64, 2))


def test_wss_with_the_gateways_certificate_pinned(net: Net, tmp_path: Path) -> None:
    gw = net.tls
    assert gw.url.startswith("wss://")
    me = Laptop(tmp_path / "laptop")
    fp = gw.fingerprint()

    def config(pin: str | None) -> dict[str, str]:
        """OpenClaw's own client config for a remote gateway (what `openclaw config set
        gateway.remote.*` writes), found through OPENCLAW_CONFIG_PATH."""
        remote: dict[str, str] = {"url": gw.url, "token": TOKEN}
        if pin:
            remote["tlsFingerprint"] = pin
        path = tmp_path / f"openclaw-{len(list(tmp_path.glob('openclaw-*')))}.json"
        path.write_text(json.dumps({"gateway": {"mode": "remote", "remote": remote}}))
        return client_env(me.state, OPENCLAW_CONFIG_PATH=str(path))

    bad = me.run(config(wrong(fp)), "list")
    assert bad.returncode == 4, bad.stderr
    lines = bad.stderr.strip().splitlines()
    assert len(lines) == 1 and "not the pinned one" in lines[0], bad.stderr
    assert fp.replace(":", "").lower() in lines[0]  # what the gateway did present
    untrusted = me.run(config(None), "list")
    assert untrusted.returncode == 4 and "not trusted" in untrusted.stderr, untrusted.stderr
    # Neither reached the gateway's pairing: no device identity was even made here.
    assert not list(me.state.rglob("gateway-device.json"))
    listed = gw.oc("devices", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout[listed.stdout.index("{") :])["pending"] == []

    good = config(fp)
    approve(gw, pairing_request(me.run(good, "list")))
    got = me.json(good, "list", "--all-agents")
    assert got["count"] == local_read(gw, "list", "--all-agents")["count"] > 0
    me.assert_secret_free([TOKEN, *device_secrets(me.identity())])
