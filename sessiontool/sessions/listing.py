"""The `list` result over every agent's store, shaped as OpenClaw's sessions_list returns it."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sessiontool import diag
from sessiontool.context import Context
from sessiontool.errors import UsageError
from sessiontool.flow import policy
from sessiontool.sessions import listfilters, reading
from sessiontool.sessions.history import is_tool_output
from sessiontool.sessions.lifeview import is_archived
from sessiontool.sessions.listfilters import LIST_DEFAULT_LIMIT, ListSpec
from sessiontool.sessions.reading import read_scope
from sessiontool.sessions.resolve import (
    all_agent_ids,
)
from sessiontool.state import keys, sessions_json
from sessiontool.state.envelopes import strip_envelopes
from sessiontool.state.paths import is_plain_name, transcript_path_for
from sessiontool.state.sessions_json import Entry, listable
from sessiontool.state.transcript import Message, is_tool_result_line
from sessiontool.structs import Value

ListRow = dict[str, Any]  # OpenClaw's row: its keys pass through from the store entry

if TYPE_CHECKING:  # for types only: a TypedDict costs `list --json` start-up to create
    from typing import NotRequired, TypedDict

    class SessionsResult(TypedDict):
        """What `list` (and the sessions_list tool) returns; `--json` writes it as is: one page
        (`hasMore`, `nextOffset`; `limitApplied` unless `--limit all`)."""

        count: int
        sessions: list[ListRow]
        hasMore: bool
        nextOffset: NotRequired[int]
        limitApplied: NotRequired[int]


MESSAGE_LIMIT_MAX = 20


LIST_FIELDS = (
    "sessionId",
    "updatedAt",
    "label",
    "displayName",
    "model",
    "contextTokens",
    "totalTokens",
    "inputTokens",
    "outputTokens",
    "thinkingLevel",
    "verboseLevel",
    "systemSent",
    "abortedLastRun",
    "sendPolicy",
    "lastChannel",
    "lastTo",
    "deliveryContext",
    "sessionFile",
    "chatType",
    "channel",
    "spawnedBy",
    "parentSessionKey",
    "spawnDepth",
    "provider",
    "lastProvider",
    "room",
    "modelProvider",
    "status",
    "subject",  # read for `--search` (listfilters.SEARCH_FIELDS), never shown
    "category",
    "archivedAt",
    "pinnedAt",
    "modelOverride",
    "providerOverride",
    "forkSource",
)
# Fields OpenClaw's own session rows carry (2026.8+'s SQLite store, and 2026.7.35's gateway over
# its JSON-era store: an `openclaw.json` state dir), shown as stored for its stores.
OPENCLAW_ROW_FIELDS = (
    "inputTokens",
    "outputTokens",
    "modelProvider",
    "status",
    "spawnedBy",
    "parentSessionKey",  # the lineage a child made through the gateway has (either way it was
    "spawnDepth",  # spawned: OpenClaw's own sessions_spawn, or sessions.create's fields)
)

_ROW_PASSTHROUGH = (
    "archivedAt",
    "pinnedAt",
    "modelOverride",
    "providerOverride",
    "forkSource",
    "thinkingLevel",
    "verboseLevel",
    "systemSent",
    "abortedLastRun",
    "sendPolicy",
    "lastChannel",
    "lastTo",
)


def _num(v: Any) -> int | float | None:
    return v if isinstance(v, int | float) and not isinstance(v, bool) else None


def total_tokens(entry: Entry) -> int | float | None:
    t = _num(entry.get("totalTokens"))
    if t is not None:
        return t
    i, o = _num(entry.get("inputTokens")), _num(entry.get("outputTokens"))
    if i is None and o is None:
        return None
    return (i or 0) + (o or 0)


def build_row(
    ctx: Context,
    agent_id: str,
    full_key: str,
    entry: Entry,
    *,
    kind: str | None = None,
    sessions_dir: Path | None = None,
) -> ListRow:
    """One list row. `kind` and `sessions_dir` may be passed in when the caller already has
    them (list builds thousands of rows: no path object or classification twice per row)."""
    main_key = ctx.config.main_key
    if kind is None:
        kind = keys.kind_of(full_key, entry, main_key)
    row: ListRow = {
        "key": ctx.display(full_key),
        "kind": kind,
        "channel": keys.row_channel(full_key, entry, main_key, kind),
    }
    for name in ("label", "displayName"):
        if isinstance(entry.get(name), str) and entry[name]:
            row[name] = entry[name]
    row["updatedAt"] = entry.get("updatedAt")
    row["sessionId"] = entry.get("sessionId")
    for name in ("model", "contextTokens"):
        if entry.get(name) is not None:
            row[name] = entry[name]
    _window_of_model(ctx, entry, row)
    tt = total_tokens(entry)
    if tt is not None:
        row["totalTokens"] = tt
    for name in _ROW_PASSTHROUGH:
        if entry.get(name) is not None:
            row[name] = entry[name]
    dc = entry.get("deliveryContext")
    if isinstance(dc, dict):
        slim = {k: dc[k] for k in ("channel", "to", "accountId") if dc.get(k) is not None}
        if slim:
            row["deliveryContext"] = slim
    sid = entry.get("sessionId")
    if isinstance(sid, str) and is_plain_name(sid):
        sdir = sessions_dir if sessions_dir is not None else ctx.paths.sessions_dir(agent_id)
        session_file = entry.get("sessionFile")
        if session_file:
            row["transcriptPath"] = str(transcript_path_for(sdir, sid, session_file))
        else:  # the common case, without building a Path per row
            row["transcriptPath"] = f"{sdir}{os.sep}{sid}.jsonl"
    return row


def _window_of_model(ctx: Context, entry: Entry, row: ListRow) -> None:
    """A run that failed before it reported stores its model, not the window: the model's
    `contextWindow` in the config's catalog, as OpenClaw's gateway lists it."""
    if "contextTokens" in row or not isinstance(row.get("model"), str):
        return
    from sessiontool.state.config_models import context_window

    window = context_window(ctx.config, entry.get("modelProvider"), row["model"])
    if window is not None:
        row["contextTokens"] = window


def _parse_kinds(kinds: Iterable[str] | None) -> set[str] | None:
    if not kinds:
        return None
    out: set[str] = set()
    for item in kinds:
        for k in str(item).split(","):
            k = k.strip().lower()
            if not k:
                continue
            if k not in keys.KINDS:
                raise UsageError(f"unknown kind {k!r} (valid kinds: {', '.join(keys.KINDS)})")
            out.add(k)
    return out or None


def _updated_at(entry: Entry) -> float:
    return _num(entry.get("updatedAt")) or 0


def list_agent_ids(ctx: Context, all_agents: bool) -> list[str]:
    req = ctx.requester
    if req.is_operator:
        return all_agent_ids(ctx) if all_agents else [ctx.agent_id]
    ids = [ctx.agent_id]
    if ctx.config.a2a_enabled and not (
        req.sandboxed and ctx.config.sandbox_visibility == "spawned"
    ):
        ids += [
            a for a in all_agent_ids(ctx) if a != ctx.agent_id and policy.a2a_pair_allowed(ctx, a)
        ]
    elif req.sandboxed and ctx.config.sandbox_visibility == "spawned":
        # A sandboxed requester may have spawned children under other agents.
        ids += [a for a in all_agent_ids(ctx) if a != ctx.agent_id]
    return ids


def list_sessions(
    ctx: Context,
    *,
    kinds: Iterable[str] | None = None,
    limit: int | None = LIST_DEFAULT_LIMIT,
    active_minutes: int | None = None,
    message_limit: int = 0,
    since_ms: int | None = None,
    all_agents: bool = False,
) -> SessionsResult:
    """The first page of the sessions (no filter beyond these): see `list_page`."""
    return list_page(
        ctx,
        list_spec(
            kinds=kinds,
            limit=limit,
            active_minutes=active_minutes,
            message_limit=message_limit,
            since_ms=since_ms,
            all_agents=all_agents,
        ),
    )


def list_spec(**given: Any) -> ListSpec:
    """A ListSpec from what a user gave (`kinds` as typed, `active_minutes`, `since_ms`,
    `message_limit`, and ListSpec's own fields), each checked."""
    wanted = _parse_kinds(given.pop("kinds", None))
    active_minutes = given.pop("active_minutes", None)
    since_ms = given.pop("since_ms", None)
    message_limit = given.pop("message_limit", 0)
    if active_minutes is not None and active_minutes < 1:
        raise UsageError("--active-minutes must be a positive whole number of minutes")
    limit = given.get("limit", LIST_DEFAULT_LIMIT)
    if limit is not None and limit < 0:
        raise UsageError("--limit must be a positive number or 'all'")
    if message_limit < 0:
        raise UsageError("--message-limit must not be negative")
    if given.get("offset", 0) < 0:
        raise UsageError("--offset must not be negative")
    if given.get("archived", "no") not in ("no", "yes", "all"):
        raise UsageError("--archived must be one of no, yes, all")
    for name in ("label", "search"):
        if given.get(name) is not None and not str(given[name]).strip():
            raise UsageError(f"--{name} must not be empty")
    from sessiontool.clock import now_ms

    cutoff = now_ms() - active_minutes * 60_000 if active_minutes is not None else None
    if since_ms is not None:
        cutoff = max(cutoff, since_ms) if cutoff is not None else since_ms
    return ListSpec(
        kinds=wanted, cutoff=cutoff, n_messages=min(message_limit, MESSAGE_LIMIT_MAX), **given
    )


def list_page(ctx: Context, spec: ListSpec) -> SessionsResult:
    """One page of the sessions the requester may see, newest first, as OpenClaw's
    sessions_list pages them: `hasMore` (and `nextOffset`, the `offset` of the next page),
    `limitApplied` when a limit applies."""
    policy.check_tool(ctx, "sessions_list")
    with read_scope():
        return _list_in_scope(ctx, spec)


# A candidate row: (updatedAt, agent, full key, entry, kind). Over sessions.json the entry is
# first the stored one and the kind None: both are made final (`_final`) only for the rows a
# filter or the page looks at (issue 47: over 100,000 sessions a fold and a kind each cost
# three times the parse).
Candidate = tuple[float, str, str, Entry, str | None]
Final = tuple[float, str, str, Entry, str]


class _Found(Value):
    """The candidate rows of every agent read, and what each agent's store is. `rows` may be
    the merged heads of the agents' kept lists (sessions/listhead.py): then `total` counts the
    rows of the whole inventory and `safe` how many of `rows` are surely in the inventory's
    order (past it a page lists in full: `_Short`)."""

    __slots__ = (
        "rows",
        "total",
        "safe",
        "sessions_dirs",
        "gateway",
        "sqlite_agents",
        "openclaw_agents",
    )

    def __init__(self) -> None:
        self.rows: list[Candidate] = []
        self.total = 0
        self.safe = 0
        self.sessions_dirs: dict[str, Path] = {}
        self.gateway: set[str] = set()
        self.sqlite_agents: set[str] = set()
        # OpenClaw's stores, either era (its JSON-era store too: rows as its gateway lists them)
        self.openclaw_agents: set[str] = set()


class _Short(Exception):
    """A page read past what the kept heads hold: list in full."""


def _shareable(spec: ListSpec) -> bool:
    """Whether the candidate rows are every live listable session of the store, as kept heads
    hold them (`--kinds` is decided on the page's rows, after)."""
    return spec.cutoff is None and not _filtering(spec) and spec.archived == "no"


def _candidates(ctx: Context, spec: ListSpec, use_heads: bool) -> _Found:
    from sessiontool.sessions import listhead

    found = _Found()
    share = _shareable(spec)
    fits = spec.limit is not None and spec.offset + spec.limit <= listhead.HEAD_ROWS
    use_heads = use_heads and share and fits
    parts: list[tuple[str, list[Candidate], int]] = []
    fresh: dict[str, tuple[Path, list[listhead.KeptRow], int]] = {}
    for agent_id in list_agent_ids(ctx, spec.all_agents):
        found.sessions_dirs[agent_id] = ctx.paths.sessions_dir(agent_id)
        rd = reading.reader_for(ctx.paths, agent_id)
        if rd.info.gateway_written:
            found.gateway.add(agent_id)
        if rd.info.format in ("openclaw-sqlite", "gateway"):  # OpenClaw's own rows, either way
            found.sqlite_agents.add(agent_id)
        if agent_id in found.sqlite_agents or getattr(rd, "as_openclaw", False):
            found.openclaw_agents.add(agent_id)
        kept = None
        json_store = getattr(rd, "store", None) is not None
        if use_heads and json_store:
            kept = listhead.head(ctx.paths, agent_id, rd.info.location)
        if kept is not None:
            head: list[Candidate] = [(r[0], agent_id, r[1], r[2], None) for r in kept.rows]
            parts.append((agent_id, head, kept.total))
            continue
        rows = _wanted(ctx, spec, agent_id, _sessions_of(ctx, rd, spec.archived))
        rows.sort(key=_order, reverse=True)
        parts.append((agent_id, rows, len(rows)))
        if share and json_store:
            first = [[c[0], c[2], c[3]] for c in rows[: listhead.HEAD_ROWS]]
            fresh[agent_id] = (rd.info.location, first, len(rows))
    if fresh:
        listhead.keep(ctx.paths, fresh)
    _merge(found, parts)
    return found


def _merge(found: _Found, parts: list[tuple[str, list[Candidate], int]]) -> None:
    """Every agent's rows (each in list order) in one list order: a stable sort of them in the
    agents' order is the order of the whole inventory. Past the last row of an agent whose
    head holds only part of its rows, that order is not known (`found.safe`)."""
    for _, rows, _n in parts:
        found.rows += rows
    found.total = sum(n for _, _, n in parts)
    if len(parts) > 1:
        found.rows.sort(key=_order, reverse=True)
    found.safe = len(found.rows)
    short = {agent for agent, rows, n in parts if len(rows) < n}
    i = len(found.rows)
    while short and i > 0:
        i -= 1
        if found.rows[i][1] in short:
            found.safe = i + 1
            short.discard(found.rows[i][1])


def _sessions_of(ctx: Context, rd: Any, archived: str) -> dict[str, Entry]:
    """The agent's sessions `--archived` asks for: `no` leaves the archived out (OpenClaw's
    SQLite store and gateway already do), `yes` only them, `all` both (sessions/archived.py
    reads OpenClaw's archived ones apart). Over sessions.json each key's entry as stored, in
    one pass over the parse (`sessions_json.winners`: no fold of every entry)."""
    raw = getattr(rd, "store", None)
    if raw is not None:
        every = sessions_json.winners(raw(), rd.info.agent_id)
    else:
        every = {k: f.entry for k, f in rd.sessions(LIST_FIELDS).items()}
    live = {k: e for k, e in every.items() if not is_archived(e)}
    if archived == "no":
        return live
    from sessiontool.sessions.archived import archived_sessions

    gone = {k: f.entry for k, f in archived_sessions(ctx, rd.info.agent_id).items()}
    return gone if archived == "yes" else {**live, **gone}


def _order(c: Candidate) -> tuple[bool, float]:
    """Pinned sessions first (OpenClaw's default order), then the newest."""
    return c[3].get("pinnedAt") is not None, c[0]


def _filtering(spec: ListSpec) -> bool:
    return not (
        spec.label is None
        and spec.search is None
        and spec.active_keys is None
        and not spec.exclude_subagents
    )


def _wanted(
    ctx: Context, spec: ListSpec, agent_id: str, entries: dict[str, Entry]
) -> list[Candidate]:
    """The inventory's own filters (OpenClaw's `sessions.list` applies these before it pages):
    the rows of `entries` that pass them."""
    filtering = _filtering(spec)
    out: list[Candidate] = []
    for full_key, stored in entries.items():
        if not listable(full_key):
            continue
        updated = _updated_at(stored)
        if spec.cutoff is not None and updated < spec.cutoff:
            continue
        c: Candidate = (updated, agent_id, full_key, stored, None)
        if filtering:
            c = _final(ctx, c)
            if not listfilters.matches(ctx, spec, full_key, entry=c[3], kind=c[4]):
                continue
        out.append(c)
    return out


def _final(ctx: Context, c: Candidate) -> Final:
    """`c` with its entry as the fold gives it (legacy fields renamed) and its kind."""
    updated, agent_id, full_key, entry, kind = c
    if kind is not None:
        return (updated, agent_id, full_key, entry, kind)
    entry = sessions_json.normalize_entry(entry)
    return (updated, agent_id, full_key, entry, keys.kind_of(full_key, entry, ctx.config.main_key))


def _page(ctx: Context, spec: ListSpec, found: _Found) -> tuple[list[Final], bool, int]:
    """(the rows of the page, hasMore, nextOffset). As OpenClaw 2026.9.6's sessions_list tool
    does, the offset counts rows of the inventory, and the kinds and visibility are checked on
    each page's rows: a page of `--kinds group` skips the other rows, `nextOffset` is the
    inventory row after the page's last, and `hasMore` says inventory rows are left (they may
    hold no group: the next page is then empty)."""
    taken: list[Final] = []
    i = spec.offset
    while i < found.total and (spec.limit is None or len(taken) < spec.limit):
        if i >= found.safe:
            raise _Short
        c = _final(ctx, found.rows[i])
        i += 1
        if (spec.kinds is None or c[4] in spec.kinds) and policy.visible(ctx, c[2], c[3]):
            taken.append(c)
    return taken, spec.limit is not None and len(taken) == spec.limit and i < found.total, i


def _list_in_scope(ctx: Context, spec: ListSpec) -> SessionsResult:
    found = _candidates(ctx, spec, use_heads=True)
    try:
        page, more, next_offset = _page(ctx, spec, found)
    except _Short:
        found = _candidates(ctx, spec, use_heads=False)
        page, more, next_offset = _page(ctx, spec, found)
    rows = [_row(ctx, found, spec.n_messages, c) for c in page]
    result: SessionsResult = {"count": len(rows), "sessions": rows, "hasMore": more}
    if more:
        result["nextOffset"] = next_offset
    if spec.limit is not None:
        result["limitApplied"] = spec.limit
    return result


def _row(
    ctx: Context, found: _Found, n_messages: int, c: tuple[float, str, str, Entry, str]
) -> ListRow:
    _, agent_id, full_key, entry, kind = c
    row = build_row(
        ctx, agent_id, full_key, entry, kind=kind, sessions_dir=found.sessions_dirs[agent_id]
    )
    if is_archived(entry):
        row["archived"] = True  # `list --archived yes|all`: the row says so
    if agent_id in found.gateway:
        row.pop("transcriptPath", None)  # no file: the transcript is in the database
    if agent_id in found.sqlite_agents:
        row["agentId"] = agent_id
    if agent_id in found.openclaw_agents:
        for name in OPENCLAW_ROW_FIELDS:
            if entry.get(name) is not None:
                row[name] = entry[name]
    if n_messages > 0:
        readable = agent_id in found.gateway or row.get("transcriptPath")
        row["messages"] = _last_messages(ctx, c, n_messages, row) if readable else []
    return row


def _last_messages(
    ctx: Context, c: tuple[float, str, str, Entry, str], n_messages: int, row: ListRow
) -> list[Message]:
    _, agent_id, full_key, entry, _kind = c
    rd = reading.reader_for(ctx.paths, agent_id)
    try:
        res = rd.messages(
            full_key, entry, n_messages, _not_tool_result, skip_line=is_tool_result_line
        )
    except OSError as exc:  # one unreadable transcript must not hide the list
        where = exc.filename or row.get("transcriptPath") or full_key
        diag.warn(f"cannot read {where}: {exc.strerror or exc}; its messages are left out")
        return []
    return strip_envelopes(res.messages)


def _not_tool_result(msg: Message) -> bool:
    return not is_tool_output(msg)
