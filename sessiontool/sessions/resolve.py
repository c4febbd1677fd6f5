"""Resolving what the user typed (a key, a label, a sessionId) to one session of one agent's
store, whatever its format; runs, the tools and the commands all resolve through here."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from sessiontool.context import Context
from sessiontool.errors import NotFoundError, SessiontoolError, UsageError, session_not_found
from sessiontool.sessions import reading
from sessiontool.state import detect, keys
from sessiontool.state.jsonio import require_utf8
from sessiontool.state.paths import is_plain_name, transcript_path_for
from sessiontool.state.sessions_json import Entry, Folded, listable
from sessiontool.structs import Value


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
    store: detect.StoreInfo | None

    def __init__(
        self,
        agent_id: str,
        key: str,
        entry: Entry | None,
        store_path: Path,
        sessions_dir: Path,
        stored_keys: list[str] | None = None,
        store: detect.StoreInfo | None = None,
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
    return reading.reader_for(ctx.paths, agent_id).sessions(
        tuple(fields) if fields is not None else None
    )


def all_agent_ids(ctx: Context) -> list[str]:
    ids = reading.agent_ids_on_disk(ctx.paths)
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
        store_path=ctx.paths.sessions_json(agent_id),
        sessions_dir=ctx.paths.sessions_dir(agent_id),
        stored_keys=folded.stored_keys if folded else [],
        store=detect.detect(ctx.paths, agent_id),
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
    found = reading.reader_for(ctx.paths, agent_id).session(full)
    if found is not None:
        return _resolved(ctx, agent_id, found, full)
    hit = _by_session_id(ctx, text) if is_plain_name(text) else None
    if hit is not None:
        return hit
    if create:
        return _resolved(ctx, agent_id, None, full)
    raise not_found_near(ctx, text, agent_id)


def not_found_near(ctx: Context, text: str, agent_id: str) -> NotFoundError:
    """`Session not found` (exit 3), with the agent's key nearest to what was typed: a typo in
    a cron line is named, not taken for a session with nothing in it."""
    import difflib

    exc = session_not_found(text)
    try:
        full_keys = list(agent_sessions(ctx, agent_id, ("sessionId",)))
    except SessiontoolError:
        return exc
    shown = {ctx.display(k): k for k in full_keys}
    close = difflib.get_close_matches(text, list(shown), n=1, cutoff=0.6)
    if not close:  # a bare key (`daly`) beside the keys' bare rests (`daily`)
        bare = {k.split(":", 2)[2]: k for k in full_keys if k.count(":") >= 2}
        close = [ctx.display(bare[k]) for k in difflib.get_close_matches(text, list(bare), n=1)]
    if close:  # in the message itself, so that --json carries it too
        return NotFoundError(
            f"Session not found: {text} (did you mean {close[0]!r}?)",
            hint="sessiontool list shows the keys",
        )
    return exc


# -- list ------------------------------------------------------------------------------------

# The entry fields a list row and its filters read: a reader that can fetch fields one by one
# (OpenClaw's SQLite store) reads only these.
