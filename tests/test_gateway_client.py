"""sessiontool's own gateway client against the scripted fake gateway (tests/fakes/gateway.py, a
real WebSocket server), for what the real gateway rarely does: a protocol it does not share
(fallback to the `openclaw` CLI, or exit 4 with the reason), pairing required (exit 4 with the
request id), `UNAVAILABLE` then ok, a connection dropped mid-turn (re-attached, the turn not sent
twice), a wrong token (exit 4, the secret printed nowhere), `OPENCLAW_SHELL=exec` (refused), one
connection for a whole spawn; and doctor's account of it all. No `openclaw` CLI is on PATH."""

from __future__ import annotations

import json
import shutil
import stat
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import run_cli

from .fakes import gateway as fake
from .test_openclaw_sqlite import OC_STATE

TOKEN = "s3cret-T0ken-for-tests"
NO_CLI = {"SESSIONTOOL_OPENCLAW_BIN": "", "PATH": "/usr/bin:/bin"}


@dataclass
class Env:
    state: Path
    gw: fake.FakeGateway
    env: dict[str, str]

    def st(self, *args: str, **more: str) -> Any:
        return run_cli("--state-dir", str(self.state), *args, env={**self.env, **more}, timeout=120)


def _state(tmp_path: Path, port: int, auth: dict[str, Any] | None) -> Path:
    state = tmp_path / f"state-{port}"
    shutil.copytree(OC_STATE, state)
    gw: dict[str, Any] = {"port": port}
    if auth is not None:
        gw["auth"] = auth
    (state / "openclaw.json").write_text(json.dumps({"gateway": gw}))
    return state


@pytest.fixture
def make(tmp_path: Path) -> Iterator[Any]:
    """make(auth=..., **fake_cfg) → Env: the SQLite fixture state wired to a fresh fake."""
    stack: list[Any] = []

    def start(auth: dict[str, Any] | None = None, **cfg: Any) -> Env:
        cfg.setdefault("token", TOKEN)
        cm = fake.running(tmp_path / f"gw{len(stack)}", **cfg)
        gw = cm.__enter__()
        stack.append(cm)
        state = _state(tmp_path, gw.port, {"token": TOKEN} if auth is None else auth)
        return Env(state, gw, dict(NO_CLI))

    yield start
    for cm in reversed(stack):
        cm.__exit__(None, None, None)


def secret_free(env: Env, *texts: str) -> None:
    """The token is in no output and in no file sessiontool wrote (records, logs, device)."""
    for t in texts:
        assert TOKEN not in t
    for p in (env.state / "sessiontool").rglob("*"):
        if p.is_file():
            assert TOKEN.encode() not in p.read_bytes(), p


def test_send_and_label_speak_the_protocol_without_any_cli(make: Any) -> None:
    env = make()
    proc = env.st("--json", "send", "main", "hello")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["reply"] == "pong: hello"
    proc = env.st("label", "discord:group:123", "via-ws")
    assert proc.returncode == 0, proc.stderr
    (patch,) = env.gw.calls("sessions.patch")
    assert patch["params"] == {"key": "agent:main:discord:group:123", "label": "via-ws"}
    for c in env.gw.connects():
        p = c["params"]
        assert (p["minProtocol"], p["maxProtocol"], p["client"]) == (
            4,
            4,
            {"id": "cli", "mode": "cli"},
        )
        assert p["auth"] == ["token"] and p["device"] is False
        # least privilege: a send and a label need operator.write, nothing more
        assert p["scopes"] == ["operator.write"]
    secret_free(env, proc.stdout, proc.stderr)


def test_admin_scope_only_for_reset_delete_and_policy(make: Any) -> None:
    env = make()
    for args in (
        ["reset", "discord:group:123"],
        ["policy", "discord:group:123", "deny"],
        ["delete", "discord:group:123"],
    ):
        before = len(env.gw.connects())
        proc = env.st(*args)
        assert proc.returncode == 0, (args, proc.stderr)
        new = env.gw.connects()[before:]
        assert [c["params"]["scopes"] for c in new] == [["operator.admin"]], args
    assert [c["method"] for c in env.gw.calls()] == [
        "sessions.reset",
        "sessions.patch",
        "sessions.delete",
    ]


def test_one_connection_for_a_spawn_with_label_announce_and_cleanup(make: Any) -> None:
    env = make()
    proc = env.st("--json", "spawn", "a task", "--label", "kid", "--cleanup", "delete")
    assert proc.returncode == 0, proc.stderr
    run_id = json.loads(proc.stdout)["runId"]
    deadline = time.monotonic() + 60
    while not env.gw.calls("sessions.delete"):
        assert time.monotonic() < deadline, env.gw.calls()
        time.sleep(0.1)
    # The command asked for OpenClaw's own sessions_spawn first (denied here: not_found), on its
    # own connection; then the worker emulates it.
    (tool,) = env.gw.calls("tools.invoke")
    assert tool["params"]["name"] == "sessions_spawn"
    calls = [c for c in env.gw.calls() if c["method"] != "tools.invoke"]
    # The announce turn is followed to its end (agent.wait) before the child is removed.
    assert [c["method"] for c in calls] == [
        "sessions.create",
        "agent",
        "agent",
        "agent.wait",
        "sessions.delete",
    ]
    assert tool["conn"] not in {c["conn"] for c in calls}
    # The worker's five calls share one connection (the command's own handshake is another
    # process's); it asked once for everything it would need, admin for the cleanup.
    assert len({c["conn"] for c in calls}) == 1
    worker_conn = calls[0]["conn"]
    (hs,) = [c for c in env.gw.connects() if c["conn"] == worker_conn]
    assert hs["params"]["scopes"] == ["operator.admin", "operator.write"]
    rec = json.loads(env.st("--json", "runs", run_id).stdout)
    key = f"announce:v1:{rec['sessionKey']}:{rec['gatewayRunId']}"
    assert calls[2]["params"]["idempotencyKey"] == key


def test_unavailable_while_starting_then_ok(make: Any) -> None:
    env = make(unavailable_connects=2, unavailable_calls=1)
    proc = env.st("label", "discord:group:123", "patient")
    assert proc.returncode == 0, proc.stderr
    assert len(env.gw.connects()) == 3  # two refused with retryAfterMs, then hello-ok
    assert [c["method"] for c in env.gw.calls()] == ["sessions.patch", "sessions.patch"]


def test_a_connection_dropped_mid_turn_is_reattached_not_resent(make: Any) -> None:
    env = make(drop_after_accept=1)
    proc = env.st("--json", "send", "main", "sleep:1 survive the drop")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == "ok" and out["reply"] == "pong: sleep:1 survive the drop"
    (turn,) = env.gw.calls("agent")  # sent once
    waits = env.gw.calls("agent.wait")
    rec = json.loads(env.st("--json", "runs", out["runId"]).stdout)
    # by the gateway's own run id (from its `accepted` answer), not the idempotency key
    assert rec["gatewayRunId"].startswith("gw-")
    assert waits and all(w["params"]["runId"] == rec["gatewayRunId"] for w in waits)
    assert waits[0]["conn"] != turn["conn"]  # on a new connection


def test_wrong_token_exits_4_and_prints_no_secret(make: Any) -> None:
    env = make(token="the-gateway-wants-this")
    proc = env.st("--json", "send", "main", "hello")
    assert proc.returncode == 4
    err = json.loads(proc.stdout)
    assert "refused sessiontool's credentials" in err["error"]
    assert "AUTH_TOKEN_MISMATCH" in err["error"] and "config gateway.auth.token" in err["error"]
    assert env.gw.calls() == []  # nothing submitted to a gateway that refused us
    assert not list((env.state / "sessiontool" / "runs").glob("*.json"))
    proc2 = env.st("label", "main", "x")
    assert proc2.returncode == 4 and "refused sessiontool's credentials" in proc2.stderr
    secret_free(env, proc.stdout, proc.stderr, proc2.stdout, proc2.stderr)


def test_openclaw_shell_exec_refuses_send_and_spawn(make: Any) -> None:
    env = make()
    for args in (["send", "main", "from an exec"], ["spawn", "from an exec"]):
        proc = env.st(*args, OPENCLAW_SHELL="exec")
        assert proc.returncode == 4, proc.stderr
        assert "from agent exec would lose inter-session attribution" in proc.stderr
        assert "sessions_send" in proc.stderr  # the session-tool alternative
    assert env.gw.calls("agent") == []
    proc = env.st("label", "main", "still-fine", OPENCLAW_SHELL="exec")
    assert proc.returncode == 0, proc.stderr  # not a message: OpenClaw's rule does not apply


def test_pairing_required_exits_4_with_the_request_id(make: Any) -> None:
    """Device-less scopes cleared: sessiontool presents its own device, which this gateway has
    not approved; the request id and the approve line are printed."""
    env = make(clear_deviceless_scopes=True, pairing="required")
    proc = env.st("label", "main", "needs-approval")
    assert proc.returncode == 4
    device = json.loads((env.state / "sessiontool" / "gateway-device.json").read_text())
    assert stat.S_IMODE((env.state / "sessiontool" / "gateway-device.json").stat().st_mode) == 0o600
    import base64
    import hashlib

    pub = base64.urlsafe_b64decode(device["publicKey"] + "==")
    request_id = "req-" + hashlib.sha256(pub).hexdigest()[:12]
    assert f"pairing request {request_id}" in proc.stderr
    assert f"openclaw devices approve {request_id}" in proc.stderr
    assert [c["params"]["device"] for c in env.gw.connects()] == [False, True]
    assert env.gw.calls() == []


def test_device_paired_silently_and_its_token_reused(make: Any) -> None:
    """No shared secret configured: the device path from the start; the device token from
    hello-ok is kept (0600) and presented by the next process."""
    env = make(token=None, auth={"mode": "none"})
    assert env.st("label", "main", "one").returncode == 0
    path = env.state / "sessiontool" / "gateway-device.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    tokens = json.loads(path.read_text())["tokens"]
    (kept,) = tokens.values()
    assert kept["token"].startswith("devtok-")
    assert env.st("label", "main", "two").returncode == 0
    first, second = env.gw.connects()
    assert first["params"]["device"] and first["params"]["auth"] == []
    assert second["params"]["device"] and second["params"]["auth"] == ["token"]


FAKE_CLI = r"""#!PYTHON
import json, os, sys
args = sys.argv[1:]
with open(os.environ["FAKE_CLI_LOG"], "a") as log:
    log.write(json.dumps({"argv": args, "token": os.environ.get("OPENCLAW_GATEWAY_TOKEN")}) + "\n")
method = args[2]
params = json.loads(args[args.index("--params") + 1])
if method == "agent":
    print(json.dumps({"runId": params["idempotencyKey"], "status": "ok",
                      "result": {"payloads": [{"text": "cli: " + params["message"]}]}}))
else:
    print(json.dumps({"ok": True, "key": params.get("key")}))
"""


def test_protocol_mismatch_falls_back_to_the_cli_or_exits_4(make: Any, tmp_path: Path) -> None:
    env = make(protocol=5)
    proc = env.st("--json", "send", "main", "hello")
    assert proc.returncode == 4
    assert "speaks protocol 5; sessiontool speaks 4" in json.loads(proc.stdout)["error"]
    assert env.gw.calls() == []
    cli = tmp_path / "openclaw"
    cli.write_text(FAKE_CLI.replace("PYTHON", sys.executable))
    cli.chmod(cli.stat().st_mode | stat.S_IXUSR)
    log = tmp_path / "cli.jsonl"
    more = {"SESSIONTOOL_OPENCLAW_BIN": str(cli), "FAKE_CLI_LOG": str(log)}
    proc = env.st("--json", "send", "main", "hello", **more)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["reply"] == "cli: hello"
    (row,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert row["argv"][:3] == ["gateway", "call", "agent"] and "--expect-final" in row["argv"]
    assert row["token"] == TOKEN and TOKEN not in json.dumps(row["argv"])
    proc = env.st("--json", "doctor", **more)
    gwinfo = json.loads(proc.stdout)["gateway"]
    assert gwinfo["transport"] == "openclaw CLI"
    assert "protocol 5" in gwinfo["handshake"]["refused"]


def test_doctor_reports_the_handshake_and_problems(make: Any) -> None:
    env = make(version="2026.9.6")
    proc = env.st("--json", "doctor")
    assert proc.returncode == 0, proc.stdout
    g = json.loads(proc.stdout)["gateway"]
    assert g["version"] == "2026.9.6" and g["transport"] == "websocket"
    assert g["auth"] == "token (config gateway.auth.token)"
    assert g["handshake"]["identity"] == "device-less cli"
    assert g["handshake"]["scopes"] == ["operator.write"]
    assert g["mode"] == "gateway (SQLite store)" and g["cli"] is None
    text = env.st("doctor").stdout
    assert (
        "via websocket: protocol 4, auth token (config gateway.auth.token), device-less cli, "
        "scopes operator.write" in text
    )
    bad = make(token="other")
    proc = bad.st("--json", "doctor")
    assert proc.returncode == 1
    data = json.loads(proc.stdout)
    (p,) = [p for p in data["problems"] if p["kind"] == "gateway-refused"]
    assert "writes through the gateway cannot work" in p["detail"]
    secret_free(bad, proc.stdout, proc.stderr)


def test_secret_refs_env_file_exec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sessiontool.openclaw import secrets

    monkeypatch.setenv("MY_GW_TOKEN", "from-env-ref")
    sec = secrets.resolve({"auth": {"token": {"source": "env", "id": "MY_GW_TOKEN"}}}, {}, None)
    assert sec is not None and (sec.field, sec.value) == ("token", "from-env-ref")
    assert secrets.resolve({"auth": {"token": "${MY_GW_TOKEN}"}}, {}, None) == sec.__class__(
        "token", "from-env-ref", "config gateway.auth.token (env shorthand)"
    )
    f = tmp_path / "secrets.json"
    f.write_text(json.dumps({"gateway": {"pw": "from-file"}}))
    cfg = {"secrets": {"providers": {"files": {"source": "file", "path": str(f)}}}}
    ref = {"source": "file", "provider": "files", "id": "/gateway/pw"}
    sec = secrets.resolve({"auth": {"mode": "password", "password": ref}}, cfg, None)
    assert sec is not None and (sec.field, sec.value) == ("password", "from-file")
    script = tmp_path / "resolver.py"
    script.write_text(
        "import json, sys\nreq = json.load(sys.stdin)\n"
        "print(json.dumps({'protocolVersion': 1, 'values': {i: 'exec-' + i for i in req['ids']}}))\n"
    )
    cfg = {
        "secrets": {
            "providers": {
                "vault": {"source": "exec", "command": sys.executable, "args": [str(script)]}
            }
        }
    }
    ref = {"source": "exec", "provider": "vault", "id": "gw/token"}
    sec = secrets.resolve({"auth": {"token": ref}}, cfg, None)
    assert sec is not None and sec.value == "exec-gw/token" and "exec-gw" not in repr(sec)
    monkeypatch.delenv("MY_GW_TOKEN")
    from sessiontool.errors import ForbiddenError

    with pytest.raises(ForbiddenError, match="names env MY_GW_TOKEN, which is not set"):
        secrets.resolve({"auth": {"token": {"source": "env", "id": "MY_GW_TOKEN"}}}, {}, None)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("timeoutMs", float("inf")),
        ("timeoutMs", float("nan")),
        ("timeoutMs", 1e308),
        ("timeoutMs", -5),
        ("timeoutMs", "5000"),
        ("env", 5),
        ("args", "--token"),
    ],
    ids=["Infinity", "NaN", "1e308", "negative", "string", "env-number", "args-string"],
)
def test_a_bad_exec_provider_setting_is_a_config_error_naming_the_key(
    make: Any, tmp_path: Path, key: str, value: Any
) -> None:
    """JSON5 lets OpenClaw's config hold `timeoutMs: Infinity` (NaN, 1e308): every command
    that resolves the exec SecretRef said "internal error: OverflowError" (ValueError for NaN).
    Now one line, exit 2, naming the file and the key; doctor reports it as the gateway's
    problem; nothing is sent and the resolver never runs."""
    script = tmp_path / "resolver.py"
    ran = tmp_path / "resolver-ran"
    script.write_text(
        f"import json, sys, pathlib\npathlib.Path({str(ran)!r}).touch()\n"
        "req = json.load(sys.stdin)\n"
        f"print(json.dumps({{'values': {{i: {TOKEN!r} for i in req['ids']}}}}))\n"
    )
    env = make(auth={"token": {"source": "exec", "provider": "vault", "id": "gw/token"}})
    conf = json.loads((env.state / "openclaw.json").read_text())
    provider = {"source": "exec", "command": sys.executable, "args": [str(script)], key: value}
    conf["secrets"] = {"providers": {"vault": provider}}
    (env.state / "openclaw.json").write_text(json.dumps(conf))  # Infinity/NaN: JSON5, not JSON
    where = f"{env.state / 'openclaw.json'}: secrets.providers.vault.{key}"
    for args in (["label", "main", "lbl"], ["send", "main", "hello"], ["--json", "send", "main"]):
        proc = env.st(*args, *(["hi"] if args[0] == "--json" else []))
        assert proc.returncode == 2, (args, proc.stderr)
        if args[0] == "--json":
            assert where in json.loads(proc.stdout)["error"]
        else:
            assert proc.stderr.startswith(f"sessiontool: error: {where}: expected "), proc.stderr
            assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    doctor = env.st("doctor")
    assert doctor.returncode == 1 and where in doctor.stdout, doctor.stdout
    assert not ran.exists()
    assert env.gw.calls() == [] and env.gw.connects() == []
    provider.update(args=[str(script)], env={}, timeoutMs=2000)  # well-formed: it resolves
    (env.state / "openclaw.json").write_text(json.dumps(conf))
    assert env.st("label", "main", "lbl").returncode == 0 and ran.exists()


def test_reads_never_load_the_client(make: Any, tmp_path: Path) -> None:
    """`list` and `history` of a state whose gateway runs start as fast as before: neither
    websockets nor cryptography is loaded (test_startup.py's probe of the real entry point)."""
    from .test_startup import imported_modules

    env = make()
    for args in (["list", "--json"], ["history", "main", "--json"]):
        names = imported_modules(*args, state=env.state, tmp=tmp_path)
        assert not names & {"websockets", "cryptography"}, args
    assert env.gw.connects() == []


def _json_era_state(tmp_path: Path, port: int) -> tuple[Path, Path]:
    state = tmp_path / f"json-{port}"
    sessions = state / "agents" / "main" / "sessions"
    sessions.mkdir(parents=True)
    store = sessions / "sessions.json"
    store.write_text(json.dumps({"agent:main:s1": {"sessionId": "s-1", "updatedAt": 1}}))
    (state / "openclaw.json").write_text(
        json.dumps({"gateway": {"port": port, "auth": {"token": TOKEN}}})
    )
    return state, store


@pytest.mark.parametrize(
    ("version", "lock_taking"),
    [("2026.5.20", False), ("2026.4.29", True)],
    ids=["lockless-protocol-3", "locking-protocol-3"],
)
def test_an_older_protocol_gateway_is_asked_its_version_in_its_own_protocol(
    tmp_path: Path, version: str, lock_taking: bool
) -> None:
    """A JSON-era gateway that speaks protocol 3 and no CLI of its own: its version comes from
    a hello-ok in protocol 3; one that does not take the lock (2026.5.2+) is never written
    beside (exit 4, the reason), one that does gets the lock protocol as before."""
    with fake.running(tmp_path / "gw", token=TOKEN, protocol=3, version=version) as gw:
        state, store = _json_era_state(tmp_path, gw.port)
        before = store.read_bytes()
        proc = run_cli("--state-dir", str(state), "label", "s1", "lbl", env=NO_CLI)
        probes = [c["params"]["maxProtocol"] for c in gw.connects()]
        assert 3 in probes and gw.calls() == []  # asked its version, sent it nothing else
        doctor = json.loads(
            run_cli("--state-dir", str(state), "--json", "doctor", env=NO_CLI).stdout
        )
    kinds = [p["kind"] for p in doctor["problems"]]
    assert doctor["gateway"]["version"] == version
    # A problem only where writes need the gateway and nothing can reach it.
    assert ("gateway-protocol" in kinds) == (not lock_taking)
    if lock_taking:
        assert proc.returncode == 0, proc.stderr
        assert json.loads(store.read_text())["agent:main:s1"]["label"] == "lbl"
    else:
        assert proc.returncode == 4
        assert "speaks protocol 3; sessiontool speaks 4" in proc.stderr
        assert store.read_bytes() == before


def test_a_bad_exec_timeout_on_a_json_era_state_is_the_config_error_not_a_refusal(
    tmp_path: Path,
) -> None:
    """A JSON-era state beside a lockless gateway, its token behind an exec SecretRef with a
    bad `timeoutMs`: the config error itself (exit 2, file and key), not "the gateway refused
    sessiontool (…)": the gateway refused nothing, it was never asked."""
    with fake.running(tmp_path / "gw", token=TOKEN) as gw:
        state, store = _json_era_state(tmp_path, gw.port)
        before = store.read_bytes()
        conf = json.loads((state / "openclaw.json").read_text())
        conf["gateway"]["auth"] = {"token": {"source": "exec", "provider": "vault", "id": "t"}}
        provider = {"source": "exec", "command": sys.executable, "timeoutMs": "5000"}
        conf["secrets"] = {"providers": {"vault": provider}}
        (state / "openclaw.json").write_text(json.dumps(conf))
        proc = run_cli("--state-dir", str(state), "label", "s1", "lbl", env=NO_CLI)
        assert proc.returncode == 2, proc.stderr
        where = f"{state / 'openclaw.json'}: secrets.providers.vault.timeoutMs"
        assert proc.stderr.startswith(f"sessiontool: error: {where}: expected "), proc.stderr
        assert "refused" not in proc.stderr
        assert store.read_bytes() == before
