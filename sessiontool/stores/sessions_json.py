"""sessions.json: reading (JSON5-tolerant, legacy names, duplicate folding) and the locked
read-modify-write with an atomic replace, in OpenClaw's format and lock protocol."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from sessiontool import testhooks
from sessiontool.errors import CorruptStateError, SessiontoolError, StorageError
from sessiontool.stores.jsonio import (
    atomic_write,
    loads_noting_nonfinite,
    loads_tolerant,
    store_bytes,
)
from sessiontool.stores.keys import RESERVED_KEYS, stored_to_full
from sessiontool.stores.locks import store_lock
from sessiontool.stores.paths import StatePaths, ensure_dir

T = TypeVar("T")

LEGACY_FIELDS = {"provider": "channel", "lastProvider": "lastChannel", "room": "groupChannel"}

Entry = dict[str, Any]
Store = dict[str, Entry]


def _position(exc: ValueError) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f" (line {exc.lineno}, column {exc.colno}: {exc.msg})"
    return f" ({exc})" if str(exc) else ""


def _read_text(path: Path) -> str | None:
    """The store's text, or None when it does not exist. Unreadable: exit 5."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        return None
    except IsADirectoryError as exc:
        raise CorruptStateError(f"unreadable session store {path}: is a directory") from exc
    except OSError as exc:
        raise CorruptStateError(f"unreadable session store {path}: {exc.strerror}") from exc
    try:
        # OpenClaw writes UTF-8. Decoding here and dropping the bytes keeps one copy of a
        # 100 MB store in memory while it is parsed, not two.
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CorruptStateError(
            f"unreadable session store {path} (not UTF-8 at byte {exc.start})",
            hint="fix or move the file; sessiontool never overwrites an unreadable store",
        ) from exc


def _parse_store(path: Path, text: str | None, nonfinite: list[bool] | None = None) -> Store:
    """The store in `text`; with `nonfinite`, also notes there whether it holds NaN/Infinity."""
    if text is None or not text.strip():
        return {}
    try:
        if nonfinite is None:
            parsed = loads_tolerant(text)
        else:
            parsed, nonfinite[0] = loads_noting_nonfinite(text)
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
    return parsed


def read_store(path: Path) -> Store:
    """The raw store, or {} when it does not exist. Unreadable or not an object: exit 5."""
    return _parse_store(path, _read_text(path))


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


def _updated(entry: Entry) -> float:
    v = entry.get("updatedAt")
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else 0.0


@dataclass
class Folded:
    """One session of a store under its full key, and the stored keys it was read from."""

    key: str
    entry: Entry
    stored_keys: list[str]


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


def listable(key: str) -> bool:
    return key not in RESERVED_KEYS


def write_store(path: Path, store: Store, *, exact: bool = False) -> None:
    ensure_dir(path.parent)
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


def update_store(path: Path, mutate: Callable[[Store], T], *, timeout: float | None = None) -> T:
    """Locked read-modify-write: take `<store>.lock`, re-read, mutate in place, replace
    atomically. The mutation sees the newest store, so no other writer's update is lost.
    Refused (exit 4) while a gateway that ignores the lock runs on this state dir. A mutation
    that leaves the file's bytes as they are writes nothing."""
    root = path.parent.parent.parent.parent
    if path.parent.parent.parent.name == "agents":
        from sessiontool.stores.reader import require_writable

        # Belt and braces: OpenClaw 2026.8+ refuses to start beside a legacy sessions.json, and
        # its database is written through its gateway only. No caller should get here.
        require_writable(StatePaths(root), [path.parent.parent.name], "write")
    form = "startedAt"
    if path.parent.parent.parent.name == "agents" and (
        (root / "openclaw.json").is_file() or (root / "clawdbot.json").is_file()
    ):
        from sessiontool.gateway import guard_store_write

        form = guard_store_write(path)  # refused beside a lockless gateway; else its lock form
    try:
        ensure_dir(path.parent)
    except OSError as exc:
        raise StorageError(f"cannot create {path.parent}: {exc.strerror}") from exc
    with store_lock(path, timeout, form):
        # NaN and Infinity (JSON5, or Python's json) must stay as they were: the exact encoder.
        nonfinite = [False]
        store = _parse_store(path, _read_text(path), nonfinite)
        result = mutate(store)
        testhooks.pause("store-locked")
        data = store_bytes(store, exact=nonfinite[0])
        if not _unchanged(path, data):
            ensure_dir(path.parent)
            atomic_write(path, data)
    return result


def set_entry(store: Store, agent_id: str, full_key: str, entry: Entry) -> None:
    """Store `entry` under its full key, dropping any legacy bare form of the same session."""
    for stored in list(store):
        if stored != full_key and stored_to_full(stored, agent_id) == full_key:
            del store[stored]
    store[full_key] = entry


def get_entry(store: Store, agent_id: str, full_key: str) -> Entry | None:
    folded = fold(
        {k: v for k, v in store.items() if stored_to_full(k, agent_id) == full_key}, agent_id
    )
    f = folded.get(full_key)
    return f.entry if f else None


def remove_entry(store: Store, agent_id: str, full_key: str) -> Entry | None:
    found = get_entry(store, agent_id, full_key)
    for stored in list(store):
        if stored_to_full(stored, agent_id) == full_key:
            del store[stored]
    return found


def store_exists(path: Path) -> bool:
    return os.path.isfile(path)


def read_entry(paths: StatePaths, full_key: str, agent_id: str | None = None) -> Entry | None:
    """The current entry of one session, read from its agent's store (raises like read_store)."""
    from sessiontool.stores.keys import agent_of

    agent = agent_id or agent_of(full_key)
    return get_entry(read_store(paths.store(agent)), agent, full_key)


def peek_entry(paths: StatePaths, full_key: str) -> Entry | None:
    """read_entry for niceties (a channel name in a prompt): an unreadable store gives None."""
    try:
        return read_entry(paths, full_key)
    except SessiontoolError:
        return None
