"""How a background worker is started (runs/spawnproc.py): forked from the caller without exec
while that is safe, a fresh program while the caller has an SQLite database open.

The hazard, found with the real OpenClaw 2026.9.6 gateway: a worker forked while its caller
read OpenClaw's database inherited SQLite's bookkeeping of that database (its descriptors,
locks it no longer held), reused the descriptor numbers, then read the database again: it
closed its own lane lock (fd 3) and deleted the live gateway's WAL, after which every reader
failed with "disk I/O error" until the gateway restarted. Here a WAL database is held open by
another process, as the gateway holds its own, and the caller reads it when it starts a worker.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from sessiontool.state import flock

from .runhelpers import poll, reap

HOLDER = """
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("PRAGMA journal_mode=wal")
c.execute("PRAGMA wal_autocheckpoint=0")  # the rows stay in the WAL, as a busy gateway's do
c.execute("CREATE TABLE t(x)")
for i in range(50):
    c.execute("INSERT INTO t VALUES (?)", (i,))
print("ready", flush=True)
time.sleep(120)
"""

# Starts a worker the way a command does, with the lane's lock handed over as fd 3. The body a
# forked worker would run is replaced by what the real one did in the gateway's flow: read the
# database through the open-reader path and close it; it then reports whether its lane lock
# survived. An exec'd worker is a fresh `python -m sessiontool.runs.worker` and never runs it.
CALLER = """
import fcntl, os, sys
from pathlib import Path
from sessiontool.runs import spawnproc
from sessiontool.state import sqlite_conn
from sessiontool.state.paths import StatePaths

db, state, hold = sys.argv[1], Path(sys.argv[2]), sys.argv[3] == "open"
uri = f"file:{db}?mode=ro&readonly_shm=1"

def forked_body(paths, args, lock_fd):
    again = sqlite_conn.connect(uri, uri=True)
    rows = again.execute("SELECT count(*) FROM t").fetchone()[0]
    again.close()
    if hold:
        inherited.execute("SELECT count(*) FROM t").fetchone()
        inherited.execute("COMMIT")
        inherited.close()
    try:
        os.fstat(3)
        lock = "open"
    except OSError:
        lock = "closed"
    (state / "forked.txt").write_text(f"{rows} {lock}")
    return 0

spawnproc._run_here = forked_body
if hold:
    inherited = sqlite_conn.connect(uri, uri=True)
    inherited.execute("BEGIN")
    inherited.execute("SELECT count(*) FROM t").fetchone()
lock = os.open(state / "lane.lock", os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(lock, fcntl.LOCK_EX)  # held by the worker from here until it exits, as a lane's
spawnproc.start_detached(StatePaths(state), ["drain", "0" * 32], lock_fd=lock)
print("started", flush=True)
"""


def _holder(db: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(db)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def _stop(holder: subprocess.Popen[str]) -> None:
    holder.kill()
    holder.wait()
    if holder.stdout is not None:
        holder.stdout.close()


def _caller(db: Path, state: Path, hold: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", CALLER, str(db), str(state), hold],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0 and "started" in proc.stdout, proc.stderr


def _rows(db: Path) -> int:
    with sqlite3.connect(f"file:{db}?mode=ro&readonly_shm=1", uri=True) as c:
        n: int = c.execute("SELECT count(*) FROM t").fetchone()[0]
    return n


def test_a_worker_started_with_a_database_open_leaves_it_and_its_lock_alone(
    tmp_path: Path,
) -> None:
    db, state = tmp_path / "live.sqlite", tmp_path / "state"
    state.mkdir()
    holder = _holder(db)
    try:
        wal = os.stat(f"{db}-wal")
        _caller(db, state, "open")
        # The exec'd worker drains its (empty) lane and exits, releasing the lane lock.
        poll(lambda: not flock.is_held(state / "lane.lock"), message="the worker to exit")
        forked = state / "forked.txt"
        # A forked one reports "50 closed": it read the database, then lost its lane lock.
        assert not forked.exists(), f"forked with SQLite state inherited: {forked.read_text()}"
        assert os.stat(f"{db}-wal").st_ino == wal.st_ino  # the holder's WAL, never deleted
        assert _rows(db) == 50
    finally:
        _stop(holder)
        reap(state)


def test_with_no_database_open_the_worker_is_forked_and_keeps_its_lock(tmp_path: Path) -> None:
    """The other side of the same choice (and proof the script above can see a fork): with
    nothing open the worker is forked without exec, reads the database safely and keeps its
    lane lock."""
    db, state = tmp_path / "live.sqlite", tmp_path / "state"
    state.mkdir()
    holder = _holder(db)
    try:
        _caller(db, state, "closed")
        got = poll(
            lambda: (state / "forked.txt").exists() and (state / "forked.txt").read_text(),
            message="the forked worker's report",
        )
        assert got == "50 open"
        assert _rows(db) == 50
    finally:
        _stop(holder)
        reap(state)


THREADED = """
import os, sys, threading, time, fcntl
from pathlib import Path
from sessiontool.runs import spawnproc
from sessiontool.state.paths import StatePaths

state = Path(sys.argv[1])
stop = threading.Event()
threading.Thread(target=stop.wait, daemon=True).start()  # a caller with threads (the MCP server)

def no_fork():
    raise AssertionError("os.fork called by a caller with threads")

os.fork = no_fork
lock = os.open(state / "lane.lock", os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(lock, fcntl.LOCK_EX)
spawnproc.start_detached(StatePaths(state), ["drain", "0" * 32], lock_fd=lock)
os.close(lock)
print("started", flush=True)
deadline = time.monotonic() + 60
while time.monotonic() < deadline:  # the worker ends; a thread of ours reaps it
    try:
        pid, _ = os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        print("reaped", flush=True)
        break
    time.sleep(0.05)
"""


def test_a_caller_with_threads_starts_the_worker_without_forking_python(
    tmp_path: Path,
) -> None:
    """Where the caller has threads, nothing of Python runs between fork and exec (os.fork is
    never called: subprocess's C fork_exec starts the worker program), the lane lock reaches
    the worker, and the caller reaps the worker once it exits (no zombie left)."""
    state = tmp_path / "state"
    state.mkdir()
    try:
        proc = subprocess.run(
            [sys.executable, "-c", THREADED, str(state)],
            capture_output=True,
            text=True,
            timeout=90,
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.split() == ["started", "reaped"], (proc.stdout, proc.stderr)
        log = (state / "sessiontool" / "runs" / ".worker.log").read_text()
        assert "Traceback" not in log and "error" not in log.lower(), log
    finally:
        reap(state)
