"""The `history` result of one session, shaped as OpenClaw's sessions_history returns it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sessiontool.context import Context
from sessiontool.errors import UsageError
from sessiontool.flow import policy
from sessiontool.sessions import reading
from sessiontool.sessions.reading import read_scope
from sessiontool.sessions.resolve import (
    Resolved,
    resolve,
)
from sessiontool.state.envelopes import strip_envelopes
from sessiontool.state.reader import SessionReader
from sessiontool.state.sessions_json import Entry
from sessiontool.state.transcript import Message, is_tool_result_line
from sessiontool.structs import Value

if TYPE_CHECKING:  # for types only: a TypedDict costs start-up to create
    from typing import NotRequired, TypedDict

    class HistoryResult(TypedDict):
        """What `history --json` and sessions_history return: OpenClaw's shape, the messages
        as the transcript holds them; `truncated` when a gateway cut one, `children` (the
        command only) the sessions spawned from this one."""

        sessionKey: str
        sessionId: NotRequired[str]
        messages: list[Message]
        truncated: NotRequired[bool]
        children: NotRequired[list[str]]
        messageIds: NotRequired[list[str | None]]
        model: NotRequired[str]
        thinkingLevel: NotRequired[str]
        archived: NotRequired[bool]
        pinned: NotRequired[bool]
        forkSource: NotRequired[dict[str, str]]
        offset: NotRequired[int]
        hasMore: NotRequired[bool]
        totalMessages: NotRequired[int]
        nextOffset: NotRequired[int]


HISTORY_DEFAULT_LIMIT = 200
HISTORY_MAX_LIMIT = 1000


def is_tool_output(msg: Message) -> bool:
    """A tool result, or OpenClaw's nested-tool record (`role: custom`, a tool customType)."""
    role = msg.get("role")
    if role == "toolResult":
        return True
    return role == "custom" and "tool" in str(msg.get("customType", ""))


class History(Value):
    __slots__ = (
        "session_key",
        "session_id",
        "messages",
        "path",
        "resolved",
        "children",
        "page",
        "ids",
        "with_ids",
    )

    session_key: str
    session_id: str | None
    messages: list[Message]
    path: Path | None
    resolved: Resolved
    # The sessions spawned from this one, when the caller asked (spawned_from): `history`, the
    # command, does; sessions_history (the tool, the mcp server) has no such key.
    children: list[str]
    # A page's place (`--offset`): offset, hasMore, totalMessages, nextOffset (OpenClaw's keys).
    page: dict[str, Any]
    ids: list[str | None]  # each message's transcript entry id (`fork --at`, `rewind`)
    with_ids: bool  # `history --json` (the command) writes them as `messageIds`

    def __init__(
        self,
        session_key: str,
        session_id: str | None,
        messages: list[Message],
        path: Path | None,
        resolved: Resolved,
    ) -> None:
        self.children = []
        self.page = {}
        self.ids = []
        self.with_ids = False
        self.session_key = session_key
        self.session_id = session_id
        self.messages = messages
        self.path = path
        self.resolved = resolved

    def to_json(self) -> HistoryResult:
        out: HistoryResult
        if self.session_id is not None:
            out = {
                "sessionKey": self.session_key,
                "sessionId": self.session_id,
                "messages": self.messages,
            }
        else:
            out = {"sessionKey": self.session_key, "messages": self.messages}
        if any(m.get("truncated") is True for m in self.messages):
            # Read through a gateway that cut a message (chat.history's caps): never silent.
            out["truncated"] = True
        if self.children:  # `history` (the command) only: sessions_history has no such key
            out["children"] = self.children
        out.update(self.page)  # type: ignore[typeddict-item]
        if self.with_ids:  # `history --json`: the ids `fork --at` and `rewind` take
            from sessiontool.sessions.lifeview import life_header

            if len(self.ids) == len(self.messages):
                out["messageIds"] = self.ids
            out.update(life_header(self.resolved.entry))  # type: ignore[typeddict-item]
        return out


def message_ts(msg: Message) -> int | None:
    ts = msg.get("timestamp")
    return int(ts) if isinstance(ts, int | float) and not isinstance(ts, bool) else None


def history(
    ctx: Context,
    value: str | None,
    *,
    label: str | None = None,
    limit: int | None = HISTORY_DEFAULT_LIMIT,
    include_tools: bool = False,
    raw: bool = False,
    since_ms: int | None = None,
) -> History:
    """A session's last `limit` messages (None: all of them, for the operator's export; the
    tool's limit is capped at HISTORY_MAX_LIMIT)."""
    spec = HistorySpec(
        label=label, limit=limit, include_tools=include_tools, raw=raw, since_ms=since_ms
    )
    return history_page(ctx, value, spec)


class HistorySpec(Value):
    """Which messages of a session `history_page` gives: the last `limit` kept ones (tool
    results with `include_tools`, envelopes with `raw`, none older than `since_ms`), or, as
    OpenClaw's sessions_history pages, the `limit` before the newest `offset` ones, or the
    window of `limit` around the message whose entry id is `message_id`."""

    __slots__ = ("label", "limit", "include_tools", "raw", "since_ms", "offset", "message_id")

    def __init__(self, **fields: Any) -> None:
        self.label: str | None = fields.pop("label", None)
        self.limit: int | None = fields.pop("limit", HISTORY_DEFAULT_LIMIT)
        self.include_tools: bool = fields.pop("include_tools", False)
        self.raw: bool = fields.pop("raw", False)
        self.since_ms: int | None = fields.pop("since_ms", None)
        self.offset: int | None = fields.pop("offset", None)
        self.message_id: str | None = fields.pop("message_id", None)
        if fields:
            raise TypeError(f"HistorySpec has no field {sorted(fields)[0]!r}")


def history_page(ctx: Context, value: str | None, spec: HistorySpec) -> History:
    policy.check_tool(ctx, "sessions_history")
    limit = spec.limit
    if limit is not None:
        if limit < 0:
            raise UsageError("--limit must not be negative")
        limit = min(limit, HISTORY_MAX_LIMIT)
    if spec.offset is not None and spec.offset < 0:
        raise UsageError("--offset must not be negative")
    if spec.message_id is not None and not spec.message_id.strip():
        raise UsageError("--message-id must not be empty")
    with read_scope():
        r = resolve(ctx, value, label=spec.label)
        policy.check_access(ctx, r.key, r.entry, "history")
        path = r.transcript_path()
        h = History(
            session_key=ctx.display(r.key),
            session_id=r.session_id,
            messages=[],
            path=path,
            resolved=r,
        )
        if r.entry is not None and (path is not None or r.gateway_written):
            if spec.message_id is not None:
                h.messages = _anchored(r, spec, limit)
            else:
                h.messages = _tail(ctx, r, spec, limit=limit, h=h)
    if not spec.raw:
        h.messages = strip_envelopes(h.messages)
    return h


def _keep(spec: HistorySpec) -> Callable[[Message], bool]:
    def keep(m: Message) -> bool:
        return spec.include_tools or not is_tool_output(m)

    return keep


def _tail(
    ctx: Context, r: Resolved, spec: HistorySpec, limit: int | None, h: History
) -> list[Message]:
    since_ms = spec.since_ms

    def older(m: Message) -> bool:
        # Transcripts are appended in time order: the first message (from the end) older than
        # --since ends the read. Messages without a timestamp are kept.
        ts = message_ts(m)
        return since_ms is not None and ts is not None and ts < since_ms

    assert r.entry is not None
    rd = reading.reader_for(ctx.paths, r.agent_id)
    stop = older if since_ms is not None else None
    if spec.offset is None:
        skip = None if spec.include_tools else is_tool_result_line
        res = rd.messages(r.key, r.entry, limit, _keep(spec), stop=stop, skip_line=skip)
        h.ids = res.ids if len(res.ids) == len(res.messages) else [None] * len(res.messages)
        return res.messages
    # A page: every record, tool results included, to count them as OpenClaw does.
    every = rd.messages(r.key, r.entry, None, None, stop=stop).messages
    shown, h.page = _page_of(every, spec.offset, limit, _keep(spec))
    return shown


def _page_of(
    every: list[Message], offset: int, limit: int | None, keep: Callable[[Message], bool]
) -> tuple[list[Message], dict[str, Any]]:
    """(the messages shown, the paging keys) of the page `offset` back from the newest, as
    OpenClaw 2026.9.6's sessions_history pages (its chat-history page kernel, checked against
    the real tool): `offset` and `limit` count the transcript's records, tool results included;
    those hidden (`includeTools` off) are dropped from the page afterwards, so it may hold fewer
    than `limit`; `nextOffset` is where the oldest message shown sits, counted from the newest
    (a hidden record just before it is read again by the next page, shown by none)."""
    total = len(every)
    end = max(0, total - offset)
    start = 0 if limit is None else max(0, end - limit)
    at = [i for i in range(start, end) if keep(every[i])]
    next_offset = max(offset + 1, total - at[0]) if at else offset + (end - start)
    page: dict[str, Any] = {
        "offset": offset,
        "hasMore": next_offset < total,
        "totalMessages": total,
    }
    if next_offset < total:
        page["nextOffset"] = next_offset
    return [every[i] for i in at], page


def _anchored(r: Resolved, spec: HistorySpec, limit: int | None) -> list[Message]:
    """The window of `limit` messages around the one with entry id `message_id`, that message
    as near its middle as the transcript allows; none when no message has that id (OpenClaw's
    rule: never the newest messages instead)."""
    from sessiontool.state.transcript import read_with_ids

    path = r.transcript_path()
    if path is None:
        raise UsageError(
            "--message-id reads a JSONL transcript (a search hit's messageId); this session's "
            "transcript is in OpenClaw's database"
        )
    keep = _keep(spec)
    kept = [(ident, m) for ident, m in read_with_ids(path) if keep(m)]
    at = next((i for i, (ident, _m) in enumerate(kept) if ident == spec.message_id), None)
    if at is None:
        return []
    n = len(kept) if limit is None else limit
    start = max(0, at - (n - 1) // 2)
    end = min(len(kept), start + n)
    start = max(0, end - n)
    return [m for _ident, m in kept[start:end]]


def spawned_from(ctx: Context, full_key: str) -> list[str]:
    """The sessions spawned from `full_key`, the requester may see, in key order: a child names
    its parent in `spawnedBy` (sessiontool's spawn, OpenClaw's own tool) or only in
    `parentSessionKey` (a child made through OpenClaw's gateway), as the HTML pages link them
    (reports/site.py). Every agent's store: a spawn may start its child under another agent.
    A store that cannot be read is said on stderr and left out, not the history's failure."""
    from sessiontool import diag
    from sessiontool.errors import SessiontoolError
    from sessiontool.sessions.resolve import all_agent_ids
    from sessiontool.state import keys

    cfg = ctx.config
    found: list[str] = []
    for agent_id in all_agent_ids(ctx):
        try:
            rows = _with_parent(reading.reader_for(ctx.paths, agent_id), agent_id)
        except (OSError, SessiontoolError) as exc:
            diag.warn(f"children of {ctx.display(full_key)}: agent {agent_id} left out: {exc}")
            continue
        for key, entry in rows:
            parent = entry.get("spawnedBy") or entry.get("parentSessionKey")
            if not isinstance(parent, str) or not parent or key == full_key:
                continue
            if keys.canonical(parent, agent_id, cfg.main_key, cfg.scope) != full_key:
                continue
            if policy.visible(ctx, key, entry):
                found.append(ctx.display(key))
    return sorted(found)


_PARENT_FIELDS = ("spawnedBy", "parentSessionKey")


def _with_parent(rd: SessionReader, agent_id: str) -> list[tuple[str, Entry]]:
    """(full key, entry) of the store's sessions that may name a parent. Over sessions.json,
    the parsed store (the one parse `history` made) is looked through for the entries with a
    parent field, and only those are folded (issue 47: a fold of 100,000 entries cost four
    times the parse); other readers fold what they hold."""
    raw = getattr(rd, "store", None)
    if raw is None:
        return [(key, f.entry) for key, f in rd.sessions(_PARENT_FIELDS).items()]
    from sessiontool.state.keys import stored_to_full

    named = {
        stored_to_full(stored, agent_id): None
        for stored, value in raw().items()
        if type(value) is dict and (value.get("spawnedBy") or value.get("parentSessionKey"))
    }
    out: list[tuple[str, Entry]] = []
    for full in named:
        f = rd.session(full)  # the folded session: its newer form may name no parent
        if f is not None:
            out.append((full, f.entry))
    return out
