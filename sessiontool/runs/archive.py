"""Archiving sub-agent sessions: a session leaves its store and its transcript is renamed to
`<file>.deleted.<time>`, never unlinked, so an archive can always be undone by hand.

Only sub-agents that sessiontool spawned (a spawn run record names them) are swept: OpenClaw's
own sub-agents are OpenClaw's to archive. A child with a queued or running run (its spawn, an
announce step, a send to it) is in use and stays, whatever its age.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sessiontool import diag
from sessiontool.clock import archive_stamp, now_ms
from sessiontool.context import Context
from sessiontool.errors import SessiontoolError, StorageError
from sessiontool.state import keys
from sessiontool.state.jsonio import atomic_write
from sessiontool.state.locks import transcript_lock
from sessiontool.state.paths import StatePaths, ensure_dir, is_plain_name, transcript_path_for
from sessiontool.state.sessions_json import (
    Entry,
    fold,
    get_entry,
    read_store,
    remove_entry,
    update_store,
)

if TYPE_CHECKING:
    from sessiontool.runs.result_types import SweepResult

SWEEP_INTERVAL_MS = 60_000
# The opportunistic sweep runs inside a foreground send or spawn: it must not hold the user up
# for the usual 10 s when a lock is busy. A busy session is simply left for the next sweep.
OPPORTUNISTIC_LOCK_TIMEOUT = 1.0


def _updated_at(entry: Entry) -> float | None:
    v = entry.get("updatedAt")
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _older_than(entry: Entry, cutoff_ms: float) -> bool:
    """An entry without a readable `updatedAt` is never old: what cannot be dated is kept."""
    updated = _updated_at(entry)
    return updated is not None and updated < cutoff_ms


def _spawned_and_busy(paths: StatePaths) -> tuple[set[str], set[str]]:
    """(child keys that have a spawn record, keys with an unfinished run of any kind). A run
    whose status is not a finished one counts as busy: unknown means possibly in use."""
    from sessiontool.runs.records import is_finished, iter_records

    spawned: set[str] = set()
    busy: set[str] = set()
    kept: set[str] = set()
    for rec in iter_records(paths):
        key = rec.get("sessionKey")
        if not isinstance(key, str):
            continue
        if rec.get("kind") == "spawn" and keys.split_agent_key(key) and keys.is_subagent(key):
            if rec.get("spawnMode") == "session":
                kept.add(key)  # a persistent child (`--mode session`) is never swept
            else:
                spawned.add(key)
        if not is_finished(rec):
            busy.add(key)
    return spawned - kept, busy


def expired_subagents(ctx: Context, now: int, *, quiet: bool = False) -> list[tuple[str, str]]:
    """(agent id, full key) of every spawned sub-agent that is due for the archive at `now`,
    sorted. Empty when `archiveAfterMinutes` is 0."""
    minutes = ctx.config.archive_after_minutes
    if minutes <= 0:
        return []
    cutoff = now - minutes * 60_000
    spawned, busy = _spawned_and_busy(ctx.paths)
    by_agent: dict[str, list[str]] = {}
    for key in spawned - busy:
        agent_id = keys.agent_of(key)
        if is_plain_name(agent_id):
            by_agent.setdefault(agent_id, []).append(key)
    out: list[tuple[str, str]] = []
    for agent_id in sorted(by_agent):
        try:
            sessions = fold(read_store(ctx.paths.sessions_json(agent_id)), agent_id)
        except SessiontoolError as exc:
            # One unreadable store must not stop the others being swept; it is never written.
            if not quiet:
                diag.warn(f"sweep skipped agent {agent_id}: {exc.message}")
            continue
        for key in sorted(by_agent[agent_id]):
            found = sessions.get(key)
            if found is not None and _older_than(found.entry, cutoff):
                out.append((agent_id, key))
    return out


def _transcript_of(sessions_dir: Path, entry: Entry) -> Path | None:
    sid = entry.get("sessionId")
    if not isinstance(sid, str) or not is_plain_name(sid):
        return None
    return transcript_path_for(sessions_dir, sid, entry.get("sessionFile"))


def _rename_aside(path: Path) -> Path:
    """Rename to `<file>.deleted.<stamp>`; a name already taken gets `.1`, `.2`, ... so that an
    earlier archive is never replaced (rename over a file would destroy it)."""
    base = path.with_name(f"{path.name}.deleted.{archive_stamp()}")
    target, n = base, 0
    ensure_dir(path.parent)  # confined: never rename inside a directory a link leads out to
    while target.exists():
        n += 1
        target = base.with_name(f"{base.name}.{n}")
    try:
        os.rename(path, target)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise StorageError(f"cannot archive transcript {path}: {exc.strerror}") from exc
    return target


class _Unlocked:
    """Stands in for the transcript lock when a session has no transcript path."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _archive(
    paths: StatePaths,
    agent_id: str,
    full_key: str,
    *,
    only_if: Callable[[Entry], bool] | None = None,
    timeout: float | None = None,
) -> tuple[bool, Path | None]:
    """(whether the entry was removed by us, the archived transcript or None)."""
    store_path = paths.sessions_json(agent_id)
    sessions_dir = paths.sessions_dir(agent_id)
    current = get_entry(read_store(store_path), agent_id, full_key)
    if current is None or (only_if is not None and not only_if(current)):
        return False, None
    # The transcript lock first, so no append can open the old path between our removing the
    # entry and renaming the file (it would start a fresh transcript nobody points to).
    tpath = _transcript_of(sessions_dir, current)
    guard: Any = transcript_lock(tpath, timeout) if tpath is not None else _Unlocked()
    with guard:

        def mutate(store: dict[str, Entry]) -> Entry | None:
            entry = get_entry(store, agent_id, full_key)
            if entry is None or (only_if is not None and not only_if(entry)):
                return None
            return remove_entry(store, agent_id, full_key)

        removed = update_store(store_path, mutate, timeout=timeout)
        if removed is None:
            return False, None
        path = _transcript_of(sessions_dir, removed)
        if path is None:
            return True, None
        try:
            return True, _rename_aside(path)
        except FileNotFoundError:
            return True, None


def archive_session(
    paths: StatePaths, agent_id: str, full_key: str, *, timeout: float | None = None
) -> Path | None:
    """Remove a session from its agent's store and rename its transcript aside. Returns the
    archived transcript's new path, or None when there was no entry or no transcript. Used by
    sweep and by `spawn --cleanup delete`."""
    return _archive(paths, agent_id, full_key, timeout=timeout)[1]


def sweep(
    ctx: Context, *, dry_run: bool, lock_timeout: float | None = None, quiet: bool = False
) -> SweepResult:
    """Archive every expired spawned sub-agent: `{"archived": [display keys]}`. `dry_run` names
    them and changes nothing. A session that cannot be archived now (a busy lock) is skipped
    with a warning and is due again on the next sweep."""
    now = now_ms()
    due = expired_subagents(ctx, now, quiet=quiet)
    if dry_run:
        return {"archived": [ctx.display(key) for _, key in due]}
    cutoff = now - ctx.config.archive_after_minutes * 60_000

    def still_due(entry: Entry) -> bool:
        # Re-checked under the lock: a run may have touched the child since the scan.
        return _older_than(entry, cutoff)

    archived: list[str] = []
    for agent_id, key in due:
        try:
            removed, _ = _archive(ctx.paths, agent_id, key, only_if=still_due, timeout=lock_timeout)
        except SessiontoolError as exc:
            if not quiet:
                diag.warn(f"could not archive {key}: {exc.message}")
            continue
        if removed:
            archived.append(ctx.display(key))
    return {"archived": archived}


def _read_stamp(path: Path) -> int | None:
    try:
        with open(path, "rb") as fh:
            return int(fh.read(64).strip())
    except (OSError, ValueError):
        return None


def maybe_sweep(ctx: Context) -> None:
    """The opportunistic sweep of `send` and `spawn`: at most once a minute (a stamp file holds
    the clock's ms of the last one), and it never fails the command that calls it. Two callers
    racing past the stamp both sweep; the store lock and the re-check make that harmless."""
    try:
        if ctx.config.archive_after_minutes <= 0:
            return
        stamp = ctx.paths.sweep_stamp
        now = now_ms()
        last = _read_stamp(stamp)
        # A stamp from the future (a pinned or stepped clock) is ignored rather than obeyed.
        if last is not None and 0 <= now - last < SWEEP_INTERVAL_MS:
            return
        ensure_dir(stamp.parent)
        atomic_write(stamp, f"{now}\n".encode())
        sweep(ctx, dry_run=False, lock_timeout=OPPORTUNISTIC_LOCK_TIMEOUT, quiet=True)
    except (SessiontoolError, OSError):
        return
