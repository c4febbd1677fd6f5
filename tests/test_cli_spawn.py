"""`spawn` end to end (spec §9): non-blocking start, the sub-agent run in its own session, the
announce back to the requester (transcript and outbox), timeouts, failures, loss, cleanup, the
allowlist and model checks, and survival of the spawning process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sessiontool.flow.announce import format_count, format_duration
from sessiontool.runs.spawnopts import task_message
from tests.helpers import AGENTS_DIR, generous, run_cli, run_json, write_config
from tests.runhelpers import (
    alive,
    outbox,
    poll,
    read_store,
    records,
    requests,
    settle,
    text_of,
    transcript_messages,
    wait_until,
    write_store,
)

MAIN = "agent:main:main"


pytestmark = pytest.mark.usefixtures("reap_workers")


def scripted_cfg(tmp_path: Path, script: dict[str, Any]) -> dict[str, Any]:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script))
    runner = {
        "type": "command",
        "command": [sys.executable, str(AGENTS_DIR / "scripted.py"), str(path)],
        "env": ["SCRIPTED_AGENT_LOG"],
        "input": "json",
        "output": "json",
    }
    return {"agents": {"defaults": {"runner": runner}}}


def scripted(state: Path, tmp_path: Path, script: dict[str, Any]) -> None:
    write_config(state, scripted_cfg(tmp_path, script))


def record(state: Path, run_id: str) -> dict[str, Any]:
    return next(r for r in records(state) if r["runId"] == run_id)


def announced(state: Path, run_id: str, timeout: float = 20.0) -> dict[str, Any]:
    """The spawn record once its announce is done (the worker sets `announcedAt` last)."""
    return poll(  # type: ignore[no-any-return]
        lambda: (lambda r: r if r.get("announcedAt") else None)(record(state, run_id)),
        timeout,
        "the announce",
    )


def injected(state: Path, requester: str = MAIN, agent: str = "main") -> list[dict[str, Any]]:
    msgs = transcript_messages(state, agent).get(requester, [])
    return [m for m in msgs if m.get("stopReason") == "injected"]


def announce_lines(msg: dict[str, Any]) -> dict[str, str]:
    lines = text_of(msg).split("\n")
    assert [ln.split(":", 1)[0] for ln in lines] == ["Status", "Result", "Notes", "Stats"], lines
    return {ln.split(":", 1)[0]: ln.split(": ", 1)[1] for ln in lines}


def group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


# -- the normal path ------------------------------------------------------------------------


def test_spawn_returns_at_once_and_the_announce_carries_status_result_and_stats(
    state: Path, tmp_path: Path, agent_log: Path
) -> None:
    usage = {"input": 12_345, "output": 678, "cacheRead": 0, "cacheWrite": 0}
    scripted(
        state,
        tmp_path,
        {
            "spawn": {"sleep": 1.2, "reply": "found 3 bugs", "usage": usage},
            "announce": "Summary: 3 bugs found.",
        },
    )
    # The requester has a channel, so the announce is delivered there (and not mirrored).
    sdir = state / "agents" / "main" / "sessions"
    write_store(
        state,
        {
            MAIN: {
                "sessionId": "req-1",
                "updatedAt": 1,
                "deliveryContext": {"channel": "telegram", "to": "42"},
            }
        },
    )
    rc, out = run_json("spawn", "Find the bugs", "--label", "bughunt")
    assert (
        rc == 0
        and set(out) == {"status", "runId", "childSessionKey"}
        and out["status"] == "accepted"
    )
    child = out["childSessionKey"]
    assert child.startswith("agent:main:subagent:")
    entry = json.loads((sdir / "sessions.json").read_text())[child]
    assert entry["spawnedBy"] == MAIN and entry["label"] == "bughunt"
    assert injected(state) == [] and outbox(state) == []

    spawn = announced(state, out["runId"])
    assert spawn["status"] == "ok" and spawn["reply"] == "found 3 bugs"
    assert spawn["usage"]["input"] == 12_345 and spawn["usage"]["output"] == 678
    (msg,) = injected(state)
    assert msg["role"] == "assistant" and msg["usage"]["totalTokens"] == 0
    parts = announce_lines(msg)
    assert parts["Status"] == "ok"
    assert parts["Result"] == "Summary: 3 bugs found."
    assert parts["Notes"] == "none"
    total = spawn["usage"]["totalTokens"]
    assert total == 12_345 + 678
    runtime = format_duration(spawn["endedAt"] - spawn["startedAt"])
    tpath = sdir / f"{entry['sessionId']}.jsonl"
    assert parts["Stats"] == " \u2022 ".join(
        [
            f"runtime {runtime}",
            f"tokens {format_count(total)} (in {format_count(12_345)} / out {format_count(678)})",
            f"sessionKey {child}",
            f"sessionId {entry['sessionId']}",
            f"transcript {tpath}",
        ]
    )
    assert "tokens 13.0k (in 12.3k / out 678)" in parts["Stats"]
    assert tpath.exists()

    (d,) = outbox(state)
    assert d["mode"] == "spawn-announce" and d["status"] == "outbox"
    assert (d["channel"], d["to"], d["sessionKey"], d["runId"]) == (
        "telegram",
        "42",
        MAIN,
        out["runId"],
    )
    assert d["text"] == text_of(msg)
    # Not mirrored again: the injected message is the only copy in the requester's transcript.
    assert [text_of(m) for m in transcript_messages(state)[MAIN]] == [text_of(msg)]
    rc, dl = run_json("deliveries")
    assert dl["count"] == 1 and dl["deliveries"][0]["sessionKey"] == "main"

    recs = settle(state)
    (step,) = [r for r in recs if r["kind"] == "step"]
    assert (step["step"], step["parentRunId"], step["sessionKey"]) == (
        "announce",
        out["runId"],
        child,
    )
    child_req, ann_req = requests(agent_log)
    # The child's agent is given the task; the transcript's first message (`taskMessage`) is
    # OpenClaw's, the depth and then the task.
    assert (child_req["kind"], child_req["sessionKey"], child_req["message"]) == (
        "spawn",
        child,
        "Find the bugs",
    )
    assert child_req["taskMessage"] == task_message(
        "Find the bugs", depth=1, max_depth=1, mode="run"
    )
    for needle in ("Find the bugs", "bughunt", MAIN, child):
        assert needle in child_req["system"]
    assert "REPLY_SKIP" not in child_req["system"] and "ANNOUNCE_SKIP" not in child_req["system"]
    assert ann_req["message"] == "Sub-agent announce step."
    assert ann_req["system"] == (
        "Sub-agent announce step:\n"
        "Task: Find the bugs\n"
        "Label: bughunt\n"
        "Outcome: ok\n"
        "Latest reply: found 3 bugs\n"
        'If you want to remain silent, reply exactly "ANNOUNCE_SKIP".\n'
        "Any other reply is reported to the requester as the result."
    )


def test_spawn_of_a_ten_second_run_returns_at_once_and_abort_is_announced(
    state: Path, tmp_path: Path
) -> None:
    # The run sleeps longer than any wait below: what ends it is the abort, by logic, not a clock.
    long = generous(6)
    scripted(
        state,
        tmp_path,
        {"spawn": {"sleep": long, "reply": "too late"}, "announce": "stopped early"},
    )
    rc, out = run_json("spawn", "a long job")
    assert rc == 0 and out["status"] == "accepted"
    rec = poll(
        lambda: (lambda r: r if r.get("agentPid") else None)(record(state, out["runId"])),
        generous(1),
        "the agent",
    )
    assert rec["status"] == "running"  # spawn returned while its run runs: not after it
    rc, aborted = run_json("abort", out["runId"])
    assert rc == 0 and aborted == {"runId": out["runId"], "status": "aborted"}
    spawn = announced(state, out["runId"], generous(2))  # after the abort, not the sleep
    assert spawn["status"] == "aborted"
    (msg,) = injected(state)
    parts = announce_lines(msg)
    assert parts["Status"] == "aborted" and parts["Result"] == "stopped early"
    assert parts["Notes"] == "aborted by user"
    assert group_gone(rec["agentPid"])


def test_failing_child_reports_error_with_the_error_in_notes(state: Path, tmp_path: Path) -> None:
    scripted(
        state,
        tmp_path,
        {
            "spawn": {"exit": 3, "stderr": "disk on fire"},
            "announce": {"exit": 1, "stderr": "announce broke too"},
        },
    )
    rc, out = run_json("spawn", "doomed task")
    assert rc == 0
    spawn = announced(state, out["runId"])
    assert spawn["status"] == "error"
    (msg,) = injected(state)
    parts = announce_lines(msg)
    # Status is the run's outcome; the failed announce step leaves the fallback Result.
    assert parts["Status"] == "error"
    assert parts["Result"] == "(no output)"
    assert "disk on fire" in parts["Notes"] and parts["Notes"] == spawn["error"]
    assert "announce broke too" not in text_of(msg)


def test_failed_announce_step_falls_back_to_the_child_reply(state: Path, tmp_path: Path) -> None:
    scripted(state, tmp_path, {"spawn": "the child's own answer", "announce": {"exit": 1}})
    rc, out = run_json("spawn", "task")
    announced(state, out["runId"])
    parts = announce_lines(injected(state)[0])
    assert parts["Status"] == "ok" and parts["Result"] == "the child's own answer"


def test_announce_skip_stays_silent(state: Path, tmp_path: Path) -> None:
    scripted(state, tmp_path, {"spawn": "done", "announce": "ANNOUNCE_SKIP"})
    rc, out = run_json("spawn", "quiet task")
    announced(state, out["runId"])
    assert injected(state) == [] and outbox(state) == []


def test_run_timeout_kills_the_agent_group_and_reports_timeout(state: Path, tmp_path: Path) -> None:
    long = generous(6)  # longer than any wait below: the 1 s timeout is what ends the run
    scripted(
        state, tmp_path, {"spawn": {"sleep": long, "reply": "never"}, "announce": "ran out of time"}
    )
    rc, out = run_json("spawn", "slow task", "--run-timeout", "1")
    assert rc == 0
    spawn = announced(state, out["runId"], generous(2))
    assert spawn["status"] == "timeout"
    assert 900 <= spawn["endedAt"] - spawn["startedAt"] < generous(1 + 1) * 1000
    assert group_gone(spawn["agentPid"])
    parts = announce_lines(injected(state)[0])
    assert parts["Status"] == "timeout" and parts["Result"] == "ran out of time"
    assert "timed out" in parts["Notes"]


# -- cleanup --------------------------------------------------------------------------------


def test_cleanup_delete_archives_the_child_and_keep_keeps_it(state: Path) -> None:
    rc, deleted = run_json("spawn", "throwaway", "--cleanup", "delete")
    assert rc == 0
    rc, kept = run_json("spawn", "keeper", "--cleanup", "keep")
    assert rc == 0
    gone = announced(state, deleted["runId"])
    announced(state, kept["runId"])
    rc, listing = run_json("list")
    listed = {row["key"] for row in listing["sessions"]}
    assert deleted["childSessionKey"] not in listed
    assert kept["childSessionKey"] in listed
    sdir = state / "agents" / "main" / "sessions"
    archived = list(sdir.glob(f"{gone['sessionId']}.jsonl.deleted.*"))
    assert len(archived) == 1 and not (sdir / f"{gone['sessionId']}.jsonl").exists()
    # The archive still holds the child's conversation.
    assert "throwaway" in archived[0].read_text()
    kept_row = next(r for r in listing["sessions"] if r["key"] == kept["childSessionKey"])
    assert Path(kept_row["transcriptPath"]).exists()
    # Both announces reached the requester, the deleted child's included.
    assert len(injected(state)) == 2


def test_bad_cleanup_value(state: Path) -> None:
    rc, out = run_json("spawn", "t", "--cleanup", "shred")
    assert rc == 2 and records(state) == []


# -- checks before anything is written ------------------------------------------------------


def test_agent_id_needs_the_allowlist(state: Path) -> None:
    rc, out = run_json("spawn", "research this", "--agent-id", "research")
    assert rc == 4, out
    assert out["status"] == "forbidden"
    assert out["error"] == "agentId is not allowed for sessions_spawn (allowed: none)"
    write_config(
        state,
        {
            "agents": {
                "list": [{"id": "main", "subagents": {"allowAgents": ["ops"]}}, {"id": "research"}]
            }
        },
    )
    rc, out = run_json("spawn", "research this", "--agent-id", "research")
    assert rc == 4 and out["error"] == "agentId is not allowed for sessions_spawn (allowed: ops)"
    assert records(state) == []
    assert not (state / "agents" / "research").exists()


def test_agent_id_allowed_by_star_spawns_under_that_agent(state: Path) -> None:
    write_config(
        state,
        {
            "agents": {
                "list": [{"id": "main", "subagents": {"allowAgents": ["*"]}}, {"id": "research"}]
            }
        },
    )
    rc, agents = run_json("agents")
    assert (
        rc == 0
        and [a["id"] for a in agents["agents"]] == ["main", "research"]
        and agents["allowAny"] is True
    )
    rc, out = run_json("spawn", "research this", "--agent-id", "research")
    assert rc == 0, out
    child = out["childSessionKey"]
    assert child.startswith("agent:research:subagent:")
    spawn = announced(state, out["runId"])
    assert (
        spawn["agentId"] == "research"
        and spawn["status"] == "ok"
        and spawn["reply"] == "echo: research this"
    )
    store = json.loads((state / "agents" / "research" / "sessions" / "sessions.json").read_text())
    assert store[child]["spawnedBy"] == MAIN
    # The announce lands with the requester, in the main agent's store.
    (msg,) = injected(state)
    assert announce_lines(msg)["Status"] == "ok"


def test_unknown_model_is_a_usage_error_naming_the_known_ones(
    state: Path, tmp_path: Path, agent_log: Path
) -> None:
    cfg = scripted_cfg(tmp_path, {"spawn": "done", "announce": "ANNOUNCE_SKIP"})
    cfg["agents"]["defaults"]["model"] = "anthropic/claude-x"
    write_config(state, cfg)
    rc, out = run_json("spawn", "task", "--model", "nope")
    assert rc == 2, out
    assert out["status"] == "error" and out["code"] == 2
    assert (
        "nope" in out["error"] and "anthropic/claude-x" in out["error"] and "echo" in out["error"]
    )
    assert records(state) == []
    assert not (state / "agents" / "main" / "sessions" / "sessions.json").exists()
    # A known model (here by the part after the provider) is the child's override.
    rc, out = run_json("spawn", "task", "--model", "claude-x")
    assert rc == 0
    entry = json.loads((state / "agents" / "main" / "sessions" / "sessions.json").read_text())[
        out["childSessionKey"]
    ]
    assert entry["modelOverride"] == "claude-x"
    announced(state, out["runId"])
    assert requests(agent_log)[0]["model"] == "claude-x"


def test_subagent_cannot_spawn(state: Path) -> None:
    # sessiontool's own store keeps the January rule by default (maxSpawnDepth 1), refused in
    # OpenClaw 2026.9.6's words.
    rc, out = run_json("--as", "agent:main:subagent:x", "spawn", "more work")
    assert rc == 4
    assert out == {
        "status": "forbidden",
        "error": "sessions_spawn is not allowed at this depth (current depth: 1, max: 1; "
        "agents.defaults.subagents.maxSpawnDepth).",
        "code": 4,
    }
    assert records(state) == []
    assert not (state / "agents" / "main" / "sessions" / "sessions.json").exists()


def test_sandboxed_requester_sees_its_child_and_gets_the_announce(state: Path) -> None:
    env = {"SESSIONTOOL_SANDBOXED": "1"}
    work = "agent:main:work"
    run_json("send", "main", "hello")  # another session it must not see
    rc, out = run_json("--as", work, "spawn", "sandboxed task", env=env)
    assert rc == 0, out
    child = out["childSessionKey"]
    rc, listing = run_json("--as", work, "list", env=env)
    assert rc == 0 and [r["key"] for r in listing["sessions"]] == [child]
    announced(state, out["runId"])
    rc, hist = run_json("--as", work, "history", child, env=env)
    assert rc == 0 and [text_of(m) for m in hist["messages"]][:2] == [
        task_message("sandboxed task", depth=1, max_depth=1, mode="run"),
        "echo: sandboxed task",
    ]
    (msg,) = injected(state, work)
    assert announce_lines(msg)["Result"] == "echo: echo: sandboxed task"


# -- the run outlives whoever started it ----------------------------------------------------


def test_spawned_run_survives_the_killed_parent_shell(state: Path, tmp_path: Path) -> None:
    scripted(
        state,
        tmp_path,
        {"spawn": {"sleep": 1.5, "reply": "survived"}, "announce": "survivor report"},
    )
    out_file = tmp_path / "spawn.out"
    script = f'{sys.executable} -m sessiontool spawn "outlive me" --json > {out_file}; sleep 30'
    parent = subprocess.Popen(["bash", "-c", script], start_new_session=True)
    try:
        text = poll(
            lambda: out_file.exists() and out_file.read_text().strip(), 10, "spawn to return"
        )
        os.killpg(parent.pid, signal.SIGKILL)
    finally:
        parent.wait(timeout=10)
    out = json.loads(text)
    rec = record(state, out["runId"])
    assert rec["status"] in ("queued", "running")
    spawn = announced(state, out["runId"])
    assert spawn["status"] == "ok" and spawn["reply"] == "survived"
    (msg,) = injected(state)
    assert announce_lines(msg)["Result"] == "survivor report"


def test_worker_killed_mid_run_is_lost_and_still_announced(state: Path, tmp_path: Path) -> None:
    scripted(state, tmp_path, {"spawn": {"sleep": 30}, "announce": "lost summary"})
    rc, out = run_json("spawn", "fragile task")
    rid = out["runId"]
    rec = poll(
        lambda: (lambda r: r if r.get("agentPid") and r.get("pid") else None)(record(state, rid)),
        10,
        "the agent",
    )
    os.kill(rec["pid"], signal.SIGKILL)
    os.killpg(rec["agentPid"], signal.SIGKILL)
    poll(lambda: not alive(rec["pid"]), 5, "the worker to die")
    assert injected(state) == []
    rc, one = run_json("runs", rid)
    assert rc == 0 and one["status"] == "lost" and one["error"] == "worker died"
    spawn = announced(state, rid)
    assert spawn["status"] == "lost"
    (msg,) = injected(state)
    parts = announce_lines(msg)
    assert (
        parts["Status"] == "lost"
        and parts["Result"] == "lost summary"
        and parts["Notes"] == "worker died"
    )
    # The child's transcript: the task without an answer, then the announce step.
    child = transcript_messages(state)[out["childSessionKey"]]
    assert [(m["role"], text_of(m)) for m in child] == [
        ("user", task_message("fragile task", depth=1, max_depth=1, mode="run")),
        ("user", "Sub-agent announce step."),
        ("assistant", "lost summary"),
    ]
    (d,) = outbox(state)
    assert d["mode"] == "spawn-announce" and d["text"] == text_of(msg)


def test_announce_to_a_closed_requester_is_recorded_as_denied(state: Path, tmp_path: Path) -> None:
    scripted(state, tmp_path, {"spawn": "done", "announce": "report"})
    write_store(
        state,
        {
            MAIN: {
                "sessionId": "req-1",
                "updatedAt": 1,
                "sendPolicy": "deny",
                "lastChannel": "telegram",
                "lastTo": "42",
            }
        },
    )
    rc, out = run_json("spawn", "task")
    assert rc == 0
    announced(state, out["runId"])
    # The requester's transcript still learns the result; the channel does not.
    (msg,) = injected(state)
    assert announce_lines(msg)["Result"] == "report"
    (d,) = outbox(state)
    assert d["status"] == "denied" and d["mode"] == "spawn-announce" and d["text"] == text_of(msg)


def test_worker_killed_during_the_announce_step_still_announces(
    state: Path, tmp_path: Path
) -> None:
    """The announce step's worker dies: the step is lost (never run twice, so the child's
    transcript gets no second announce turn) and the announce goes on with the child's own
    reply, exactly once."""
    scripted(
        state, tmp_path, {"spawn": "child finished", "announce": {"sleep": 30, "reply": "never"}}
    )
    rc, out = run_json("spawn", "task")
    rid = out["runId"]
    step = poll(
        lambda: next(
            (r for r in records(state) if r.get("step") == "announce" and r.get("agentPid")), None
        ),
        10,
        "the announce step",
    )
    assert record(state, rid)["status"] == "ok"
    os.kill(step["pid"], signal.SIGKILL)
    os.killpg(step["agentPid"], signal.SIGKILL)
    poll(lambda: not alive(step["pid"]), 5, "the worker to die")
    (tmp_path / "script.json").write_text(json.dumps({"announce": "second try"}))
    rc, one = run_json("runs", step["runId"])
    assert rc == 0 and one["status"] == "lost"
    spawn = announced(state, rid)
    assert spawn["status"] == "ok"
    (msg,) = injected(state)
    parts = announce_lines(msg)
    assert parts["Status"] == "ok" and parts["Result"] == "child finished"
    assert [d["id"] for d in outbox(state)] == [f"{rid}:spawn-announce"]


def test_agent_id_refusal_says_what_to_configure(state: Path) -> None:
    proc = run_cli("spawn", "go slow", "--agent-id", "slow")
    assert proc.returncode == 4
    assert "(allowed: none)" in proc.stderr  # OpenClaw's message, unchanged
    assert "may spawn only under itself" in proc.stderr
    assert "add it to agents.entries.main.subagents.allowAgents" in proc.stderr


def test_spawn_label_in_use_is_refused(state: Path, reap_workers: None) -> None:
    proc = run_cli("spawn", "research X", "--label", "research", "-q")
    assert proc.returncode == 0
    run_id = proc.stdout.strip()
    assert "\t" not in run_id and len(run_id) == 36  # -q: the run id only
    holder = next(k for k, e in read_store(state).items() if e.get("label") == "research")
    before = read_store(state)
    proc = run_cli("spawn", "again", "--label", "research")
    assert proc.returncode == 2
    assert f"label already in use: research (by {holder})" in proc.stderr
    assert set(read_store(state)) == set(before)
    rc, data = run_json("history", "--label", "research")
    assert rc == 0 and data["sessionKey"] == holder


@pytest.mark.slow
def test_announce_after_cleanup_delete_names_the_archive(state: Path, reap_workers: None) -> None:
    rc, data = run_json("spawn", "do it", "--cleanup", "delete")
    assert rc == 0
    rc, done = run_json("wait", data["runId"], "--timeout", "30")
    assert rc == 0
    sdir = state / "agents" / "main" / "sessions"

    def announced() -> str | None:
        rc, hist = run_json("history", "main")
        texts = [
            b.get("text", "")
            for m in (hist or {}).get("messages", [])
            for b in (m.get("content") if isinstance(m.get("content"), list) else [])
        ]
        return next((t for t in texts if "Stats:" in t), None)

    wait_until(lambda: announced() is not None and list(sdir.glob("*.deleted.*")) != [])
    text = announced()
    assert text is not None
    archived = next(sdir.glob("*.deleted.*"))
    stem = archived.name.split(".deleted.")[0]
    assert f"{stem}.deleted.<time> (archived: --cleanup delete)" in text
    assert not (sdir / stem).exists()
