"""Archived sessions (OpenClaw's `archivedAt`): left out of `list` unless asked for, and
found for `restore`. On sessiontool's own store they are entries of sessions.json with the
field set; OpenClaw's SQLite store and its gateway leave them out of their default reads, so
they are asked for apart (`archived_at IS NOT NULL`; `sessions.list {archived: true}`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sessiontool.context import Context
from sessiontool.sessions import reading
from sessiontool.sessions.lifeview import is_archived
from sessiontool.state.sessions_json import Entry, Folded

if TYPE_CHECKING:
    from sessiontool.sessions.listing import SessionsResult

ARCHIVED_CHOICES = ("no", "yes", "all")


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


def list_with_archived(ctx: Context, archived: str, **kw: Any) -> SessionsResult:
    """`list --archived no|yes|all`: `no` is `list_sessions` as it is (archived sessions left
    out); `yes` only the archived ones, `all` both, each row of an archived one saying so
    (`archived: true`), with the same kind, time and visibility filters and the same order
    (pinned first, then the newest) cut at the same limit."""
    from sessiontool.errors import UsageError
    from sessiontool.sessions.listing import list_sessions

    if archived not in ARCHIVED_CHOICES:
        raise UsageError(f"--archived must be one of {', '.join(ARCHIVED_CHOICES)}")
    if archived == "no":
        return list_sessions(ctx, **kw)
    base: list[dict[str, Any]] = []
    if archived == "all":
        base = list_sessions(ctx, **kw)["sessions"]
    else:
        list_sessions(ctx, **{**kw, "limit": 0})  # the same checks of the same options
    with reading.read_scope():
        rows = base + _archived_rows(ctx, kw)
    rows.sort(key=lambda r: (r.get("pinnedAt") is not None, r.get("updatedAt") or 0), reverse=True)
    limit = kw.get("limit", 200)
    if limit is not None:
        rows = rows[:limit]
    return {"count": len(rows), "sessions": rows}


def _archived_rows(ctx: Context, kw: dict[str, Any]) -> list[dict[str, Any]]:
    from sessiontool.clock import now_ms
    from sessiontool.flow import policy
    from sessiontool.sessions import listing
    from sessiontool.state import keys

    wanted = listing._parse_kinds(kw.get("kinds"))
    cutoff = kw.get("since_ms")
    if kw.get("active_minutes") is not None:
        recent = now_ms() - int(kw["active_minutes"]) * 60_000
        cutoff = recent if cutoff is None else max(cutoff, recent)
    n = min(int(kw.get("message_limit") or 0), listing.MESSAGE_LIMIT_MAX)
    out: list[dict[str, Any]] = []
    for agent_id in listing.list_agent_ids(ctx, bool(kw.get("all_agents"))):
        for full_key, f in archived_sessions(ctx, agent_id).items():
            kind = keys.kind_of(full_key, f.entry, ctx.config.main_key)
            if wanted is not None and kind not in wanted:
                continue
            if cutoff is not None and (f.entry.get("updatedAt") or 0) < cutoff:
                continue
            if policy.visible(ctx, full_key, f.entry):
                out.append(_row(ctx, agent_id, f, kind, n))
    return out


def _row(ctx: Context, agent_id: str, f: Folded, kind: str, n: int) -> Any:
    from sessiontool.sessions.listing import build_row

    full_key, entry = f.key, f.entry
    row = build_row(ctx, agent_id, full_key, entry, kind=kind)
    row["archived"] = True
    rd = reading.reader_for(ctx.paths, agent_id)
    if rd.info.format != "jsonl":
        row["agentId"] = agent_id
        if rd.info.gateway_written:
            row.pop("transcriptPath", None)
    if n > 0:
        from sessiontool.errors import SessiontoolError
        from sessiontool.state.envelopes import strip_envelopes

        try:
            row["messages"] = strip_envelopes(rd.messages(full_key, entry, n).messages)
        except (OSError, SessiontoolError):
            row["messages"] = []
    return row
