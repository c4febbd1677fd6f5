"""The session tools' single definition: schemas, hints and argument checking that every
transport (openai runner, llm runner, MCP) shares."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sessiontool.context import build_context
from sessiontool.runs import tools
from tests.helpers import write_config


def test_every_tool_fully_described() -> None:
    assert tuple(tools.TOOLS) == tools.TOOL_NAMES
    for tool in tools.TOOLS.values():
        schema = tool.input_schema
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        for name, prop in schema["properties"].items():
            assert prop.get("description"), f"{tool.name}.{name} has no description"
        assert set(schema.get("required", [])) <= set(schema["properties"])
        assert tool.description and tool.title
        # The openai spec is the same definition, not a copy that could drift.
        assert tools.TOOL_SPECS[tool.name]["function"]["parameters"] is schema
    ro = {n for n, t in tools.TOOLS.items() if t.read_only}
    assert (
        ro
        == set(tools.READ_ONLY_TOOLS)
        == {
            "sessions_list",
            "sessions_history",
            "sessions_search",
            "sessions_yield",
            "agents_list",
        }
    )
    # subagents cancels runs, sessions resets and deletes; nothing else destroys anything
    assert {n for n, t in tools.TOOLS.items() if t.destructive} == {"subagents", "sessions"}
    assert tools.TOOLS["sessions_list"].annotations["idempotentHint"] is True
    assert tools.TOOLS["sessions_send"].annotations["idempotentHint"] is False


@pytest.mark.parametrize(
    ("name", "args", "message"),
    [
        ("sessions_list", {"limit": "5"}, "limit must be a whole number"),
        ("sessions_list", {"limit": 0}, "limit must be at least 1"),
        ("sessions_list", {"limit": 2.5}, "limit must be a whole number"),
        ("sessions_list", {"kinds": ["main", "bogus"]}, "kinds[1] must be one of"),
        ("sessions_list", {"kinds": "main"}, "kinds must be an array"),
        ("sessions_history", {}, "sessionKey is required"),
        ("sessions_history", {"sessionKey": 3}, "sessionKey must be a string"),
        ("sessions_send", {"message": "x", "timeoutSeconds": -1}, "at least 0"),
        ("sessions_send", {"message": "x", "timeoutSeconds": True}, "must be a number"),
        ("sessions_send", {"message": "hi"}, "needs sessionKey or label"),
        ("sessions_spawn", {"task": "t", "cleanup": "burn"}, "cleanup must be one of"),
        ("agents_list", {"verbose": True}, "agents_list has no argument 'verbose'"),
    ],
)
def test_bad_arguments_are_usage_results(
    state: Path, name: str, args: dict[str, Any], message: str
) -> None:
    ctx = build_context(state)
    r = tools.call_tool(ctx, name, args)
    assert r.failed and not r.malformed
    assert r.data["status"] == "error" and r.data["code"] == 2
    assert message in r.data["error"]


def test_call_shapes_and_openai_compat(state: Path) -> None:
    ctx = build_context(state, as_key="agent:main:dm:bob")
    r = tools.call_tool(ctx, "sessions_list", {"limit": 3.0, "messageLimit": None})
    assert not r.failed
    assert r.data == {"count": 0, "sessions": [], "hasMore": False, "limitApplied": 3}
    assert r.text().startswith("{\n  ")
    bad = tools.call_tool(ctx, "nope", {})
    assert bad.malformed and "unknown tool" in bad.data["error"]
    assert tools.execute_tool(ctx, "sessions_list", [1]) == (
        {"status": "error", "error": "arguments of sessions_list must be a JSON object", "code": 2},
        True,
    )
    missing = tools.call_tool(ctx, "sessions_history", {"sessionKey": "agent:main:none"})
    assert missing.failed and missing.data["code"] == 3
    assert "agent:main:none" in missing.data["error"]


def test_offered_definitions_follow_identity_and_filters(state: Path) -> None:
    write_config(state, {"tools": {"subagents": {"tools": {"allow": ["sessions_history"]}}}})
    op = build_context(state)
    # sessions_search only where the transport hands the search down (the MCP server)
    assert [t.name for t in tools.offered_definitions(op, searching=True)] == list(tools.TOOL_NAMES)
    assert "sessions_search" not in [t.name for t in tools.offered_definitions(op)]
    assert [t.name for t in tools.offered_definitions(op, read_only=True, searching=True)] == [
        "sessions_list",
        "sessions_history",
        "agents_list",
        "sessions_search",
        "sessions_yield",
    ]
    assert [
        t.name for t in tools.offered_definitions(op, only=["agents_list", "sessions_send"])
    ] == [
        "sessions_send",
        "agents_list",
    ]
    sub = build_context(state, as_key="agent:main:subagent:x")
    assert [t.name for t in tools.offered_definitions(sub)] == ["sessions_history"]
    denied = tools.call_tool(sub, "sessions_spawn", {"task": "t"})
    assert denied.failed and denied.data["status"] == "forbidden"
