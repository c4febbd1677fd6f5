"""sessions.json: reading (JSON5-tolerant, legacy names, duplicate folding) and the locked
read-modify-write with an atomic replace, in OpenClaw's format and lock protocol."""

from __future__ import annotations

import _thread
import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from sessiontool import gcpause, testhooks
from sessiontool.errors import CorruptStateError, SessiontoolError, StorageError
from sessiontool.state.jsonio import (
    atomic_write,
    float_flags,
    loads_noting_floats,
    store_bytes,
)
from sessiontool.state.keys import RESERVED_KEYS, stored_to_full
from sessiontool.state.locks import store_lock
from sessiontool.state.paths import StatePaths, ensure_dir
from sessiontool.structs import Value

T = TypeVar("T")

LEGACY_FIELDS = {"provider": "channel", "lastProvider": "lastChannel", "room": "groupChannel"}

Entry = dict[str, Any]
Store = dict[str, Entry]


def _position(exc: ValueError) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f" (line {exc.lineno}, column {exc.colno}: {exc.msg})"
    return f" ({exc})" if str(exc) else ""


def _read_text_ident(path: Path) -> tuple[str | None, tuple[int, ...] | None]:
    """The store's text (None when it does not exist), and the identity of the file it was read
    from when that file can be cached (see `_identity`): taken before and after the read, and
    only given when both agree, so a file changed while it was read is never cached. Unreadable:
    exit 5."""
    try:
        with open(path, "rb") as fh:
            before = _identity(os.fstat(fh.fileno()))
            data = fh.read()
            ident = (
                before
                if before is not None and before == _identity(os.fstat(fh.fileno()))
                else None
            )
    except FileNotFoundError:
        return None, None
    except IsADirectoryError as exc:
        raise CorruptStateError(f"unreadable session store {path}: is a directory") from exc
    except OSError as exc:
        raise CorruptStateError(f"unreadable session store {path}: {exc.strerror}") from exc
    try:
        # OpenClaw writes UTF-8. Decoding here and dropping the bytes keeps one copy of a
        # 100 MB store in memory while it is parsed, not two.
        return data.decode("utf-8-sig"), ident
    except UnicodeDecodeError as exc:
        raise CorruptStateError(
            f"unreadable session store {path} (not UTF-8 at byte {exc.start})",
            hint="fix or move the file; sessiontool never overwrites an unreadable store",
        ) from exc


class _Parsed(Value):
    """A parsed store, what its floats need when it is written again (`exact`: it holds NaN or
    Infinity, see store_bytes; `plain`: it holds no float orjson writes differently from
    json.dumps) and, when it is kept, the identity of the file it came from."""

    __slots__ = ("store", "exact", "plain", "ident")

    store: Store
    exact: bool
    plain: bool
    ident: tuple[int, ...] | None

    def __init__(
        self,
        store: Store,
        exact: bool = False,
        plain: bool = True,
        ident: tuple[int, ...] | None = None,
    ) -> None:
        self.store = store
        self.exact = exact
        self.plain = plain
        self.ident = ident


def _parse_store(path: Path, text: str | None) -> _Parsed:
    """The store in `text` (unreadable or not an object: exit 5)."""
    if text is None or not text.strip():
        return _Parsed({})
    testhooks.note("store-parse")
    # The cyclic garbage collector would walk the new objects again and again while a big
    # store is built (a 57 MB store: 590 ms to parse with it, 210 ms without); JSON holds no
    # cycles, so there is nothing for it to find.
    try:
        with gcpause.paused():
            parsed, nonfinite, odd = loads_noting_floats(text)
    except ValueError as exc:
        raise CorruptStateError(
            f"unreadable session store {path}{_position(exc)}",
            hint="fix or move the file; sessiontool never overwrites an unreadable store",
        ) from exc
    except RecursionError as exc:
        raise CorruptStateError(f"unreadable session store {path} (nested too deeply)") from exc
    if not isinstance(parsed, dict):
        raise CorruptStateError(
            f"session store {path} is not a JSON object (found {type(parsed).__name__})"
        )
    return _Parsed(parsed, nonfinite, not odd)


# -- the parsed-store cache ---------------------------------------------------------------------
#
# A send parses a big store once, not at every step: the foreground's parse is kept here, the
# lane worker forked from it inherits it, and a store written by this process is kept as written.
# Before a kept parse is used the file is stat'ed: it is used only while the file is the very one
# it was read from or written as, (device, inode, size, mtime, ctime) unchanged, so a store
# another writer replaced (always a new inode: OpenClaw and sessiontool write a temp file and
# rename it) or changed in place is parsed again. update_store does this check under the store
# lock, so its read-modify-write still starts from the newest store. Only files of at least
# CACHE_MIN_BYTES on a file system with sub-second mtimes are kept: a recycled inode with the
# same size and the same mtime would need two other writers to read, rewrite and replace such a
# file within one clock tick, which it takes far longer than a tick to do. Small stores are
# parsed every time (they cost little), and so are stores where mtimes are whole seconds.
#
# What is returned is shared: read_store's result and the entries in it must not be changed in
# place (update_store hands its mutation a copy of the top level; the mutations copy an entry
# before they change it, as they always have).

CACHE_MIN_BYTES = 1 << 20
CACHE_SLOTS = 2  # stores kept (an agent-to-agent send reads two); the least recently used goes


_cache: dict[str, _Parsed] = {}
_cache_lock = _thread.allocate_lock()  # the MCP server calls from several threads


def _identity(st: os.stat_result) -> tuple[int, ...] | None:
    """What tells one version of a store file from another, or None when it cannot be cached."""
    if not stat.S_ISREG(st.st_mode) or st.st_size < CACHE_MIN_BYTES:
        return None
    if st.st_mtime_ns % 1_000_000_000 == 0:  # whole seconds: a coarse file system (or chance)
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _remember(path: Path, parsed: _Parsed | None) -> None:
    key = os.fspath(path)
    with _cache_lock:
        _cache.pop(key, None)
        if parsed is None or parsed.ident is None:
            return
        _cache[key] = parsed
        while len(_cache) > CACHE_SLOTS:
            del _cache[next(iter(_cache))]


def _load(path: Path) -> _Parsed:
    """The store at `path`: kept, or parsed now."""
    key = os.fspath(path)
    hit = _cache.get(key)
    if hit is not None:
        try:
            ident = _identity(os.stat(path))
        except OSError:
            ident = None
        if ident is not None and ident == hit.ident:
            with _cache_lock:  # most recently used last
                if _cache.pop(key, None) is hit:
                    _cache[key] = hit
            return hit
    text, ident = _read_text_ident(path)
    parsed = _parse_store(path, text)
    parsed.ident = ident
    _remember(path, parsed)
    return parsed


def _remember_written(path: Path, written: os.stat_result, parsed: _Parsed) -> None:
    """Keep what update_store just wrote as the parse of `path`: identified by the file now at
    `path` (the rename changed its ctime), provided that is still the file we wrote."""
    try:
        now = os.stat(path)
    except OSError:
        now = None
    same = now is not None and (now.st_dev, now.st_ino, now.st_size, now.st_mtime_ns) == (
        written.st_dev,
        written.st_ino,
        written.st_size,
        written.st_mtime_ns,
    )
    parsed.ident = _identity(now) if same and now is not None else None
    _remember(path, parsed)


def file_identity(path: Path) -> tuple[int, ...] | None:
    """The identity `read_store` keeps a parse of `path` under (None: not cacheable, or gone),
    for callers that keep something derived from a store across processes."""
    try:
        return _identity(os.stat(path))
    except OSError:
        return None


def kept_identity(path: Path) -> tuple[int, ...] | None:
    """The identity of the file the parse kept for `path` was read from (None: none kept): what
    was derived from `read_store(path)` just now describes exactly that file."""
    hit = _cache.get(os.fspath(path))
    return hit.ident if hit is not None else None


def read_store(path: Path) -> Store:
    """The raw store, or {} when it does not exist. Unreadable or not an object: exit 5.
    Shared with later readers of the same file: never change it in place."""
    return _load(path).store


def read_listing(path: Path) -> Store:
    """`read_store` for a command that lists the store and never writes it back (`search`'s
    and `usage`'s full check): orjson's parse where it takes the text (a third of the time of
    the standard library's with the float hooks, on a 12 MB store of 100,000 sessions; issue
    47), else `read_store`'s. The parse is kept as `read_store` keeps it, marked as neither
    exact nor plain: a writer that meets it later in the process checks its floats itself."""
    import orjson

    key = os.fspath(path)
    hit = _cache.get(key)
    if hit is not None:
        return _load(path).store
    text, ident = _read_text_ident(path)
    if text is None or not text.strip():
        return _load(path).store
    try:
        value = orjson.loads(text)  # NaN, a number past 64 bits, a lone surrogate: refused
    except orjson.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        parsed = _parse_store(path, text)  # its own words for what is wrong, or JSON5's way
    else:
        testhooks.note("store-parse")
        parsed = _Parsed(value, exact=False, plain=False)
    parsed.ident = ident
    _remember(path, parsed)
    return parsed.store


def normalize_entry(entry: Entry) -> Entry:
    """Legacy field names → current ones (provider → channel, ...), without dropping anything."""
    if not any(k in entry for k in LEGACY_FIELDS):
        return entry
    out = dict(entry)
    for old, new in LEGACY_FIELDS.items():
        if old in out:
            value = out.pop(old)
            out.setdefault(new, value)
    return out


def _is_entry(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("sessionId"), str)


def updated_of(entry: Entry) -> float:
    """An entry's updatedAt as a number (0: none), as `fold` compares two entries of a key."""
    v = entry.get("updatedAt")
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else 0.0


_updated = updated_of


class Folded(Value):
    """One session of a store under its full key, and the stored keys it was read from."""

    __slots__ = ("key", "entry", "stored_keys")

    key: str
    entry: Entry
    stored_keys: list[str]

    def __init__(self, key: str, entry: Entry, stored_keys: list[str]) -> None:
        self.key = key
        self.entry = entry
        self.stored_keys = stored_keys


def fold(store: Store, agent_id: str) -> dict[str, Folded]:
    """Full key → session. A legacy bare key and its full form are one session: the newer
    `updatedAt` wins (the real gateway does the same)."""
    out: dict[str, Folded] = {}
    for stored, value in store.items():
        if not _is_entry(value):
            continue
        full = stored_to_full(stored, agent_id)
        entry = normalize_entry(value)
        have = out.get(full)
        if have is None:
            out[full] = Folded(full, entry, [stored])
            continue
        have.stored_keys.append(stored)
        if _updated(entry) > _updated(have.entry):
            have.entry = entry
    return out


def winners(store: Store, agent_id: str) -> dict[str, Entry]:
    """Full key → the stored entry `fold` would pick for it, as stored (not normalized, not
    copied): one pass for a listing that reads a few fields of 100,000 sessions (issue 47)."""
    won: dict[str, Entry] = {}
    for stored, value in store.items():
        if type(value) is not dict or type(value.get("sessionId")) is not str:
            continue
        # `stored_to_full`'s first test inline: a key already in full form (the common case)
        i = stored.find(":", 6) if stored.startswith("agent:") else -1
        full = stored if 6 < i < len(stored) - 1 else stored_to_full(stored, agent_id)
        have = won.get(full)
        if have is None or updated_of(value) > updated_of(have):
            won[full] = value
    return won


def listable(key: str) -> bool:
    return key not in RESERVED_KEYS


def write_store(path: Path, store: Store, *, exact: bool = False) -> None:
    ensure_dir(path.parent)
    testhooks.note("store-write")
    atomic_write(path, store_bytes(store, exact=exact))


def _unchanged(path: Path, data: bytes) -> bool:
    """Whether `path` already holds exactly `data` (the size first: a change mostly shows
    there, and then the file is not read again)."""
    try:
        with open(path, "rb") as fh:
            if os.fstat(fh.fileno()).st_size != len(data):
                return False
            return fh.read() == data
    except OSError:
        return False


# Asked before every write to an OpenClaw state dir's sessions.json: raises (exit 4) while a
# gateway that ignores the store lock runs there, else names the lock payload to write. Set by
# the command layer (cli/app.py: openclaw/gateway.guard_store_write), so this module needs no
# knowledge of gateways; without it the 2026.1 lock form is written.
_write_guard: Callable[[Path], str] | None = None


def set_write_guard(guard: Callable[[Path], str] | None) -> None:
    global _write_guard
    _write_guard = guard


def update_store(path: Path, mutate: Callable[[Store], T], *, timeout: float | None = None) -> T:
    """Locked read-modify-write: take `<store>.lock`, re-read, mutate in place, replace
    atomically. The mutation sees the newest store, so no other writer's update is lost.
    Refused (exit 4) while a gateway that ignores the lock runs on this state dir. A mutation
    that leaves the file's bytes as they are writes nothing."""
    root = path.parent.parent.parent.parent
    if path.parent.parent.parent.name == "agents":
        from sessiontool.state.detect import require_writable

        # Belt and braces: OpenClaw 2026.8+ refuses to start beside a legacy sessions.json, and
        # its database is written through its gateway only. No caller should get here.
        require_writable(StatePaths(root), [path.parent.parent.name], "write")
    form = "startedAt"
    if (
        _write_guard is not None
        and path.parent.parent.parent.name == "agents"
        and ((root / "openclaw.json").is_file() or (root / "clawdbot.json").is_file())
    ):
        form = _write_guard(path)  # refused beside a lockless gateway; else its lock form
    try:
        ensure_dir(path.parent)
    except OSError as exc:
        raise StorageError(f"cannot create {path.parent}: {exc.strerror}") from exc
    with store_lock(path, timeout, form):
        # The newest store: a kept parse only if the file is still the one it was made from.
        # NaN and Infinity (JSON5, or Python's json) must stay as they were: the exact encoder.
        parsed = _load(path)
        current = parsed.store
        # A copy of the top level: what earlier readers hold (and the kept parse) stays as it
        # was, whatever the mutation does or wherever it fails.
        store = dict(current)
        result = mutate(store)
        testhooks.pause("store-locked")
        # The floats of what was read are known from the parse; only the entries the mutation
        # put there (not the very objects read) are looked at.
        plain = parsed.plain and not any(
            float_flags(v)[1] for k, v in store.items() if current.get(k) is not v
        )
        out = _Parsed(store, parsed.exact, plain)
        data = store_bytes(store, exact=out.exact, plain=out.plain)
        # Data that changed is written without reading the file again; only data equal to what
        # was read (most entries are the very same objects: a fast compare) is compared byte by
        # byte, so a no-op mutation leaves the file alone.
        if store != current or not _unchanged(path, data):
            ensure_dir(path.parent)
            testhooks.note("store-write")
            try:
                written = atomic_write(path, data)
            except BaseException:
                _remember(path, None)  # whatever is there now: parse it again
                raise
            _remember_written(path, written, out)
    return result


def _stored_forms(agent_id: str, full_key: str) -> list[str]:
    """The keys under which a store of `agent_id` can hold `full_key`: exactly the `k` with
    `stored_to_full(k, agent_id) == full_key` (the full key itself, and its legacy bare form).
    Looking those up is O(1); mapping every key of a 10,000-entry store is not."""
    forms = [full_key] if stored_to_full(full_key, agent_id) == full_key else []
    prefix = f"agent:{agent_id}:"
    if full_key.startswith(prefix):
        bare = full_key[len(prefix) :]
        if stored_to_full(bare, agent_id) == full_key:
            forms.append(bare)
    return forms


def _present_forms(store: Store, agent_id: str, full_key: str) -> list[str]:
    """The stored forms of `full_key` in `store`, in the store's order."""
    present = [k for k in _stored_forms(agent_id, full_key) if k in store]
    if len(present) > 1:  # both forms (a legacy store): the store's order decides ties
        present = [k for k in store if k in present]
    return present


def set_entry(store: Store, agent_id: str, full_key: str, entry: Entry) -> None:
    """Store `entry` under its full key, dropping any legacy bare form of the same session."""
    for stored in _present_forms(store, agent_id, full_key):
        if stored != full_key:
            del store[stored]
    store[full_key] = entry


def lookup(store: Store, agent_id: str, full_key: str) -> Folded | None:
    """`fold(store, agent_id).get(full_key)`, from the key's stored forms alone."""
    return fold({k: store[k] for k in _present_forms(store, agent_id, full_key)}, agent_id).get(
        full_key
    )


def get_entry(store: Store, agent_id: str, full_key: str) -> Entry | None:
    f = lookup(store, agent_id, full_key)
    return f.entry if f else None


def remove_entry(store: Store, agent_id: str, full_key: str) -> Entry | None:
    found = get_entry(store, agent_id, full_key)
    for stored in _present_forms(store, agent_id, full_key):
        del store[stored]
    return found


def read_entry(paths: StatePaths, full_key: str, agent_id: str | None = None) -> Entry | None:
    """The current entry of one session, read from its agent's store (raises like read_store)."""
    from sessiontool.state.keys import agent_of

    agent = agent_id or agent_of(full_key)
    return get_entry(read_store(paths.sessions_json(agent)), agent, full_key)


def peek_entry(paths: StatePaths, full_key: str) -> Entry | None:
    """read_entry for niceties (a channel name in a prompt): an unreadable store gives None."""
    try:
        return read_entry(paths, full_key)
    except SessiontoolError:
        return None
