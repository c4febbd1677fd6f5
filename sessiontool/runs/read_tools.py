"""The read tools, OpenClaw 2026.9.6's names and arguments: `sessions_list` (a page of the
sessions, filtered by their metadata), `sessions_history` (a transcript's tail, a page of it, or
the window around a message), `sessions_search` (every visible transcript by its words; a hit's
`messageId` reopens it through sessions_history). Registered into `runs/tools.py`'s table."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sessiontool.context import Context
from sessiontool.errors import UsageError
from sessiontool.runs.tooldefs import (
    KINDS,
    SESSION_KEY,
    CallOptions,
    ToolDef,
    bool_param,
    int_param,
    obj_schema,
    str_param,
)

# The tools a transport offers only when it hands down the search (CallOptions.search).
NEEDS_SEARCH = frozenset({"sessions_search"})
# OpenClaw applies at most 200 rows a page (`limitApplied`); its search at most 25 hits.
LIST_PAGE_MAX = 200
SEARCH_MAX_LIMIT = 25
SEARCH_MAX_QUERY_CHARS = 4096
# OpenClaw's `archived` (false or left out: the unarchived; true: the archived only; "all":
# both) as `list --archived` spells it.
ARCHIVED_CHOICE: dict[bool | str, str] = {False: "no", True: "yes", "all": "all"}


def _sessions_list(ctx: Context, args: Mapping[str, Any], opts: CallOptions) -> dict[str, Any]:
    from sessiontool.sessions.listing import list_page, list_spec

    active = None
    if args.get("activeOnly"):
        from sessiontool.runs.listing import active_session_keys

        active = active_session_keys(ctx)
    spec = list_spec(
        kinds=args.get("kinds"),
        limit=min(args.get("limit", LIST_PAGE_MAX), LIST_PAGE_MAX),
        offset=args.get("offset", 0),
        active_minutes=args.get("activeMinutes"),
        message_limit=args.get("messageLimit", 0),
        label=args.get("label"),
        search=args.get("search"),
        active_keys=active,
        exclude_subagents=bool(args.get("excludeSubagents", False)),
        archived=ARCHIVED_CHOICE[args.get("archived", False)],
    )
    return dict[str, Any](list_page(ctx, spec))


def _sessions_history(ctx: Context, args: Mapping[str, Any], opts: CallOptions) -> dict[str, Any]:
    from sessiontool.sessions.history import HistorySpec, history_page

    spec = HistorySpec(
        limit=args.get("limit", 200),
        include_tools=bool(args.get("includeTools", False)),
        offset=args.get("offset"),
        message_id=args.get("messageId"),
    )
    return dict(history_page(ctx, args["sessionKey"], spec).to_json())


def _sessions_search(ctx: Context, args: Mapping[str, Any], opts: CallOptions) -> dict[str, Any]:
    from sessiontool.durations import parse_since

    search = opts.search
    if search is None:  # offered only where a transport hands the search down
        raise UsageError("sessions_search is not offered here (the MCP server offers it)")
    if len(args["query"]) > SEARCH_MAX_QUERY_CHARS:
        raise UsageError(f"query must be at most {SEARCH_MAX_QUERY_CHARS} characters")
    since, until = args.get("since"), args.get("until")
    found = search(
        ctx,
        args["query"],
        session=args.get("sessionKey"),
        role=args.get("role"),
        since_ms=parse_since(since) if since else None,
        until_ms=parse_since(until) if until else None,
        limit=min(args.get("limit", 10), SEARCH_MAX_LIMIT),
    )
    return {"results": [search_hit(h) for h in found["hits"]]}


def search_hit(hit: Mapping[str, Any]) -> dict[str, Any]:
    """A `search --json` hit as OpenClaw's sessions_search result names it (its own extras,
    `label` and `agentId`, kept)."""
    out: dict[str, Any] = {
        "sessionKey": hit["key"],
        "timestamp": hit["timestamp"],
        "role": hit["role"],
        "snippet": hit["snippet"],
        "score": hit.get("score", 0),
    }
    for name in ("sessionId", "messageId", "label", "agentId"):
        if hit.get(name) is not None:
            out[name] = hit[name]
    return out


_LIST = ToolDef(
    name="sessions_list",
    title="List sessions",
    description=(
        "List the sessions this session may see, newest first, one page at a time, with "
        "optional filters and the last messages of each. Result: {count, sessions: [{key, "
        "kind, channel, label, updatedAt (epoch ms), sessionId, model, totalTokens, ...}], "
        "hasMore, nextOffset (pass it as offset for the next page), limitApplied}."
    ),
    input_schema=obj_schema(
        {
            "kinds": {
                "type": "array",
                "items": {"type": "string", "enum": KINDS},
                "description": "Only sessions of these kinds.",
            },
            "limit": int_param(
                f"At most this many sessions a page (default and at most {LIST_PAGE_MAX}).", 1
            ),
            "offset": int_param("Skip this many sessions (a previous page's nextOffset).", 0),
            "activeMinutes": int_param("Only sessions updated in the last N minutes.", 1),
            "activeOnly": bool_param("Only sessions with a run queued or running."),
            "excludeSubagents": bool_param("Leave out sub-agent and other spawned sessions."),
            "label": str_param("Only the sessions with exactly this label."),
            "search": str_param(
                "Only sessions whose key, label, displayName, subject, sessionId, kind or model "
                "holds this text (any case; not the transcripts: that is sessions_search)."
            ),
            "messageLimit": int_param(
                "Include the last N messages of each session (0 = none, the default; at most 20).",
                0,
            ),
            "archived": {
                "type": ["boolean", "string"],
                "enum": [False, True, "all"],
                "description": "false (the default): the sessions not archived; true: only the "
                'archived ones; "all": both (each archived row says archived: true).',
            },
        }
    ),
    handler=_sessions_list,
    read_only=True,
    idempotent=True,
)

_HISTORY = ToolDef(
    name="sessions_history",
    title="Read a session's history",
    description=(
        "Fetch the message history of a session (by key or sessionId), oldest first: its last "
        "messages, a page further back (offset, then each nextOffset), or the window around a "
        "sessions_search hit (messageId). Result: {sessionKey, sessionId, messages: [...]}, "
        "with offset, hasMore, totalMessages and nextOffset when paging."
    ),
    input_schema=obj_schema(
        {
            "sessionKey": str_param(SESSION_KEY),
            "limit": int_param("The last N messages (default 200, at most 1000).", 1),
            "offset": int_param(
                "Page backwards: skip the newest N records, tool results included (0 for the "
                "first page with its paging keys; then each nextOffset). Ignored with "
                "messageId.",
                0,
            ),
            "messageId": str_param(
                "Return the window of `limit` messages around this message (a sessions_search "
                "hit's messageId); none when no message has it."
            ),
            "includeTools": bool_param("Include tool-result messages (default false)."),
        },
        ["sessionKey"],
    ),
    handler=_sessions_history,
    read_only=True,
    idempotent=True,
)

_SEARCH = ToolDef(
    name="sessions_search",
    title="Search session transcripts",
    description=(
        "Search the transcripts of the sessions this session may see by their words (FTS5 "
        'syntax: words, "phrases", prefix*, AND/OR/NOT), best match first. Result: '
        "{results: [{sessionKey, timestamp, role, snippet, score, sessionId, messageId}]}; "
        "reopen a hit with sessions_history {sessionKey, messageId}."
    ),
    input_schema=obj_schema(
        {
            "query": {
                "type": "string",
                "maxLength": SEARCH_MAX_QUERY_CHARS,
                "description": "What to search for.",
            },
            "sessionKey": str_param("Only this session (" + SESSION_KEY + ")"),
            "limit": int_param(
                f"At most this many hits (default 10, at most {SEARCH_MAX_LIMIT}).",
                1,
                SEARCH_MAX_LIMIT,
            ),
            "role": {
                "type": "string",
                "enum": ["user", "assistant", "tool"],
                "description": "Only messages of this role (default: user and assistant).",
            },
            "since": str_param("Only messages since (30m, 2h, 1d or an ISO date)."),
            "until": str_param("Only messages before (30m, 2h, 1d or an ISO date)."),
        },
        ["query"],
    ),
    handler=_sessions_search,
    read_only=True,
    idempotent=True,
)

TOOLS: dict[str, ToolDef] = {t.name: t for t in (_LIST, _HISTORY, _SEARCH)}
