"""Writes while an OpenClaw gateway runs: a simulated lockless JSON-era gateway (2026.5.2+) that
rewrites sessions.json without the lock and answers version detection the way the real one
does (`openclaw gateway call status` → runtimeVersion); sessiontool routes its writes through
it or refuses them, and never races it. Also how the gateway is found."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import run_cli

from .fakes import gateway as fake


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def lockless(tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    """A simulated lockless JSON-era gateway (the scripted fake, tests/fakes/gateway.py, as
    2026.6.3): it applies routed `sessions.patch` requests in-process and, meanwhile, rewrites
    sessions.json on its own (token counts on its own sessions) without sessions.json.lock,
    re-reading the file only when its mtime/size changed — as 2026.5.2+ does. sessiontool finds
    its version by connecting to it; no `openclaw` CLI is involved."""
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
    with fake.running(
        tmp_path / "gw", store=str(store), own_writes=n_keys, version="2026.6.3"
    ) as gw:
        (state / "openclaw.json").write_text(
            json.dumps({"gateway": {"port": gw.port, "bind": "loopback", "auth": {"mode": "none"}}})
        )
        yield state, store, gw, n_keys


@pytest.mark.parametrize(
    "lockless",
    [pytest.param(20, id="40-writes"), pytest.param(250, id="500-writes", marks=pytest.mark.slow)],
    indirect=True,
)
def test_lockless_gateway_routes_writes_and_loses_none(lockless: Any) -> None:
    """N label writes routed through the gateway, interleaved with its own N unlocked rewrites
    of sessions.json (N = 250 in the slow run: 500 writes): every update is in the final store."""
    state, store, gw, n = lockless
    from sessiontool.context import build_context
    from sessiontool.operations import manage

    ctx = build_context(state)
    errors: list[BaseException] = []

    def labels() -> None:
        try:
            for i in range(n):
                out = manage.set_label(ctx, f"agent:main:s{i}", f"label-{i}")
                assert out["via"] == "gateway"
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    t = threading.Thread(target=labels)
    t.start()
    t.join(timeout=240)
    assert not t.is_alive() and not errors, errors
    assert gw.readline() == "own-done"
    final = json.loads(store.read_text())
    lost_labels = [i for i in range(n) if final[f"agent:main:s{i}"].get("label") != f"label-{i}"]
    lost_own = [i for i in range(n) if f"agent:main:gw-{i}" not in final]
    assert lost_labels == [] and lost_own == []
    assert not (store.parent / "sessions.json.lock").exists()


def test_lockless_gateway_routes_spawn_and_refuses_file_writes(lockless: Any) -> None:
    state, store, gw, _n = lockless
    # A spawn is routed: its child is the gateway's to create and run (this fake one answers
    # the turn without writing its store), never sessiontool's to write beside it.
    proc = run_cli("--state-dir", str(state), "--json", "spawn", "a task")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["via"] == "gateway"
    proc = run_cli("--state-dir", str(state), "--json", "wait", out["runId"])
    assert json.loads(proc.stdout)["reply"] == "pong: a task"
    turn = gw.calls("agent")[0]  # then the announce to the requester
    assert turn["params"]["sessionKey"] == out["childSessionKey"]
    assert out["childSessionKey"] not in json.loads(store.read_text())
    # Any sessions.json write is refused (exit 4, one line), a library call's too once the
    # guard the command layer installs (openclaw.install_store_guard) is in place.
    from sessiontool.errors import ForbiddenError
    from sessiontool.openclaw import install_store_guard
    from sessiontool.state.sessions_json import set_write_guard, update_store

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
    gw.set(version="2026.4.29")
    proc = run_cli("--state-dir", str(state), "--json", "label", "agent:main:s1", "by-file")
    assert proc.returncode == 0, proc.stderr
    assert "via" not in json.loads(proc.stdout)


def test_label_through_a_gateway_that_answers_without_the_entry(tmp_path: Path) -> None:
    """sessions.patch's answer may leave the entry out: the label is set all the same, the line
    says the label sent (trimmed), `--json` has `entry: null`; never an internal error."""
    state = tmp_path / "state"
    store = state / "agents" / "main" / "sessions" / "sessions.json"
    store.parent.mkdir(parents=True)
    store.write_text(json.dumps({"agent:main:s1": {"sessionId": "s-1", "updatedAt": 1}}))
    with fake.running(
        tmp_path / "gw", store=str(store), version="2026.6.3", patch_without_entry=True
    ) as gw:
        (state / "openclaw.json").write_text(
            json.dumps({"gateway": {"port": gw.port, "bind": "loopback", "auth": {"mode": "none"}}})
        )
        proc = run_cli("--state-dir", str(state), "label", "agent:main:s1", "  first  ")
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == "agent:main:s1\tlabel: first\n"
        proc = run_cli("--state-dir", str(state), "--json", "label", "agent:main:s1", "second")
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout) == {
            "sessionKey": "agent:main:s1",
            "entry": None,
            "via": "gateway",
        }
    assert json.loads(store.read_text())["agent:main:s1"]["label"] == "second"


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
    from sessiontool.state.paths import StatePaths

    state = tmp_path / "st"
    state.mkdir()
    (state / "openclaw.json").write_text(
        '{ gateway: { port: 18893, bind: "loopback", auth: { mode: "token", token: "t-1" } } }'
    )
    monkeypatch.delenv("OPENCLAW_GATEWAY_TOKEN", raising=False)
    monkeypatch.delenv("OPENCLAW_GATEWAY_PORT", raising=False)
    g = gateway.find(StatePaths(state))
    secret = g.secret()
    assert (g.host, g.port, secret and secret.value) == ("127.0.0.1", 18893, "t-1")
    gateway._found.clear()
    monkeypatch.setenv("OPENCLAW_GATEWAY_TOKEN", "from-env")
    g = gateway.find(StatePaths(state))
    secret = g.secret()
    assert secret is not None and secret.value == "from-env" and "from-env" not in repr(secret)
    gateway._found.clear()
    assert gateway.lockless("2026.5.2") and gateway.lockless("2026.7.35")
    assert not gateway.lockless("2026.4.29") and not gateway.lockless("2026.1.24-3")
    assert not gateway.lockless(None)


# -- SQLite era: sends through the gateway ------------------------------------------------------


def test_sqlite_send_goes_through_the_gateway_with_timeout(tmp_path: Path) -> None:
    import shutil

    from .test_openclaw_sqlite import OC_STATE, tree_digest

    state = tmp_path / "state"
    shutil.copytree(OC_STATE, state)
    before = tree_digest(state / "agents")
    with fake.running(tmp_path / "gw", token="tok-1") as gw:
        (state / "openclaw.json").write_text(json.dumps({"gateway": {"port": gw.port}}))
        env = {"OPENCLAW_GATEWAY_TOKEN": "tok-1"}
        proc = run_cli(
            "--state-dir", str(state), "--json", "send", "discord:group:123", "ping", env=env
        )
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
            "sleep:1.5 slow",
            "--timeout",
            "0.3",
            env=env,
        )
        assert proc.returncode == 124, proc.stderr
        out = json.loads(proc.stdout)
        assert out["status"] == "timeout" and out["via"] == "gateway"
        # The run goes on in its worker: `wait` gets its reply (tests/test_gateway_runs.py).
        proc = run_cli("--state-dir", str(state), "--json", "wait", out["runId"], env=env)
        assert json.loads(proc.stdout)["reply"] == "pong: sleep:1.5 slow"
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
    state, store, gw, _n = lockless
    gw.set(version=version)
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
