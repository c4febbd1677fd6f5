"""The `mcp` server's read-only report tools `usage` and `diff`: offered beside the session
tools (and under --read-only), answering what `usage --json` and `diff --json` print; never
offered to a model's runner."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")

from mcp.client.client import Client  # noqa: E402

from tests.helpers import run_json, write_config  # noqa: E402
from tests.runhelpers import sessions_dir, write_store  # noqa: E402
from tests.test_mcp import err, ok, server  # noqa: E402
from tests.test_usage_steps import MESSAGES, PRICE, T0, _line  # noqa: E402


@pytest.fixture
def two(state: Path) -> Path:
    write_config(state, {"models": {"providers": {"p": {"models": [{"id": "m", "cost": PRICE}]}}}})
    store = {}
    for key, sid, msgs in (
        ("agent:main:main", "s1", MESSAGES),
        ("agent:main:b", "s2", MESSAGES[:2]),
    ):
        store[key] = {"sessionId": sid, "updatedAt": T0}
        head = json.dumps(
            {"type": "session", "version": 3, "id": sid, "timestamp": "2026-11-30T00:00:00Z"}
        )
        (sessions_dir(state) / f"{sid}.jsonl").parent.mkdir(parents=True, exist_ok=True)
        (sessions_dir(state) / f"{sid}.jsonl").write_text(
            head + "\n" + "".join(_line(m) for m in msgs)
        )
    write_store(state, store)
    return state


def test_usage_and_diff_through_mcp(two: Path) -> None:
    got: dict[str, Any] = {}

    async def main() -> None:
        async with Client(server("--read-only"), read_timeout_seconds=60) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            got["annotations"] = {n: tools[n].annotations.read_only_hint for n in ("usage", "diff")}
            got["tool"] = ok(await c.call_tool("usage", {"by": "tool"}))
            got["turn"] = ok(await c.call_tool("usage", {"by": "turn", "sessionKey": "main"}))
            got["model"] = ok(await c.call_tool("usage", {"by": "model"}))
            got["diff"] = ok(await c.call_tool("diff", {"a": "main", "b": "agent:main:b"}))
            got["bad"] = err(await c.call_tool("usage", {"by": "week"}))

    anyio.run(main)
    assert got["annotations"] == {"usage": True, "diff": True}
    assert got["tool"] == run_json("usage", "--by", "tool")[1]
    assert got["turn"] == run_json("usage", "--by", "turn", "main")[1]
    assert got["model"] == run_json("usage", "--by", "model")[1]
    assert got["diff"] == run_json("diff", "main", "agent:main:b")[1]
    assert got["diff"]["divergence"]["step"] == 5  # b ends after its first turn (4 steps)
    assert got["bad"]["code"] == 2


def test_a_models_runner_is_not_offered_them(state: Path) -> None:
    from sessiontool.context import build_context
    from sessiontool.runs.tools import offered_names

    assert "usage" not in offered_names(build_context(str(state)))
