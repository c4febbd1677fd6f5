"""`doctor` with a remote gateway as the target (`--gateway URL`): one line each for the
connection, sessiontool's identity there, the pairing and the scopes granted, and a problem
(exit 1) for whatever stops commands from working: nothing answers, the device is not approved
yet, a refused credential, too few scopes. Against the scripted fake (tests/fakes/gateway.py);
the real 2026.9.6 gateway's answer is in tests/interop_openclaw/test_remote_commands.py."""

from __future__ import annotations

import base64
import hashlib
import json
import socket
from pathlib import Path
from typing import Any

from tests.helpers import run_cli

from .fakes import gateway as fake

TOKEN = "s3cret-T0ken-doctor"


def doctor(port: int, *args: str, token: str = TOKEN) -> tuple[int, str, str]:
    proc = run_cli(
        "--gateway",
        f"ws://127.0.0.1:{port}",
        "doctor",
        *args,
        env={"OPENCLAW_GATEWAY_TOKEN": token, "SESSIONTOOL_OPENCLAW_BIN": ""},
        timeout=120,
    )
    assert TOKEN not in proc.stdout + proc.stderr
    return proc.returncode, proc.stdout, proc.stderr


def gateway_lines(out: str, port: int) -> list[str]:
    lines = out.splitlines()
    i = lines.index(next(x for x in lines if x.startswith(f"gateway ws://127.0.0.1:{port}:")))
    return lines[i : i + 4]


def remote(port: int, *args: str, token: str = TOKEN) -> tuple[int, dict[str, Any]]:
    rc, out, _ = doctor(port, "--json", *args, token=token)
    data = json.loads(out)
    assert isinstance(data, dict)
    return rc, data


def test_a_healthy_remote_gateway_is_four_lines_and_exit_0(tmp_path: Path) -> None:
    with fake.running(tmp_path / "gw", token=TOKEN, version="2026.9.6") as gw:
        rc, out, err = doctor(gw.port)
        rc_json, data = remote(gw.port)
    assert rc == 0 and rc_json == 0, out + err
    assert gateway_lines(out, gw.port) == [
        f"gateway ws://127.0.0.1:{gw.port}: connected: OpenClaw 2026.9.6, protocol 4, auth token "
        "(env OPENCLAW_GATEWAY_TOKEN)",
        "  identity: device-less cli (loopback with a shared secret)",
        "  pairing: not needed (loopback with a shared secret)",
        "  scopes: operator.read, operator.write",
    ]
    assert out.endswith("no problems found\n")
    rem = data["gateway"]["remote"]
    assert rem["scopes"] == ["operator.read", "operator.write"]
    # the JSON scripts read: pinned
    assert set(rem) == {"connection", "identity", "deviceId", "pairing", "scopes"}


def test_a_remote_gateway_that_does_not_answer_is_a_problem(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    rc, out, err = doctor(port)
    assert rc == 1, out + err
    assert gateway_lines(out, port) == [
        f"gateway ws://127.0.0.1:{port}: unreachable",
        "  identity: no device key yet",
        "  pairing: unknown",
        "  scopes: unknown",
    ]
    assert f"gateway-unreachable: ws://127.0.0.1:{port}" in out
    assert "1 problem found" in out


def test_a_device_not_approved_yet_names_its_id_and_the_approve_line(tmp_path: Path) -> None:
    with fake.running(
        tmp_path / "gw", token=TOKEN, clear_deviceless_scopes=True, pairing="required"
    ) as gw:
        rc, data = remote(gw.port)
        rc_text, out, _ = doctor(gw.port)
    assert rc == 1 and rc_text == 1
    rem = data["gateway"]["remote"]
    dev = _device_file(tmp_path)
    pub = base64.urlsafe_b64decode(json.loads(dev.read_text())["publicKey"] + "==")
    device_id = hashlib.sha256(pub).hexdigest()
    request_id = "req-" + device_id[:12]
    assert rem["deviceId"] == device_id and rem["identity"] == f"device {device_id}"
    assert rem["pairing"] == f"pending approval (request {request_id})"
    (problem,) = [p for p in data["problems"] if p["kind"] == "gateway-not-paired"]
    assert problem["hint"] == (
        f"on the gateway's host run: openclaw devices approve {request_id}, then run the command "
        "again with the shared secret set: it fetches the device token, and later commands need "
        "no secret"
    )
    lines = gateway_lines(out, gw.port)
    assert lines[1] == f"  identity: device {device_id}"
    assert lines[2] == f"  pairing: pending approval (request {request_id})"


def _device_file(tmp_path: Path) -> Path:
    (found,) = (tmp_path / "state").rglob("gateway-device.json")
    return found


def test_too_few_scopes_granted_is_a_problem(tmp_path: Path) -> None:
    with fake.running(tmp_path / "gw", token=TOKEN, grant_scopes=["operator.read"]) as gw:
        rc, data = remote(gw.port)
    assert rc == 1
    assert data["gateway"]["remote"]["scopes"] == ["operator.read"]
    (problem,) = [p for p in data["problems"] if p["kind"] == "gateway-scopes"]
    assert "only operator.read" in problem["detail"] and "operator.write" in problem["detail"]
    # Which way a spawn goes cannot be told without operator.write, and doctor asks no upgrade.
    want = "unknown until the gateway grants sessiontool operator.write (spawn needs it)"
    assert data["gateway"]["spawn"] == want
    assert gw.calls("tools.invoke") == []


def test_the_spawn_path_on_a_remote_gateway_is_named_and_where_to_change_it(
    tmp_path: Path,
) -> None:
    """The tool policy is the gateway host's openclaw.json, not one on this machine."""
    with fake.running(tmp_path / "gw", token=TOKEN) as gw:
        rc, out, err = doctor(gw.port)
    assert rc == 0, out + err
    assert gateway_lines(out, gw.port)[3:] == ["  scopes: operator.read, operator.write"]
    assert (
        "  spawn: emulated; add sessions_spawn, sessions_send to gateway.tools.allow on the "
        "gateway's host for OpenClaw's own\n"
    ) in out
    both = ["sessions_spawn", "sessions_send"]
    with fake.running(tmp_path / "gw2", token=TOKEN, tools_allowed=both) as gw:
        rc, data = remote(gw.port)
    assert rc == 0 and data["gateway"]["spawn"] == "OpenClaw's own sessions_spawn"
    assert sorted(c["params"]["name"] for c in gw.calls("tools.invoke")) == sorted(both)


def test_a_refused_credential_is_a_problem_naming_where_it_came_from(tmp_path: Path) -> None:
    with fake.running(tmp_path / "gw", token=TOKEN) as gw:
        rc, data = remote(gw.port, token="not-the-token")
    assert rc == 1
    rem = data["gateway"]["remote"]
    assert rem["connection"].startswith("refused: ") and rem["scopes"] is None
    (problem,) = [p for p in data["problems"] if p["kind"] == "gateway-refused"]
    assert "env OPENCLAW_GATEWAY_TOKEN" in problem["detail"]
    assert "not-the-token" not in json.dumps(data)
