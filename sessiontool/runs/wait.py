"""Waiting for a run without polling.

A waiter makes the run's FIFO (`runs/<runId>.fifo`), opens its read end without blocking and
then reads the record: a run already over is returned at once. Otherwise it sleeps in poll() on
the FIFO. Whoever ends the run (its worker, `abort`, a reconciler marking it lost) writes the
record first and then opens and closes the FIFO's write end (records.notify): every reader
wakes with POLLHUP within microseconds. The sleep is cut every half second to reconcile (a
worker killed mid-run cannot say goodbye), which costs a record read, not a spin.
"""

from __future__ import annotations

import errno
import os
import select
import time
from pathlib import Path
from typing import TYPE_CHECKING

from sessiontool.runs import records
from sessiontool.runs.reconcile import reconcile
from sessiontool.runs.records import fifo_path
from sessiontool.state.paths import StatePaths
from sessiontool.state.safefs import CLOEXEC, NOFOLLOW

if TYPE_CHECKING:
    from sessiontool.runs.record_types import RunRecord

CHECK_SECONDS = 0.5


def _open(path: Path) -> int | None:
    try:
        os.mkfifo(path, 0o600)
    except FileExistsError:
        pass
    except OSError:
        return None
    try:
        return os.open(path, os.O_RDONLY | os.O_NONBLOCK | NOFOLLOW | CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ELOOP, errno.ENXIO):
            return None
        return None


# The line a worker leaves in a run's log when it withdrew the run (worker.withdraw).
WITHDRAWN = "sessiontool worker: withdrawn: "
# How long a waiter that found its run's record gone waits for that line (a full disk may never
# let it be written: the error then says the record vanished).
REASON_WAIT = 1.0


def withdrawn_reason(paths: StatePaths, run_id: str) -> str | None:
    """Why a run was withdrawn, from its log; None when it was not."""
    try:
        with open(paths.run_log(run_id), "rb") as fh:
            fh.seek(max(0, os.fstat(fh.fileno()).st_size - 8192))
            tail = fh.read().decode("utf-8", "replace")
    except OSError:
        return None
    found = [ln[len(WITHDRAWN) :] for ln in tail.splitlines() if ln.startswith(WITHDRAWN)]
    return found[-1] if found else None


def _read(paths: StatePaths, run_id: str, seen: bool) -> RunRecord:
    """The record; a run its worker withdrew (it could record nothing: a full disk) is the
    failure it was, not "not found"."""
    from sessiontool.errors import NotFoundError, StorageError

    try:
        return records.read_record(paths, run_id)
    except NotFoundError:
        why = withdrawn_reason(paths, run_id)
        if why is None and not seen:
            raise
        # The worker writes the reason just after it removed the record (worker.withdraw).
        until = time.monotonic() + REASON_WAIT
        while why is None and time.monotonic() < until:
            time.sleep(0.02)
            why = withdrawn_reason(paths, run_id)
        why = why or "its record was removed while it was waited for (a full disk, or prune)"
        raise StorageError(
            f"run {run_id} could not be started and was withdrawn: {why}",
            hint="free some space and send again",
        ) from None


def wait_for(
    paths: StatePaths, run_id: str, timeout: float | None, *, submitted: bool = False
) -> RunRecord:
    """The record once the run is over, or as it is when `timeout` seconds have passed.
    `submitted`: the caller wrote the record itself just before (a send waiting for its own
    run), so a record that is gone at the first look was withdrawn by its worker, which may
    have done so before this process looked at all; it is never "not found"."""
    deadline = None if timeout is None else time.monotonic() + timeout
    path = fifo_path(paths, run_id)
    fd = _open(path)
    rec: RunRecord | None = None
    try:
        while True:
            seen = submitted or rec is not None
            rec = reconcile(paths, _read(paths, run_id, seen), waiting=True)
            if records.is_finished(rec):
                return rec
            wait = CHECK_SECONDS
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return rec
                wait = min(wait, left)
            if fd is None:
                time.sleep(min(wait, 0.05))
                fd = _open(path)
                continue
            poller = select.poll()
            poller.register(fd, select.POLLIN | select.POLLHUP)
            if poller.poll(int(wait * 1000) + 1):
                # Woken: read the record again (first); a fresh descriptor for a later wait.
                rec = reconcile(paths, _read(paths, run_id, rec is not None), waiting=True)
                if records.is_finished(rec):
                    return rec
                os.close(fd)
                fd = _open(path)
    finally:
        if fd is not None:
            os.close(fd)
        if rec is not None and records.is_finished(rec):
            try:
                os.unlink(path)
            except OSError:
                pass


def wait_all(paths: StatePaths, run_ids: list[str], timeout: float | None) -> list[RunRecord]:
    """Each run's record once it is over (in the order given), or as it is when `timeout`
    seconds (one deadline for all of them) have passed."""
    deadline = None if timeout is None else time.monotonic() + timeout
    out = []
    for run_id in run_ids:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        out.append(wait_for(paths, run_id, left))
    return out


# Worse first: a run that failed, a wait that gave up, then ok (pueue's `wait` reports the same).
_SEVERITY = {0: 0, 124: 1}


def worst_exit(codes: list[int]) -> int:
    """The exit status of waiting on several runs: the worst of theirs."""
    return max(codes, key=lambda c: _SEVERITY.get(c, 2), default=0)
