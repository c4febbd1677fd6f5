"""A session's life under faults: kill -9 in the middle of a compaction (the worker) and of a
rewind (the command, holding the transcript lock), and a full disk during a fork or a rewind.
Each loses nothing: the transcript is whole (byte for byte, or with what it had plus what the
finished step wrote), nothing half-written is left, and the same command works afterwards."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import run_cli, run_json
from tests.reliability.util import kill9, wait_pause
from tests.runhelpers import NOW, read_store, sessions_dir, write_store, write_transcript

SID = "77777777-7777-4777-8777-777777777777"
TURNS = [
    ("user", "one", NOW - 9000),
    ("assistant", "un", NOW - 8900),
    ("user", "two", NOW - 8000),
    ("assistant", "deux", NOW - 7900),
    ("user", "three", NOW - 7000),
    ("assistant", "trois", NOW - 6900),
]


@pytest.fixture
def work(state: Path) -> Path:
    write_store(state, {"agent:main:work": {"sessionId": SID, "updatedAt": NOW}})
    write_transcript(state, SID, TURNS)
    return state


def transcript(state: Path) -> Path:
    return sessions_dir(state) / f"{SID}.jsonl"


def entry_ids(state: Path) -> list[str]:
    return [json.loads(ln)["id"] for ln in transcript(state).read_text().splitlines()[1:]]


def leftovers(state: Path) -> list[str]:
    return [p.name for p in state.rglob("*") if p.name.endswith(".tmp")]


@pytest.mark.usefixtures("reap_workers")
def test_kill9_of_the_compaction_worker_loses_nothing(work: Path) -> None:
    before = transcript(work).read_bytes()
    env = {"SESSIONTOOL_TEST_PAUSE": "compact-archived:60"}
    rc, data = run_json("compact", "work", "--keep", "1", "--timeout", "0", env=env)
    assert rc == 0 and data["status"] == "accepted", data
    pid = wait_pause(work, data["runId"], "compact-archived")
    kill9(pid)
    rc, waited = run_json("wait", data["runId"], "--timeout", "30")
    assert waited["runStatus"] == "lost", waited
    # The transcript is as it was; its copy beside it is whole too.
    assert transcript(work).read_bytes() == before
    copies = list(sessions_dir(work).glob(f"{SID}.jsonl.compacted.*"))
    assert [c.read_bytes() for c in copies] == [before]
    assert leftovers(work) == []
    # The next compaction goes through.
    rc, again = run_json("compact", "work", "--keep", "1")
    assert rc == 0 and again["compaction"]["compacted"] is True, again
    assert transcript(work).read_bytes().startswith(before)


def test_kill9_of_a_rewind_holding_the_transcript_lock_loses_nothing(work: Path) -> None:
    before = transcript(work).read_bytes()
    at = entry_ids(work)[2]
    proc = subprocess.Popen(
        [sys.executable, "-m", "sessiontool", "rewind", "work", at],
        env=dict(os.environ, SESSIONTOOL_TEST_PAUSE="rewind-archived:60"),
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    line = proc.stderr.readline()
    assert "sessiontool test pause: rewind-archived" in line, line
    kill9(proc.pid)
    proc.wait()
    proc.stderr.close()
    assert transcript(work).read_bytes() == before  # not cut
    archives = list(sessions_dir(work).glob(f"{SID}.jsonl.rewound.*"))
    assert [a.read_bytes() for a in archives] == [before]
    # The shorter copy it was about to put in place is a dead writer's temp file: doctor's.
    assert len(leftovers(work)) == 1
    assert run_cli("doctor", "--fix").returncode in (0, 2)
    assert leftovers(work) == []
    # The dead command's transcript lock is taken over; the rewind is done again.
    rc, data = run_json("rewind", "work", at)
    assert rc == 0, data
    assert len(entry_ids(work)) == 2


FAULTS = r"""
import errno, fnmatch, os
_root = os.path.realpath(os.environ["FAULT_ROOT"])
def _hit(fd):
    try:
        p = os.readlink("/proc/self/fd/%d" % fd)
    except OSError:
        return False
    return p.startswith(_root + os.sep) and fnmatch.fnmatch(os.path.basename(p), "*.tmp")
def _full(*a):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
_write, _cfr = os.write, os.copy_file_range
def write(fd, data):
    return _full() if _hit(fd) else _write(fd, data)
def copy_file_range(src, dst, count, offset_src=None, offset_dst=None):
    return _full() if _hit(dst) else _cfr(src, dst, count, offset_src, offset_dst)
os.write, os.copy_file_range = write, copy_file_range
"""


def full_disk(tmp_path: Path, root: Path) -> dict[str, str]:
    d = tmp_path / "faults"
    d.mkdir(exist_ok=True)
    (d / "sitecustomize.py").write_text(FAULTS)
    path = os.pathsep.join(p for p in (str(d), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path, "FAULT_ROOT": str(root)}


@pytest.mark.parametrize(
    "args", [("fork", "work"), ("fork", "work", "--at", "*"), ("rewind", "work", "*")]
)
def test_a_full_disk_during_a_fork_or_rewind_writes_nothing(
    work: Path, tmp_path: Path, args: tuple[str, ...]
) -> None:
    at = entry_ids(work)[2]
    argv = [at if a == "*" else a for a in args]
    before = transcript(work).read_bytes()
    store: dict[str, Any] = read_store(work)
    names = sorted(p.name for p in sessions_dir(work).iterdir())
    proc = run_cli(*argv, env=full_disk(tmp_path, work))
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and "No space left on device" in lines[0], proc.stderr
    assert transcript(work).read_bytes() == before
    assert read_store(work) == store
    assert sorted(p.name for p in sessions_dir(work).iterdir()) == names
    # With room again, it goes through.
    assert run_cli(*argv).returncode == 0


NO_EXCHANGE = r"""
import ctypes
def _refuse(*a, **k):
    raise OSError("no renameat2 here")
ctypes.CDLL = _refuse
"""


def test_a_rewind_where_names_cannot_be_exchanged_renames_over_and_keeps_the_archive(
    work: Path, tmp_path: Path
) -> None:
    """Where renameat2(RENAME_EXCHANGE) is missing (another libc, another system), the
    shorter copy is renamed over the transcript: the same result, the archive whole."""
    d = tmp_path / "noexchange"
    d.mkdir()
    (d / "sitecustomize.py").write_text(NO_EXCHANGE)
    path = os.pathsep.join(p for p in (str(d), os.environ.get("PYTHONPATH", "")) if p)
    before = transcript(work).read_bytes()
    ino = os.stat(transcript(work)).st_ino
    rc, data = run_json("rewind", "work", entry_ids(work)[2], env={"PYTHONPATH": path})
    assert rc == 0, data
    archive = Path(data["archived"])
    assert archive.read_bytes() == before and os.stat(archive).st_ino == ino
    assert before.startswith(transcript(work).read_bytes())
    assert len(entry_ids(work)) == 2
    assert leftovers(work) == []
