"""Bringing a run record up to date with reality, which only locks tell (records.py): a started
run whose worker died is ended now, a queued run gets a live lane worker, a finished run whose
follow-up stalled gets a follow-up worker. Every command that reads runs (`wait`, `runs`,
`abort`, a send's wait) reconciles what it reads, so a killed worker costs a moment, not a run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sessiontool.clock import now_ms
from sessiontool.errors import CorruptStateError, NotFoundError, StorageError
from sessiontool.runs import lanes, recover, steps
from sessiontool.runs.records import (
    is_finished,
    lock_held,
    notify,
    read_record,
    update_record,
)
from sessiontool.runs.spawnproc import start_detached
from sessiontool.runs.writer import writer_of
from sessiontool.state import flock
from sessiontool.state.paths import StatePaths, is_plain_name

if TYPE_CHECKING:
    from sessiontool.runs.record_types import RunRecord

# A follow-up step attempted this recently (a delivery that failed) is not resumed again yet.
RETRY_MS = 5_000


def reconcile(
    paths: StatePaths, rec: RunRecord, *, resume: bool = True, waiting: bool = False
) -> RunRecord:
    """Bring a record up to date with reality: a started run whose worker died is `lost` now
    (and its session flagged, its follow-up resumed); a queued run gets a live lane worker; a
    finished run whose follow-up stalled is resumed in the background.

    A dead worker's run whose end cannot be written (a full disk) stays `running` on disk;
    `waiting` (a waiter) then raises that failure instead of waiting for a run nobody runs."""
    status = rec.get("status")
    if status == "queued":
        if resume:
            _ensure_lane(paths, rec)
        return rec
    if status == "running":
        if lock_held(paths, rec["runId"]):
            return rec
        marked = {"now": False, "recovered": False}

        def mark(r: RunRecord) -> bool:
            if r.get("status") != "running" or lock_held(paths, r["runId"]):
                return False
            # Ended with its reply when that is on disk (it died after writing it), else lost.
            marked["recovered"] = recover.end_dead(paths, r)

            steps.init_follow_up(r)
            marked["now"] = True
            return True

        try:
            rec = update_record(paths, rec["runId"], mark)
        except StorageError as exc:
            if waiting:
                return _unrecorded_end(paths, rec, exc)
            return rec
        except (NotFoundError, CorruptStateError):
            return rec
        if marked["now"]:
            _after_dead_end(paths, rec, marked["recovered"], resume=resume)
    if resume and is_finished(rec):
        _clear_stale_lock(paths, rec["runId"])
    if resume and is_finished(rec) and ("followUp" in rec or status == "running"):
        try:
            maybe_resume(paths, rec)
            parent = rec.get("parentRunId") if status == "running" else None
            if isinstance(parent, str) and is_plain_name(parent):
                # A step that ended without its worker advancing the parent (it died).
                maybe_resume(paths, read_record(paths, parent))
        except Exception:  # noqa: BLE001 - a reconciler never fails on someone else's run
            pass
    return rec


def _unrecorded_end(paths: StatePaths, rec: RunRecord, exc: StorageError) -> RunRecord:
    """For a waiter: a dead worker's run whose end cannot be recorded (a full disk). When its
    turn happened (its reply is in the transcript), the end as the reconciler will record it
    once there is space, to give (the reply, exit 0) with a warning, not "stopped" (a cron
    job retrying on exit 1 would make the turn twice); the record on disk is not touched.
    Else that failure, at once."""
    from sessiontool import diag

    reply = recover.reply_on_disk(paths, rec)
    if reply is None:
        raise StorageError(
            f"run {rec['runId']} stopped: its worker is gone and its end cannot be "
            f"recorded: {exc.message}",
            hint="free some space; the next command records its end (lost, or ok with "
            "the reply its transcript holds); it is never run again",
        ) from exc
    ended: RunRecord = dict(rec)  # type: ignore[assignment]
    recover.end_from(ended, reply)
    diag.warn(
        f"run {rec['runId']}: its reply is in the transcript, but its record could not be "
        f"written ({exc.message}); the next command once there is space records its end"
    )
    return ended


def _after_dead_end(paths: StatePaths, rec: RunRecord, recovered: bool, *, resume: bool) -> None:
    """What follows ending a dead worker's run: its waiters woken, its lock file gone (and its
    lane marker, unless a follow-up waits), its store updated (or its session flagged), the
    lane given a worker."""
    notify(paths, rec["runId"])
    # Only while nobody holds it: a lane worker may have taken it since (steps.try_lock).
    flock.remove_if_free(paths.run_lock(rec["runId"]))
    if not steps.pending(rec):
        # With a follow-up to do (a delivery, an announce), the marker stays: the lane's worker
        # does it when it passes the marker, before the session's next run, as it would have.
        # A follow-up worker started beside that run would write its mirror into its turn.
        lanes.remove_marker(paths, rec)
    try:
        recover.after_end(paths, rec, recovered)
    except Exception:  # noqa: BLE001 - best effort; the record already says its end
        pass
    writer_of(rec).clear_stale_locks(paths, rec)
    if resume:
        _ensure_lane(paths, rec)


def _clear_stale_lock(paths: StatePaths, run_id: str) -> None:
    """Remove the lock file a worker killed after the run's end left behind (nobody holds it)."""
    flock.remove_if_free(paths.run_lock(run_id))


def _ensure_lane(paths: StatePaths, rec: RunRecord) -> None:
    try:
        lanes.ensure_worker(paths, lanes.lane_id(rec["sessionKey"]))
    except (OSError, StorageError):
        pass


def _announce_exhausted(rec: RunRecord) -> bool:
    from sessiontool.runs import gateway_announce

    return gateway_announce.exhausted(rec)


def maybe_resume(paths: StatePaths, rec: RunRecord) -> None:
    """Start a follow-up worker for a finished run whose follow-up stalled: nobody holds its
    lock, no agent step of it is queued or running, and no attempt was made in the last few
    seconds (a delivery that cannot be written is retried, not hammered)."""
    if not steps.pending(rec) or lock_held(paths, rec["runId"]):
        return
    fu = rec["followUp"]
    name = str(fu.get("next"))
    if steps.is_agent_step(name):
        try:
            step = read_record(paths, steps.step_id(rec["runId"], name))
        except NotFoundError:
            step = None
        except CorruptStateError:
            return
        if step is not None and not is_finished(step):
            reconcile(paths, step)  # lost now, or given a lane worker
            return
    attempt = fu.get("attemptAt")
    if isinstance(attempt, int) and 0 <= now_ms() - attempt < RETRY_MS:
        return
    if name.endswith("-announce") and _announce_exhausted(rec):
        return  # its failed turns are not repeated on their own: `deliveries retry` does
    start_detached(paths, ["follow", rec["runId"]])
