"""Lanes: a session's queue of runs, and the one worker that drains it.

A lane is a directory `<state>/sessiontool/lanes/<sha256(sessionKey)[:32]>/` holding one empty
marker file per queued run, named `<position>-<runId>`. The position is taken from the lane's
counter (`.seq`) under the lane's flock when the record is created, so creation order is
execution order, whatever the clocks say. `.worker` is the lane's worker lock: whoever holds its
flock is the lane's one worker; nobody holds it when the lane has no live worker (the kernel
drops the flock of a killed process), which is how a run queued behind a dead worker is simply
picked up by the next one.

The global cap (`sessiontool.maxConcurrentRuns`) is a set of slot files `runs/.slots/<i>`: a
worker holds one slot's flock while its run's agent runs. A worker that finds every slot taken
sleeps in flock() (woken twice a second to look at the other slots): it never spins.
"""

from __future__ import annotations

import hashlib
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from sessiontool.errors import StorageError
from sessiontool.state import safefs
from sessiontool.state.flock import is_held, open_lock_file, try_flock, wait_flock
from sessiontool.state.paths import StatePaths, ensure_dir
from sessiontool.state.safefs import CLOEXEC, NOFOLLOW

if TYPE_CHECKING:
    from sessiontool.runs.record_types import RunRecord

SEQ_WIDTH = 15
DEFAULT_MAX_CONCURRENT = 8
SLOT_RESCAN_SECONDS = 0.5


# -- where a lane lives ----------------------------------------------------------------------


def lane_id(session_key: str) -> str:
    return hashlib.sha256(session_key.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def lane_path(paths: StatePaths, lane: str) -> Path:
    return paths.lanes_dir / lane


def lane_dir(paths: StatePaths, session_key: str) -> Path:
    return lane_path(paths, lane_id(session_key))


def is_lane_id(name: str) -> bool:
    return len(name) == 32 and all(c in "0123456789abcdef" for c in name)


def marker_name(seq: int, run_id: str) -> str:
    return f"{seq:0{SEQ_WIDTH}d}-{run_id}"


def parse_marker(name: str) -> tuple[int, str] | None:
    """(position, runId) of a marker name, or None for anything else (skipped, never run)."""
    head, sep, run_id = name.partition("-")
    if not sep or not head.isdigit() or len(head) != SEQ_WIDTH or not run_id:
        return None
    if not all(c.isalnum() or c in "-_." for c in run_id) or run_id.startswith("."):
        return None
    return int(head), run_id


# -- queueing --------------------------------------------------------------------------------


def enqueue(paths: StatePaths, rec: RunRecord, write: Callable[[RunRecord], None]) -> None:
    """Give `rec` its lane position, write it (`write(rec)`), then add its marker: all under the
    lane's counter lock, so positions are unique and increasing in the order records appear."""
    d = lane_dir(paths, rec["sessionKey"])
    fresh = not d.exists()
    ensure_dir(d)
    # A link planted at the lane's counter or worker lock is refused (exit 5) before the
    # record exists, as every planted link is: no run is queued that no worker could take.
    safefs.preflight(paths.root, [d], [d / ".seq", d / ".worker"])
    try:
        _enqueue(d, rec, write)
    except BaseException:
        if fresh:  # leave no trace of a lane that never held a run
            for name in (".seq",):
                try:
                    os.unlink(d / name)
                except OSError:
                    pass
            try:
                os.rmdir(d)
            except OSError:
                pass
        raise


def _enqueue(d: Path, rec: RunRecord, write: Callable[[RunRecord], None]) -> None:
    try:
        fd = open_lock_file(d / ".seq")
    except OSError as exc:
        raise StorageError(f"cannot open lane counter in {d}: {exc.strerror or exc}") from exc
    try:
        wait_flock(fd)
        raw = os.pread(fd, 32, 0)
        try:
            last = int(raw.strip() or b"0")
        except ValueError:
            last = 0
        seq = last + 1
        rec["seq"] = seq
        write(rec)
        marker = d / marker_name(seq, rec["runId"])
        try:
            mfd = os.open(marker, os.O_WRONLY | os.O_CREAT | NOFOLLOW | CLOEXEC, 0o600)
        except OSError as exc:
            raise StorageError(
                f"cannot create lane marker for run {rec['runId']}: {exc.strerror or exc}"
            ) from exc
        os.close(mfd)
        data = f"{seq}\n".encode()
        try:
            os.pwrite(fd, data.ljust(max(len(raw), len(data))), 0)
        except OSError:
            os.unlink(marker)
            raise
    except OSError as exc:
        raise StorageError(f"cannot queue run {rec['runId']}: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)


def remove_marker(paths: StatePaths, rec: RunRecord) -> None:
    seq = rec.get("seq")
    key = rec.get("sessionKey")
    if not isinstance(seq, int) or not isinstance(key, str):
        return
    try:
        os.unlink(lane_dir(paths, key) / marker_name(seq, rec["runId"]))
    except OSError:
        pass


def markers(d: Path) -> list[str]:
    try:
        return sorted(n for n in os.listdir(d) if not n.startswith("."))
    except (FileNotFoundError, NotADirectoryError):
        return []


def iter_lanes(paths: StatePaths) -> Iterator[str]:
    try:
        names = os.listdir(paths.lanes_dir)
    except OSError:
        return
    for name in names:
        if is_lane_id(name):
            yield name


# -- the lane's worker -----------------------------------------------------------------------


def worker_alive(paths: StatePaths, lane: str) -> bool:
    return is_held(lane_path(paths, lane) / ".worker")


def ensure_worker(paths: StatePaths, lane: str, config_path: str | None = None) -> bool:
    """Make sure the lane has a live worker: take its worker lock; if that works nobody holds
    it, so start a worker that inherits the held lock (no gap in which a second one starts).
    True when this call started one."""
    d = lane_path(paths, lane)
    try:
        ensure_dir(d)
        fd = open_lock_file(d / ".worker")
    except OSError as exc:
        raise StorageError(f"cannot open the lane lock in {d}: {exc.strerror or exc}") from exc
    try:
        if not try_flock(fd):
            return False
        from sessiontool.runs.spawnproc import start_detached

        start_detached(paths, ["lane", lane], lock_fd=fd, config_path=config_path)
        return True
    finally:
        os.close(fd)


# -- the global cap --------------------------------------------------------------------------


class _Rescan(Exception):
    pass


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    raise _Rescan()


def acquire_slot(paths: StatePaths, limit: int) -> int:
    """Hold one of `limit` run slots; returns its descriptor (close it to release)."""
    d = ensure_dir(paths.runs_dir / ".slots")
    fds = [open_lock_file(d / str(i)) for i in range(max(1, limit))]
    try:
        while True:
            start = os.getpid() % len(fds)  # workers start their search at different slots
            order = [(start + i) % len(fds) for i in range(len(fds))]
            for i in order:
                if try_flock(fds[i]):
                    got = fds.pop(i)
                    return got
            # All taken: sleep in one slot's flock; a timer wakes us to look at the others.
            old = signal.signal(signal.SIGALRM, _on_alarm)
            signal.setitimer(signal.ITIMER_REAL, SLOT_RESCAN_SECONDS)
            try:
                wait_flock(fds[order[0]])
                signal.setitimer(signal.ITIMER_REAL, 0)
                return fds.pop(order[0])
            except _Rescan:
                continue
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, old)
    finally:
        for fd in fds:
            os.close(fd)
