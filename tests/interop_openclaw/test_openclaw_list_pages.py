"""`list`'s and `history`'s pages and filters (issue 41 item 5) beside OpenClaw 2026.9.6's own
sessions_list and sessions_history tools on the same store, through the real gateway
(`tools.invoke`, the tools as its agents call them, as `main`): the same sessions in the same
order for each filter, the same paging keys."""

from __future__ import annotations

import json
from typing import Any

import pytest

from .conftest import Live
from .test_openclaw_gateway import _gw, st


def theirs(live: Live, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    answer = _gw(live, "tools.invoke", {"name": tool, "sessionKey": "main", "args": args})
    assert answer.get("ok") is not False, answer
    details: dict[str, Any] = answer["output"]["details"]
    return details


def ours(live: Live, *args: str) -> dict[str, Any]:
    proc = st(live.env, live.state, "--json", *args)
    assert proc.returncode == 0, proc.stderr
    data: dict[str, Any] = json.loads(proc.stdout)
    return data


def full(key: str) -> str:
    return key if key.startswith("agent:") else f"agent:main:{key}"


@pytest.mark.parametrize(
    ("args", "flags"),
    [
        ({}, []),
        ({"label": "weather-fixture"}, ["--label", "weather-fixture"]),
        ({"search": "ops"}, ["--search", "ops"]),
        ({"excludeSubagents": True}, ["--exclude-subagents"]),
        (
            {"kinds": ["group"], "limit": 2, "offset": 1},
            ["--kinds", "group", "--limit", "2", "--offset", "1"],
        ),
        ({"limit": 5, "offset": 5}, ["--limit", "5", "--offset", "5"]),
    ],
)
def test_list_pages_and_filters_as_openclaws_tool(
    live: Live, args: dict[str, Any], flags: list[str]
) -> None:
    them = theirs(live, "sessions_list", {"limit": 200, **args})
    us = ours(
        live, "list", "--all-agents", *(flags if "limit" in args else [*flags, "--limit", "200"])
    )
    assert [full(r["key"]) for r in us["sessions"]] == [full(r["key"]) for r in them["sessions"]]
    for name in ("count", "hasMore", "nextOffset", "limitApplied"):
        assert us.get(name) == them.get(name), (name, us.get(name), them.get(name))


def test_history_pages_as_openclaws_tool(live: Live) -> None:
    offset: int | None = 0
    while offset is not None:
        them = theirs(
            live,
            "sessions_history",
            {"sessionKey": "agent:main:main", "limit": 5, "offset": offset},
        )
        us = ours(live, "history", "main", "--limit", "5", "--offset", str(offset))
        for name in ("offset", "hasMore", "nextOffset", "totalMessages"):
            assert us.get(name) == them.get(name), (offset, name, us.get(name), them.get(name))
        # the messages: OpenClaw's own but its nested tool records (`role: custom`), which
        # sessiontool shows with tool results only (docs/openclaw.md)
        assert len(us["messages"]) == len([m for m in them["messages"] if m["role"] != "custom"])
        offset = us.get("nextOffset")
