"""sessiontool against the real OpenClaw 2026.9.6 gateway, on a copy of the real fixture:
sends go through the gateway and come back, `history` (read side, straight from the database)
shows them, a label set by sessiontool is in the program's own sessions.list; and with no
gateway a send exits 4 and leaves the state dir byte-identical."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ..test_openclaw_sqlite import tree_digest
from .conftest import Live, copy_fixture, free_port, oc_env


def st(live_env: dict[str, str], state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sessiontool", "--state-dir", str(state), *args],
        env=live_env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_send_to_a_group_returns_the_reply_and_history_shows_it(live: Live) -> None:
    proc = st(
        live.env,
        live.state,
        "--json",
        "send",
        "discord:group:123",
        "interop hello",
        "--timeout",
        "300",
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == "ok" and "interop hello" in out["reply"]
    proc = st(live.env, live.state, "--json", "history", "discord:group:123", "--limit", "2")
    msgs = json.loads(proc.stdout)["messages"]
    assert msgs[0]["role"] == "user" and msgs[0]["content"] == "interop hello"
    assert msgs[1]["role"] == "assistant"
    assert out["reply"] in json.dumps(msgs[1]["content"])


def test_label_is_in_the_programs_own_sessions_list(live: Live) -> None:
    proc = st(live.env, live.state, "label", "telegram:group:-100555", "interop-label")
    assert proc.returncode == 0, proc.stderr
    real = live.oc("gateway", "call", "sessions.list", "--json", "--port", str(live.port))
    assert real.returncode == 0, real.stderr
    rows = {s["key"]: s for s in json.loads(real.stdout)["sessions"]}
    assert rows["agent:main:telegram:group:-100555"]["label"] == "interop-label"


def test_without_a_gateway_send_exits_4_and_changes_nothing(tmp_path: Path) -> None:
    state = copy_fixture(tmp_path / "state", free_port(), free_port())
    home = tmp_path / "oc-home"
    home.mkdir()
    before = tree_digest(state)
    proc = st(oc_env(state, home), state, "send", "discord:group:123", "anyone there?")
    assert proc.returncode == 4
    assert "start it with `openclaw gateway" in proc.stderr
    assert tree_digest(state) == before


def test_openclaw_doctor_fix_imports_a_sessiontool_export(tmp_path: Path) -> None:
    """The reverse direction of `export` is OpenClaw's own `doctor --fix`: it imports the
    sessions.json + JSONL store sessiontool wrote, and the imported database reads back the same."""
    from .conftest import openclaw_bin

    src = copy_fixture(tmp_path / "src", free_port(), free_port())
    home = tmp_path / "oc-home"
    home.mkdir()
    dest = tmp_path / "exported"
    env = oc_env(src, home)
    assert st(env, src, "export", "--to", str(dest), "--all-agents").returncode == 0
    (dest / "openclaw.json").write_text((src / "openclaw.json").read_text())
    fix_env = oc_env(dest, home)
    proc = subprocess.run(
        [openclaw_bin(), "doctor", "--fix", "--non-interactive"],
        env=fix_env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert (dest / "agents" / "main" / "agent" / "openclaw-agent.sqlite").is_file()
    for args in (["list", "--all-agents", "--limit", "all"], ["history", "discord:group:123"]):
        a = json.loads(st(env, src, "--json", *args).stdout)
        b = json.loads(st(fix_env, dest, "--json", *args).stdout)
        if "sessions" in a:
            assert [(r["key"], r["sessionId"]) for r in a["sessions"]] == [
                (r["key"], r["sessionId"]) for r in b["sessions"]
            ]
        else:
            # OpenClaw stores a plain-string content as one text block when it imports.
            def text(c: object) -> object:
                return [{"type": "text", "text": c}] if isinstance(c, str) else c

            assert [(m["role"], text(m["content"])) for m in a["messages"]] == [
                (m["role"], text(m["content"])) for m in b["messages"]
            ]


def test_send_timeout_exits_124_and_wait_returns_the_reply(live: Live) -> None:
    """`--timeout` shorter than the real turn: exit 124 with the run id; the run goes on in its
    worker and `wait RUN_ID` prints the reply, which `history` shows."""
    proc = st(
        live.env,
        live.state,
        "--json",
        "send",
        "telegram:group:-100555",
        "timeout hello",
        "--timeout",
        "0.1",
    )
    assert proc.returncode == 124, proc.stderr
    run_id = json.loads(proc.stdout)["runId"]
    proc = st(live.env, live.state, "--json", "wait", run_id, "--timeout", "300")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == "ok" and "timeout hello" in out["reply"]
    hist = st(live.env, live.state, "--json", "history", "telegram:group:-100555", "--limit", "2")
    msgs = json.loads(hist.stdout)["messages"]
    assert msgs[0]["content"] == "timeout hello" and out["reply"] in json.dumps(msgs[1])


def test_spawn_creates_the_child_and_announces_to_the_requester(live: Live) -> None:
    proc = st(
        live.env,
        live.state,
        "--json",
        "spawn",
        "interop spawn task",
        "--label",
        "interop-child",
        "--run-timeout",
        "300",
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    run_id, child = out["runId"], out["childSessionKey"]
    proc = st(live.env, live.state, "--json", "wait", run_id, "--timeout", "300")
    assert proc.returncode == 0, proc.stderr
    assert "interop spawn task" in json.loads(proc.stdout)["reply"]
    deadline = time.monotonic() + 300
    while True:  # the announce is the run's follow-up, after its end
        rec = json.loads(st(live.env, live.state, "--json", "runs", run_id).stdout)
        if (rec.get("followUp") or {}).get("next") == "done" or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert rec["followUp"]["next"] == "done", rec
    real = live.oc("gateway", "call", "sessions.list", "--json", "--port", str(live.port))
    rows = {s["key"]: s for s in json.loads(real.stdout)["sessions"]}
    assert rows[child]["label"] == "interop-child"
    deadline = time.monotonic() + 300
    while True:  # the announce turn is the gateway's, accepted and then run
        hist = st(live.env, live.state, "--json", "history", "main", "--limit", "6")
        text = json.dumps(json.loads(hist.stdout)["messages"])
        if "Status: ok" in text or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert "Status: ok" in text and child in text


# -- every write through sessiontool's own client, no `openclaw` CLI on its PATH ---------------


def gw_call(live: Live, method: str, params: dict[str, object]) -> dict[str, Any]:
    """The program's own answer (`openclaw gateway call`), waited for on a busy machine."""
    real = live.oc(
        "gateway",
        "call",
        method,
        "--params",
        json.dumps(params),
        "--json",
        "--timeout",
        "120000",
        "--port",
        str(live.port),
    )
    assert real.returncode == 0, real.stdout[-2000:] + real.stderr[-2000:]
    out: dict[str, Any] = json.loads(real.stdout)
    return out


def sessions(live: Live) -> dict[str, dict[str, Any]]:
    return {s["key"]: s for s in gw_call(live, "sessions.list", {"limit": 1000})["sessions"]}


def chat(live: Live, key: str) -> list[dict[str, Any]]:
    real = gw_call(live, "chat.history", {"sessionKey": key, "limit": 1000})
    msgs: list[dict[str, Any]] = real["messages"]
    return msgs


def test_sessiontool_has_no_openclaw_to_fall_back_on(live: Live) -> None:
    """The premise of this module: doctor says the writes go over sessiontool's own websocket,
    with the version from the handshake and least-privilege scopes, and no CLI is found."""
    proc = st(live.env, live.state, "--json", "doctor")
    g = json.loads(proc.stdout)["gateway"]
    assert g["cli"] is None and g["transport"] == "websocket"
    assert g["version"] == "2026.9.6" and g["handshake"]["protocol"] == 4
    assert g["handshake"]["identity"] == "device-less cli"
    assert g["handshake"]["scopes"] == ["operator.write"]
    assert not [p for p in json.loads(proc.stdout)["problems"] if "gateway" in p["kind"]]


def test_spawn_with_label_announce_and_cleanup_delete(live: Live) -> None:
    proc = st(
        live.env,
        live.state,
        "--json",
        "spawn",
        "interop cleanup task",
        "--label",
        "interop-gone",
        "--cleanup",
        "delete",
        "--run-timeout",
        "300",
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    run_id, child = out["runId"], out["childSessionKey"]
    deadline = time.monotonic() + 300
    while True:
        rec = json.loads(st(live.env, live.state, "--json", "runs", run_id).stdout)
        if (rec.get("followUp") or {}).get("next") == "done" or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert rec["status"] == "ok" and "interop cleanup task" in rec["reply"], rec
    assert rec["followUp"]["next"] == "done", rec
    assert child not in sessions(live)  # cleaned up by the gateway's sessions.delete
    deadline = time.monotonic() + 300
    while True:  # the announce turn, in the requester's own history
        text = json.dumps(chat(live, "agent:main:main"))
        if child in text or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert child in text and "Status: ok" in text


def test_reset_delete_and_policy_through_the_gateway(live: Live) -> None:
    before = chat(live, "agent:main:cron:job-abc")
    assert any(m["role"] == "user" for m in before)  # it has a conversation to lose
    proc = st(live.env, live.state, "--json", "reset", "cron:job-abc")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["via"] == "gateway"
    # OpenClaw's own view afterwards: the conversation gone, at most its reset marker left.
    assert [m["role"] for m in chat(live, "agent:main:cron:job-abc")] in ([], ["system"])
    proc = st(live.env, live.state, "--json", "policy", "slack:channel:c0123", "deny")
    assert proc.returncode == 0, proc.stderr
    assert sessions(live)["agent:main:slack:channel:c0123"].get("sendPolicy") == "deny"
    proc = st(live.env, live.state, "--json", "delete", "custom-other")
    assert proc.returncode == 0, proc.stderr
    assert "agent:main:custom-other" not in sessions(live)


def test_abort_stops_the_turn_in_the_gateway(live: Live) -> None:
    """A turn that runs a 120 s tool: `abort` ends the run and the gateway's `chat.abort` stops
    the turn (no final reply lands in the session)."""
    proc = st(
        live.env,
        live.state,
        "send",
        "node-mac-mini",
        'TOOL[exec]{"command":"sleep 120"}',
        "--timeout",
        "0",
    )
    assert proc.returncode == 0, proc.stderr
    run_id = proc.stdout.strip()
    deadline = time.monotonic() + 120
    while True:  # until the gateway has the turn
        rows = sessions(live)
        row = rows.get("agent:main:node-mac-mini") or {}
        if row.get("hasActiveRun") or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    proc = st(live.env, live.state, "--json", "abort", run_id)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == "aborted" and out["gatewayAborted"] is True, out
    proc = st(live.env, live.state, "--json", "wait", run_id, "--timeout", "60")
    assert json.loads(proc.stdout)["runStatus"] == "aborted"
    deadline = time.monotonic() + 60
    while sessions(live).get("agent:main:node-mac-mini", {}).get("hasActiveRun"):
        assert time.monotonic() < deadline, "the gateway's turn is still running"
        time.sleep(0.5)
