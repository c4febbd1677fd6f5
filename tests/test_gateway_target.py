"""Which OpenClaw gateway a command talks to (`--gateway`, SESSIONTOOL_GATEWAY_URL,
OPENCLAW_GATEWAY_URL, OpenClaw's `gateway.remote.*`), what it authenticates with (never shown),
`gateway forget URL`, and reads from a remote gateway that does not answer."""

from __future__ import annotations

import base64
import hashlib
import json
import socket
from pathlib import Path

from tests.helpers import run_cli, run_json

SECRET = "s3cret-remote-token-xyz"
ENV_SECRET = "env-token-abc-123"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _oc_config(state: Path, gateway: dict[str, object]) -> None:
    state.mkdir(parents=True, exist_ok=True)
    (state / "openclaw.json").write_text(json.dumps({"gateway": gateway}))


REMOTE_CFG = {
    "mode": "remote",
    "port": 18789,
    "auth": {"mode": "token", "token": "local-token"},
    "remote": {"url": "wss://GW.example.net:8443/", "token": SECRET, "tlsFingerprint": "AB:CD"},
}


def show(*args: str, env: dict[str, str] | None = None) -> dict[str, object]:
    proc = run_cli(*args, "gateway", "show", "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    assert SECRET not in proc.stdout + proc.stderr
    assert ENV_SECRET not in proc.stdout + proc.stderr
    data = json.loads(proc.stdout)
    assert isinstance(data, dict)
    return data


def test_no_remote_target_is_the_state_dirs_own_gateway(state: Path) -> None:
    _oc_config(state, {"port": 18801, "auth": {"token": "x"}})
    got = show()
    assert got["remote"] is False and got["url"] == "ws://127.0.0.1:18801"


def test_openclaw_remote_mode_config_gives_url_token_and_pin(state: Path) -> None:
    _oc_config(state, REMOTE_CFG)
    got = show()
    assert got["remote"] is True
    assert got["url"] == "wss://gw.example.net:8443"  # normalised: host case, trailing /
    assert got["source"] == "gateway.remote.url"
    assert got["auth"] == "token" and got["authSource"] == "config gateway.remote.token"
    assert got["tlsFingerprint"] == "AB:CD"
    # sessiontool's own files for this gateway: a per-gateway part of the local state dir
    key = hashlib.sha256(b"wss://gw.example.net:8443").hexdigest()[:16]
    assert got["stateDir"] == str(state / "gateways" / key)


def test_remote_url_without_remote_mode_is_not_a_target(state: Path) -> None:
    _oc_config(state, {**REMOTE_CFG, "mode": "local"})
    assert show()["remote"] is False


def test_openclaw_gateway_url_beats_config_and_takes_env_credentials_only(state: Path) -> None:
    _oc_config(state, REMOTE_CFG)
    got = show(env={"OPENCLAW_GATEWAY_URL": "ws://10.0.0.5:18789"})
    assert got["url"] == "ws://10.0.0.5:18789" and got["source"] == "OPENCLAW_GATEWAY_URL"
    assert got["auth"] is None and got["tlsFingerprint"] is None  # nothing borrowed
    got = show(
        env={"OPENCLAW_GATEWAY_URL": "ws://10.0.0.5:18789", "OPENCLAW_GATEWAY_TOKEN": ENV_SECRET}
    )
    assert got["authSource"] == "env OPENCLAW_GATEWAY_TOKEN"
    got = show(
        env={"OPENCLAW_GATEWAY_URL": "ws://10.0.0.5:18789", "OPENCLAW_GATEWAY_PASSWORD": ENV_SECRET}
    )
    assert got["auth"] == "password"


def test_sessiontool_url_beats_openclaw_url_and_the_option_beats_both(state: Path) -> None:
    _oc_config(state, REMOTE_CFG)
    env = {"OPENCLAW_GATEWAY_URL": "ws://10.0.0.5:1", "SESSIONTOOL_GATEWAY_URL": "ws://10.0.0.6:2"}
    got = show(env=env)
    assert got["url"] == "ws://10.0.0.6:2" and got["source"] == "SESSIONTOOL_GATEWAY_URL"
    got = show("--gateway", "ws://10.0.0.7:3", env=env)
    assert got["url"] == "ws://10.0.0.7:3" and got["source"] == "--gateway"


def test_explicit_url_uses_the_configured_credentials_only_for_that_same_url(state: Path) -> None:
    _oc_config(state, REMOTE_CFG)
    got = show("--gateway", "wss://gw.example.net:8443")
    assert got["authSource"] == "config gateway.remote.token" and got["tlsFingerprint"] == "AB:CD"
    got = show("--gateway", "wss://other.example.net:8443")
    assert got["auth"] is None and got["tlsFingerprint"] is None


def test_option_after_the_command_and_a_bad_url_is_exit_2(state: Path) -> None:
    got = json.loads(run_cli("gateway", "show", "--json", "--gateway", "ws://h:1").stdout)
    assert got["url"] == "ws://h:1"
    for bad in ("http://h:1", "h:1", "ws://user:pw@h:1"):
        proc = run_cli("--gateway", bad, "list")
        assert proc.returncode == 2, (bad, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) <= 2
        assert ("credentials" if "@" in bad else "gateway URL") in proc.stderr


def test_gateway_forget_removes_only_that_gateways_device_token(state: Path) -> None:
    tokens = state / "sessiontool" / "gateway"
    tokens.mkdir(parents=True)
    mine = tokens / (hashlib.sha256(b"wss://gw.example.net:8443").hexdigest()[:16] + ".json")
    other = tokens / (hashlib.sha256(b"ws://10.0.0.5:18789").hexdigest()[:16] + ".json")
    mine.write_text('{"token": "dev-token"}')
    other.write_text('{"token": "dev-token-2"}')
    rc, got = run_json("gateway", "forget", "WSS://gw.example.net:8443/")
    assert rc == 0 and got["removed"] is True and got["url"] == "wss://gw.example.net:8443"
    assert not mine.exists() and other.exists()
    rc, got = run_json("gateway", "forget", "wss://gw.example.net:8443")
    assert rc == 0 and got["removed"] is False
    assert run_cli("gateway", "forget").returncode == 2
    assert run_cli("gateway", "forget", "ftp://x").returncode == 2


def test_gateway_forget_also_drops_a_token_kept_in_the_identity_file(state: Path) -> None:
    """The device key file may keep its tokens by URL beside the key: the URL's entry goes,
    the key and the other gateway's token stay (0600)."""
    ident = state / "sessiontool" / "gateway-device.json"
    ident.parent.mkdir(parents=True)
    data = {
        "version": 1,
        "privateKey": "k",
        "publicKey": "p",
        "tokens": {"wss://gw.example.net:8443": {"token": "t1"}, "ws://h:1": {"token": "t2"}},
    }
    ident.write_text(json.dumps(data))
    rc, got = run_json("gateway", "forget", "wss://GW.example.net:8443")
    assert rc == 0 and got["removed"] is True
    after = json.loads(ident.read_text())
    assert after["tokens"] == {"ws://h:1": {"token": "t2"}} and after["privateKey"] == "k"
    assert ident.stat().st_mode & 0o777 == 0o600


def test_reading_a_remote_gateway_that_does_not_answer_is_exit_4(state: Path) -> None:
    url = f"ws://127.0.0.1:{_closed_port()}"
    for args in (["list"], ["history", "main"], ["search", "hello"]):
        proc = run_cli("--gateway", url, *args, env={"OPENCLAW_GATEWAY_TOKEN": ENV_SECRET})
        assert proc.returncode == 4, (args, proc.stderr)
        assert url in proc.stderr and ENV_SECRET not in proc.stderr
    # Nothing of the remote's was written beside the local store: only its own part.
    assert sorted(p.name for p in state.iterdir()) == ["gateways"]


def test_gateway_forget_drops_the_identity_made_for_that_gateway(state: Path) -> None:
    """The device key and token sessiontool keeps for a remote gateway (under its
    `gateways/<hash>/`) go, so the next connection asks to be paired again; another gateway's
    stay. The text names the device id for `openclaw devices remove` on the gateway's host."""
    pub = bytes(range(32))
    ids = {}
    for url in ("ws://10.0.0.5:18789", "ws://10.0.0.6:18789"):
        own = state / "gateways" / hashlib.sha256(url.encode()).hexdigest()[:16] / "sessiontool"
        own.mkdir(parents=True)
        data = {
            "version": 1,
            "privateKey": "cHJpdmF0ZQ",
            "publicKey": base64.urlsafe_b64encode(pub).rstrip(b"=").decode(),
            "tokens": {url: {"token": "dev-token", "scopes": []}},
        }
        (own / "gateway-device.json").write_text(json.dumps(data))
        ids[url] = own / "gateway-device.json"
    proc = run_cli("gateway", "forget", "WS://10.0.0.5:18789/")
    assert proc.returncode == 0, proc.stderr
    device_id = hashlib.sha256(pub).hexdigest()
    assert "removed" in proc.stdout and f"openclaw devices remove {device_id}" in proc.stdout
    assert not ids["ws://10.0.0.5:18789"].exists() and ids["ws://10.0.0.6:18789"].exists()
    rc, got = run_json("gateway", "forget", "ws://10.0.0.5:18789")
    assert rc == 0 and got["removed"] is False and got["deviceId"] is None


def test_a_worker_started_by_exec_reaches_the_same_remote_gateway(
    state: Path, tmp_path: Path
) -> None:
    """A caller with threads (the MCP server) execs its run workers instead of forking them:
    the worker binds its per-gateway state dir to the remote gateway again (from the URL in its
    environment, never the secret) instead of looking for a gateway beside it."""
    from .fakes import gateway as fake
    from .runhelpers import reap

    with fake.running(tmp_path / "gw", token=ENV_SECRET) as gw:
        url = f"ws://127.0.0.1:{gw.port}"
        env = {"OPENCLAW_GATEWAY_TOKEN": ENV_SECRET, "SESSIONTOOL_EXEC_WORKER": "1"}
        rc, out = run_json("--gateway", url, "send", "room", "hello there", env=env, timeout=120)
        for root in state.glob("gateways/*"):
            reap(root)
        turns = gw.calls("agent")
    assert rc == 0 and out["status"] == "ok" and out["via"] == "gateway", out
    assert [t["params"]["message"] for t in turns] == ["hello there"]
    assert [t["params"]["sessionKey"] for t in turns] == ["agent:main:room"]
    for log in state.rglob(".worker.log"):
        assert ENV_SECRET not in log.read_text()


def test_gateway_forget_never_unlinks_through_a_planted_link(state: Path, tmp_path: Path) -> None:
    """A link planted at `gateways/<hash>` (issue 37, item 3): `gateway forget` refuses it with
    exit 5 naming it, as every other write through it is, and removes nothing, neither the key
    it leads to nor the token kept beside the state dir; `doctor` reports the link and
    `doctor --fix --yes` removes the link, never what it points to."""
    url = "ws://10.0.0.5:18789"
    digest = hashlib.sha256(url.encode()).hexdigest()[:16]
    victim = tmp_path / "victim"
    (victim / "sessiontool").mkdir(parents=True)
    key = victim / "sessiontool" / "gateway-device.json"
    key.write_text('{"publicKey": "not yours"}')
    (state / "gateways").mkdir(parents=True)
    planted = state / "gateways" / digest
    planted.symlink_to(victim)
    token = state / "sessiontool" / "gateway" / f"{digest}.json"
    token.parent.mkdir(parents=True)
    token.write_text('{"token": "dev-token"}')
    proc = run_cli("gateway", "forget", url)
    assert proc.returncode == 5, proc.stderr
    line = proc.stderr.splitlines()[0]
    assert line.startswith("sessiontool: error: refusing to write through the link"), line
    assert str(planted) in line
    assert key.read_text() == '{"publicKey": "not yours"}' and token.exists()
    rc, doc = run_json("doctor")
    assert rc == 1, doc
    found = [f for f in doc["problems"] if f["path"] == str(planted)]
    assert [f["kind"] for f in found] == ["planted-link"], doc["problems"]
    assert run_cli("doctor", "--fix", "--yes").returncode == 0
    assert not planted.is_symlink() and key.exists()
    rc, got = run_json("gateway", "forget", url)
    assert rc == 0 and got["removed"] is True and not token.exists()


def test_gateway_forget_refuses_a_link_at_the_token_dir(state: Path, tmp_path: Path) -> None:
    """The device tokens kept beside the state dir (`sessiontool/gateway/<hash>.json`): a link
    planted at that directory is refused too (exit 5), the file it leads to stays, and doctor
    reports the link."""
    url = "wss://gw.example.net:8443"
    victim = tmp_path / "victim"
    victim.mkdir()
    kept = victim / (hashlib.sha256(url.encode()).hexdigest()[:16] + ".json")
    kept.write_text('{"token": "not yours"}')
    (state / "sessiontool").mkdir(parents=True)
    planted = state / "sessiontool" / "gateway"
    planted.symlink_to(victim)
    proc = run_cli("gateway", "forget", url)
    assert proc.returncode == 5 and str(planted) in proc.stderr.splitlines()[0], proc.stderr
    assert kept.read_text() == '{"token": "not yours"}'
    rc, doc = run_json("doctor")
    assert rc == 1 and [f["kind"] for f in doc["problems"] if f["path"] == str(planted)] == [
        "planted-link"
    ], doc["problems"]
