"""`send --mode` and the result words of OpenClaw 2026.9.6's sessions_send on sessiontool's own
store, with real runs (issue 41 item 4): notify adds context and runs nothing; steer reaches an
`openai` run between its model calls (and is queued as a turn where no run can take it, or when
it came after the last call); `targetDisposition`, `delivery.status`, `no_reply`, `forbidden`;
the openai runner's reasoning setting from a spawn's `--thinking`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import run_cli, run_json, write_config
from tests.runhelpers import py_command, records, settle, text_of, transcript_messages

pytestmark = pytest.mark.usefixtures("reap_workers")
BOB = "agent:main:dm:bob"


def _user_texts(body: dict[str, Any]) -> list[str]:
    out = []
    for m in body["messages"]:
        if m.get("role") == "user":
            c = m.get("content")
            out.append(c if isinstance(c, str) else "".join(p.get("text", "") for p in c))
    return out


class Brain:
    """A model that steers its own session while its first call is being answered (so the
    guidance is in the inbox before the run's next call, whatever the machine's speed)."""

    def __init__(self) -> None:
        self.steered: list[dict[str, Any]] = []

    def __call__(self, body: dict[str, Any]) -> Any:
        msgs = body["messages"]
        texts = _user_texts(body)
        first = texts[-1] if texts else ""
        if any(m["role"] == "tool" for m in msgs):
            return {"content": "after tool; last user: " + first}
        if first.startswith(("STEER", "LATE")):
            proc = run_cli("send", BOB, "turn left", "--mode", "steer", "--json")
            self.steered.append(json.loads(proc.stdout))
            if first.startswith("LATE"):  # no further model call: the guidance comes too late
                return {"content": "done at once"}
            return {"tool_calls": [{"name": "agents_list", "arguments": {}}]}
        return {"content": f"fake: {first}"}


@pytest.fixture
def brain(state: Path) -> Iterator[tuple[FakeOpenAI, Brain]]:
    b = Brain()
    with FakeOpenAI(default=b) as srv:
        runner = {"type": "openai", "baseUrl": srv.base_url, "model": "fake-model"}
        write_config(state, {"agents": {"defaults": {"runner": runner}}})
        yield srv, b


def test_steer_reaches_the_active_run_before_its_next_model_call(
    state: Path, brain: tuple[FakeOpenAI, Brain]
) -> None:
    srv, b = brain
    rc, out = run_json("send", BOB, "STEER me")
    assert rc == 0, out
    (steered,) = b.steered
    assert steered["status"] == "accepted" and steered["targetDisposition"] == "steered"
    assert steered["runId"] == out["runId"]  # the active run, not a new one
    assert steered["delivery"] == {"status": "skipped", "mode": "announce"}
    # The second model call had the guidance as the newest user message; so did the reply.
    second = srv.requests[-1].body
    assert _user_texts(second)[-1] == "turn left"
    assert out["reply"] == "after tool; last user: turn left"
    msgs = transcript_messages(state)[BOB]
    assert [m["role"] for m in msgs] == ["user", "assistant", "toolResult", "user", "assistant"]
    assert text_of(msgs[3]) == "turn left"
    assert msgs[3]["provenance"] == {"kind": "external_user", "sourceTool": "sessiontool"}
    assert len(records(state)) == 1  # no run of its own


def test_guidance_after_the_last_model_call_becomes_a_turn_of_its_own(
    state: Path, brain: tuple[FakeOpenAI, Brain]
) -> None:
    srv, b = brain
    rc, out = run_json("send", BOB, "LATE steer")
    assert rc == 0 and out["reply"] == "done at once"
    assert b.steered[0]["targetDisposition"] == "steered"
    recs = settle(state)
    assert [r["kind"] for r in recs] == ["send", "send"]
    later = next(r for r in recs if r["runId"] != out["runId"])
    assert later["message"] == "turn left" and later["reply"] == "fake: turn left"
    texts = [text_of(m) for m in transcript_messages(state)[BOB]]
    assert texts == ["LATE steer", "done at once", "turn left", "fake: turn left"]


def test_steer_without_a_run_that_takes_guidance_is_queued_and_says_so(state: Path) -> None:
    rc, out = run_json("send", "main", "steer me", "--mode", "steer")
    assert rc == 0, out
    assert out["status"] == "ok" and out["reply"] == "echo: steer me"
    assert out["note"] == "the target has no active run that takes guidance: queued as a new turn"
    rc, later = run_json("send", "main", "again", "--mode", "steer", "--timeout", "0")
    assert rc == 0 and later["status"] == "accepted"
    assert later["targetDisposition"] == "queued"
    proc = run_cli("send", "main", "third", "--mode", "steer")
    assert proc.returncode == 0 and proc.stdout == "echo: third\n"
    assert "note: the target has no active run that takes guidance" in proc.stderr
    settle(state)


def test_notify_adds_context_and_starts_no_run(state: Path) -> None:
    rc, _ = run_json("send", "main", "hello")
    assert rc == 0
    rc, out = run_json("send", "main", "FYI: the build is green", "--mode", "notify")
    assert rc == 0, out
    assert out["status"] == "queued" and out["runStarted"] is False
    assert set(out) == {"status", "sessionKey", "notificationId", "durability", "runStarted"}
    assert len(records(state)) == 1
    msgs = transcript_messages(state)["agent:main:main"]
    assert text_of(msgs[-1]) == "FYI: the build is green" and msgs[-1]["role"] == "user"
    rc, out = run_json("--as", "agent:main:work", "send", "main", "from work", "--mode", "notify")
    assert rc == 0
    last = transcript_messages(state)["agent:main:main"][-1]
    assert last["provenance"] == {
        "kind": "inter_session",
        "sourceSessionKey": "agent:main:work",
        "sourceTool": "sessions_send",
    }
    assert len(records(state)) == 1
    proc = run_cli("send", "main", "quiet context", "--mode", "notify")
    assert proc.returncode == 0 and proc.stdout == ""


def test_notify_needs_an_existing_session_and_the_send_policy(state: Path) -> None:
    rc, out = run_json("send", "agent:main:nobody", "x", "--mode", "notify")
    assert rc == 3, out
    rc, _ = run_json("send", "main", "hello")
    write_config(state, {"session": {"sendPolicy": {"default": "deny"}}})
    rc, out = run_json("send", "main", "x", "--mode", "notify")
    assert rc == 4 and out["status"] == "forbidden"
    rc, out = run_json("send", "main", "x", "--mode", "loud")
    assert rc == 2 and "mode must be one of: followup, steer, notify" in out["error"]
    rc, out = run_json("send", "main", "x", "--mode", "notify", "--deliver")
    assert rc == 2 and "--deliver goes with a follow-up turn" in out["error"]
    assert len(records(state)) == 1  # the first send's only


def test_a_run_with_no_visible_reply_is_no_reply(state: Path) -> None:
    write_config(
        state, {"agents": {"defaults": {"runner": py_command("import sys; sys.stdin.read()")}}}
    )
    rc, out = run_json("send", "main", "say nothing")
    assert rc == 0, out
    assert out["status"] == "no_reply" and "reply" not in out
    assert (
        out["message"] == "No visible reply or pending announcement. Continue or retry if needed."
    )
    proc = run_cli("send", "main", "still nothing")
    assert proc.returncode == 0 and proc.stdout == ""
    assert "no visible reply (run " in proc.stderr
    settle(state)


def test_followup_results_carry_openclaws_words(state: Path) -> None:
    rc, out = run_json("send", "main", "hi", "--mode", "followup")
    assert rc == 0 and out["delivery"] == {"status": "skipped", "mode": "announce"}
    rc, out = run_json("send", "main", "later", "--timeout", "0")
    assert rc == 0 and out["targetDisposition"] == "queued"
    assert out["delivery"] == {"status": "skipped", "mode": "announce"}
    rc, out = run_json("--as", "agent:main:work", "send", "main", "a2a", "--timeout", "0")
    assert rc == 0 and out["delivery"] == {"status": "pending", "mode": "announce"}
    settle(state)


def test_the_mcp_send_takes_the_mode(state: Path) -> None:
    from sessiontool.context import build_context
    from sessiontool.runs.tools import call_tool

    run_json("send", "main", "hello")
    ctx = build_context(state, None, None, None)
    res = call_tool(
        ctx, "sessions_send", {"sessionKey": "main", "message": "ctx", "mode": "notify"}
    )
    assert not res.failed and res.data["status"] == "queued"
    res = call_tool(ctx, "sessions_send", {"sessionKey": "main", "message": "x", "mode": "resume"})
    assert res.failed and "mode must be one of" in res.data["error"]
    assert len(records(state)) == 1


def test_a_spawns_thinking_is_the_openai_reasoning_effort(
    state: Path, brain: tuple[FakeOpenAI, Brain]
) -> None:
    srv, _ = brain
    rc, out = run_json("spawn", "think hard", "--thinking", "xhigh")
    assert rc == 0
    settle(state)
    bodies = [r.body for r in srv.requests]
    child = next(b for b in bodies if _user_texts(b)[-1] == "think hard")
    assert child["reasoning_effort"] == "high"
    rc, out = run_json("spawn", "no thought", "--thinking", "off")
    settle(state)
    last_child = [b for b in (r.body for r in srv.requests) if "no thought" in _user_texts(b)[-1]]
    assert last_child and all("reasoning_effort" not in b for b in last_child)


def test_a_sessions_own_thinking_level_is_the_openai_reasoning_effort(
    state: Path, brain: tuple[FakeOpenAI, Brain]
) -> None:
    """`session KEY --thinking` reaches the in-process runners too (one level: the run's,
    else the session's), `max` as OpenAI's strongest."""
    srv, _ = brain
    assert run_json("send", "main", "first")[0] == 0
    settle(state)
    assert all("reasoning_effort" not in r.body for r in srv.requests)
    assert run_json("session", "main", "--thinking", "max")[0] == 0
    assert run_json("send", "main", "deeper")[0] == 0
    settle(state)
    body = next(b for b in (r.body for r in srv.requests) if _user_texts(b)[-1] == "deeper")
    assert body["reasoning_effort"] == "high"
