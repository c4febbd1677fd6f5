"""The background worker: one per lane (session) while the lane has queued runs.

It holds the lane's worker lock, takes the lane's runs one at a time in queue order, runs each
(run_one: its turn over the files, execute.py, or through OpenClaw's gateway, gateway_run.py),
advances its follow-up (steps.py), and exits once the lane is empty.
A `follow` worker only resumes one finished run's follow-up.

Started by lanes.ensure_worker (forked from the caller, with the lane lock already held), or as
`python -m sessiontool.runs.worker STATE_DIR lane LANE_ID [--lock-fd N]` /
`python -m sessiontool.runs.worker STATE_DIR follow RUN_ID`.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from sessiontool.clock import now_ms
from sessiontool.errors import CorruptStateError, NotFoundError, SessiontoolError
from sessiontool.runs import lanes, records, steps
from sessiontool.runs.turn import WorkerState, on_abort_signal
from sessiontool.runs.writer import writer_of
from sessiontool.state import flock
from sessiontool.state.paths import StatePaths
from sessiontool.state.safefs import NOFOLLOW

if TYPE_CHECKING:
    from sessiontool.runs.record_types import RunRecord


# -- the run log -----------------------------------------------------------------------------


def log_to(path: Path) -> None:
    """Send this process's stdout and stderr (and its agents') to `path`."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | NOFOLLOW, 0o600)
    except OSError:
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


class _LogStream:
    """A worker's stdout or stderr: its log, on the state dir's disk. When that disk is full a
    line written there is lost, never the handling of the failure it reports (a raised write
    in `fail` left the run queued to be run hours later by whichever command came next)."""

    def __init__(self, fd: int) -> None:
        import io

        self._stream = io.TextIOWrapper(
            io.FileIO(fd, "w", closefd=False),
            encoding="utf-8",
            errors="replace",
            write_through=True,
        )

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except (OSError, ValueError):
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except (OSError, ValueError):
            pass

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)


def _log_streams() -> None:
    """stdout and stderr as log streams whose writes never raise (see _LogStream)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    sys.stdout = _LogStream(1)
    sys.stderr = _LogStream(2)


# -- draining a lane -------------------------------------------------------------------------


def next_marker(d: Path) -> tuple[str, str] | None:
    """(marker name, runId) at the head of the lane; malformed names are dropped."""
    for name in lanes.markers(d):
        parsed = lanes.parse_marker(name)
        if parsed is None:
            sys.stderr.write(f"sessiontool worker: skipping malformed lane marker {name!r}\n")
            _unlink(d / name)
            continue
        return name, parsed[1]
    return None


def drain(w: WorkerState, lane: str, lock_fd: int | None) -> int:
    """Run the lane's queued runs one by one until it is empty."""
    d = lanes.lane_path(w.paths, lane)
    if lock_fd is None:
        lock_fd = flock.open_lock_file(d / ".worker")
        if not flock.try_flock(lock_fd):
            return 0  # the lane has its worker
    while True:
        head = next_marker(d)
        if head is None:
            # Let go, then look once more: a run queued just before we let go found the lock
            # held and started nobody, so it is ours to run (or a new worker's).
            flock.unlock(lock_fd)
            if next_marker(d) is None or not flock.try_flock(lock_fd):
                os.close(lock_fd)
                return 0
            continue
        name, run_id = head
        try:
            rec = records.read_record(w.paths, run_id)
        except (NotFoundError, CorruptStateError) as exc:
            sys.stderr.write(f"sessiontool worker: dropping lane marker {name}: {exc}\n")
            _unlink(d / name)
            continue
        try:
            run_one(w, rec)
        except Exception as exc:  # noqa: BLE001 - one bad run must not stop the lane
            from sessiontool.errors import describe

            if not fail(w.paths, run_id, describe(exc)) and not withdraw(
                w.paths, run_id, describe(exc)
            ):
                # Nothing can be recorded or removed (a read-only disk): the run stays queued
                # for the next worker, and this one stops instead of spinning.
                os.close(lock_fd)
                return 1
        _unlink(d / name)


def run_one(w: WorkerState, rec: RunRecord) -> None:
    """Run one record (if still queued) and advance what follows it, holding its run lock."""
    run_id = rec["runId"]
    w.forget_config()
    fd = steps.try_lock(w.paths, run_id, block=True)
    assert fd is not None
    try:
        rec = records.read_record(w.paths, run_id)
        if rec.get("status") == "running":
            # Its worker died mid-run (we hold its lock now): it is lost, at once.
            end_lost(w.paths, rec)
        elif rec.get("status") == "queued":
            log_to(w.paths.run_log(run_id))
            carry_out(w, rec)
        advance(w, run_id)
        parent = records.read_record(w.paths, run_id).get("parentRunId")
    finally:
        steps.release_lock(w.paths, run_id, fd)
    if isinstance(parent, str):
        pfd = steps.try_lock(w.paths, parent, block=True)
        if pfd is not None:
            try:
                advance(w, parent)
            finally:
                steps.release_lock(w.paths, parent, pfd)


def carry_out(w: WorkerState, rec: RunRecord) -> None:
    """The record's turn, where its command chose (the writer named in its record, `via`):
    sessiontool's runner over the files (execute.py) or OpenClaw's gateway (gateway_run.py);
    a compaction (compaction.py) is a files run only: OpenClaw's store compacts in its gateway."""
    if rec.get("kind") == "compact":
        from sessiontool.runs.compaction import run_compact

        run_compact(w, rec)
    elif writer_of(rec).kind == "gateway":
        from sessiontool.runs.gateway_run import execute_run

        execute_run(w, rec)
    else:
        from sessiontool.runs.execute import run_in_files

        run_in_files(w, rec)


def advance(w: WorkerState, run_id: str) -> None:
    try:
        steps.Advancer(w.paths, w.cfg).advance(run_id)
    except SessiontoolError as exc:
        sys.stderr.write(f"sessiontool worker: follow-up of {run_id}: {exc.message}\n")


def end_lost(paths: StatePaths, rec: RunRecord) -> None:
    """A `running` run whose worker died (we hold its lock now): ended with its reply when
    that is on disk, else lost (runs/recover.py)."""
    from sessiontool.runs import recover

    recovered = {"now": False}

    def mark(r: RunRecord) -> bool:
        if r.get("status") != "running":
            return False
        recovered["now"] = recover.end_dead(paths, r)
        steps.init_follow_up(r)
        return True

    rec = records.update_record(paths, rec["runId"], mark)
    records.notify(paths, rec["runId"])
    try:
        recover.after_end(paths, rec, recovered["now"])
    except SessiontoolError:
        pass


def fail(paths: StatePaths, run_id: str, problem: str) -> bool:
    """A bug or an unwritable disk inside a run: record it as an error if we can. False when
    the run is still unfinished afterwards."""
    sys.stderr.write(f"sessiontool worker: {problem}\n")
    if os.environ.get("SESSIONTOOL_DEBUG") == "1":
        import traceback

        traceback.print_exc()

    def mark(r: RunRecord) -> bool:
        if records.is_finished(r):
            return False
        r.update({"status": "error", "outcome": "error", "error": problem, "endedAt": now_ms()})
        steps.init_follow_up(r)
        return True

    try:
        rec = records.update_record(paths, run_id, mark)
    except Exception:  # noqa: BLE001
        return False
    records.notify(paths, run_id)
    return records.is_finished(rec)


def withdraw(paths: StatePaths, run_id: str, problem: str) -> bool:
    """A run that never started and whose error cannot be recorded (a full disk): remove its
    record (an unlink needs no space) rather than leave it queued to run at some later time
    nobody asked for. The reason goes to its log, which its waiter reads (wait.wait_for).
    False when the record could not be removed (a read-only disk)."""
    from sessiontool.runs.wait import WITHDRAWN

    try:
        with records.records_lock(paths):
            if records.read_record(paths, run_id).get("status") != "queued":
                return False
            os.unlink(paths.run_record(run_id))
    except (OSError, SessiontoolError):
        return False
    # The reason after the unlink: on a full disk the record's freed block is what lets it be
    # written. A waiter that finds the record gone first waits a moment for it (wait._read).
    try:
        fd = os.open(
            paths.run_log(run_id), os.O_WRONLY | os.O_CREAT | os.O_APPEND | NOFOLLOW, 0o600
        )
        try:
            os.write(fd, f"{WITHDRAWN}{problem}\n".encode("utf-8", "replace"))
        finally:
            os.close(fd)
    except OSError:
        pass  # a full disk may refuse even this: the waiter then says the run vanished
    records.notify(paths, run_id)
    return True


def follow(w: WorkerState, run_id: str) -> int:
    """Resume one finished run's follow-up (started by a reconciler)."""
    fd = steps.try_lock(w.paths, run_id, block=False)
    if fd is None:
        return 0
    try:
        log_to(w.paths.run_log(run_id))
        try:
            rec = records.read_record(w.paths, run_id)
        except SessiontoolError:
            return 1
        if not records.is_finished(rec):
            return 0
        try:
            steps.Advancer(w.paths, w.cfg).record(rec, {"attemptAt": now_ms()})
        except SessiontoolError:
            pass
        advance(w, run_id)
    finally:
        steps.release_lock(w.paths, run_id, fd)
    return 0


def _unlink(p: Path) -> None:
    try:
        os.unlink(p)
    except OSError:
        pass


# -- entry points ----------------------------------------------------------------------------


def run_args(paths: StatePaths, args: list[str], lock_fd: int | None) -> int:
    def on_term(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(143)

    signal.signal(signal.SIGUSR1, on_abort_signal)
    signal.signal(signal.SIGTERM, on_term)
    _log_streams()
    w = WorkerState(paths)
    try:
        if len(args) >= 2 and args[0] == "lane" and lanes.is_lane_id(args[1]):
            return drain(w, args[1], lock_fd)
        if len(args) >= 2 and args[0] == "follow":
            return follow(w, args[1])
    except SessiontoolError as exc:
        sys.stderr.write(f"sessiontool worker: {exc.message}\n")
        return 1
    sys.stderr.write(f"sessiontool worker: bad arguments {args!r}\n")
    return 2


def main(argv: list[str] | None = None) -> int:
    from sessiontool.openclaw import install_store_guard

    install_store_guard()  # as in the command that started this worker
    args = list(sys.argv[1:] if argv is None else argv)
    lock_fd: int | None = None
    if "--lock-fd" in args:
        i = args.index("--lock-fd")
        try:
            lock_fd = int(args[i + 1])
        except (IndexError, ValueError):
            lock_fd = None
        del args[i : i + 2]
    if len(args) < 3:
        sys.stderr.write(
            "usage: python -m sessiontool.runs.worker STATE_DIR (lane LANE_ID | follow RUN_ID)\n"
        )
        return 2
    paths = StatePaths(Path(args[0]))
    from sessiontool.openclaw.target import rebind_worker

    rebind_worker(paths)
    return run_args(paths, args[1:], lock_fd)


if __name__ == "__main__":
    sys.exit(main())
