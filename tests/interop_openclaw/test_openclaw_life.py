"""A session's life through the real OpenClaw 2026.9.6 gateway, each command compared with what
OpenClaw's own methods show afterwards (`openclaw gateway call ...`): archive and restore
(`sessions.list` leaves an archived session out, `archived: true` lists it), a send to an
archived session refused, pin (first in the program's own order), the per-session model and
thinking level (`sessions.get`'s `modelOverride`/`thinkingLevel`), fork and rewind at a message
id that `history --json` gave, and compact (`sessions.compact`)."""

from __future__ import annotations

import json
from typing import Any

from .conftest import Live
from .test_openclaw_gateway import _gw, st

GROUP = "agent:main:discord:group:123"
TG = "agent:main:telegram:group:-100555"


def rows(live: Live, **params: Any) -> dict[str, dict[str, Any]]:
    data = _gw(live, "sessions.list", {"limit": 500, **params})
    return {r["key"]: r for r in data["sessions"]}


def ok(live: Live, *args: str) -> dict[str, Any]:
    proc = st(live.env, live.state, "--json", *args)
    assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
    data: dict[str, Any] = json.loads(proc.stdout)
    return data


def test_archive_and_restore_are_openclaws(live: Live) -> None:
    sid = rows(live)[TG]["sessionId"]
    proc = st(live.env, live.state, "archive", TG, "--expect-session-id", "not-" + sid)
    assert proc.returncode == 4 and "session changed" in proc.stderr
    data = ok(live, "archive", TG)
    assert data["via"] == "gateway"
    assert TG not in rows(live)
    assert TG in rows(live, archived=True)
    listed = ok(live, "list", "--archived", "yes")
    assert [r["key"] for r in listed["sessions"]] == [TG]
    assert listed["sessions"][0]["archived"] is True
    proc = st(live.env, live.state, "send", TG, "hello?", "--timeout", "60")
    assert proc.returncode == 4 and "archived" in proc.stderr
    ok(live, "restore", TG, "--expect-session-id", sid)
    assert TG in rows(live)


def test_pin_puts_it_first_in_openclaws_order_and_ours(live: Live) -> None:
    ok(live, "pin", GROUP)
    first = _gw(live, "sessions.list", {"limit": 500})["sessions"][0]
    assert first["key"] == GROUP
    assert ok(live, "list")["sessions"][0]["key"] in (GROUP, "discord:group:123")
    proc = st(
        live.env, live.state, "pin", "agent:main:subagent:96e0c7a6-e46b-424e-a8eb-556208f4ca46"
    )
    assert proc.returncode != 0
    ok(live, "unpin", GROUP)


def _stored(live: Live, key: str) -> dict[str, Any]:
    """The session's entry as OpenClaw's own database holds it (read-only, beside the gateway)."""
    import sqlite3

    db = live.state / "agents" / "main" / "agent" / "openclaw-agent.sqlite"
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        (raw,) = con.execute(
            "SELECT entry_json FROM session_nodes WHERE session_key = ?", (key,)
        ).fetchone()
    finally:
        con.close()
    entry: dict[str, Any] = json.loads(raw)
    return entry


def test_session_model_and_thinking_are_stored_where_openclaw_reads_them(live: Live) -> None:
    data = ok(live, "session", GROUP, "--model", "fake/fake-model", "--thinking", "off")
    assert data["via"] == "gateway"
    entry = _stored(live, GROUP)
    assert entry.get("modelOverride") == "fake-model" and entry.get("thinkingLevel") == "off"
    ours = next(r for r in ok(live, "list")["sessions"] if r["key"] in (GROUP, "discord:group:123"))
    assert ours["modelOverride"] == "fake-model"
    ok(live, "session", GROUP, "--model", "default", "--thinking", "default")
    entry = _stored(live, GROUP)
    assert "modelOverride" not in entry and "thinkingLevel" not in entry


def test_fork_and_rewind_at_a_message_id_history_gave(live: Live) -> None:
    ok(live, "send", GROUP, "first words", "--timeout", "300")
    ok(live, "send", GROUP, "second words", "--timeout", "300")
    hist = ok(live, "history", GROUP)
    users = [i for i, m in enumerate(hist["messages"]) if m["role"] == "user"]
    at = hist["messageIds"][users[-1]]
    assert isinstance(at, str)
    fork = ok(live, "fork", GROUP, "--at", at)
    assert fork["editorText"] == "second words"
    new = fork["sessionKey"]
    assert new in rows(live) or f"agent:main:{new}" in rows(live)
    forked = ok(live, "history", new)
    assert [m["content"] for m in forked["messages"]] == [
        m["content"] for m in hist["messages"][: users[-1]]
    ]
    whole = ok(live, "fork", GROUP, "--label", "whole-fork")  # sessions.create {fork: true}
    assert whole["via"] == "gateway" and whole["sessionKey"] != new
    copied = ok(live, "history", whole["sessionKey"])
    assert [m["content"] for m in copied["messages"]][-2:] == [
        m["content"] for m in hist["messages"]
    ][-2:]
    back = ok(live, "rewind", GROUP, at)
    assert back["editorText"] == "second words"
    after = ok(live, "history", GROUP)
    assert len(after["messages"]) == users[-1]


def test_compact_goes_through_sessions_compact(live: Live) -> None:
    data = ok(live, "compact", GROUP)
    assert data["via"] == "gateway" and isinstance(data["compaction"]["compacted"], bool)
    proc = st(live.env, live.state, "compact", GROUP, "--keep", "1")
    assert proc.returncode == 2 and "--keep" in proc.stderr


def _columns(live: Live, key: str) -> dict[str, Any]:
    """OpenClaw's own pin and fork-origin columns of the session (read-only)."""
    import sqlite3

    db = live.state / "agents" / "main" / "agent" / "openclaw-agent.sqlite"
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        row = con.execute(
            "SELECT pinned_at, fork_source_session_key, fork_source_session_id, "
            "fork_source_entry_id FROM session_nodes WHERE session_key = ?",
            (key,),
        ).fetchone()
    finally:
        con.close()
    return dict(zip(("pinned_at", "key", "sid", "entry"), row, strict=True))


def test_pin_and_fork_origin_as_openclaws_columns_hold_them(live: Live) -> None:
    """`pin` and `fork --at` through the gateway: what `list` and `history` say, through the
    gateway and straight from the database (`--store openclaw-sqlite`), is what OpenClaw's
    `pinned_at` and `fork_source_*` columns hold; our fork's result names the same origin."""
    ok(live, "pin", GROUP)
    ok(live, "send", GROUP, "pin and fork words", "--timeout", "300")
    hist = ok(live, "history", GROUP)
    users = [i for i, m in enumerate(hist["messages"]) if m["role"] == "user"]
    at = hist["messageIds"][users[-1]]
    fork = ok(live, "fork", GROUP, "--at", at)
    new = (
        fork["sessionKey"]
        if fork["sessionKey"].startswith("agent:")
        else f"agent:main:{fork['sessionKey']}"
    )
    pin_cols, fork_cols = _columns(live, GROUP), _columns(live, new)
    assert isinstance(pin_cols["pinned_at"], int)
    origin = {
        "sessionKey": fork_cols["key"],
        "sessionId": fork_cols["sid"],
        "entryId": fork_cols["entry"],
    }
    assert origin == {"sessionKey": GROUP, "sessionId": hist["sessionId"], "entryId": at}
    assert fork["forkSource"] == origin
    for store in ([], ["--store", "openclaw-sqlite"]):
        listed = {r["key"]: r for r in ok(live, *store, "list")["sessions"]}
        assert listed[GROUP]["pinnedAt"] == pin_cols["pinned_at"], store
        assert listed[new]["forkSource"] == origin, store
        shown = ok(live, *store, "history", new)
        assert shown["forkSource"] == origin, store
    assert ok(live, "history", GROUP)["pinned"] is True
    ok(live, "unpin", GROUP)
    assert _columns(live, GROUP)["pinned_at"] is None
