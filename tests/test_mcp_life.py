"""The `sessions` and `session_status` tools (OpenClaw 2026.9.6's), through the real
`sessiontool mcp` server driven by the MCP SDK's client, acting as a session (`--as`): patch
(archive with `expectedSessionId`, pin, model, thinking level), reset and delete, and the
status card."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import run_cli, write_config

from .runhelpers import NOW, read_store, write_store

pytest.importorskip("mcp")

from mcp import Client  # noqa: E402

from .test_mcp import err, ok, run, server  # noqa: E402

ME = "agent:main:mcp"
OTHER_SID = "55555555-5555-4555-8555-555555555555"


@pytest.fixture
def two(state: Path) -> Path:
    write_config(state, {"agents": {"defaults": {"models": {"prov/big": {}}}}})
    write_store(
        state,
        {
            ME: {"sessionId": "66666666-6666-4666-8666-666666666666", "updatedAt": NOW},
            "agent:main:other": {"sessionId": OTHER_SID, "updatedAt": NOW - 1, "totalTokens": 7},
        },
    )
    return state


def test_sessions_patch_archive_pin_model_and_the_status_card(two: Path) -> None:
    seen: dict[str, Any] = {}

    async def session(c: Client) -> None:
        key = "agent:main:other"
        seen["no_expect"] = err(
            await c.call_tool("sessions", {"action": "patch", "sessionKey": key, "archived": True})
        )
        seen["stale"] = err(
            await c.call_tool(
                "sessions",
                {
                    "action": "patch",
                    "sessionKey": key,
                    "archived": True,
                    "expectedSessionId": "00000000-0000-4000-8000-000000000000",
                },
            )
        )
        seen["archived"] = ok(
            await c.call_tool(
                "sessions",
                {
                    "action": "patch",
                    "sessionKey": key,
                    "archived": True,
                    "expectedSessionId": OTHER_SID,
                },
            )
        )
        seen["send"] = err(await c.call_tool("sessions_send", {"sessionKey": key, "message": "x"}))
        seen["pin"] = ok(await c.call_tool("sessions", {"action": "patch", "pinned": True}))
        seen["model"] = ok(
            await c.call_tool(
                "sessions", {"action": "patch", "model": "prov/big", "thinkingLevel": "max"}
            )
        )
        seen["status"] = ok(await c.call_tool("session_status", {}))
        seen["cleared"] = ok(await c.call_tool("session_status", {"model": "default"}))
        seen["bad_model"] = err(await c.call_tool("session_status", {"model": "nosuch"}))
        seen["self_reset"] = err(await c.call_tool("sessions", {"action": "reset"}))
        seen["nothing"] = err(await c.call_tool("sessions", {"action": "patch"}))

    run(session, server("--as", ME))
    assert seen["no_expect"]["code"] == 2 and "expectedSessionId" in seen["no_expect"]["error"]
    assert seen["stale"]["code"] == 4 and "session changed" in seen["stale"]["error"]
    assert seen["archived"]["archived"] is True
    assert seen["send"]["code"] == 4 and "archived" in seen["send"]["error"]
    store = read_store(two)
    assert isinstance(store["agent:main:other"]["archivedAt"], int)
    assert seen["pin"]["pinned"] is True and isinstance(store[ME]["pinnedAt"], int)
    assert (store[ME].get("providerOverride"), store[ME].get("modelOverride")) == (None, None)
    assert seen["model"]["model"] == "prov/big" and seen["model"]["thinkingLevel"] == "max"
    card = seen["status"]
    assert card["sessionKey"] == ME and card["modelOverride"] == "prov/big"
    assert card["run"] == {"state": "idle"}
    assert "Model: prov/big (session override)" in card["text"]
    assert seen["cleared"]["modelOverride"] is None
    assert seen["bad_model"]["code"] == 2
    assert seen["self_reset"]["code"] == 4
    assert seen["nothing"]["code"] == 2


def test_sessions_delete_and_reset_with_expected_session_id(two: Path) -> None:
    seen: dict[str, Any] = {}

    async def session(c: Client) -> None:
        key = "agent:main:other"
        seen["stale"] = err(
            await c.call_tool(
                "sessions",
                {
                    "action": "delete",
                    "sessionKey": key,
                    "expectedSessionId": "00000000-0000-4000-8000-000000000000",
                },
            )
        )
        seen["reset"] = ok(
            await c.call_tool(
                "sessions", {"action": "reset", "sessionKey": key, "expectedSessionId": OTHER_SID}
            )
        )
        seen["deleted"] = ok(
            await c.call_tool(
                "sessions",
                {
                    "action": "delete",
                    "sessionKey": key,
                    "expectedSessionId": seen["reset"]["entry"]["sessionId"],
                },
            )
        )

    run(session, server("--as", ME))
    assert seen["stale"]["code"] == 4
    assert seen["reset"]["previousSessionId"] == OTHER_SID
    assert seen["deleted"]["action"] == "delete"
    assert "agent:main:other" not in read_store(two)
    assert json.loads(run_cli("list", "--json").stdout)["count"] == 1


def test_sessions_list_archived_false_true_and_all_as_openclaws_tool(two: Path) -> None:
    """OpenClaw's `archived`: false or left out lists the sessions not archived, true only the
    archived ones, "all" both (each archived row says so); anything else is refused."""
    rc = run_cli("archive", "agent:main:other", "--expect-session-id", OTHER_SID).returncode
    assert rc == 0
    seen: dict[str, Any] = {}

    async def session(c: Client) -> None:
        seen["default"] = ok(await c.call_tool("sessions_list", {}))
        seen["false"] = ok(await c.call_tool("sessions_list", {"archived": False}))
        seen["true"] = ok(await c.call_tool("sessions_list", {"archived": True}))
        seen["all"] = ok(await c.call_tool("sessions_list", {"archived": "all"}))
        seen["yes"] = err(await c.call_tool("sessions_list", {"archived": "yes"}))
        seen["one"] = err(await c.call_tool("sessions_list", {"archived": 1}))

    run(session, server())

    def keys(name: str) -> list[str]:
        return [r["key"] for r in seen[name]["sessions"]]

    assert keys("default") == keys("false") == [ME]
    assert keys("true") == ["agent:main:other"]
    assert seen["true"]["sessions"][0]["archived"] is True
    rows = {r["key"]: r for r in seen["all"]["sessions"]}
    assert sorted(rows) == sorted([ME, "agent:main:other"])
    assert rows["agent:main:other"]["archived"] is True and "archived" not in rows[ME]
    for name in ("yes", "one"):
        assert seen[name]["code"] == 2 and "archived must be one of" in seen[name]["error"]
