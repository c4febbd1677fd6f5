"""sessiontool's own locks: `flock(2)` on a lock file in the state dir, in one place.

A flock dies with its holder (the kernel drops it when the last descriptor closes), so a killed
process never blocks anyone and liveness is a question the lock itself answers: no pid files,
no timers. Lock files are opened without following a symlink planted in their place and are not
inherited by children, except where a worker is handed its lane's lock on purpose
(runs/spawnproc.py). OpenClaw's own `.lock` files (pid and time inside) are state/locks.py.
"""

from __future__ import annotations

import errno
import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sessiontool.errors import StorageError
from sessiontool.state.safefs import CLOEXEC, NOFOLLOW

_BUSY = (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES)


def open_lock_file(path: Path, mode: int = 0o600) -> int:
    """Open (creating) a lock file without following a symlink planted in its place: a link
    there is refused as every planted link is (UnsafePathError, exit 5), other failures are
    the OSError."""
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | NOFOLLOW | CLOEXEC, mode)
    except OSError:
        if os.path.islink(path):
            from sessiontool.state import safefs

            safefs.check_file(path)
        raise


def try_flock(fd: int) -> bool:
    """Take the lock if nobody holds it; False when someone does."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in _BUSY:
            return False
        raise
    return True


def wait_flock(fd: int) -> None:
    """Take the lock, waiting for its holder (a signal handler may interrupt the wait)."""
    fcntl.flock(fd, fcntl.LOCK_EX)


def unlock(fd: int) -> None:
    fcntl.flock(fd, fcntl.LOCK_UN)


@contextmanager
def held(path: Path, what: str, mode: int = 0o600) -> Iterator[int]:
    """Hold the lock of `path` (created with its folder) for the block, waiting for a live
    holder. A lock that cannot be opened is a StorageError naming `what` it guards."""
    from sessiontool.state.paths import ensure_dir

    try:
        ensure_dir(path.parent)
        fd = open_lock_file(path, mode)
    except OSError as exc:
        raise StorageError(f"cannot lock {what}: {exc.strerror or exc}") from exc
    try:
        wait_flock(fd)
        yield fd
    finally:
        os.close(fd)


def is_held(path: Path) -> bool:
    """Whether a live process holds the lock of `path` (never creates it). A lock file that
    cannot be opened counts as held: nobody may act as if its holder were dead."""
    try:
        fd = os.open(path, os.O_RDWR | NOFOLLOW | CLOEXEC)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    try:
        return not try_flock(fd)
    finally:
        os.close(fd)


def remove_if_free(path: Path) -> bool:
    """Remove a lock file nobody holds (left behind by a killed holder); True when removed.
    It is unlinked while we hold it, so nobody takes it in between."""
    try:
        fd = os.open(path, os.O_RDWR | NOFOLLOW | CLOEXEC)
    except OSError:
        return False
    try:
        if not try_flock(fd):
            return False
        try:
            os.unlink(path)
        except OSError:
            return False
        return True
    finally:
        os.close(fd)
