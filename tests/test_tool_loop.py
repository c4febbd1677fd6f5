"""The openai runner as an agent loop: a model behind a fake OpenAI-compatible server calls the
session tools, which run in-process as the run's own session."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import run_cli, run_json
from tests.runhelpers import records, text_of

pytestmark = pytest.mark.usefixtures("reap_workers")


def _user_texts(body: dict[str, Any]) -> list[str]:
    out = []
    for m in body["messages"]:
        if m.get("role") == "user":
            c = m.get("content")
            out.append(c if isinstance(c, str) else "".join(p.get("text", "") for p in c))
    return out


class Brain:
    """Answers by what the conversation asks for, so concurrent runs never race a script."""

    def __init__(self, state: Path) -> None:
        self.state = state
        self.snapshots: list[Any] = []

    def __call__(self, body: dict[str, Any]) -> Any:
        msgs = body["messages"]
        system = msgs[0]["content"] if msgs and msgs[0]["role"] == "system" else ""
        if 'reply exactly "REPLY_SKIP"' in system:
            return "REPLY_SKIP"
        if "ANNOUNCE_SKIP" in system and "Agent-to-agent announce step" in system:
            return "ANNOUNCE_SKIP"
        last = msgs[-1]
        first = _user_texts(body)[-1] if _user_texts(body) else ""
        if last["role"] == "tool":
            if first.startswith("LOOP"):
                return {"tool_calls": [{"name": "sessions_list", "arguments": {"limit": 1}}]}
            if first.startswith("LIST"):
                proc = run_cli("--as", "agent:main:dm:bob", "list", "--json")
                self.snapshots.append(json.loads(proc.stdout))
            return {"content": "done: " + last["content"][:40]}
        if first.startswith(("LIST", "LOOP")):
            return {"tool_calls": [{"name": "sessions_list", "arguments": {}}]}
        if first.startswith("SPAWN"):
            return {
                "tool_calls": [
                    {"name": "sessions_spawn", "arguments": {"task": "sub task", "label": "kid"}}
                ]
            }
        if first.startswith("SEND"):
            args = {"sessionKey": "agent:main:dm:carol", "message": "ping", "timeoutSeconds": 10}
            return {"tool_calls": [{"name": "sessions_send", "arguments": args}]}
        if first.startswith("HIST"):
            return {
                "tool_calls": [
                    {"name": "sessions_history", "arguments": {"sessionKey": "agent:main:dm:carol"}}
                ]
            }
        return {"content": f"fake: {first}"}


@pytest.fixture
def brain(state: Path) -> Iterator[tuple[FakeOpenAI, Brain]]:
    b = Brain(state)
    with FakeOpenAI(default=b) as srv:
        state.mkdir(parents=True, exist_ok=True)
        cfg = {
            "agents": {
                "defaults": {
                    "runner": {"type": "openai", "baseUrl": srv.base_url, "model": "fake-model"}
                }
            },
            "sessiontool": {"maxToolRounds": 3},
        }
        (state / "sessiontool.json5").write_text(json.dumps(cfg))
        yield srv, b


def _messages(key: str, tools: bool = True) -> list[dict[str, Any]]:
    args = ["history", key, "--json"] + (["--include-tools"] if tools else [])
    rc, out = run_json(*args)
    assert rc == 0, out
    return out["messages"]


def test_list_tool_call_then_answer(state: Path, brain: tuple[FakeOpenAI, Brain]) -> None:
    srv, b = brain
    run_json("send", "agent:main:dm:carol", "hello carol")
    rc, out = run_json("send", "agent:main:dm:bob", "LIST please")
    assert rc == 0 and out["reply"].startswith("done: ")
    msgs = _messages("agent:main:dm:bob")
    roles = [(m["role"], m.get("stopReason")) for m in msgs]
    assert roles == [
        ("user", None),
        ("assistant", "toolUse"),
        ("toolResult", None),
        ("assistant", "stop"),
    ]
    call = msgs[1]["content"][-1]
    assert call["type"] == "toolCall" and call["name"] == "sessions_list"
    result = msgs[2]
    assert result["toolCallId"] == call["id"] and result["toolName"] == "sessions_list"
    assert result["isError"] is False
    assert json.loads(result["content"][0]["text"]) == result["details"]
    assert result["content"][0]["text"].startswith("{\n  ")
    # What the tool returned is what the CLI prints as that session at that moment.
    assert b.snapshots and result["details"] == b.snapshots[0]
    assert {r["key"] for r in result["details"]["sessions"]} == {
        "agent:main:dm:carol",
        "agent:main:dm:bob",
    }
    # The model was offered OpenClaw's tools with OpenClaw's parameter names.
    tools = {
        t["function"]["name"]: t["function"]["parameters"] for t in srv.requests[-1].body["tools"]
    }
    assert set(tools) == {
        "sessions_list",
        "sessions_history",
        "sessions_send",
        "sessions_spawn",
        "agents_list",
        "sessions",
        "session_status",
        "subagents",
        "sessions_yield",
    }  # not sessions_search: the runners' transport has no search (reports/ is above runs/)
    assert {"kinds", "limit", "activeMinutes", "messageLimit"} <= set(
        tools["sessions_list"]["properties"]
    )
    assert {"task", "label", "agentId", "model", "runTimeoutSeconds", "cleanup"} <= set(
        tools["sessions_spawn"]["properties"]
    )
    # Usage sums both model calls; the index keeps the last call's.
    rec = next(r for r in records(state) if r["runId"] == out["runId"])
    calls = [m for m in msgs if m["role"] == "assistant"]
    assert rec["usage"]["input"] == sum(m["usage"]["input"] for m in calls)
    rc, listing = run_json("list")
    row = next(r for r in listing["sessions"] if r["key"] == "agent:main:dm:bob")
    assert row["totalTokens"] == calls[-1]["usage"]["input"]


def test_send_tool_waits_for_the_other_session(
    state: Path, brain: tuple[FakeOpenAI, Brain]
) -> None:
    rc, out = run_json("send", "agent:main:dm:bob", "SEND to carol", "--timeout", "30")
    assert rc == 0, out
    msgs = _messages("agent:main:dm:bob")
    result = next(m for m in msgs if m["role"] == "toolResult")
    assert result["details"]["status"] == "ok"
    assert result["details"]["reply"] == "fake: ping"
    assert result["details"]["sessionKey"] == "agent:main:dm:carol"
    carol = _messages("agent:main:dm:carol")
    assert carol[0]["provenance"]["sourceSessionKey"] == "agent:main:dm:bob"


def test_spawn_tool_starts_a_subagent_and_announces(
    state: Path, brain: tuple[FakeOpenAI, Brain]
) -> None:
    rc, out = run_json("send", "agent:main:dm:bob", "SPAWN a helper")
    assert rc == 0
    result = next(m for m in _messages("agent:main:dm:bob") if m["role"] == "toolResult")
    assert result["details"]["status"] == "accepted"
    child = result["details"]["childSessionKey"]
    assert child.startswith("agent:main:subagent:")
    deadline = time.monotonic() + 20
    announce = None
    while time.monotonic() < deadline and announce is None:
        announce = next(
            (m for m in _messages("agent:main:dm:bob") if m.get("stopReason") == "injected"), None
        )
        time.sleep(0.1)
    assert announce is not None
    assert text_of(announce).startswith("Status: ok\n")
    assert f"sessionKey {child}" in text_of(announce)


def test_sandboxed_history_is_a_forbidden_tool_result(
    state: Path, brain: tuple[FakeOpenAI, Brain]
) -> None:
    run_json("send", "agent:main:dm:carol", "secret stuff")
    cfg = json.loads((state / "sessiontool.json5").read_text())
    cfg["agents"]["defaults"]["sandbox"] = {"mode": "all"}
    (state / "sessiontool.json5").write_text(json.dumps(cfg))
    rc, out = run_json("send", "agent:main:dm:bob", "HIST of carol")
    assert rc == 0, out
    result = next(m for m in _messages("agent:main:dm:bob") if m["role"] == "toolResult")
    assert result["isError"] is False
    assert result["details"]["status"] == "forbidden"
    assert result["details"]["code"] == 4
    assert "not visible" in result["details"]["error"]


def test_stuck_model_stops_after_max_tool_rounds(
    state: Path, brain: tuple[FakeOpenAI, Brain]
) -> None:
    rc, out = run_json("send", "agent:main:dm:bob", "LOOP forever")
    assert rc == 1
    assert out["runStatus"] == "error" and "maxToolRounds" in out["error"]
    msgs = _messages("agent:main:dm:bob")
    assert sum(1 for m in msgs if m["role"] == "toolResult") == 3
    assert msgs[-1]["stopReason"] == "error"


def test_subagent_gets_no_tools_unless_allowed(
    state: Path, brain: tuple[FakeOpenAI, Brain]
) -> None:
    srv, _ = brain
    run_json("send", "agent:main:subagent:x", "plain question")
    body = srv.requests[-1].body
    assert "tools" not in body


def test_subagent_calling_a_tool_it_was_not_given_gets_a_tool_error(
    state: Path, brain: tuple[FakeOpenAI, Brain]
) -> None:
    """As with the llm runner (both execute calls through runners/turns.py): a sub-agent offered
    only sessions_list whose model calls sessions_spawn is refused, and nothing is spawned."""
    srv, _ = brain
    cfg = json.loads((state / "sessiontool.json5").read_text())
    cfg["tools"] = {"subagents": {"tools": {"allow": ["sessions_list"]}}}
    (state / "sessiontool.json5").write_text(json.dumps(cfg))
    rc, out = run_json("send", "agent:main:subagent:x", "SPAWN a grandchild")
    assert rc == 0, out
    offered = [t["function"]["name"] for t in srv.requests[0].body["tools"]]
    assert offered == ["sessions_list"]
    result = next(m for m in _messages("agent:main:subagent:x") if m["role"] == "toolResult")
    assert result["isError"] is True
    assert result["details"]["status"] == "forbidden"
    assert "not available to this session" in result["details"]["error"]
    assert [r for r in records(state) if r.get("kind") == "spawn"] == []
