"""`deliveries --follow`: every outbox line exactly once, across any number of replacements.

`prune` and `doctor --fix` replace the outbox (a new file renamed over it, under the outbox lock
every appender takes) with the lines they keep, in order; appenders then write to the new file.
The follower keeps the file it reads open, so when it sees the path name another file it first
reads the old one to its end (nothing is appended to it after the rename), then opens the one
that replaced it and skips its leading lines that are lines of the old one (the kept ones: an
in-order subsequence) and reads the rest as new.

Which file replaced which is told by the rewriter, not guessed from the path: two rewrites
between two looks would otherwise hide the middle file, and with it the lines appended to it
that the second rewrite dropped (found by tests/reliability/test_follow_outbox.py). Before its
rename the rewriter hard-links the new file into `.outbox-successors/` under the name of the
file it replaces (device, inode, final size: nothing is appended to it after that), so the
follower walks the chain file by file. Entries older than SUCCESSOR_KEEP_SECONDS are removed by
the next rewrite; a follower stopped for longer (or an outbox replaced by hand) falls back to the
path, which is right unless two rewrites dropped lines it had not read.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

SUCCESSOR_KEEP_SECONDS = 600


def _open(path: Path) -> IO[bytes] | None:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a planted link: doctor reports it; nothing to follow
            return None
        raise
    return os.fdopen(fd, "rb")  # held across iterations, closed on replace


def _successor_prefix(st: os.stat_result) -> str:
    return f"{st.st_dev}-{st.st_ino}-{st.st_size}-"


def link_successor(chain: Path, replaced: Path, new: Path) -> None:
    """For a rewriter holding the outbox lock, just before it renames `new` over `replaced`:
    record that `new` follows `replaced`, and drop entries older than SUCCESSOR_KEEP_SECONDS."""
    from sessiontool.state.safefs import ensure_dir

    try:
        old = os.lstat(replaced)
    except FileNotFoundError:
        return  # nothing was there to follow
    ensure_dir(chain)
    now = int(time.time())
    prefix = _successor_prefix(old)
    for name in os.listdir(chain):
        stamp = name.rpartition("-")[2]
        # An entry under the same name is about a file that no longer exists (its inode is
        # being reused, so nobody holds it open): it cannot be followed, and it is in the way.
        stale = name.startswith(prefix)
        if stale or not stamp.isdigit() or now - int(stamp) > SUCCESSOR_KEEP_SECONDS:
            with contextlib.suppress(OSError):
                os.unlink(chain / name)
    os.link(new, chain / f"{prefix}{now}", follow_symlinks=False)


def _successor(chain: Path | None, st: os.stat_result) -> IO[bytes] | None:
    """The file a rewriter renamed over the one `st` describes, if it said so."""
    if chain is None:
        return None
    prefix = _successor_prefix(st)
    try:
        names = [n for n in os.listdir(chain) if n.startswith(prefix)]
    except OSError:
        return None
    names.sort(key=lambda n: int(n[len(prefix) :]) if n[len(prefix) :].isdigit() else -1)
    return _open(chain / names[-1]) if names else None


def _kept(old: list[int], lines: list[bytes]) -> int:
    """How many leading `lines` are, in order, lines of the old file (what a rewrite kept)."""
    j = n = 0
    for raw in lines:
        h = hash(raw)
        k = j
        while k < len(old) and old[k] != h:
            k += 1
        if k == len(old):
            break
        j, n = k + 1, n + 1
    return n


def follow_lines(
    path: Path,
    *,
    replay: bool | Callable[[list[bytes]], list[bytes]],
    poll: float,
    chain: Path | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[bytes]:
    """Complete lines of the outbox as they are appended, each exactly once; those already
    there first with `replay` True, or what `replay` picks of them when it is a function (the
    last few). A missing outbox is waited for. `chain` is the directory where rewriters record
    which file replaced which (link_successor)."""
    fh = _open(path)
    while fh is None:
        sleep(poll)
        fh = _open(path)
        replay = True  # it did not exist: all it holds is new
    seen: list[int] = []
    pending = b""

    def take(data: bytes, emit: bool) -> list[bytes]:
        nonlocal pending
        pending += data
        *complete, pending = pending.split(b"\n")
        seen.extend(hash(raw) for raw in complete)
        return complete if emit else []

    try:
        there = take(fh.read(), bool(replay))
        yield from (replay(there) if callable(replay) else there)
        while True:
            data = fh.read()
            if data:
                yield from take(data, True)
                continue
            try:
                st: Any = os.stat(path)
            except OSError:
                st = None
            cur = os.fstat(fh.fileno())
            if st is not None and (st.st_ino, st.st_dev) != (cur.st_ino, cur.st_dev):
                # The old file is frozen once renamed over: read its end, then switch to the
                # file that replaced it (which may itself be replaced already: the next look
                # finds that out and walks on).
                yield from take(fh.read(), True)
                new = _successor(chain, os.fstat(fh.fileno())) or _open(path)
                if new is None:
                    sleep(poll)
                    continue
                old = seen + ([hash(pending)] if pending else [])
                fh.close()
                fh, seen, pending = new, [], b""
                body, sep, rest = fh.read().rpartition(b"\n")
                lines = body.split(b"\n") if sep else []
                skip = _kept(old, lines)
                seen.extend(hash(raw) for raw in lines)
                pending = rest
                yield from lines[skip:]
                continue
            if st is not None and st.st_size < fh.tell():
                # Cut shorter in place (not something sessiontool does): go on from its end.
                fh.seek(0, os.SEEK_END)
                pending = b""
                continue
            sleep(poll)
    finally:
        fh.close()
