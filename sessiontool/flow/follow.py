"""`deliveries --follow`: every outbox line exactly once, across any number of replacements.

`prune` and `doctor --fix` replace the outbox (a new file renamed over it, under the outbox lock
every appender takes) with the lines they keep, in order; appenders then write to the new file.
The follower keeps the file it reads open, so when it sees the path name another file it first
reads the old one to its end (nothing is appended to it after the rename), then opens the new
one and skips its leading lines that are lines of the old one (the kept ones: an in-order
subsequence) and reads the rest as new. Several replacements between two looks are one: what a
middle file received and the last one kept is not in the old file, so it is read as new.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any


def _open(path: Path) -> IO[bytes] | None:
    try:
        return open(path, "rb")  # noqa: SIM115 - held across iterations, closed on replace
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None


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
    path: Path, *, replay: bool, poll: float, sleep: Callable[[float], None] = time.sleep
) -> Iterator[bytes]:
    """Complete lines of the outbox as they are appended (with `replay`, those already there
    first), each exactly once. A missing outbox is waited for."""
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
        yield from take(fh.read(), replay)
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
                new = _open(path)
                if new is None:
                    sleep(poll)
                    continue
                # The old file is frozen once renamed over: read its end, then switch.
                yield from take(fh.read(), True)
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
