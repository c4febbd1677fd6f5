"""The read side over every agent's store: resolving what the user typed to one session, and the
`list` and `history` results, shaped as OpenClaw's sessions_list / sessions_history return them."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sessiontool import diag
from sessiontool.context import Context
from sessiontool.errors import NotFoundError, UsageError, session_not_found
from sessiontool.flow import policy
from sessiontool.stores import keys
from sessiontool.stores import reader as store_reader
from sessiontool.stores.jsonio import require_utf8
from sessiontool.stores.paths import is_plain_name, transcript_path_for
from sessiontool.stores.reader import read_scope
from sessiontool.stores.sessions_json import Entry, Folded, listable
from sessiontool.stores.transcript import Message, ReadResult, is_tool_result_line
from sessiontool.structs import Value

HISTORY_DEFAULT_LIMIT = 200
HISTORY_MAX_LIMIT = 1000
LIST_DEFAULT_LIMIT = 200
MESSAGE_LIMIT_MAX = 20


class Resolved(Value):
    __slots__ = (
        "agent_id",
        "key",
        "entry",
        "store_path",
        "sessions_dir",
        "stored_keys",
        "store",
    )

    agent_id: str
    key: str
    entry: Entry | None
    store_path: Path
    sessions_dir: Path
    stored_keys: list[str]
    store: store_reader.StoreInfo | None

    def __init__(
        self,
        agent_id: str,
        key: str,
        entry: Entry | None,
        store_path: Path,
        sessions_dir: Path,
        stored_keys: list[str] | None = None,
        store: store_reader.StoreInfo | None = None,
    ) -> None:
        self.agent_id = agent_id
        self.key = key
        self.entry = entry
        self.store_path = store_path
        self.sessions_dir = sessions_dir
        self.stored_keys = [] if stored_keys is None else stored_keys
        self.store = store

    @property
    def gateway_written(self) -> bool:
        """The session lives in OpenClaw's SQLite store (read-only for sessiontool)."""
        return self.store is not None and self.store.gateway_written

    @property
    def exists(self) -> bool:
        return self.entry is not None

    @property
    def session_id(self) -> str | None:
        sid = (self.entry or {}).get("sessionId")
        return sid if isinstance(sid, str) else None

    def transcript_path(self) -> Path | None:
        """None when the entry's id is not a plain name: such an id never becomes a path, and
        for a session in OpenClaw's SQLite store (no transcript file)."""
        sid = self.session_id
        if self.gateway_written:
            return None
        if sid is None or not is_plain_name(sid):
            return None
        return transcript_path_for(self.sessions_dir, sid, (self.entry or {}).get("sessionFile"))


def agent_sessions(
    ctx: Context, agent_id: str, fields: Iterable[str] | None = None
) -> dict[str, Folded]:
    """One agent's sessions through its store reader (sessions.json or OpenClaw's SQLite)."""
    return store_reader.reader_for(ctx.paths, agent_id).sessions(
        tuple(fields) if fields is not None else None
    )


def all_agent_ids(ctx: Context) -> list[str]:
    ids = store_reader.agent_ids_on_disk(ctx.paths)
    for a in ctx.config.known_agent_ids():
        if a not in ids:
            ids.append(a)
    return ids


def _search_order(ctx: Context) -> list[str]:
    ids = all_agent_ids(ctx)
    return [ctx.agent_id] + [a for a in ids if a != ctx.agent_id]


def validate_key_input(value: str) -> str:
    text = require_utf8(value.strip(), "the session key")
    if not text:
        raise UsageError("a session key is required")
    if any(ord(c) < 0x20 or c == "\x7f" for c in text) or "/" in text or "\\" in text:
        raise UsageError(f"invalid session key or id: {value!r} (keys and ids never name paths)")
    return text


def _resolved(ctx: Context, agent_id: str, folded: Folded | None, key: str) -> Resolved:
    return Resolved(
        agent_id=agent_id,
        key=key,
        entry=folded.entry if folded else None,
        store_path=ctx.paths.store(agent_id),
        sessions_dir=ctx.paths.sessions_dir(agent_id),
        stored_keys=folded.stored_keys if folded else [],
        store=store_reader.detect(ctx.paths, agent_id),
    )


def _by_session_id(ctx: Context, session_id: str) -> Resolved | None:
    for agent_id in _search_order(ctx):
        matches = [
            f
            for f in agent_sessions(ctx, agent_id).values()
            if f.entry.get("sessionId") == session_id
        ]
        if len(matches) > 1:
            raise UsageError(
                f"session id {session_id} matches several sessions: "
                + ", ".join(m.key for m in matches),
                hint="use the full key from list",
            )
        if matches:
            return _resolved(ctx, agent_id, matches[0], matches[0].key)
    return None


def _by_label(ctx: Context, label: str) -> Resolved:
    found: list[tuple[str, Folded]] = []
    for agent_id in _search_order(ctx):
        for f in agent_sessions(ctx, agent_id).values():
            if f.entry.get("label") == label and listable(f.key):
                found.append((agent_id, f))
        if found:
            break
    if not found:
        raise NotFoundError(
            f"No session with label: {label}", hint="see labels with: sessiontool list"
        )
    if len(found) > 1:
        raise UsageError(
            f"label {label!r} matches several sessions: " + ", ".join(f.key for _, f in found),
            hint="use the full key from list",
        )
    agent_id, f = found[0]
    return _resolved(ctx, agent_id, f, f.key)


def resolve(
    ctx: Context,
    value: str | None,
    *,
    label: str | None = None,
    create: bool = False,
    write: bool = False,
) -> Resolved:
    """What the user typed → one session. A UUID-shaped input is a sessionId; anything else is a
    key, or, failing that, a sessionId (real ids like `dev-orphan-42`). `create` lets an unknown
    key stand for a session about to be made (send)."""
    if label is not None:
        if value:
            raise UsageError("give a session key or --label, not both")
        return _by_label(ctx, label)
    if value is None:
        raise UsageError("a session key (or --label) is required")
    text = validate_key_input(value)
    if keys.looks_like_uuid(text):
        hit = _by_session_id(ctx, text)
        if hit is None:
            raise session_not_found(text)
        return hit
    full = ctx.canonical(text)
    if full in keys.RESERVED_KEYS and full != "global":
        raise UsageError(f"{full!r} is a reserved key")
    if (create or write) and full in keys.RESERVED_KEYS and full != ctx.main_key():
        # The spec reserves them: `send global` once wrote a hidden session and reported
        # another key. With session.scope "global" the main session is `global`: allowed.
        raise UsageError(
            f"{full!r} is a reserved key and cannot be a target",
            hint="name a session from `sessiontool list`",
        )
    agent_id = keys.agent_of(full, ctx.agent_id)
    found = store_reader.reader_for(ctx.paths, agent_id).session(full)
    if found is not None:
        return _resolved(ctx, agent_id, found, full)
    hit = _by_session_id(ctx, text) if is_plain_name(text) else None
    if hit is not None:
        return hit
    if create:
        return _resolved(ctx, agent_id, None, full)
    raise session_not_found(text)


# -- list ------------------------------------------------------------------------------------

# The entry fields a list row and its filters read: a reader that can fetch fields one by one
# (OpenClaw's SQLite store) reads only these.
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
    "provider",
    "lastProvider",
    "room",
    "modelProvider",
    "status",
)
# Fields OpenClaw 2026.8+'s own session rows carry, shown as stored for its SQLite store.
OPENCLAW_ROW_FIELDS = ("inputTokens", "outputTokens", "modelProvider", "status", "spawnedBy")

_ROW_PASSTHROUGH = (
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
) -> dict[str, Any]:
    """One list row. `kind` and `sessions_dir` may be passed in when the caller already has
    them (list builds thousands of rows: no path object or classification twice per row)."""
    main_key = ctx.config.main_key
    if kind is None:
        kind = keys.kind_of(full_key, entry, main_key)
    row: dict[str, Any] = {
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
) -> dict[str, Any]:
    policy.check_tool(ctx, "sessions_list")
    wanted = _parse_kinds(kinds)
    if active_minutes is not None and active_minutes < 1:
        raise UsageError("--active-minutes must be a positive whole number of minutes")
    if limit is not None and limit < 0:
        raise UsageError("--limit must be a positive number or 'all'")
    if message_limit < 0:
        raise UsageError("--message-limit must not be negative")
    from sessiontool.clock import now_ms

    now = now_ms()
    cutoff = now - active_minutes * 60_000 if active_minutes is not None else None
    if since_ms is not None:
        cutoff = max(cutoff, since_ms) if cutoff is not None else since_ms
    with read_scope():
        return _list_in_scope(
            ctx, wanted, limit, cutoff, min(message_limit, MESSAGE_LIMIT_MAX), all_agents
        )


def _list_in_scope(
    ctx: Context,
    wanted: set[str] | None,
    limit: int | None,
    cutoff: int | None,
    n_messages: int,
    all_agents: bool,
) -> dict[str, Any]:
    candidates: list[tuple[float, str, str, Entry, str]] = []
    main_key = ctx.config.main_key
    sessions_dirs: dict[str, Path] = {}
    gateway: set[str] = set()
    sqlite_agents: set[str] = set()
    for agent_id in list_agent_ids(ctx, all_agents):
        sessions_dirs[agent_id] = ctx.paths.sessions_dir(agent_id)
        rd = store_reader.reader_for(ctx.paths, agent_id)
        if rd.info.gateway_written:
            gateway.add(agent_id)
        if rd.info.kind in ("openclaw-sqlite", "gateway"):  # OpenClaw's own rows, either way
            sqlite_agents.add(agent_id)
        for full_key, f in rd.sessions(LIST_FIELDS).items():
            if not listable(full_key):
                continue
            kind = keys.kind_of(full_key, f.entry, main_key)
            if wanted is not None and kind not in wanted:
                continue
            if cutoff is not None and _updated_at(f.entry) < cutoff:
                continue
            if not policy.visible(ctx, full_key, f.entry):
                continue
            candidates.append((_updated_at(f.entry), agent_id, full_key, f.entry, kind))
    candidates.sort(key=lambda c: c[0], reverse=True)
    if limit is not None:
        candidates = candidates[:limit]
    rows = []
    for _, agent_id, full_key, entry, kind in candidates:
        row = build_row(
            ctx, agent_id, full_key, entry, kind=kind, sessions_dir=sessions_dirs[agent_id]
        )
        if agent_id in gateway:
            row.pop("transcriptPath", None)  # no file: the transcript is in the database
        if agent_id in sqlite_agents:
            row["agentId"] = agent_id
            for name in OPENCLAW_ROW_FIELDS:
                if entry.get(name) is not None:
                    row[name] = entry[name]
        if n_messages > 0:
            msgs: list[Message] = []
            if agent_id in gateway or row.get("transcriptPath"):
                rd = store_reader.reader_for(ctx.paths, agent_id)
                try:
                    res = rd.messages(
                        full_key, entry, n_messages, _not_tool_result, skip_line=is_tool_result_line
                    )
                except OSError as exc:  # one unreadable transcript must not hide the list
                    where = exc.filename or row.get("transcriptPath") or full_key
                    diag.warn(
                        f"cannot read {where}: {exc.strerror or exc}; its messages are left out"
                    )
                else:
                    msgs = strip_envelopes(res.messages)
            row["messages"] = msgs
        rows.append(row)
    return {"count": len(rows), "sessions": rows}


# -- history ---------------------------------------------------------------------------------

_ENVELOPE = re.compile(r"^\[([^\]]+)\]\s*")
_ENVELOPE_CHANNELS = (
    "WebChat",
    "WhatsApp",
    "Telegram",
    "Signal",
    "Slack",
    "Discord",
    "Google Chat",
    "iMessage",
    "Teams",
    "Matrix",
    "Zalo",
    "Zalo Personal",
    "BlueBubbles",
)
_ISO_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}Z\b")
_DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}\b")
_MESSAGE_ID_LINE = re.compile(r"^\s*\[message_id:\s*[^\]]+\]\s*$", re.IGNORECASE)


def _looks_like_envelope(header: str) -> bool:
    if _ISO_TIME.search(header) or _DATE_TIME.search(header):
        return True
    return any(header.startswith(ch + " ") for ch in _ENVELOPE_CHANNELS)


def strip_envelope_text(text: str) -> str:
    """Drop the channel envelope (`[WhatsApp +1555 +2m 2026-01-24 10:11 UTC] `) and
    `[message_id: ...]` lines that OpenClaw stores inside user text, as its history does."""
    m = _ENVELOPE.match(text)
    if m and _looks_like_envelope(m.group(1)):
        text = text[m.end() :]
    if "[message_id:" in text:
        lines = re.split(r"\r?\n", text)
        kept = [ln for ln in lines if not _MESSAGE_ID_LINE.match(ln)]
        if len(kept) != len(lines):
            text = "\n".join(kept)
    return text


def strip_envelope(msg: Message) -> Message:
    if str(msg.get("role", "")).lower() != "user":
        return msg
    content = msg.get("content")
    if isinstance(content, str):
        new = strip_envelope_text(content)
        return msg if new == content else {**msg, "content": new}
    if isinstance(content, list):
        changed = False
        blocks = []
        for b in content:
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str):
                t = strip_envelope_text(b["text"])
                if t != b["text"]:
                    b = {**b, "text": t}
                    changed = True
            blocks.append(b)
        return {**msg, "content": blocks} if changed else msg
    if isinstance(msg.get("text"), str):
        t = strip_envelope_text(msg["text"])
        return msg if t == msg["text"] else {**msg, "text": t}
    return msg


def strip_envelopes(msgs: list[Message]) -> list[Message]:
    return [strip_envelope(m) for m in msgs]


def is_tool_output(msg: Message) -> bool:
    """A tool result, or OpenClaw's nested-tool record (`role: custom`, a tool customType)."""
    role = msg.get("role")
    if role == "toolResult":
        return True
    return role == "custom" and "tool" in str(msg.get("customType", ""))


def _not_tool_result(msg: Message) -> bool:
    return not is_tool_output(msg)


def _warn_bad(path: Path, res: ReadResult) -> None:
    if res.bad_lines:
        diag.warn(f"{path}: skipped {res.bad_lines} unreadable line(s)")


class History(Value):
    __slots__ = ("session_key", "session_id", "messages", "path", "resolved")

    session_key: str
    session_id: str | None
    messages: list[Message]
    path: Path | None
    resolved: Resolved

    def __init__(
        self,
        session_key: str,
        session_id: str | None,
        messages: list[Message],
        path: Path | None,
        resolved: Resolved,
    ) -> None:
        self.session_key = session_key
        self.session_id = session_id
        self.messages = messages
        self.path = path
        self.resolved = resolved

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"sessionKey": self.session_key}
        if self.session_id is not None:
            out["sessionId"] = self.session_id
        out["messages"] = self.messages
        if any(m.get("truncated") is True for m in self.messages):
            # Read through a gateway that cut a message (chat.history's caps): never silent.
            out["truncated"] = True
        return out


def message_ts(msg: Message) -> int | None:
    ts = _num(msg.get("timestamp"))
    return int(ts) if ts is not None else None


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
    policy.check_tool(ctx, "sessions_history")
    if limit is not None:
        if limit < 0:
            raise UsageError("--limit must not be negative")
        limit = min(limit, HISTORY_MAX_LIMIT)

    def keep(m: Message) -> bool:
        return include_tools or not is_tool_output(m)

    def older(m: Message) -> bool:
        # Transcripts are appended in time order: the first message (from the end) older than
        # --since ends the read. Messages without a timestamp are kept.
        ts = message_ts(m)
        return since_ms is not None and ts is not None and ts < since_ms

    with read_scope():
        r = resolve(ctx, value, label=label)
        policy.check_access(ctx, r.key, r.entry, "history")
        path = r.transcript_path()
        messages: list[Message] = []
        if r.entry is not None and (path is not None or r.gateway_written):
            rd = store_reader.reader_for(ctx.paths, r.agent_id)
            res = rd.messages(
                r.key,
                r.entry,
                limit,
                keep,
                stop=older if since_ms is not None else None,
                skip_line=None if include_tools else is_tool_result_line,
            )
            messages = res.messages if raw else strip_envelopes(res.messages)
    return History(ctx.display(r.key), r.session_id, messages, path, r)
