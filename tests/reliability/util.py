"""Helpers for the reliability suite: finding and killing a state dir's workers, holding a lock
from another live process the way OpenClaw does, and checking the state dir's invariants."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from tests.helpers import run_json
from tests.runhelpers import alive, read_store, records, sessions_dir

T = TypeVar("T")

FINISHED = {"ok", "error", "timeout", "aborted", "lost"}


def wait_until(pred: Callable[[], T], timeout: float, what: str, poll: float = 0.02) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(poll)


# -- processes -------------------------------------------------------------------------------


def _cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return [p.decode("utf-8", "replace") for p in fh.read().split(b"\0") if p]
    except OSError:
        return []


def _held_files(pid: int) -> list[str]:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return []
    out = []
    for fd in fds:
        try:
            out.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass
    return out


def _stat_field(pid: int, index: int) -> int | None:
    """A numeric field of /proc/<pid>/stat, counted after the command name (1: ppid, 3: sid)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        return int(fields[index])
    except (OSError, IndexError, ValueError):
        return None


def _sid(pid: int) -> int | None:
    return _stat_field(pid, 3)


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid`."""
    return [int(n) for n in os.listdir("/proc") if n.isdigit() and _stat_field(int(n), 1) == pid]


def _detached(pid: int) -> bool:
    """A background worker runs in a session of its own, not the test's (where the foreground
    commands run)."""
    sid = _sid(pid)
    return sid is not None and sid != _sid(os.getpid())


def worker_pids(state: Path, run_id: str | None = None) -> list[int]:
    """Live background workers of this state dir, found in /proc: a lane worker holds its lane's
    `.worker` lock file open, a worker running (or following up) a run holds `<runId>.lock`
    open; an exec'd worker is also known by its argv. With `run_id`: the worker of that run
    (its lane's worker while the run is queued)."""
    tool = str(state / "sessiontool")
    lane = None
    if run_id is not None:
        rec = next((r for r in records(state) if r.get("runId") == run_id), None)
        if rec is not None and isinstance(rec.get("sessionKey"), str):
            lane = hashlib.sha256(rec["sessionKey"].encode()).hexdigest()[:32]
    me = os.getpid()
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        pid = int(name)
        argv = _cmdline(pid)
        is_worker = False
        if (
            argv[1:3]
            in (["-m", "sessiontool.reports.runworker"], ["-m", "sessiontool.runs.worker"])
            and len(argv) >= 5
            and argv[3] == str(state)
            and (run_id is None or run_id in argv[4:] or (lane is not None and lane in argv[4:]))
        ):
            is_worker = True
        if not is_worker and _detached(pid):  # a forked worker runs in its own session
            for target in _held_files(pid):
                if not target.startswith(tool):
                    continue
                if run_id is None:
                    if target.endswith("/.worker") or (
                        target.endswith(".lock")
                        and "/runs/" in target
                        and not target.endswith("/.records.lock")
                    ):
                        is_worker = True
                elif target.endswith(f"/runs/{run_id}.lock") or (
                    lane is not None and target.endswith(f"/lanes/{lane}/.worker")
                ):
                    is_worker = True
        if is_worker and alive(pid):
            out.append(pid)
    return out


def kill_run_processes(state: Path) -> None:
    """SIGKILL every worker of this state dir and every agent process group it started."""
    for pid in worker_pids(state):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    for rec in records(state):
        pid = rec.get("agentPid")
        if isinstance(pid, int) and pid > 0:
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass


def reap_state(state: Path, grace: float = 10.0) -> None:
    """Let this state dir's workers finish, then kill whatever is left: no test leaves one."""
    deadline = time.monotonic() + grace
    while worker_pids(state) and time.monotonic() < deadline:
        time.sleep(0.05)
    kill_run_processes(state)
    wait_until(lambda: not worker_pids(state), 5, "killed workers to exit")


def wait_pause(state: Path, run_id: str, point: str, timeout: float = 20) -> int:
    """Wait until the run's worker reports reaching a SESSIONTOOL_TEST_PAUSE point; its pid."""
    log = state / "sessiontool" / "runs" / f"{run_id}.log"
    pattern = re.compile(rf"sessiontool test pause: {re.escape(point)} pid=(\d+)")

    def find() -> int | None:
        try:
            m = pattern.search(log.read_text(errors="replace"))
        except FileNotFoundError:
            return None
        return int(m.group(1)) if m else None

    return wait_until(find, timeout, f"run {run_id} to pause at {point}")


def kill9(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not alive(pid), 5, f"pid {pid} to die")


def dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


# -- a lock held by another live process (as OpenClaw holds it) ------------------------------

_HOLDER = r"""
import json, os, sys
path, key, stamp = sys.argv[1], sys.argv[2], int(sys.argv[3])
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
os.write(fd, json.dumps({"pid": os.getpid(), key: stamp}).encode())
os.close(fd)
sys.stdout.write("held\n"); sys.stdout.flush()
sys.stdin.readline()
try:
    os.unlink(path)
except FileNotFoundError:
    pass  # broken as stale by someone else
sys.stdout.write("released\n"); sys.stdout.flush()
"""


class HeldLock:
    def __init__(self, proc: subprocess.Popen[str], path: Path) -> None:
        self.proc = proc
        self.path = path
        self.content = path.read_bytes()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def release(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None and self.proc.stdout is not None
            self.proc.stdin.write("\n")
            self.proc.stdin.flush()
            assert self.proc.stdout.readline() == "released\n"
            self.proc.wait(timeout=5)


@contextmanager
def hold_lock(
    path: Path, *, stamp_key: str = "startedAt", stamp_ms: int | None = None
) -> Iterator[HeldLock]:
    """Another live process takes `path` with exclusive create and `{"pid", <stamp_key>}`,
    holds it until `release()` (or the end of the block), then removes it, as OpenClaw does."""
    stamp = int(time.time() * 1000) if stamp_ms is None else stamp_ms
    path.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path), stamp_key, str(stamp)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "held\n", "lock holder failed to take the lock"
        held = HeldLock(proc, path)
        yield held
        held.release()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()


# -- invariants of a state dir ---------------------------------------------------------------


def parse_transcript(path: Path) -> list[dict[str, Any]]:
    """Every line is a JSON object, except at most an unterminated (torn) last line, which
    readers skip. Returns the parsed lines."""
    data = path.read_bytes()
    lines = data.split(b"\n")
    torn = lines.pop()  # b"" when the file ends with "\n"
    out = []
    for n, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except ValueError as exc:
            raise AssertionError(f"{path}: line {n} is not JSON: {raw[:200]!r}") from exc
        assert isinstance(obj, dict), f"{path}: line {n} is not an object"
        out.append(obj)
    if torn.strip():
        try:
            out.append(json.loads(torn))
        except ValueError:
            pass  # a torn last line: allowed, readers skip it
    return out


def check_transcripts(state: Path) -> dict[Path, list[dict[str, Any]]]:
    return {p: parse_transcript(p) for p in sorted((state / "agents").glob("*/sessions/*.jsonl"))}


def messages(state: Path, key: str, agent: str = "main") -> list[dict[str, Any]]:
    entry = read_store(state, agent)[key]
    path = sessions_dir(state, agent) / f"{entry['sessionId']}.jsonl"
    if not path.exists():
        return []
    return [o["message"] for o in parse_transcript(path) if o.get("type") == "message"]


def texts(state: Path, key: str, agent: str = "main") -> list[str]:
    from tests.runhelpers import text_of

    return [text_of(m) for m in messages(state, key, agent)]


def seed_store(state: Path, keys: list[str], agent: str = "main", **fields: Any) -> dict[str, Any]:
    """Write an index with these sessions (no transcripts yet), as OpenClaw would have."""
    import uuid

    sdir = sessions_dir(state, agent)
    sdir.mkdir(parents=True, exist_ok=True)
    now = int(time.time() * 1000)
    store = {
        k: {"sessionId": str(uuid.uuid4()), "updatedAt": now - i, **fields}
        for i, k in enumerate(keys)
    }
    (sdir / "sessions.json").write_text(json.dumps(store, indent=2))
    return store


def reconcile(env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """`runs --json` (which reconciles dead workers): every record afterwards."""
    rc, out = run_json("runs", env=env)
    assert rc == 0, out
    return list(out["runs"])


def stray_locks(state: Path) -> list[Path]:
    """Store and transcript lock files left in any sessions dir."""
    return sorted((state / "agents").glob("*/sessions/*.lock"))


def snapshot(root: Path) -> dict[str, str]:
    """Relative path → sha256 (or 'dir'), for byte-identical before/after comparisons."""
    out: dict[str, str] = {}
    if not root.exists():
        return out
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            out[os.path.relpath(os.path.join(dirpath, d), root)] = "dir"
        for f in filenames:
            p = os.path.join(dirpath, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, root)] = hashlib.sha256(fh.read()).hexdigest()
    return out
