"""A full or read-only disk: a clear one-line error (exit 1), and nothing half-written.

Tests run as root, and root ignores permission bits, so a chmod'ed state dir proves nothing.
Two ways in instead:
- fault injection, portable: a `sitecustomize.py` on PYTHONPATH (so the command *and* the
  workers it starts load it) makes the disk calls under the state dir fail with ENOSPC or
  EROFS: `os.write` for a full disk; every write-side call (open for writing, mkdir, rename,
  replace, unlink, link) for a read-only one. A file-name pattern aims the fault at one kind
  of file (store rewrites, transcripts) to reach the later steps of a write.
- a real, small tmpfs, filled up and then remounted read-only, where `mount` is allowed
  (root in this sandbox); skipped elsewhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import run_cli, run_json
from tests.reliability.util import check_transcripts, snapshot, stray_locks

SITECUSTOMIZE = r'''
import builtins, errno, fnmatch, io, os

_root = os.environ.get("FAULT_ROOT")
if _root:
    _root = os.path.realpath(_root)
    _errno = getattr(errno, os.environ.get("FAULT_ERRNO", "ENOSPC"))
    _match = os.environ.get("FAULT_MATCH", "*")

    def _hit(path):
        try:
            p = os.path.realpath(os.fsdecode(path))
        except (TypeError, ValueError):
            return False
        inside = p == _root or p.startswith(_root + os.sep)
        return inside and fnmatch.fnmatch(os.path.basename(p), _match)

    def _fail(path):
        raise OSError(_errno, os.strerror(_errno), os.fsdecode(path))

    def _guard(real, nargs=1):
        def wrapper(*args, **kw):
            for a in args[:nargs]:
                if isinstance(a, (str, bytes, os.PathLike)) and _hit(a):
                    _fail(a)
            return real(*args, **kw)
        return wrapper

    _write = os.write

    def _fd_write(fd, data):
        try:
            target = os.readlink("/proc/self/fd/%d" % fd)
        except OSError:
            target = None
        if target and _hit(target):
            _fail(target)
        return _write(fd, data)

    os.write = _fd_write
    if _errno == errno.EROFS:
        _open = os.open

        def _os_open(path, flags, *a, **kw):
            if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND) and _hit(path):
                _fail(path)
            return _open(path, flags, *a, **kw)

        os.open = _os_open
        for name in ("mkdir", "unlink", "remove", "rmdir"):
            setattr(os, name, _guard(getattr(os, name)))
        for name in ("rename", "replace", "link"):
            setattr(os, name, _guard(getattr(os, name), 2))
        _bopen = builtins.open

        def _builtin_open(file, mode="r", *a, **kw):
            if isinstance(file, (str, bytes, os.PathLike)) and any(c in mode for c in "wax+") and _hit(file):
                _fail(file)
            return _bopen(file, mode, *a, **kw)

        builtins.open = io.open = _builtin_open
'''


@pytest.fixture
def faults(tmp_path: Path) -> Path:
    d = tmp_path / "faults"
    d.mkdir()
    (d / "sitecustomize.py").write_text(SITECUSTOMIZE)
    return d


def fault_env(faults: Path, state: Path, err: str, match: str = "*") -> dict[str, str]:
    pythonpath = os.pathsep.join(p for p in (str(faults), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": pythonpath, "FAULT_ROOT": str(state), "FAULT_ERRNO": err, "FAULT_MATCH": match}


@pytest.fixture
def populated(state: Path) -> Path:
    """A state dir with sessions, transcripts, run records and a delivery, all written by
    sessiontool itself."""
    for args in (
        ("send", "main", "hello", "--timeout", "20"),
        ("send", "cron:nightly", "report", "--timeout", "20", "--deliver"),
        ("label", "cron:nightly", "nightly"),
    ):
        proc = run_cli(*args)
        assert proc.returncode == 0, proc.stderr
    return state


def assert_one_line_error(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.splitlines()
    assert "Traceback" not in proc.stderr
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("sessiontool: error: "), proc.stderr
    assert "internal error" not in lines[0], proc.stderr
    for needle in needles:
        assert needle in lines[0], proc.stderr


def no_tmp_files(state: Path) -> list[str]:
    return [str(p) for p in state.rglob("*") if p.name.endswith((".tmp", ".stale"))]


WRITERS = [
    ("label", "main", "a label"),
    ("policy", "main", "deny"),
    ("reset", "main"),
    ("delete", "cron:nightly"),
    ("send", "main", "more", "--timeout", "20"),
    ("send", "fresh-session", "first words", "--timeout", "0"),
    ("spawn", "a task"),
]


@pytest.mark.parametrize("err, message", [("ENOSPC", "No space left on device"), ("EROFS", "Read-only file system")])
@pytest.mark.parametrize("args", WRITERS, ids=lambda a: " ".join(a[:2]))
def test_a_refused_disk_fails_cleanly(
    populated: Path, faults: Path, err: str, message: str, args: tuple[str, ...]
) -> None:
    state = populated
    before = snapshot(state)
    proc = run_cli(*args, env=fault_env(faults, state, err))
    assert_one_line_error(proc, message)
    assert snapshot(state) == before
    assert not no_tmp_files(state)


@pytest.mark.parametrize("err", ["ENOSPC", "EROFS"])
def test_reads_work_on_a_full_or_read_only_disk(populated: Path, faults: Path, err: str) -> None:
    state = populated
    before = snapshot(state)
    env = fault_env(faults, state, err)
    for args in (("list",), ("history", "main"), ("runs",), ("deliveries",), ("paths",)):
        rc, out = run_json(*args, env=env)
        assert rc == 0, (args, out)
    assert snapshot(state) == before


def test_store_rewrite_fails_after_the_lock_is_taken(populated: Path, faults: Path) -> None:
    """Only the `<store>.<pid>.<rand>.tmp` write fails: the lock is released, the temp file
    removed, the store untouched."""
    state = populated
    before = snapshot(state)
    for args in (("label", "main", "x"), ("policy", "main", "allow")):
        proc = run_cli(*args, env=fault_env(faults, state, "ENOSPC", "sessions.json.*.tmp"))
        assert_one_line_error(proc, "sessions.json", "No space left on device")
    assert snapshot(state) == before
    assert not stray_locks(state) and not no_tmp_files(state)


def test_transcript_append_fails_in_the_worker(populated: Path, faults: Path) -> None:
    """The disk fills up under a running worker: the run ends `error` saying so, the
    transcript has no half line, no lock is left, and the session works again afterwards."""
    state = populated
    transcripts = {p: p.read_bytes() for p in (state / "agents").glob("*/sessions/*.jsonl")}
    store_before = json.loads((state / "agents/main/sessions/sessions.json").read_text())
    rc, out = run_json("send", "main", "lost words", "--timeout", "20", env=fault_env(faults, state, "ENOSPC", "*.jsonl"))
    assert rc == 1, out
    assert out["status"] == "error" and out["runStatus"] == "error"
    assert "No space left on device" in out["error"], out
    assert {p: p.read_bytes() for p in transcripts} == transcripts
    store = json.loads((state / "agents/main/sessions/sessions.json").read_text())
    assert store["agent:main:main"]["sessionId"] == store_before["agent:main:main"]["sessionId"]
    assert not stray_locks(state) and not no_tmp_files(state)
    check_transcripts(state)
    rc, out = run_json("send", "main", "space again", "--timeout", "20")
    assert rc == 0 and out["reply"] == "echo: space again"


def test_run_record_update_fails_in_the_worker(populated: Path, faults: Path) -> None:
    """The worker cannot even record its outcome: the run must not stay `running` forever."""
    state = populated
    rc, out = run_json(
        "send", "main", "unrecorded", "--timeout", "20", env=fault_env(faults, state / "sessiontool" / "runs", "ENOSPC", "*.json.*.tmp")
    )
    assert rc == 1, out
    assert not stray_locks(state) and not no_tmp_files(state)


# -- a real small filesystem -----------------------------------------------------------------


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", str(mnt)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def _fill(fs: Path) -> None:
    """Fill the filesystem to the last byte."""
    fd = os.open(fs / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (65536, 4096, 1):
            while True:
                try:
                    os.write(fd, b"\0" * size)
                except OSError:
                    break
    finally:
        os.close(fd)


def test_a_real_full_then_read_only_filesystem(small_fs: Path) -> None:
    state = small_fs / "state"
    env = {"SESSIONTOOL_STATE_DIR": str(state)}
    for args in (("send", "main", "hello", "--timeout", "20"), ("label", "main", "before")):
        proc = run_cli(*args, env=env)
        assert proc.returncode == 0, proc.stderr
    from tests.reliability.util import reap_state

    reap_state(state)
    _fill(small_fs)
    before = snapshot(state)
    for args in (("label", "main", "after"), ("send", "main", "more", "--timeout", "20"), ("spawn", "t")):
        proc = run_cli(*args, env=env)
        assert_one_line_error(proc, "No space left on device")
        assert snapshot(state) == before, args
    rc, hist = run_json("history", "main", env=env)
    assert rc == 0 and len(hist["messages"]) == 2
    (small_fs / "filler").unlink()
    subprocess.run(["mount", "-o", "remount,ro", str(small_fs)], check=True)
    for args in (("label", "main", "after"), ("send", "main", "more", "--timeout", "20"), ("spawn", "t")):
        proc = run_cli(*args, env=env)
        assert_one_line_error(proc, "Read-only file system")
    assert snapshot(state) == before
    for args in (("list",), ("history", "main"), ("runs",)):
        rc, out = run_json(*args, env=env)
        assert rc == 0, (args, out)
    assert not no_tmp_files(state)
