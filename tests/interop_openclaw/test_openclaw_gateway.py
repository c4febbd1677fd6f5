"""sessiontool against the real OpenClaw 2026.9.6 gateway, on a copy of the real fixture:
sends go through the gateway and come back, `history` (read side, straight from the database)
shows them with the roles the gateway's chat.history gives them, a label set by sessiontool is
in the program's own sessions.list (one in use: exit 2), a spawned child is linked to its
requester as OpenClaw links one, a `--run-timeout` that expires ends as `timeout`, a reset is in
place, a `send --as` runs the reply-back turns and the announce; and with no gateway a send
exits 4 and leaves the state dir byte-identical."""

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
    full = child if child.startswith("agent:") else "agent:main:" + child
    assert _announced(live, rec) == f"announce:v1:{full}:{rec['gatewayRunId']}"


def _announced(live: Live, rec: dict[str, Any]) -> str:
    """The spawn's announce, in OpenClaw's form: the requester's run under OpenClaw's announce
    key left only the requester's reply (no user message, no Status/Result text)."""
    announce = str(rec["followUp"]["announceRunId"])
    deadline = time.monotonic() + 300
    while True:  # the announce turn is the gateway's, accepted and then run
        msgs = _gw(live, "chat.history", {"sessionKey": "agent:main:main", "limit": 40})["messages"]
        mine = [m for m in msgs if (m.get("__openclaw") or {}).get("runId") == announce]
        if mine or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert mine and {m["role"] for m in mine} == {"assistant"}, msgs[-6:]
    assert "Status: ok" not in json.dumps(msgs)
    return announce


def _gw(live: Live, method: str, params: dict[str, object]) -> dict[str, Any]:
    real = live.oc(
        "gateway",
        "call",
        method,
        "--json",
        "--port",
        str(live.port),
        "--timeout",
        "120000",
        "--params",
        json.dumps(params),
    )
    assert real.returncode == 0, real.stderr
    data: dict[str, Any] = json.loads(real.stdout)
    return data


def _roles_match(live: Live, key: str, n: int = 12) -> list[tuple[str, str]]:
    """The last `n` messages of `key` as (role, text) from the gateway's chat.history and from
    `sessiontool history`: asserted equal, returned."""

    def text(c: object) -> str:
        if isinstance(c, list):
            return "".join(b.get("text", "") for b in c if isinstance(b, dict))
        return str(c)

    theirs = _gw(live, "chat.history", {"sessionKey": key, "limit": n})["messages"]
    proc = st(live.env, live.state, "--json", "history", key, "--limit", str(n))
    assert proc.returncode == 0, proc.stderr
    ours = json.loads(proc.stdout)["messages"]
    a = [(m["role"], text(m.get("content"))) for m in theirs][-n:]
    b = [(m["role"], text(m.get("content"))) for m in ours][-n:]
    assert a == b
    return a


def _until_done(live: Live, run_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 300
    while True:
        rec: dict[str, Any] = json.loads(st(live.env, live.state, "--json", "runs", run_id).stdout)
        if (rec.get("followUp") or {}).get("next") == "done" or time.monotonic() > deadline:
            return rec
        time.sleep(1)


def test_spawned_child_is_linked_and_roles_are_openclaws(live: Live) -> None:
    """As OpenClaw's sessions_spawn links a child: the child's row names its requester
    (`parentSessionKey`, depth 1) and the requester's row lists it in `childSessions`. Its task
    (an inter-session message of sessions_spawn) is a `user` turn in chat.history, and so in
    `history`; the announce in the requester too."""
    proc = st(live.env, live.state, "--json", "spawn", "linked task", "--label", "linked-child")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    child = out["childSessionKey"]
    rec = _until_done(live, out["runId"])
    assert rec["status"] == "ok" and rec["followUp"]["next"] == "done", rec
    rows = {r["key"]: r for r in _gw(live, "sessions.list", {"limit": 500})["sessions"]}
    assert rows[child]["parentSessionKey"] == "agent:main:main"
    assert rows[child]["spawnDepth"] == 1 and rows[child]["label"] == "linked-child"
    assert child in rows["agent:main:main"]["childSessions"]
    msgs = _roles_match(live, child)
    assert msgs[0] == ("user", "linked task") and msgs[1][0] == "assistant"
    _announced(live, rec)
    _roles_match(live, "main", 6)  # history shows the announce as chat.history does


def test_run_timeout_ends_as_timeout(live: Live) -> None:
    """The child's turn outlives `--run-timeout`: OpenClaw ends the turn `ok` with a failed
    tool ("⚠️ Exec failed"); sessiontool reports `timeout`, as OpenClaw's own spawn does."""
    task = 'TOOL[exec]{"command":"sleep 30"}'
    # A label: the announce names the task by it (as OpenClaw's does), so the requester's fake
    # model is not handed the task's TOOL[...] marker to run.
    proc = st(
        live.env, live.state, "--json", "spawn", task, "--run-timeout", "3", "--label", "slow"
    )
    assert proc.returncode == 0, proc.stderr
    run_id = json.loads(proc.stdout)["runId"]
    proc = st(live.env, live.state, "--json", "wait", run_id, "--timeout", "300")
    out = json.loads(proc.stdout)
    assert proc.returncode == 1 and out["runStatus"] == "timeout", out
    assert "--run-timeout" in out["error"] and "Exec failed" not in proc.stdout


def test_reset_is_in_place_and_a_label_in_use_exits_2(live: Live) -> None:
    key = "agent:main:telegram:group:-100555"
    before = {r["key"]: r for r in _gw(live, "sessions.list", {"limit": 500})["sessions"]}
    proc = st(live.env, live.state, "reset", key)
    assert proc.returncode == 0, proc.stderr
    sid = before[key]["sessionId"]
    assert proc.stdout.strip() == (
        f"{key}\treset in place: sessionId {sid} kept, its transcript starts over"
    )
    after = {r["key"]: r for r in _gw(live, "sessions.list", {"limit": 500})["sessions"]}
    assert after[key]["sessionId"] == sid
    assert st(live.env, live.state, "label", key, "taken-label").returncode == 0
    proc = st(live.env, live.state, "label", "discord:group:123", "taken-label")
    assert proc.returncode == 2 and "label already in use: taken-label" in proc.stderr
    rows = {r["key"]: r for r in _gw(live, "sessions.list", {"limit": 500})["sessions"]}
    assert rows["agent:main:discord:group:123"].get("label") != "taken-label"


def test_send_as_runs_reply_back_turns_and_the_announce(live: Live) -> None:
    """A send made as the main session: the reply-back turn in the requester (the fake model
    answers turn 1 with PINGPONG-1, then REPLY_SKIP) and the announce step in the target, each
    a turn of the real gateway, with the roles chat.history gives them."""
    proc = st(
        live.env,
        live.state,
        "--as",
        "agent:main:main",
        "--json",
        "send",
        "discord:group:123",
        "a2a hello",
        "--timeout",
        "300",
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    rec = _until_done(live, out["runId"])
    assert rec["followUp"]["next"] == "done", rec
    steps = json.loads(st(live.env, live.state, "--json", "runs", "--kind", "step").stdout)["runs"]
    mine = [r for r in steps if r.get("parentRunId") == out["runId"]]
    got = sorted((r["step"], r["sessionKey"], r["status"]) for r in mine)
    assert got == [
        ("announce", "agent:main:discord:group:123", "ok"),
        ("reply", "agent:main:discord:group:123", "ok"),
        ("reply", "main", "ok"),  # `runs` shows the requester's main session as `main`
    ]
    main = _roles_match(live, "main", 4)
    assert ("assistant", "PINGPONG-1 from requester: acknowledged.") in main
    target = _roles_match(live, "discord:group:123", 8)
    # sessions_send's messages are forwarded: shown as the sender's assistant turns.
    assert ("assistant", "a2a hello") in target
    assert ("assistant", "Agent-to-agent announce step.") in target


# -- every write through sessiontool's own client, no `openclaw` CLI on its PATH ---------------


def sessions(live: Live) -> dict[str, dict[str, Any]]:
    return {s["key"]: s for s in _gw(live, "sessions.list", {"limit": 1000})["sessions"]}


def chat(live: Live, key: str) -> list[dict[str, Any]]:
    real = _gw(live, "chat.history", {"sessionKey": key, "limit": 1000})
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
    _announced(live, rec)  # the announce turn, in the requester's own history


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
