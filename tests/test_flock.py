"""state/flock.py: sessiontool's own locks, as another process sees them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sessiontool.errors import StorageError
from sessiontool.state import flock

# A child that takes the lock, says so, and holds it until its stdin closes.
_HOLDER = """
import sys
from pathlib import Path
from sessiontool.state import flock
with flock.held(Path(sys.argv[1]), "test"):
    print("held", flush=True)
    sys.stdin.read()
"""


def _holder(path: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "held\n"
    return proc


def _release(proc: subprocess.Popen[str], *, kill: bool = False) -> int:
    assert proc.stdin is not None and proc.stdout is not None
    if kill:
        proc.kill()
    proc.stdin.close()
    proc.stdout.close()
    return proc.wait(timeout=30)


def test_a_lock_held_by_another_process_is_held_and_not_removed(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "x.lock"
    assert not flock.is_held(path)  # no file: nobody holds it (and it is not created)
    assert not path.exists()
    proc = _holder(path)
    try:
        assert flock.is_held(path)
        assert not flock.remove_if_free(path)
        assert path.exists()
        fd = flock.open_lock_file(path)
        try:
            assert not flock.try_flock(fd)
        finally:
            os.close(fd)
    finally:
        assert _release(proc) == 0
    assert not flock.is_held(path)  # its holder ended: the kernel dropped the lock
    assert flock.remove_if_free(path)
    assert not path.exists()


def test_a_killed_holder_leaves_the_lock_free(tmp_path: Path) -> None:
    path = tmp_path / "y.lock"
    proc = _holder(path)
    assert _release(proc, kill=True) != 0
    assert not flock.is_held(path)
    with flock.held(path, "test") as fd:
        assert fd >= 0
        assert flock.is_held(path)


def test_a_lock_that_cannot_be_created_names_what_it_guards(tmp_path: Path) -> None:
    (tmp_path / "z.lock").mkdir()  # a directory where the lock file should be
    with (
        pytest.raises(StorageError, match="cannot lock the widgets: Is a directory"),
        flock.held(tmp_path / "z.lock", "the widgets"),
    ):
        pass


def test_a_run_lock_waiter_takes_the_file_its_path_names_not_the_one_let_go(
    tmp_path: Path,
) -> None:
    """A run lock's holder unlinks its file as it lets go (steps.release_lock). A worker that
    was waiting on that file must not wake holding it while a newcomer holds the path's new file:
    two workers would advance one run, and `lock_held` would call the live one dead."""
    import threading
    import time

    from sessiontool.runs import records, steps
    from sessiontool.state.paths import StatePaths

    paths = StatePaths(tmp_path / "state")
    paths.runs_dir.mkdir(parents=True)
    first = steps.try_lock(paths, "r1", block=False)
    assert first is not None
    got: list[int | None] = []
    waiter = threading.Thread(target=lambda: got.append(steps.try_lock(paths, "r1", block=True)))
    waiter.start()
    time.sleep(0.3)  # the waiter is blocked in flock on the first file
    steps.release_lock(paths, "r1", first)
    newcomer = steps.try_lock(paths, "r1", block=False)
    try:
        if newcomer is not None:
            # The newcomer holds the path's file: the waiter waits for it, not past it.
            waiter.join(0.5)
            assert waiter.is_alive(), "two holders of one run's lock"
            assert records.lock_held(paths, "r1")
            steps.release_lock(paths, "r1", newcomer)
            newcomer = None
        waiter.join(10)
        assert not waiter.is_alive() and got and got[0] is not None
        # What the waiter holds is what the path names: others see the lock held.
        assert os.fstat(got[0]).st_ino == paths.run_lock("r1").stat().st_ino
        assert records.lock_held(paths, "r1")
    finally:
        if newcomer is not None:
            os.close(newcomer)
        waiter.join(10)
        for fd in got:
            if fd is not None:
                os.close(fd)
