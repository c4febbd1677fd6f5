"""Writes while an OpenClaw gateway runs: a simulated lockless JSON-era gateway (2026.5.2+) that
rewrites sessions.json without the lock and answers version detection the way the real one
does (`openclaw gateway call status` → runtimeVersion); sessiontool routes its writes through
it or refuses them, and never races it. Also how the gateway is found."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from .conftest import run_cli

# The simulated gateway: a TCP server that applies routed `sessions.patch` requests in-process
# and, meanwhile, rewrites sessions.json on its own (token counts on its own sessions) without
# sessions.json.lock, re-reading the file only when its mtime/size changed — as 2026.5.2+ does.
FAKE_GATEWAY = r"""
import json, os, socket, sys, threading, time
store_path, port, own_writes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
lock = threading.Lock()
cache = {"stat": None, "data": {}}

def load():
    st = os.stat(store_path)
    key = (st.st_mtime_ns, st.st_size)
    if cache["stat"] != key:
        with open(store_path) as fh:
            cache["data"] = json.load(fh)
        cache["stat"] = key
    return cache["data"]

def save(data):
    tmp = store_path + ".gw.tmp"
    with open(tmp, "w") as fh:
        json.dump(data, fh)
    os.replace(tmp, store_path)
    st = os.stat(store_path)
    cache["stat"] = (st.st_mtime_ns, st.st_size)

def handle(conn):
    with conn:
        req = json.loads(conn.makefile().readline())
        with lock:
            data = load()
            if req["method"] == "sessions.patch":
                p = req["params"]
                entry = data.setdefault(p["key"], {"sessionId": "new-" + p["key"], "updatedAt": 0})
                for k, v in p.items():
                    if k != "key":
                        if v is None:
                            entry.pop(k, None)
                        else:
                            entry[k] = v
                entry["updatedAt"] = int(time.time() * 1000)
                save(data)
                out = {"ok": True, "key": p["key"], "entry": entry}
            else:
                out = {"ok": False, "error": {"message": "unknown method " + req["method"]}}
        conn.sendall((json.dumps(out) + "\n").encode())

srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", port))
srv.listen(64)
print("ready", flush=True)

def own():
    for i in range(own_writes):
        with lock:
            data = load()
            data["agent:main:gw-%d" % i] = {"sessionId": "gw-%d" % i, "updatedAt": i, "totalTokens": i}
            save(data)
        time.sleep(0.002)
    print("own-done", flush=True)

threading.Thread(target=own, daemon=True).start()
while True:
    c, _ = srv.accept()
    threading.Thread(target=handle, args=(c,), daemon=True).start()
"""

# The `openclaw` CLI as sessiontool calls it: `gateway call METHOD --params JSON --json ...`.
FAKE_CLI = r"""#!PYTHON
import json, os, socket, sys
args = sys.argv[1:]
method = args[2]
params = json.loads(args[args.index("--params") + 1])
port = int(args[args.index("--port") + 1])
if method == "status":
    print(json.dumps({"runtimeVersion": os.environ.get("FAKE_GATEWAY_VERSION", "2026.6.3")}))
    sys.exit(0)
with socket.create_connection(("127.0.0.1", port)) as s:
    s.sendall((json.dumps({"method": method, "params": params}) + "\n").encode())
    out = s.makefile().readline()
print(out.strip())
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def lockless(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Any:
    state = tmp_path / "state"
    sessions = state / "agents" / "main" / "sessions"
    sessions.mkdir(parents=True)
    store = sessions / "sessions.json"
    n_keys = getattr(request, "param", 10)
    store.write_text(
        json.dumps(
            {f"agent:main:s{i}": {"sessionId": f"s-{i}", "updatedAt": 1} for i in range(n_keys)}
        )
    )
    port = _free_port()
    (state / "openclaw.json").write_text(
        json.dumps({"gateway": {"port": port, "bind": "loopback"}})
    )
    cli = tmp_path / "openclaw"
    cli.write_text(FAKE_CLI.replace("PYTHON", sys.executable))
    cli.chmod(cli.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("SESSIONTOOL_OPENCLAW_BIN", str(cli))
    gw = subprocess.Popen(
        [sys.executable, "-c", FAKE_GATEWAY, str(store), str(port), str(n_keys)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert gw.stdout is not None and gw.stdout.readline().strip() == "ready"
    try:
        yield state, store, gw, n_keys
    finally:
        gw.kill()
        gw.wait()
        gw.stdout.close()


@pytest.mark.parametrize(
    "lockless",
    [pytest.param(20, id="40-writes"), pytest.param(250, id="500-writes", marks=pytest.mark.slow)],
    indirect=True,
)
def test_lockless_gateway_routes_writes_and_loses_none(lockless: Any) -> None:
    """N label writes routed through the gateway, interleaved with its own N unlocked rewrites
    of sessions.json (N = 250 in the slow run: 500 writes): every update is in the final store."""
    state, store, gw, n = lockless
    from sessiontool import admin
    from sessiontool.context import build_context

    ctx = build_context(state)
    errors: list[BaseException] = []

    def labels() -> None:
        try:
            for i in range(n):
                out = admin.set_label(ctx, f"agent:main:s{i}", f"label-{i}")
                assert out["via"] == "gateway"
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    t = threading.Thread(target=labels)
    t.start()
    t.join(timeout=240)
    assert not t.is_alive() and not errors, errors
    assert gw.stdout.readline().strip() == "own-done"
    final = json.loads(store.read_text())
    lost_labels = [i for i in range(n) if final[f"agent:main:s{i}"].get("label") != f"label-{i}"]
    lost_own = [i for i in range(n) if f"agent:main:gw-{i}" not in final]
    assert lost_labels == [] and lost_own == []
    assert not (store.parent / "sessions.json.lock").exists()


def test_lockless_gateway_routes_spawn_and_refuses_file_writes(lockless: Any) -> None:
    state, store, gw, _n = lockless
    # A spawn is routed: its child is the gateway's to create (this fake one cannot run it).
    proc = run_cli("--state-dir", str(state), "--json", "spawn", "a task")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["via"] == "gateway"
    proc = run_cli("--state-dir", str(state), "--json", "wait", out["runId"])
    assert json.loads(proc.stdout)["runStatus"] == "error"
    assert out["childSessionKey"] not in json.loads(store.read_text())
    # Any sessions.json write is refused (exit 4, one line), a library call's too once the
    # guard the command layer installs (openclaw.install_store_guard) is in place.
    from sessiontool.errors import ForbiddenError
    from sessiontool.openclaw import install_store_guard
    from sessiontool.stores.sessions_json import set_write_guard, update_store

    install_store_guard()
    try:
        with pytest.raises(ForbiddenError):
            update_store(store, lambda s: s.update({"agent:main:x": {"sessionId": "x"}}))
    finally:
        set_write_guard(None)
    assert "agent:main:x" not in json.loads(store.read_text())


def test_lock_honouring_gateway_keeps_the_lock_protocol(
    lockless: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    state, store, gw, _n = lockless
    monkeypatch.setenv("FAKE_GATEWAY_VERSION", "2026.4.29")
    proc = run_cli("--state-dir", str(state), "--json", "label", "agent:main:s1", "by-file")
    assert proc.returncode == 0, proc.stderr
    assert "via" not in json.loads(proc.stdout)


def test_doctor_names_the_gateway(lockless: Any) -> None:
    state, _store, _gw, _n = lockless
    proc = run_cli("--state-dir", str(state), "--json", "doctor")
    data = json.loads(proc.stdout)
    assert data["gateway"]["reachable"] is True
    assert data["gateway"]["version"] == "2026.6.3"
    assert data["gateway"]["mode"].startswith("gateway")


def test_gateway_is_found_from_config_and_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sessiontool.openclaw import gateway
    from sessiontool.stores.paths import StatePaths

    state = tmp_path / "st"
    state.mkdir()
    (state / "openclaw.json").write_text(
        '{ gateway: { port: 18893, bind: "loopback", auth: { mode: "token", token: "t-1" } } }'
    )
    monkeypatch.delenv("OPENCLAW_GATEWAY_TOKEN", raising=False)
    monkeypatch.delenv("OPENCLAW_GATEWAY_PORT", raising=False)
    g = gateway.find(StatePaths(state))
    assert (g.host, g.port, g.token) == ("127.0.0.1", 18893, "t-1")
    gateway._found.clear()
    monkeypatch.setenv("OPENCLAW_GATEWAY_TOKEN", "from-env")
    g = gateway.find(StatePaths(state))
    assert g.token == "from-env"
    gateway._found.clear()
    assert gateway.lockless("2026.5.2") and gateway.lockless("2026.7.35")
    assert not gateway.lockless("2026.4.29") and not gateway.lockless("2026.1.24-3")
    assert not gateway.lockless(None)


# -- SQLite era: sends through the gateway ------------------------------------------------------

FAKE_AGENT_CLI = r"""#!PYTHON
import json, os, sys, time
args = sys.argv[1:]
method = args[2]
params = json.loads(args[args.index("--params") + 1])
if method == "status":
    print(json.dumps({"runtimeVersion": "2026.9.6"}))
elif method == "agent":
    assert "--expect-final" in args
    delay = float(os.environ.get("FAKE_AGENT_DELAY", "0"))
    limit = int(args[args.index("--timeout") + 1])
    if delay * 1000 > limit:
        time.sleep(limit / 1000)
        print(json.dumps({"ok": False, "error": {"kind": "timeout",
                                                  "message": "gateway timeout after %dms" % limit}}))
        sys.exit(1)
    time.sleep(delay)
    print(json.dumps({"runId": params["idempotencyKey"], "status": "ok", "summary": "completed",
                      "result": {"payloads": [{"text": "pong: " + params["message"]}]}}))
else:
    print(json.dumps({"ok": False, "error": {"message": "unsupported"}}))
"""


def test_sqlite_send_goes_through_the_gateway_with_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    from .test_openclaw_sqlite import OC_STATE, tree_digest

    state = tmp_path / "state"
    shutil.copytree(OC_STATE, state)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    (state / "openclaw.json").write_text(json.dumps({"gateway": {"port": port}}))
    cli = tmp_path / "openclaw"
    cli.write_text(FAKE_AGENT_CLI.replace("PYTHON", sys.executable))
    cli.chmod(cli.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("SESSIONTOOL_OPENCLAW_BIN", str(cli))
    before = tree_digest(state / "agents")
    try:
        proc = run_cli("--state-dir", str(state), "--json", "send", "discord:group:123", "ping")
        assert proc.returncode == 0, proc.stderr
        out = json.loads(proc.stdout)
        assert out["status"] == "ok" and out["reply"] == "pong: ping"
        assert out["sessionKey"] == "agent:main:discord:group:123"
        proc = run_cli(
            "--state-dir",
            str(state),
            "--json",
            "send",
            "main",
            "slow",
            "--timeout",
            "0.3",
            env={"FAKE_AGENT_DELAY": "1.5"},
        )
        assert proc.returncode == 124, proc.stderr
        out = json.loads(proc.stdout)
        assert out["status"] == "timeout" and out["via"] == "gateway"
        # The run goes on in its worker: `wait` gets its reply (tests/test_gateway_runs.py).
        proc = run_cli("--state-dir", str(state), "--json", "wait", out["runId"])
        assert json.loads(proc.stdout)["reply"] == "pong: slow"
    finally:
        listener.close()
    assert tree_digest(state / "agents") == before  # the gateway writes, sessiontool never


@pytest.mark.parametrize(
    ("version", "keys"),
    [
        ("2026.4.29", {"pid", "createdAt", "starttime"}),
        ("2026.2.6-3", {"pid", "createdAt", "starttime"}),
        ("2026.1.24-3", {"pid", "startedAt"}),
    ],
)
def test_the_store_lock_is_written_in_the_form_the_gateway_reads(
    lockless: Any, monkeypatch: pytest.MonkeyPatch, version: str, keys: set[str]
) -> None:
    """A gateway that honours the lock gets sessiontool's lock in its own payload form (its
    version comes from the detection, `status` → runtimeVersion); doctor says which form."""
    state, store, _gw, _n = lockless
    monkeypatch.setenv("FAKE_GATEWAY_VERSION", version)
    proc = subprocess.Popen(
        [sys.executable, "-m", "sessiontool", "--state-dir", str(state), "label", "s1", "x"],
        env={**os.environ, "SESSIONTOOL_TEST_PAUSE": "store-locked:1"},
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert line.startswith("sessiontool test pause: store-locked"), line
        info = json.loads((store.parent / "sessions.json.lock").read_text())
    finally:
        proc.wait()
        assert proc.stderr is not None
        proc.stderr.close()
    assert set(info) == keys and info["pid"] == proc.pid
    assert proc.returncode == 0
    data = json.loads(run_cli("--state-dir", str(state), "--json", "doctor").stdout)
    assert data["gateway"]["mode"] == "files (the gateway honours sessions.json.lock)"
    form = data["gateway"]["lockForm"]
    assert form.startswith(
        '{"pid", "createdAt", "starttime"}' if "createdAt" in keys else '{"pid", "startedAt"}'
    )
