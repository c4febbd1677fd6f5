"""The agent-to-agent flow of `send` end to end (spec §5.3, §7): the primary run, the reply-back
loop, the announce step and its delivery, with real detached workers and a scripted agent."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import AGENTS_DIR, run_cli, run_json
from tests.runhelpers import (
    outbox,
    poll,
    records,
    requests,
    runner_config,
    settle,
    text_of,
    transcript_messages,
    write_store,
)

A = "agent:main:main"
B = "agent:main:telegram:group:9"


pytestmark = pytest.mark.usefixtures("reap_workers")


def scripted(state: Path, tmp_path: Path, script: dict[str, Any], **more: Any) -> None:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script))
    runner = {
        "type": "command",
        "command": [sys.executable, str(AGENTS_DIR / "scripted.py"), str(path)],
        "env": ["SCRIPTED_AGENT_LOG"],
        "input": "json",
        "output": "json",
    }
    runner_config(state, runner, **more)


def ping_pong(turns: int) -> dict[str, Any]:
    return {"agentToAgent": {"maxPingPongTurns": turns}}


def steps(recs: list[dict[str, Any]], step: str) -> list[dict[str, Any]]:
    out = [r for r in recs if r.get("kind") == "step" and r.get("step") == step]
    return sorted(out, key=lambda r: (r.get("turn") or 0, r["createdAt"]))


def is_mirror(m: dict[str, Any]) -> bool:
    return m.get("provider") == "openclaw" and m.get("model") == "delivery-mirror"


# -- the full flow --------------------------------------------------------------------------


@pytest.mark.parametrize(("configured", "how"), [(5, "as"), (9, "env")])
def test_five_turns_alternate_then_one_announce_and_one_delivery(
    state: Path, tmp_path: Path, configured: int, how: str
) -> None:
    # No reply is ever REPLY_SKIP: the loop can only stop at its limit (9 is clamped to 5).
    scripted(state, tmp_path, {"announce": "Announced!"}, session=ping_pong(configured))
    if how == "as":
        rc, out = run_json("--as", "main", "send", B, "hello")
    else:
        rc, out = run_json("send", B, "hello", env={"SESSIONTOOL_SESSION_KEY": A})
    assert rc == 0, out
    assert out["status"] == "ok" and out["reply"] == "scripted: hello"
    assert out["delivery"] == {"status": "pending", "mode": "announce"}
    recs = settle(state)
    (send,) = [r for r in recs if r["kind"] == "send"]
    assert send["requesterSessionKey"] == A and send["sessionKey"] == B and send["a2a"] is True

    turns = steps(recs, "reply")
    assert [r["turn"] for r in turns] == [1, 2, 3, 4, 5]
    assert [r["sessionKey"] for r in turns] == [A, B, A, B, A]
    assert {r["maxTurns"] for r in turns} == {5}
    assert {r["parentRunId"] for r in turns} == {send["runId"]}
    assert all(r["status"] == "ok" for r in turns)
    # Each turn's message is the reply it answers: the primary's, then the previous turn's.
    incoming = [send["reply"]] + [r["reply"] for r in turns[:-1]]
    assert [r["message"] for r in turns] == incoming
    (announce,) = steps(recs, "announce")
    assert announce["sessionKey"] == B and announce["parentRunId"] == send["runId"]
    assert announce["reply"] == "Announced!"
    # Turns run one after the other, the announce after the last turn.
    order = [send, *turns, announce]
    for before, after in zip(order, order[1:], strict=False):
        assert before["endedAt"] <= after["startedAt"]

    rc, dl = run_json("deliveries")
    assert rc == 0 and dl["count"] == 1
    (d,) = dl["deliveries"]
    assert d["mode"] == "announce" and d["status"] == "outbox"
    assert (d["channel"], d["to"], d["sessionKey"]) == ("telegram", "group:9", B)
    assert d["text"] == "Announced!" and d["runId"] == send["runId"]

    msgs = transcript_messages(state)
    target, requester = msgs[B], msgs[A]
    assert [(m["role"], text_of(m)) for m in target[:2]] == [
        ("user", "hello"),
        ("assistant", "scripted: hello"),
    ]
    assert target[0]["provenance"]["kind"] == "inter_session"
    assert target[0]["provenance"]["sourceSessionKey"] == A
    # B got turns 2 and 4, then the announce step, then the mirror of what was delivered.
    assert [text_of(m) for m in target[2:6]] == [
        turns[1]["message"],
        turns[1]["reply"],
        turns[3]["message"],
        turns[3]["reply"],
    ]
    assert [text_of(m) for m in target[6:8]] == ["Agent-to-agent announce step.", "Announced!"]
    assert len(target) == 9
    mirror = target[8]
    assert is_mirror(mirror) and mirror["role"] == "assistant" and text_of(mirror) == "Announced!"
    assert mirror["api"] == "openai-responses" and mirror["usage"]["totalTokens"] == 0
    assert sum(is_mirror(m) for m in target) == 1
    # A got turns 1, 3 and 5: the incoming reply as a user message from B, its own answer.
    assert [(m["role"], text_of(m)) for m in requester] == [
        (role, text)
        for t in (turns[0], turns[2], turns[4])
        for role, text in (("user", t["message"]), ("assistant", t["reply"]))
    ]
    assert requester[0]["provenance"]["sourceSessionKey"] == B
    assert requester[0]["provenance"]["sourceChannel"] == "telegram"


def test_reply_skip_at_turn_two_ends_the_loop(state: Path, tmp_path: Path, agent_log: Path) -> None:
    scripted(
        state,
        tmp_path,
        {"reply:1": "one more thing", "reply:2": " REPLY_SKIP\n", "announce": "done"},
    )
    rc, out = run_json("--as", "main", "send", B, "hello")
    assert rc == 0, out
    recs = settle(state)
    turns = steps(recs, "reply")
    assert [(r["turn"], r["sessionKey"]) for r in turns] == [(1, A), (2, B)]
    assert len(steps(recs, "announce")) == 1
    # The skip is not a reply: the latest reply is turn 1's.
    (ann,) = [r for r in requests(agent_log) if r.get("step") == "announce"]
    assert "\nLatest reply: one more thing\n" in ann["system"]
    assert [d["text"] for d in outbox(state)] == ["done"]


def test_failed_turn_ends_the_loop(state: Path, tmp_path: Path, agent_log: Path) -> None:
    scripted(
        state, tmp_path, {"reply:1": {"exit": 2, "stderr": "no"}, "announce": "still announced"}
    )
    rc, out = run_json("--as", "main", "send", B, "hello")
    assert rc == 0
    recs = settle(state)
    turns = steps(recs, "reply")
    assert [(r["turn"], r["status"]) for r in turns] == [(1, "error")]
    (ann,) = [r for r in requests(agent_log) if r.get("step") == "announce"]
    assert "\nLatest reply: scripted: hello\n" in ann["system"]
    assert [d["text"] for d in outbox(state)] == ["still announced"]


def test_announce_skip_delivers_nothing(state: Path, tmp_path: Path) -> None:
    scripted(state, tmp_path, {"reply": "REPLY_SKIP", "announce": "ANNOUNCE_SKIP"})
    rc, out = run_json("--as", "main", "send", B, "hello")
    assert rc == 0 and out["delivery"]["mode"] == "announce"
    recs = settle(state)
    (ann,) = steps(recs, "announce")
    assert ann["status"] == "ok" and ann["reply"] == "ANNOUNCE_SKIP"
    rc, dl = run_json("deliveries")
    assert rc == 0 and dl == {"count": 0, "deliveries": []}
    assert not any(is_mirror(m) for m in transcript_messages(state)[B])


def test_zero_turns_skips_the_loop_but_announces(
    state: Path, tmp_path: Path, agent_log: Path
) -> None:
    scripted(state, tmp_path, {"announce": "straight to announce"}, session=ping_pong(0))
    rc, out = run_json("--as", "main", "send", B, "hello")
    assert rc == 0
    recs = settle(state)
    assert steps(recs, "reply") == []
    (ann,) = steps(recs, "announce")
    assert ann["sessionKey"] == B
    assert [r.get("step") for r in requests(agent_log)] == [None, "announce"]
    (d,) = outbox(state)
    assert d["text"] == "straight to announce" and d["status"] == "outbox"
    # Nothing ran in the requester's session.
    assert transcript_messages(state).get(A, []) == []


def test_caller_timeout_is_still_announced(state: Path, tmp_path: Path) -> None:
    scripted(
        state,
        tmp_path,
        {
            "send": {"sleep": 2.5, "reply": "slow answer"},
            "reply": "REPLY_SKIP",
            "announce": "late news",
        },
    )
    rc, out = run_json("--as", "main", "send", B, "hello", "--timeout", "1")
    assert rc == 124, out
    assert out["status"] == "timeout" and out["delivery"] == {
        "status": "pending",
        "mode": "announce",
    }
    assert outbox(state) == []
    (d,) = poll(lambda: outbox(state), 20, "the late announce")
    assert d["text"] == "late news" and d["mode"] == "announce" and d["status"] == "outbox"
    recs = settle(state)
    (send,) = [r for r in recs if r["kind"] == "send"]
    assert send["status"] == "ok" and send["reply"] == "slow answer"
    assert d["runId"] == send["runId"]


def test_prompts_are_the_spec_texts(state: Path, tmp_path: Path, agent_log: Path) -> None:
    target = "agent:main:discord:group:7"
    write_store(
        state,
        {
            A: {
                "sessionId": "req-1",
                "updatedAt": 1,
                "deliveryContext": {"channel": "whatsapp", "to": "+1555"},
            }
        },
    )
    scripted(
        state,
        tmp_path,
        {
            "send": "round one",
            "reply:1": "turn one",
            "reply:2": "turn two",
            "announce": "ANNOUNCE_SKIP",
        },
        session=ping_pong(2),
    )
    rc, out = run_json("--as", "main", "send", target, "What's the status?")
    assert rc == 0 and out["reply"] == "round one"
    settle(state)
    primary, r1, r2, ann = requests(agent_log)
    parties = (
        "Agent 1 (requester) session: agent:main:main.\n"
        "Agent 1 (requester) channel: whatsapp.\n"
        "Agent 2 (target) session: agent:main:discord:group:7.\n"
    )
    assert (primary["kind"], primary["sessionKey"], primary["message"]) == (
        "send",
        target,
        "What's the status?",
    )
    assert "step" not in primary
    assert primary["system"] == (
        "Agent-to-agent message context:\n"
        "Agent 1 (requester) session: agent:main:main.\n"
        "Agent 1 (requester) channel: whatsapp.\n"
        "Agent 2 (target) session: agent:main:discord:group:7."
    )
    assert (r1["kind"], r1["step"], r1["turn"], r1["maxTurns"]) == ("step", "reply", 1, 2)
    assert (r1["sessionKey"], r1["message"]) == (A, "round one")
    assert r1["system"] == (
        "Agent-to-agent reply step:\n"
        "Current agent: Agent 1 (requester).\n"
        "Turn 1 of 2.\n" + parties + "Agent 2 (target) channel: discord.\n"
        'If you want to stop the ping-pong, reply exactly "REPLY_SKIP".'
    )
    assert (r2["step"], r2["turn"], r2["sessionKey"], r2["message"]) == (
        "reply",
        2,
        target,
        "turn one",
    )
    assert r2["system"] == (
        "Agent-to-agent reply step:\n"
        "Current agent: Agent 2 (target).\n"
        "Turn 2 of 2.\n" + parties + "Agent 2 (target) channel: discord.\n"
        'If you want to stop the ping-pong, reply exactly "REPLY_SKIP".'
    )
    assert (ann["kind"], ann["step"], ann["sessionKey"]) == ("step", "announce", target)
    assert ann["message"] == "Agent-to-agent announce step."
    assert ann["system"] == (
        "Agent-to-agent announce step:\n" + parties + "Agent 2 (target) channel: discord.\n"
        "Original request: What's the status?\n"
        "Round 1 reply: round one\n"
        "Latest reply: turn two\n"
        'If you want to remain silent, reply exactly "ANNOUNCE_SKIP".\n'
        "Any other reply will be posted to the target channel.\n"
        "After this reply, the agent-to-agent conversation is over."
    )
    # The announce step sees the conversation so far in its own session.
    assert [text_of(m) for m in ann["messages"]] == [
        "What's the status?",
        "round one",
        "turn one",
        "turn two",
    ]
    msgs = transcript_messages(state)
    assert msgs[target][0]["provenance"] == {
        "kind": "inter_session",
        "sourceSessionKey": A,
        "sourceChannel": "whatsapp",
        "sourceTool": "sessions_send",
    }
    # The requester's turn came from the target, by way of the same tool.
    assert msgs[A][0]["provenance"] == {
        "kind": "inter_session",
        "sourceSessionKey": target,
        "sourceChannel": "discord",
        "sourceTool": "sessions_send",
    }
    assert outbox(state) == []


def test_unknown_requester_channel_is_left_out_not_null(state: Path, tmp_path: Path) -> None:
    scripted(
        state,
        tmp_path,
        {"reply:1": "back to you", "reply:2": "REPLY_SKIP", "announce": "ANNOUNCE_SKIP"},
    )
    rc, _ = run_json("--as", "main", "send", B, "hello")
    assert rc == 0
    settle(state)
    provs = [m["provenance"] for m in transcript_messages(state)[B] if m["role"] == "user"]
    assert len(provs) == 3  # primary, turn 2, announce step
    for prov in provs:
        assert prov["sourceSessionKey"] == A and "sourceChannel" not in prov


# -- the operator ---------------------------------------------------------------------------


def test_operator_send_runs_no_loop_and_no_announce(
    state: Path, tmp_path: Path, agent_log: Path
) -> None:
    scripted(state, tmp_path, {"send": "operator reply", "announce": "must not run"})
    rc, out = run_json("send", B, "from cron")
    assert rc == 0 and out["reply"] == "operator reply"
    assert out["delivery"] == {"status": "skipped", "mode": "announce"}  # nothing announced
    recs = settle(state)
    assert [r["kind"] for r in recs] == ["send"]
    assert "requesterSessionKey" not in recs[0]
    assert [r.get("kind") for r in requests(agent_log)] == ["send"]
    assert requests(agent_log)[0]["system"] == ""
    assert outbox(state) == []
    msgs = transcript_messages(state)[B]
    assert [text_of(m) for m in msgs] == ["from cron", "operator reply"]
    assert msgs[0]["provenance"] == {"kind": "external_user", "sourceTool": "sessiontool"}


def test_operator_deliver_posts_the_reply_itself(
    state: Path, tmp_path: Path, agent_log: Path
) -> None:
    scripted(state, tmp_path, {"send": "today: 3 alerts"})
    rc, out = run_json("send", B, "summarise today's alerts", "--deliver")
    assert rc == 0
    # send --deliver waits for the worker's delivery and reports how it went.
    assert out["reply"] == "today: 3 alerts" and out["delivery"] == {
        "id": f"{out['runId']}:deliver",
        "status": "outbox",
        "mode": "deliver",
    }
    (d,) = poll(lambda: outbox(state), 15, "the delivery")
    assert d["mode"] == "deliver" and d["status"] == "outbox"
    assert (d["channel"], d["to"], d["text"], d["sessionKey"]) == (
        "telegram",
        "group:9",
        "today: 3 alerts",
        B,
    )
    recs = settle(state)
    assert [r["kind"] for r in recs] == ["send"] and d["runId"] == recs[0]["runId"]
    assert len(requests(agent_log)) == 1  # no announce step: the reply itself is posted
    msgs = transcript_messages(state)[B]
    assert [text_of(m) for m in msgs] == [
        "summarise today's alerts",
        "today: 3 alerts",
        "today: 3 alerts",
    ]
    assert is_mirror(msgs[2]) and not is_mirror(msgs[1])


def test_session_deliver_flag_means_the_agent_to_agent_announce(
    state: Path, tmp_path: Path
) -> None:
    """From a session, --deliver adds nothing: the announce step decides what is posted."""
    scripted(state, tmp_path, {"reply": "REPLY_SKIP", "announce": "ANNOUNCE_SKIP"})
    rc, out = run_json("--as", "main", "send", B, "hello", "--deliver")
    assert rc == 0 and out["delivery"]["mode"] == "announce"
    settle(state)
    assert outbox(state) == []


# -- refusals -------------------------------------------------------------------------------


def test_a_session_cannot_send_to_itself(state: Path) -> None:
    for target in ("main", A):
        rc, out = run_json("--as", "main", "send", target, "hi me")
        assert rc == 4
        assert out["status"] == "forbidden" and out["code"] == 4 and "itself" in out["error"]
        assert out["sessionKey"] == "main"
    assert records(state) == []
    proc = run_cli("send", "work", "hi", env={"SESSIONTOOL_SESSION_KEY": "agent:main:work"})
    assert proc.returncode == 4 and proc.stdout == ""
    assert proc.stderr.startswith("sessiontool: error:")
    assert records(state) == []


def test_send_policy_applies_to_every_step(state: Path, tmp_path: Path, agent_log: Path) -> None:
    """The requester's own session is closed to sends: no reply turn may run in it, while the
    target (open) still gets its announce step and its delivery."""
    sessions = state / "agents" / "main" / "sessions"
    sessions.mkdir(parents=True)
    (sessions / "sessions.json").write_text(
        json.dumps({A: {"sessionId": "req-1", "updatedAt": 1, "sendPolicy": "deny"}})
    )
    scripted(state, tmp_path, {"announce": "announced anyway"})
    rc, out = run_json("--as", "main", "send", B, "hello")
    assert rc == 0, out
    recs = settle(state)
    assert steps(recs, "reply") == []
    assert [r.get("step") for r in requests(agent_log)] == [None, "announce"]
    assert [(d["text"], d["status"]) for d in outbox(state)] == [("announced anyway", "outbox")]
    assert transcript_messages(state).get(A, []) == []


@pytest.mark.slow  # a step that sleeps 8 s on purpose: CI's slow pass runs it
def test_a_long_step_is_not_taken_for_lost(state: Path, tmp_path: Path) -> None:
    """Steps run inside the send's worker; a reconciler that looks at one long after it was
    created (a slow model, or turn 1 queued behind the requester's own run) must see it alive."""
    scripted(
        state,
        tmp_path,
        # long enough that `runs` (a process to start, seconds on a loaded machine) sees it run
        {"reply": "REPLY_SKIP", "announce": {"sleep": 8, "reply": "slow announce"}},
    )
    rc, out = run_json("--as", "main", "send", B, "hello")
    assert rc == 0
    step = poll(
        lambda: next(
            (
                r
                for r in records(state)
                if r.get("step") == "announce" and r.get("status") == "running"
            ),
            None,
        ),
        15,
        "the announce step to run",
    )
    later = str(step["createdAt"] + 10 * 60_000)
    rc, listing = run_json("runs", "--kind", "step", env={"SESSIONTOOL_NOW_MS": later})
    assert rc == 0
    assert {r["step"]: r["status"] for r in listing["runs"]} == {
        "reply": "ok",
        "announce": "running",
    }
    (d,) = poll(lambda: outbox(state), 15, "the announce")
    assert d["text"] == "slow announce"
    recs = settle(state)
    assert all(r["status"] == "ok" for r in recs)
