"""A big store (at least 1 MiB: the size from which a parse is kept) is parsed once per send:
the foreground parses it, the lane worker forked from it reuses that parse, and what a process
writes it keeps as written. A send writes the store at most twice and a spawn with its announce
at most four times. The kept parse is used only while the file is the one it was made from, so
a store another writer changed between the foreground's read and the worker's update (replaced,
as OpenClaw does, or rewritten in place) is read again under the lock: no update is lost."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

from tests.helpers import run_json
from tests.reliability.util import (
    read_store,
    sessions_dir,
    wait_pause,
    wait_until,
    worker_pids,
)
from tests.runhelpers import records, runner_config

A = "agent:main:main"
NS = 1_000_000_000

# Logs every open of a sessions.json for reading (a parse needs one) and every store replaced,
# each with the mtime of the file then: whole-second mtimes are never trusted by the cache (a
# file system that keeps only seconds), so they may cost an extra parse.
COUNT_IO = r"""
import builtins, os
_log = os.environ.get("STORE_IO_LOG")
if _log:
    _open, _replace = builtins.open, os.replace

    def _note(what, path):
        try:
            mtime = os.stat(path).st_mtime_ns
        except OSError:
            mtime = -1
        with _open(_log, "a") as fh:
            fh.write(f"{what} {mtime}\n")

    def _counting_open(file, mode="r", *a, **kw):
        if isinstance(file, (str, os.PathLike)) and os.fsdecode(file).endswith(
            "sessions.json"
        ) and not any(c in mode for c in "wax+"):
            _note("read", file)
        return _open(file, mode, *a, **kw)

    def _counting_replace(src, dst, *a, **kw):
        r = _replace(src, dst, *a, **kw)
        if os.fsdecode(dst).endswith("sessions.json"):
            _note("write", dst)
        return r

    builtins.open = _counting_open
    os.replace = _counting_replace
"""


def big_store(state: Path, n: int = 250, **extra: Any) -> dict[str, Any]:
    """~1.3 MB: `n` sessions with a 5 KB field each (real entries carry a skillsSnapshot)."""
    store: dict[str, Any] = {
        f"agent:main:dm:user{i}": {
            "sessionId": str(uuid.uuid4()),
            "updatedAt": 1_700_000_000_000 + i,
            "skillsSnapshot": {"prompt": f"skill {i} " + "x" * 5000},
        }
        for i in range(n)
    }
    store[A] = {"sessionId": str(uuid.uuid4()), "updatedAt": 1_700_000_000_000, **extra}
    d = sessions_dir(state)
    d.mkdir(parents=True, exist_ok=True)
    (d / "sessions.json").write_text(json.dumps(store, indent=2, ensure_ascii=False))
    assert (d / "sessions.json").stat().st_size > 1 << 20
    return store


def counting_env(tmp_path: Path) -> tuple[dict[str, str], Path]:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(COUNT_IO)
    log = tmp_path / "store-io.log"
    log.write_text("")
    env = {
        "PYTHONPATH": os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p),
        "STORE_IO_LOG": str(log),
    }
    return env, log


def io_counts(log: Path) -> tuple[int, int, int]:
    """(reads, writes, whole-second mtimes seen)."""
    events = [line.split() for line in log.read_text().splitlines()]
    reads = sum(1 for what, _ in events if what == "read")
    writes = sum(1 for what, _ in events if what == "write")
    coarse = sum(1 for _, mtime in events if int(mtime) % NS == 0)
    return reads, writes, coarse


def test_a_send_parses_a_big_store_once_and_writes_it_at_most_twice(
    state: Path, tmp_path: Path
) -> None:
    runner_config(state, {"type": "echo"})
    big_store(state)
    env, log = counting_env(tmp_path)
    rc, out = run_json("send", "agent:main:dm:fresh", "hello", "--timeout", "30", env=env)
    assert rc == 0 and out["reply"] == "echo: hello", out
    wait_until(lambda: not worker_pids(state), 10, "the worker to finish")
    reads, writes, coarse = io_counts(log)
    assert writes == 2, log.read_text()  # the new entry, the run's end
    assert reads <= 1 + coarse, log.read_text()
    entry = read_store(state)["agent:main:dm:fresh"]
    assert entry["systemSent"] is True and entry["model"] == "echo"

    log.write_text("")
    rc, out = run_json("send", "main", "again", "--timeout", "30", env=env)
    assert rc == 0 and out["reply"] == "echo: again", out
    wait_until(lambda: not worker_pids(state), 10, "the worker to finish")
    reads, writes, coarse = io_counts(log)
    assert writes == 1, log.read_text()  # the run's end only
    assert reads <= 1 + coarse, log.read_text()
    stored = read_store(state)
    assert stored[A]["systemSent"] is True
    assert len(stored) == 252  # nothing lost, nothing added twice


def test_a_spawn_and_its_announce_parse_a_big_store_once(state: Path, tmp_path: Path) -> None:
    runner_config(state, {"type": "echo"})
    big_store(state)
    env, log = counting_env(tmp_path)
    rc, out = run_json("--as", "main", "spawn", "a task", env=env)
    assert rc == 0, out
    rid = out["runId"]
    wait_until(
        lambda: next((r for r in records(state) if r["runId"] == rid), {}).get("announcedAt"),
        30,
        "the announce",
    )
    wait_until(lambda: not worker_pids(state), 10, "the workers to finish")
    reads, writes, coarse = io_counts(log)
    # The child, the child's end, the announce turn, the requester's injected message.
    assert writes <= 4, log.read_text()
    assert reads <= 1 + coarse, log.read_text()
    stored = read_store(state)
    child = out["childSessionKey"]
    assert stored[child]["spawnedBy"] == A and stored[child]["systemSent"] is True
    assert len(stored) == 252


# An external writer (OpenClaw's protocol: the lock file, a temp file renamed over the store, or
# here also an in-place rewrite) while the worker is paused after reading the entry.
EXTERNAL_WRITE = r"""
import json, os, sys, time
path, mode = sys.argv[1], sys.argv[2]
lock = path + ".lock"
fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
os.write(fd, json.dumps({"pid": os.getpid(), "startedAt": int(time.time() * 1000)}).encode())
os.close(fd)
try:
    with open(path) as fh:
        store = json.load(fh)
    store["agent:main:dm:user7"]["label"] = "set by another writer"
    if mode == "replace":
        store["agent:main:dm:added"] = {"sessionId": "added-by-openclaw", "updatedAt": 1}
        tmp = path + ".openclaw.tmp"
        with open(tmp, "w") as fh:
            fh.write(json.dumps(store, indent=2, ensure_ascii=False))
        os.replace(tmp, path)
    else:  # in place, same inode, same size: only the bytes and the mtime tell
        data = json.dumps(store, indent=2, ensure_ascii=False).encode()
        size = os.path.getsize(path)
        assert len(data) > size
        store["agent:main:dm:user7"]["skillsSnapshot"]["prompt"] = store["agent:main:dm:user7"][
            "skillsSnapshot"
        ]["prompt"][: -(len(data) - size)]
        data = json.dumps(store, indent=2, ensure_ascii=False).encode()
        assert len(data) == size
        with open(path, "r+b") as fh:
            fh.write(data)
finally:
    os.unlink(lock)
"""


def _external_write_mid_run(state: Path, tmp_path: Path, mode: str) -> dict[str, Any]:
    import subprocess
    import sys

    runner_config(state, {"type": "echo"})
    big_store(state)
    env = {"SESSIONTOOL_TEST_PAUSE": "before-user:3"}
    rc, out = run_json("send", "main", "hello", "--timeout", "0", env=env)
    assert rc == 0 and out["status"] == "accepted", out
    rid = out["runId"]
    # The worker has read the entry (from the foreground's parse) and pauses before its
    # transcript line; its end-of-run update comes after the other writer's change.
    wait_pause(state, rid, "before-user")
    store_path = sessions_dir(state) / "sessions.json"
    ino = store_path.stat().st_ino
    subprocess.run(
        [sys.executable, "-c", EXTERNAL_WRITE, str(store_path), mode], check=True, timeout=30
    )
    assert (store_path.stat().st_ino == ino) == (mode == "in-place")
    rc, done = run_json("wait", rid, "--timeout", "30")
    assert rc == 0 and done["reply"] == "echo: hello", done
    wait_until(lambda: not worker_pids(state), 10, "the worker to finish")
    stored = read_store(state)
    assert stored["agent:main:dm:user7"]["label"] == "set by another writer"
    assert stored[A]["systemSent"] is True  # and the run's own update is there too
    return stored


def test_a_store_replaced_by_another_writer_mid_run_is_read_again(
    state: Path, tmp_path: Path
) -> None:
    stored = _external_write_mid_run(state, tmp_path, "replace")
    assert stored["agent:main:dm:added"]["sessionId"] == "added-by-openclaw"


def test_a_store_rewritten_in_place_mid_run_is_read_again(state: Path, tmp_path: Path) -> None:
    _external_write_mid_run(state, tmp_path, "in-place")


def test_concurrent_sends_on_a_big_store_lose_no_update(state: Path) -> None:
    """Four sessions' workers, each with its own kept parse, update one big store at once."""
    import subprocess
    import sys

    runner_config(state, {"type": "echo"})
    big_store(state)
    keys = [f"agent:main:dm:new{i}" for i in range(4)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "sessiontool", "send", k, f"m{i}", "--timeout", "60", "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i, k in enumerate(keys)
    ]
    for p in procs:
        stdout, stderr = p.communicate(timeout=90)
        assert p.returncode == 0, stderr
        assert json.loads(stdout)["status"] == "ok"
    wait_until(lambda: not worker_pids(state), 20, "the workers to finish")
    stored = read_store(state)
    assert len(stored) == 251 + len(keys)
    for k in keys:
        assert stored[k]["systemSent"] is True and stored[k]["model"] == "echo", stored[k]


def test_odd_floats_and_nan_in_a_big_store_survive_the_kept_parse(state: Path) -> None:
    """A big store's floats are written as they were read: `1e-05` stays `1e-05` (orjson would
    write `0.00001`) and NaN stays NaN, through a send (parse kept, worker writes)."""
    runner_config(state, {"type": "echo"})
    big_store(state, tiny=1e-05, odd=2.5e-07)
    rc, out = run_json("send", "main", "hello", "--timeout", "30")
    assert rc == 0, out
    wait_until(lambda: not worker_pids(state), 10, "the worker to finish")
    path = sessions_dir(state) / "sessions.json"
    raw = path.read_bytes()
    assert b'"tiny": 1e-05' in raw and b'"odd": 2.5e-07' in raw
    assert raw == json.dumps(json.loads(raw), indent=2, ensure_ascii=False).encode()

    text = path.read_text().replace('"tiny": 1e-05', '"tiny": NaN')
    path.write_text(text)
    rc, out = run_json("send", "main", "again", "--timeout", "30")
    assert rc == 0, out
    wait_until(lambda: not worker_pids(state), 10, "the worker to finish")
    raw = path.read_bytes()
    assert b'"tiny": NaN' in raw
    assert json.loads(raw)[A]["systemSent"] is True
