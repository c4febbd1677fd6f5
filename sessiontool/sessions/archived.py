"""Archived sessions (OpenClaw's `archivedAt`): left out of `list` unless asked for, and
found for `restore`. On sessiontool's own store they are entries of sessions.json with the
field set; OpenClaw's SQLite store and its gateway leave them out of their default reads, so
they are asked for apart (`archived_at IS NOT NULL`; `sessions.list {archived: true}`)."""

from __future__ import annotations

from typing import Any

from sessiontool.context import Context
from sessiontool.sessions import reading
from sessiontool.sessions.lifeview import is_archived
from sessiontool.state.sessions_json import Entry, Folded


def archived_sessions(ctx: Context, agent_id: str) -> dict[str, Folded]:
    """The agent's archived sessions, whatever its store's format."""
    rd: Any = reading.reader_for(ctx.paths, agent_id)
    if rd.info.format == "jsonl":
        return {k: f for k, f in rd.sessions().items() if is_archived(f.entry)}
    from sessiontool.state import openclaw_sqlite

    if isinstance(rd, openclaw_sqlite.SqliteReader):  # OpenClaw's SQLite store, read in place
        return openclaw_sqlite.archived_sessions(rd)
    from sessiontool.openclaw.gateway_reader import archived_rows

    return archived_rows(ctx.paths, agent_id)


def find_archived(ctx: Context, agent_id: str, full_key: str) -> Folded | None:
    return archived_sessions(ctx, agent_id).get(full_key)


def refuse_archived_target(ctx: Context, agent_id: str, full_key: str, entry: Entry | None) -> None:
    """A send to an archived session: exit 4, as OpenClaw denies archived targets. A key that
    OpenClaw's store did not list may be an archived session of it: asked apart."""
    if entry is None and reading.reader_for(ctx.paths, agent_id).info.format != "jsonl":
        from sessiontool.errors import SessiontoolError

        try:
            found = find_archived(ctx, agent_id, full_key)
        except SessiontoolError:  # not asked: the send's own write says what is wrong
            found = None
        entry = found.entry if found is not None else None
    if is_archived(entry):
        from sessiontool.errors import ForbiddenError

        shown = ctx.display(full_key)
        raise ForbiddenError(
            f"{shown} is archived; restore it first to send to it",
            hint=f"sessiontool restore {shown}",
            extra={"sessionKey": shown},
        )
