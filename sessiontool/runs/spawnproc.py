"""Starting a detached background worker.

The worker is not our child (double fork), has its own session, stdin from /dev/null and no
inherited descriptors but the lock it is handed, so `$(sessiontool send ...)` and cron return at
once and a long-lived caller collects no zombies. A single-threaded caller forks it without
exec: the modules are already imported, so a worker costs a fork, not a Python start-up
(measured: docs/decisions.md). When the caller has threads (a spinner, the MCP server) or an
SQLite database open (state/sqlite_conn.py), fork without exec is unsafe (another thread may
hold a lock the child then waits on for ever), so the worker is started as `python -m
sessiontool.reports.runworker STATE ARGS... --lock-fd N` with nothing of Python between fork and exec
(subprocess's fork_exec, its own session), and a thread of the caller reaps it.

Either way the worker is a program started by its name (`WORKER`), never imported here: it is
the top of the engine (it runs turns, whose session tools send and spawn, which start workers
through this module), so an import of it here would close a loop through the whole engine. The
forked child looks it up by that name as `python -m` would, and calls the same `run_args`.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

from sessiontool.errors import StorageError
from sessiontool.state.paths import StatePaths, ensure_dir

MAX_FD = 65536
# The worker program: `python -m WORKER STATE ARGS...`, the engine's lane worker (runs/worker.py)
# started from above the engine, which hands the budgets' gate down to its runs' session tools.
WORKER = "sessiontool.reports.runworker"


def worker_log(paths: StatePaths) -> Path:
    return paths.runs_dir / ".worker.log"


def _set_env(paths: StatePaths, config_path: str | None) -> dict[str, str]:
    env = dict(os.environ)
    env["SESSIONTOOL_WORKER"] = "1"
    env["SESSIONTOOL_STATE_DIR"] = str(paths.root)
    if config_path:
        env["SESSIONTOOL_CONFIG"] = str(Path(config_path).expanduser().absolute())
    from sessiontool.openclaw.target import WORKER_ENV, bound_to

    remote = bound_to(paths.root)
    if remote is not None:  # an exec'd worker binds its state dir to the same gateway again
        env[WORKER_ENV] = remote.url
    return env


def start_detached(
    paths: StatePaths,
    args: list[str],
    *,
    lock_fd: int | None = None,
    config_path: str | None = None,
) -> None:
    try:
        ensure_dir(paths.runs_dir)
        from sessiontool.state import safefs

        # A link planted in its place is refused as every other one is (exit 5).
        log_fd = safefs.open_write(worker_log(paths), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    except OSError as exc:
        raise StorageError(f"cannot start the worker: {exc.strerror or exc}") from exc
    env = _set_env(paths, config_path)
    gw = sys.modules.get("sessiontool.openclaw.wsclient")
    in_process = (
        threading.active_count() == 1
        and os.environ.get("SESSIONTOOL_EXEC_WORKER") != "1"
        and not _sqlite_open()
    )
    # A forked worker goes on with this process's gateway connection (wsclient.hand_over); an
    # exec'd one gets no socket.
    try:
        if not in_process:
            if gw is not None:
                gw.close_all()
            _spawn(paths, args, env, log_fd=log_fd, lock_fd=lock_fd)
        else:
            _fork_here(paths, args, env, log_fd=log_fd, lock_fd=lock_fd)
    finally:
        os.close(log_fd)


def _spawn(
    paths: StatePaths, args: list[str], env: dict[str, str], log_fd: int, lock_fd: int | None
) -> None:
    """The worker as a program of its own, for a caller with threads: nothing of Python runs
    between fork and exec (subprocess's C fork_exec: its own session, stdin from /dev/null,
    the log as stdout and stderr, no descriptor but the lock). It is this process's child, so
    a thread reaps it when it exits: a long-lived caller (the MCP server) collects no
    zombies."""
    import subprocess

    argv = [sys.executable, "-m", WORKER, str(paths.root), *args]
    if lock_fd is not None:
        argv += ["--lock-fd", str(lock_fd)]
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log_fd,
            stderr=log_fd,
            pass_fds=(lock_fd,) if lock_fd is not None else (),
            close_fds=True,
            start_new_session=True,
            env=env,
        )
    except OSError as exc:
        raise StorageError(f"cannot start the worker: {exc.strerror or exc}") from exc
    threading.Thread(target=proc.wait, name="sessiontool-reap", daemon=True).start()


def _fork_here(
    paths: StatePaths,
    args: list[str],
    env: dict[str, str],
    log_fd: int,
    lock_fd: int | None,
) -> None:
    """The worker forked from this single-threaded process without exec (double fork: not our
    child), its modules already imported: a fork, not a Python start-up."""
    import gc

    gw = sys.modules.get("sessiontool.openclaw.wsclient")
    handed = gw.hand_over() if gw is not None else None
    # What the caller holds (a big store's parse: a million objects) goes to the collector's
    # permanent generation for the fork: the worker's first collections would otherwise walk
    # all of it, touching every page and so copying the caller's whole heap into the worker.
    # The caller takes it back right after (a long-lived caller must still collect what it
    # drops).
    gc.freeze()
    try:
        pid = os.fork()
    except OSError as exc:
        gc.unfreeze()
        raise StorageError(f"cannot start the worker: {exc.strerror or exc}") from exc
    if pid == 0:  # pragma: no cover - runs in the child
        _child(paths, args, env, (log_fd, lock_fd, handed))
    gc.unfreeze()
    if handed is not None and gw is not None:
        gw.let_go()
    os.waitpid(pid, 0)


def _child(
    paths: StatePaths, args: list[str], env: dict[str, str], fds: tuple[int, int | None, int | None]
) -> None:  # pragma: no cover - runs in the forked child
    log_fd, lock_fd, handed = fds
    code = 127
    try:
        os.setsid()
        if os.fork() != 0:
            os._exit(0)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        keep = 3
        if lock_fd is not None:
            os.dup2(lock_fd, keep)
            os.set_inheritable(keep, True)
        _close_fds(keep + 1 if lock_fd is not None else 3, handed)
        os.environ.clear()
        os.environ.update(env)
        code = _run_here(paths, args, keep if lock_fd is not None else None)
    except BaseException:  # noqa: BLE001
        try:
            import traceback

            traceback.print_exc()
        except BaseException:  # noqa: BLE001
            pass
    finally:
        os._exit(code)


def _close_fds(first: int, handed: int | None) -> None:
    """In the worker: every descriptor from `first` on closed but the handed connection's."""
    if handed is not None:
        os.closerange(first, handed)
        first = handed + 1
    os.closerange(first, MAX_FD)


def _sqlite_open() -> bool:
    """Whether this process has an SQLite database open (state/sqlite_conn.py says why a
    forked worker must then be exec'd). Nothing to ask when no database was ever opened."""
    conns = sys.modules.get("sessiontool.state.sqlite_conn")
    return conns is not None and bool(conns.any_open())


def _run_here(paths: StatePaths, args: list[str], lock_fd: int | None) -> int:
    import io
    import signal

    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), line_buffering=True)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), line_buffering=True)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    import importlib

    from sessiontool import diag

    diag.drain()
    code: int = importlib.import_module(WORKER).run_args(paths, args, lock_fd)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:
        pass
    return code
