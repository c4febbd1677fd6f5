"""Run records and the detached workers behind them.

A run is a JSON record under `<state>/sessiontool/runs/` plus one background worker process
that holds an flock on `<runId>.lock` for its whole life. The foreground never runs an agent: it
writes the record, starts the worker and polls the record, which is how `send` emulates
OpenClaw's wait and timeout. Liveness is decided by the flock, never by a PID alone.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sessiontool.clock import now_ms
from sessiontool.errors import CorruptStateError, NotFoundError, StorageError
from sessiontool.stores.jsonio import atomic_write, to_utf8
from sessiontool.stores.paths import StatePaths, ensure_dir, is_plain_name

FINISHED_STATUSES = frozenset({"ok", "error", "timeout", "aborted", "lost"})
ACTIVE_STATUSES = frozenset({"queued", "running"})
LOST_GRACE_MS = 30_000

Record = dict[str, Any]


def new_run_id() -> str:
    return str(uuid.uuid4())


def is_finished(rec: Record) -> bool:
    return rec.get("status") in FINISHED_STATUSES


# -- records ---------------------------------------------------------------------------------


def _load(path: Path) -> Record:
    with open(path, "rb") as fh:
        data = json.loads(fh.read())
    if not isinstance(data, dict):
        raise ValueError("not an object")
    return data


def read_record(paths: StatePaths, run_id: str) -> Record:
    if not is_plain_name(run_id):
        raise NotFoundError(f"Run not found: {run_id}")
    path = paths.run_record(run_id)
    try:
        return _load(path)
    except FileNotFoundError:
        raise NotFoundError(
            f"Run not found: {run_id}", hint="list runs with: sessiontool runs"
        ) from None
    except (OSError, ValueError) as exc:
        raise CorruptStateError(f"unreadable run record {path}: {exc}") from exc


def iter_records(paths: StatePaths) -> Iterator[Record]:
    """Every readable record (unreadable ones are skipped; doctor reports them)."""
    try:
        names = os.listdir(paths.runs_dir)
    except OSError:
        return
    for name in names:
        if not name.endswith(".json"):
            continue
        try:
            yield _load(paths.runs_dir / name)
        except (OSError, ValueError):
            continue


def _write(paths: StatePaths, rec: Record) -> None:
    ensure_dir(paths.runs_dir)
    atomic_write(paths.run_record(rec["runId"]), to_utf8(rec))


@contextmanager
def _records_lock(paths: StatePaths) -> Iterator[None]:
    """Serialises read-modify-write of run records between a worker, `abort` and reconcilers."""
    ensure_dir(paths.runs_dir)
    fd = os.open(paths.runs_dir / ".records.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def update_record(paths: StatePaths, run_id: str, mutate: Callable[[Record], None]) -> Record:
    with _records_lock(paths):
        rec = read_record(paths, run_id)
        mutate(rec)
        _write(paths, rec)
        return rec


_last_created_ms = 0


def _creation_ms() -> int:
    """now_ms(), strictly increasing within this process. A lane orders runs by createdAt, then
    by the (random) runId, so two runs one process creates in the same millisecond would
    otherwise run in a random order, not in the order they were sent."""
    global _last_created_ms
    ms = max(now_ms(), _last_created_ms + 1)
    _last_created_ms = ms
    return ms


def create_record(paths: StatePaths, **fields: Any) -> Record:
    rec: Record = {
        "runId": fields.pop("runId", None) or new_run_id(),
        "kind": fields.pop("kind"),
        "status": "queued",
        "createdAt": _creation_ms(),
    }
    rec.update({k: v for k, v in fields.items() if v is not None})
    _write(paths, rec)
    try:
        add_lane_marker(paths, rec)
    except (OSError, StorageError) as exc:
        # A run outside its lane would run beside the session's other runs: take it back.
        _unlink(paths.run_record(rec["runId"]))
        if isinstance(exc, StorageError):
            raise
        raise StorageError(
            f"cannot create lane marker for run {rec['runId']}: {exc.strerror or exc}"
        ) from exc
    return rec


def abandon(paths: StatePaths, rec: Record, error: str) -> None:
    """A run whose worker could not be started: end it as `error` and leave its lane, so it
    neither stays queued nor holds up the session's next runs for the 30 s grace."""
    remove_lane_marker(paths, rec)

    def mark(r: Record) -> None:
        if not is_finished(r):
            r["status"] = "error"
            r["error"] = error
            r["endedAt"] = now_ms()

    try:
        update_record(paths, rec["runId"], mark)
    except (OSError, NotFoundError, CorruptStateError, StorageError):
        _unlink(paths.run_record(rec["runId"]))


# -- lanes -----------------------------------------------------------------------------------


def lane_dir(paths: StatePaths, session_key: str) -> Path:
    import hashlib

    return (
        paths.lanes_dir
        / hashlib.sha256(session_key.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    )


def _marker_name(rec: Record) -> str:
    return f"{int(rec['createdAt']):015d}-{rec['runId']}"


def add_lane_marker(paths: StatePaths, rec: Record) -> None:
    d = ensure_dir(lane_dir(paths, rec["sessionKey"]))
    fd = os.open(d / _marker_name(rec), os.O_WRONLY | os.O_CREAT, 0o600)
    os.close(fd)


def remove_lane_marker(paths: StatePaths, rec: Record) -> None:
    try:
        os.unlink(lane_dir(paths, rec["sessionKey"]) / _marker_name(rec))
    except OSError:
        pass


def lane_head(paths: StatePaths, rec: Record) -> str | None:
    """The runId at the head of this run's lane, after clearing finished runs off the front.
    Lanes order runs by createdAt, then runId: a session's runs execute one at a time."""
    d = lane_dir(paths, rec["sessionKey"])
    try:
        names = sorted(os.listdir(d))
    except FileNotFoundError:
        return None
    for name in names:
        run_id = name.split("-", 1)[1] if "-" in name else name
        if run_id == rec["runId"]:
            return run_id
        try:
            other = read_record(paths, run_id)
        except (NotFoundError, CorruptStateError):
            _unlink(d / name)
            continue
        other = reconcile(paths, other)
        if is_finished(other):
            _unlink(d / name)
            continue
        return run_id
    return None


def _unlink(p: Path) -> None:
    try:
        os.unlink(p)
    except OSError:
        pass


# -- liveness --------------------------------------------------------------------------------


def lock_held(paths: StatePaths, run_id: str) -> bool:
    """Whether a live process holds the run's flock (the worker, for its whole life)."""
    try:
        fd = os.open(paths.run_lock(run_id), os.O_RDWR)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return True
        raise
    finally:
        os.close(fd)
    return False


def is_lost(paths: StatePaths, rec: Record, now: int | None = None) -> bool:
    if is_finished(rec):
        return False
    if rec.get("workerStartedAt"):
        return not lock_held(paths, rec["runId"])
    created = rec.get("createdAt") or 0
    return (now if now is not None else now_ms()) - int(created) > LOST_GRACE_MS


def reconcile(paths: StatePaths, rec: Record) -> Record:
    """Turn a run whose worker died into `lost`: record the error, flag the session's
    `abortedLastRun`, remove the dead worker's lock file and (for a spawn) start its announce."""
    if not is_lost(paths, rec):
        return rec
    marked: dict[str, bool] = {"now": False}

    def mark(r: Record) -> None:
        if is_finished(r) or not is_lost(paths, r):
            return
        r["status"] = "lost"
        r["error"] = "worker died"
        r["endedAt"] = now_ms()
        marked["now"] = True

    try:
        rec = update_record(paths, rec["runId"], mark)
    except (NotFoundError, CorruptStateError, StorageError):
        return rec
    if not marked["now"]:
        return rec
    _unlink(paths.run_lock(rec["runId"]))
    remove_lane_marker(paths, rec)
    try:
        _flag_aborted(paths, rec)
    except Exception:  # noqa: BLE001 - best effort; the record already says lost
        pass
    announce_for = rec["runId"] if rec.get("kind") == "spawn" else None
    if rec.get("kind") == "step" and rec.get("step") == "announce" and rec.get("parentRunId"):
        # The worker died inside a spawn's announce step: the announce is still owed.
        try:
            parent = read_record(paths, str(rec["parentRunId"]))
        except (NotFoundError, CorruptStateError):
            parent = {}
        if parent.get("kind") == "spawn" and is_finished(parent) and not parent.get("announcedAt"):
            announce_for = parent["runId"]
    if announce_for is not None:
        try:
            start_worker(paths, announce_for, mode="announce")
        except Exception:  # noqa: BLE001
            pass
    return rec


def _flag_aborted(paths: StatePaths, rec: Record) -> None:
    from sessiontool.stores import keys
    from sessiontool.stores import sessions_json as store

    key = rec["sessionKey"]
    agent_id = rec.get("agentId") or keys.agent_of(key)

    def mutate(s: store.Store) -> None:
        entry = store.get_entry(s, agent_id, key)
        if entry is not None:
            entry = dict(entry)
            entry["abortedLastRun"] = True
            store.set_entry(s, agent_id, key, entry)

    store.update_store(paths.store(agent_id), mutate)


# -- workers ---------------------------------------------------------------------------------


def start_worker(
    paths: StatePaths, run_id: str, *, mode: str = "run", config_path: str | None = None
) -> None:
    """Start the detached worker: its own session, stdin /dev/null, stdout and stderr to the run
    log, no inherited descriptors, and not our child (double fork), so `$(sessiontool send ...)`
    and cron return at once and a long-lived caller collects no zombies."""
    ensure_dir(paths.runs_dir)
    log_path = paths.run_log(run_id)
    env = dict(os.environ)
    env["SESSIONTOOL_WORKER"] = "1"
    env["SESSIONTOOL_STATE_DIR"] = str(paths.root)
    if config_path:
        env["SESSIONTOOL_CONFIG"] = str(Path(config_path).expanduser().absolute())
    argv = [sys.executable, "-m", "sessiontool.runs.worker", str(paths.root), run_id, mode]
    try:
        log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    except OSError as exc:
        raise StorageError(
            f"cannot start the worker: cannot open {log_path}: {exc.strerror or exc}"
        ) from exc
    try:
        try:
            pid = os.fork()
        except OSError as exc:
            raise StorageError(f"cannot start the worker: {exc.strerror or exc}") from exc
        if pid == 0:  # pragma: no cover - runs in the child
            try:
                os.setsid()
                if os.fork() != 0:
                    os._exit(0)
                null = os.open(os.devnull, os.O_RDONLY)
                os.dup2(null, 0)
                os.dup2(log_fd, 1)
                os.dup2(log_fd, 2)
                os.closerange(3, 65536)
                os.execve(sys.executable, argv, env)
            finally:
                os._exit(127)
        os.waitpid(pid, 0)
    finally:
        os.close(log_fd)


def wait_for(paths: StatePaths, run_id: str, timeout: float | None) -> Record:
    """Poll until the run finishes or `timeout` seconds pass; reconciles a dead worker."""
    deadline = None if timeout is None else time.monotonic() + timeout
    delay = 0.02
    while True:
        rec = reconcile(paths, read_record(paths, run_id))
        if is_finished(rec):
            return rec
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                return rec
            time.sleep(min(delay, left))
        else:
            time.sleep(delay)
        delay = min(delay * 1.5, 0.2)


def abort(paths: StatePaths, run_id: str) -> Record:
    """Mark the run aborted and kill what is running it: the agent's process group when there
    is one, else signal the worker, which stops its in-process runner."""
    import signal

    rec = reconcile(paths, read_record(paths, run_id))
    if is_finished(rec):
        return rec

    def mark(r: Record) -> None:
        if is_finished(r):
            return
        r["status"] = "aborted"
        r["error"] = "aborted by user"
        r["endedAt"] = now_ms()

    rec = update_record(paths, run_id, mark)
    agent_pid = rec.get("agentPid")
    if isinstance(agent_pid, int) and agent_pid > 0:
        try:
            os.killpg(agent_pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    worker_pid = rec.get("pid")
    if isinstance(worker_pid, int) and worker_pid > 0 and lock_held(paths, run_id):
        try:
            os.kill(worker_pid, signal.SIGUSR1)
        except (ProcessLookupError, PermissionError):
            pass
    return rec
