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
from sessiontool.sessions import reading
from sessiontool.sessions.history import is_tool_output
from sessiontool.sessions.reading import read_scope
from sessiontool.sessions.resolve import (
    all_agent_ids,
)
from sessiontool.state import keys, sessions_json
from sessiontool.state.envelopes import strip_envelopes
from sessiontool.state.paths import is_plain_name, transcript_path_for
from sessiontool.state.sessions_json import Entry, listable
from sessiontool.state.transcript import Message, is_tool_result_line

ListRow = dict[str, Any]  # OpenClaw's row: its keys pass through from the store entry

if TYPE_CHECKING:  # for types only: a TypedDict costs `list --json` start-up to create
    from typing import TypedDict

    class SessionsResult(TypedDict):
        """What `list` (and the sessions_list tool) returns; `--json` writes it as is."""

        count: int
        sessions: list[ListRow]


LIST_DEFAULT_LIMIT = 200
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
)
# Fields OpenClaw 2026.8+'s own session rows carry, shown as stored for its SQLite store.
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
) -> SessionsResult:
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
) -> SessionsResult:
    candidates: list[tuple[float, str, str, Entry, str | None]] = []
    main_key = ctx.config.main_key
    sessions_dirs: dict[str, Path] = {}
    gateway: set[str] = set()
    sqlite_agents: set[str] = set()
    for agent_id in list_agent_ids(ctx, all_agents):
        sessions_dirs[agent_id] = ctx.paths.sessions_dir(agent_id)
        rd = reading.reader_for(ctx.paths, agent_id)
        if rd.info.gateway_written:
            gateway.add(agent_id)
        if rd.info.format in ("openclaw-sqlite", "gateway"):  # OpenClaw's own rows, either way
            sqlite_agents.add(agent_id)
        raw = getattr(rd, "store", None)
        if raw is not None:  # sessions.json: one pass over the parse, no fold (issue 47)
            found = sessions_json.winners(raw(), agent_id)
        else:
            found = {key: f.entry for key, f in rd.sessions(LIST_FIELDS).items()}
        candidates += _candidates(ctx, agent_id, found, wanted, cutoff)
    candidates.sort(key=lambda c: c[0], reverse=True)
    if limit is not None:
        candidates = candidates[:limit]
    rows = []
    for _, agent_id, full_key, stored, kind in candidates:
        entry = sessions_json.normalize_entry(stored)
        kind = kind or keys.kind_of(full_key, entry, main_key)
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
                rd = reading.reader_for(ctx.paths, agent_id)
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


def _candidates(
    ctx: Context,
    agent_id: str,
    found: dict[str, Entry],
    wanted: set[str] | None,
    cutoff: int | None,
) -> list[tuple[float, str, str, Entry, str | None]]:
    """(updatedAt, agent, full key, entry, kind: None when no filter asked it) of the listable
    sessions in `found` that pass the filters. The kind and the visibility are decided only
    where a filter needs them: over 100,000 sessions they cost three times the parse."""
    main_key = ctx.config.main_key
    everyone = ctx.requester.is_operator
    out: list[tuple[float, str, str, Entry, str | None]] = []
    for full_key, entry in found.items():
        if not listable(full_key):
            continue
        kind = None
        if wanted is not None:
            kind = keys.kind_of(full_key, entry, main_key)
            if kind not in wanted:
                continue
        updated = _updated_at(entry)
        if cutoff is not None and updated < cutoff:
            continue
        if not everyone and not policy.visible(ctx, full_key, entry):
            continue
        out.append((updated, agent_id, full_key, entry, kind))
    return out


def _not_tool_result(msg: Message) -> bool:
    return not is_tool_output(msg)
