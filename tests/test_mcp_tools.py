"""`sessiontool mcp`'s orchestration and search tools (issue 41 item 2), through the real server
and the MCP SDK's own client (which checks every successful result against the tool's
outputSchema): `subagents` list / wait / cancel over the requester's session tree (a run its
child started included), `sessions_yield` returning the children's completion events,
`sessions_search` hits reopened with sessions_history; read-only keeps only the read tools."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import run_cli, run_json, write_config

from .test_mcp import ME, err, ok, run, server

pytest.importorskip("mcp")

from mcp import Client  # noqa: E402

pytestmark = pytest.mark.usefixtures("reap_workers")

AGENTS = Path(__file__).resolve().parent / "agents"


def _scripted(state: Path) -> None:
    """A `slow task` takes two minutes (it is cancelled long before); everything else answers
    `done` at once. A sub-agent may send (so a child of ME has a run of its own)."""
    script = state.parent / "script.json"
    script.write_text(json.dumps({"message:slow task": {"sleep": 120}, "default": "done"}))
    runner = {
        "type": "command",
        "command": [sys.executable, str(AGENTS / "scripted.py"), str(script)],
        "input": "json",
        "output": "json",
    }
    write_config(
        state,
        {
            "agents": {"defaults": {"runner": runner}},
            "tools": {"subagents": {"tools": {"allow": ["sessions_send"]}}},
        },
    )


def test_subagents_and_yield_over_the_session_tree(state: Path) -> None:
    _scripted(state)
    seen: dict[str, Any] = {}

    async def session(c: Client) -> None:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        seen["tools"] = tools
        quick = ok(await c.call_tool("sessions_spawn", {"task": "quick task", "label": "q"}))
        slow = ok(await c.call_tool("sessions_spawn", {"task": "slow task", "label": "s"}))
        seen["quick"], seen["slow"] = quick, slow
        seen["wait"] = ok(
            await c.call_tool(
                "subagents", {"action": "wait", "taskIds": [quick["runId"]], "timeoutSeconds": 60}
            )
        )
        seen["wait0"] = ok(
            await c.call_tool(
                "subagents", {"action": "wait", "taskIds": [slow["runId"]], "timeoutSeconds": 0}
            )
        )
        progress: list[str | None] = []

        async def on_progress(p: float, total: float | None, msg: str | None) -> None:
            progress.append(msg)

        seen["wait2"] = ok(
            await c.call_tool(
                "subagents",
                {"action": "wait", "taskIds": [slow["runId"]], "timeoutSeconds": 2},
                progress_callback=on_progress,
            )
        )
        seen["progress"] = progress
        # the quick child's own run: a send it makes, as itself
        proc = run_cli("--as", quick["childSessionKey"], "send", "s9", "grandchild work")
        seen["grandchild"] = proc
        seen["list"] = ok(await c.call_tool("subagents", {}))
        seen["cancel"] = ok(
            await c.call_tool("subagents", {"action": "cancel", "taskId": slow["runId"]})
        )
        seen["outside"] = err(
            await c.call_tool("subagents", {"action": "cancel", "taskId": "nope"})
        )
        third = ok(await c.call_tool("sessions_spawn", {"task": "third task", "label": "t"}))
        seen["third"] = third
        seen["yield"] = ok(await c.call_tool("sessions_yield", {"timeoutSeconds": 60}))
        seen["yield_again"] = err(await c.call_tool("sessions_yield", {}))
        seen["bad"] = err(await c.call_tool("subagents", {"action": "wait"}))

    run(session, server("--as", ME))

    tools = seen["tools"]
    assert {"subagents", "sessions_yield", "sessions_search"} <= set(tools)
    assert all(t.output_schema and t.output_schema["type"] == "object" for t in tools.values())
    assert tools["subagents"].annotations.destructive_hint is True
    assert tools["sessions_yield"].annotations.read_only_hint is True

    wait = seen["wait"]
    assert wait["action"] == "wait" and wait["reason"] == "completed"
    assert wait["completed"] == [seen["quick"]["runId"]]
    assert wait["tasks"][0]["status"] == "completed" and wait["tasks"][0]["runtime"] == "subagent"
    assert wait["tasks"][0]["terminalSummary"] == "done"
    wait0 = seen["wait0"]
    assert wait0["reason"] == "timeout" and wait0["completed"] == []
    assert wait0["tasks"][0]["status"] in ("queued", "running")  # a timeout cancels nothing
    assert seen["wait2"]["reason"] == "timeout"
    # a wait of its own reports MCP progress about once a second, as sessions_send's does
    assert seen["progress"] and all("waiting for 1 run(s)" in str(m) for m in seen["progress"])

    assert seen["grandchild"].returncode == 0, seen["grandchild"].stderr
    listed = seen["list"]
    assert listed["status"] == "ok" and listed["action"] == "list"
    assert listed["requesterSessionKey"] == ME and listed["callerIsSubagent"] is False
    by_id = {t["taskId"]: t for t in listed["tasks"]}
    assert by_id[seen["slow"]["runId"]]["status"] in ("queued", "running")
    assert by_id[seen["quick"]["runId"]]["label"] == "q"
    grand = [t for t in listed["tasks"] if t["runtime"] == "session"]
    assert [t["sessionKey"] for t in grand] == ["agent:main:s9"]  # the child's run, in the tree
    assert listed["total"] == 2 and listed["taskTotal"] == 3
    assert [t["taskId"] for t in listed["active"]] == [seen["slow"]["runId"]]

    cancel = seen["cancel"]
    assert cancel == {
        "status": "cancelled",
        "taskId": seen["slow"]["runId"],
        "found": True,
        "cancelled": True,
    }
    rc, rec = run_json("runs", seen["slow"]["runId"])
    assert rc == 0 and rec["status"] == "aborted"
    assert seen["outside"]["status"] == "forbidden"
    assert seen["outside"]["error"] == "Task outside session tree."

    y = seen["yield"]
    assert y["status"] == "yielded"
    (event,) = y["events"]
    assert event["runId"] == seen["third"]["runId"] and event["type"] == "task_completion"
    assert event["childSessionKey"] == seen["third"]["childSessionKey"]
    assert event["status"] == "ok" and event["result"] == "done" and event["taskLabel"] == "t"
    again = seen["yield_again"]
    assert again["status"] == "error" and "No pending child completion" in again["error"]
    assert seen["bad"]["code"] == 2 and "taskIds" in seen["bad"]["error"]


def test_search_over_mcp_and_read_only(state: Path) -> None:
    _scripted(state)
    assert run_cli("send", "notes", "remember the aardvark").returncode == 0
    seen: dict[str, Any] = {}

    async def session(c: Client) -> None:
        found = ok(await c.call_tool("sessions_search", {"query": "aardvark"}))
        seen["found"] = found
        hit = found["results"][0]
        seen["window"] = ok(
            await c.call_tool(
                "sessions_history",
                {"sessionKey": hit["sessionKey"], "messageId": hit["messageId"], "limit": 1},
            )
        )

    run(session, server())

    async def read_only(c: Client) -> None:
        seen["ro"] = [t.name for t in (await c.list_tools()).tools]
        seen["ro_cancel"] = err(await c.call_tool("subagents", {"action": "list"}))

    run(read_only, server("--read-only"))

    (hit,) = seen["found"]["results"]
    assert hit["sessionKey"] == "agent:main:notes" and hit["role"] == "user"
    assert "aardvark" in hit["snippet"] and isinstance(hit["score"], float)
    (msg,) = seen["window"]["messages"]
    assert "remember the aardvark" in json.dumps(msg)
    assert seen["ro"] == [
        "sessions_list",
        "sessions_history",
        "agents_list",
        "sessions_search",
        "sessions_yield",
        "usage",
        "diff",
    ]
    assert seen["ro_cancel"]["status"] == "forbidden"
    assert "read-only" in seen["ro_cancel"]["error"]
