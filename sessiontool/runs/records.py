"""Run records: one JSON file per run under `<state>/sessiontool/runs/`, and the rules that keep
them true.

- A record is created `queued` with a fixed lane position (lanes.py); its lane's one worker runs
  it. Nobody polls: a waiter blocks on the run's FIFO (wait.py), and whoever ends the run wakes
  it after writing the end (`notify`).
- A run ends exactly once. Every change to a record is a read-modify-write under the records
  lock, and the end is decided there: the worker first records the `outcome` it reached, then
  writes the transcript and the store, then publishes `status = outcome`. `abort` decides under
  the same lock, so whichever comes first is the one answer `abort`, `wait`, `runs` and the
  transcript all give.
- Liveness comes from locks, not timers: the worker holds the run's flock (`<runId>.lock`) from
  before `running` until its follow-up is recorded. A `running` record whose lock nobody holds
  is `lost` at once; a `queued` one just waits for its lane's next worker, started on demand.
- A malformed or out-of-range record is skipped (one warning) by listings, is exit 5 when named,
  never blocks a lane, and is reported by doctor and removed by prune.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from sessiontool.clock import now_ms
from sessiontool.errors import CorruptStateError, NotFoundError, StorageError
from sessiontool.runs.schema import FINISHED_STATUSES, RECORD_VERSION, problem
from sessiontool.runs.schema import is_ms as _is_ms
from sessiontool.state import flock
from sessiontool.state.jsonio import atomic_write, to_utf8
from sessiontool.state.paths import StatePaths, is_plain_name
from sessiontool.state.safefs import CLOEXEC, NOFOLLOW

if TYPE_CHECKING:
    from sessiontool.runs.record_types import RunRecord, RunStatus


def new_run_id() -> str:
    return str(uuid.uuid4())


def is_finished(rec: RunRecord) -> bool:
    status = rec.get("status")
    return isinstance(status, str) and status in FINISHED_STATUSES


# -- reading and validating ------------------------------------------------------------------


def _load(path: Path, run_id: str) -> RunRecord:
    fd = os.open(path, os.O_RDONLY | NOFOLLOW | CLOEXEC)
    with os.fdopen(fd, "rb") as fh:
        raw = fh.read()
    try:
        data = json.loads(raw)
    except RecursionError as exc:
        raise ValueError("nested too deeply") from exc
    why = problem(data, run_id)
    if why is not None:
        raise ValueError(why)
    return data  # type: ignore[no-any-return]


def read_record(paths: StatePaths, run_id: str) -> RunRecord:
    if not is_plain_name(run_id):
        raise NotFoundError(f"Run not found: {run_id}")
    path = paths.run_record(run_id)
    try:
        return _load(path, run_id)
    except FileNotFoundError:
        raise NotFoundError(
            f"Run not found: {run_id}", hint="list runs with: sessiontool runs"
        ) from None
    except (OSError, ValueError) as exc:
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise CorruptStateError(
            f"unreadable run record {path}: {detail}",
            hint="`sessiontool doctor` lists it; `sessiontool prune` removes it",
        ) from exc


def record_names(paths: StatePaths) -> list[str]:
    try:
        names = os.listdir(paths.runs_dir)
    except OSError:
        return []
    return [n[:-5] for n in names if n.endswith(".json") and not n.startswith(".")]


def bad_records(paths: StatePaths) -> list[tuple[Path, str]]:
    """(file, why) of every record that cannot be used."""
    out = []
    for run_id in sorted(record_names(paths)):
        path = paths.runs_dir / f"{run_id}.json"
        if not is_plain_name(run_id):
            out.append((path, "not a run id"))
            continue
        try:
            _load(path, run_id)
        except FileNotFoundError:
            continue
        except (OSError, ValueError) as exc:
            out.append((path, str(exc)))
    return out


def iter_records(paths: StatePaths, *, warn: bool = True) -> Iterator[RunRecord]:
    """Every usable record. Malformed ones are skipped with one warning for the lot."""
    bad = 0
    for run_id in record_names(paths):
        if not is_plain_name(run_id):
            bad += 1
            continue
        try:
            yield _load(paths.runs_dir / f"{run_id}.json", run_id)
        except FileNotFoundError:
            continue
        except (OSError, ValueError):
            bad += 1
    if bad and warn:
        from sessiontool import diag

        diag.warn(
            f"skipped {bad} unreadable run record(s); `sessiontool doctor` lists them, "
            "`sessiontool prune` removes them"
        )


# -- writing ---------------------------------------------------------------------------------


def write_record(paths: StatePaths, rec: RunRecord) -> None:
    """Replace the record atomically (temp file, rename): a reader sees the old or the new one,
    never half, and a killed writer leaves the old one. No fsync: a record is ours alone, and
    one a power cut leaves empty is skipped as malformed (doctor, prune), never trusted."""
    atomic_write(paths.run_record(rec["runId"]), to_utf8(rec), durable=False, temp_prefix=".")


@contextmanager
def records_lock(paths: StatePaths) -> Iterator[None]:
    """Serialises read-modify-write of run records between workers, `abort` and reconcilers."""
    with flock.held(paths.runs_dir / ".records.lock", "run records"):
        yield


def update_record(paths: StatePaths, run_id: str, mutate: Callable[[RunRecord], Any]) -> RunRecord:
    """Locked read-modify-write. When `mutate` returns False the record is left unwritten."""
    with records_lock(paths):
        rec = read_record(paths, run_id)
        if mutate(rec) is not False:
            write_record(paths, rec)
        return rec


_last_created_ms = 0


def _creation_ms() -> int:
    global _last_created_ms
    ms = max(now_ms(), _last_created_ms + 1)
    _last_created_ms = ms
    return ms


def create_record(paths: StatePaths, **fields: Any) -> RunRecord:
    """Write a new `queued` record with its lane position and marker; the caller then makes
    sure the lane has a worker (lanes.ensure_worker)."""
    from sessiontool.runs import lanes

    created = _creation_ms()
    if not _is_ms(created):
        from sessiontool.errors import UsageError

        raise UsageError(f"the clock reads {created}, which is not a time in milliseconds")
    rec: RunRecord = {
        "runId": fields.pop("runId", None) or new_run_id(),
        "kind": fields.pop("kind"),
        "status": "queued",
        "createdAt": created,
        "sessionKey": fields.pop("sessionKey"),
        "version": RECORD_VERSION,
    }
    rec.update(cast("RunRecord", {k: v for k, v in fields.items() if v is not None}))
    try:
        lanes.enqueue(paths, rec, lambda r: write_record(paths, r))
    except StorageError:
        _unlink(paths.run_record(rec["runId"]))
        raise
    return rec


def abandon(paths: StatePaths, rec: RunRecord, error: str) -> None:
    """A run whose worker could not be started: end it as `error` and leave its lane."""
    from sessiontool.runs import lanes

    lanes.remove_marker(paths, rec)

    def mark(r: RunRecord) -> bool:
        if is_finished(r):
            return False
        r.update({"status": "error", "outcome": "error", "error": error, "endedAt": now_ms()})
        return True

    try:
        update_record(paths, rec["runId"], mark)
    except (OSError, NotFoundError, CorruptStateError, StorageError):
        _unlink(paths.run_record(rec["runId"]))


def _unlink(p: Path) -> None:
    try:
        os.unlink(p)
    except OSError:
        pass


# -- liveness --------------------------------------------------------------------------------


def lock_held(paths: StatePaths, run_id: str) -> bool:
    """Whether a live process holds the run's flock (its worker, or whoever resumes it)."""
    return flock.is_held(paths.run_lock(run_id))


def record_end(r: RunRecord, status: RunStatus, error: str | None, reply: str | None) -> None:
    """Write a finished run's end into its record, unless its end was already decided (an abort
    that won the race keeps its status): then only the outcome and the reply are added."""
    if not is_finished(r):
        r["status"] = status
        r["endedAt"] = now_ms()
        if error:
            r["error"] = error
    r["outcome"] = r["status"]
    reply = reply if status == "ok" else (reply or None)
    if reply is not None:
        r["reply"] = reply


def is_lost(paths: StatePaths, rec: RunRecord, now: int | None = None) -> bool:
    """A started run whose lock nobody holds. (`now` is accepted for old callers.)"""
    return rec.get("status") == "running" and not lock_held(paths, rec["runId"])


def lost_fields(rec: RunRecord) -> RunRecord:
    """The end of a run whose worker died: its decided outcome when that was an abort (a
    partial record, for `update`)."""
    if rec.get("outcome") == "aborted":
        return cast(
            "RunRecord", {"status": "aborted", "error": rec.get("error") or "aborted by user"}
        )
    return cast("RunRecord", {"status": "lost", "outcome": "lost", "error": "worker died"})


# -- the end, told -----------------------------------------------------------------------------


def fifo_path(paths: StatePaths, run_id: str) -> Path:
    """The run's FIFO, on which its waiters sleep (wait.py)."""
    return paths.run_lock(run_id).with_suffix(".fifo")


def notify(paths: StatePaths, run_id: str) -> None:
    """Wake every waiter of the run (call after its end is in the record): open and close the
    FIFO's write end, and every reader wakes with POLLHUP."""
    path = fifo_path(paths, run_id)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | NOFOLLOW | CLOEXEC)
    except OSError:
        return  # no FIFO or no reader: nobody is waiting
    os.close(fd)
