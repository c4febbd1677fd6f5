"""Reading transcripts for the search index: a transcript's new complete lines parsed into rows
(message text) and turns (token usage), the digest that proves the bytes before an offset did not
change, and the forked workers that parse many files at once on a first build.

Kept apart from the index file (index/db.py) because this half runs in worker processes
too: plain data in, plain data out, no SQLite connection."""

from __future__ import annotations

import os
from collections.abc import Generator
from pathlib import Path
from typing import Any, NamedTuple

from sessiontool.index.extract import (
    Extracted,
    Turns,
    add_turn,
    extract,
    has_unsegmented,
    iter_complete_blocks,
    iter_complete_lines,
    scan_lines,
    scan_turns,
)

# What a transcript's digest covers: every byte of a prefix up to this size (a few ms per MB,
# paid only when the file changed); beyond it the first and last EDGE bytes and SAMPLES blocks
# spread between them, so a catch-up after one new message in a huge transcript stays cheap.
FULL_DIGEST_MAX = 32 << 20
EDGE = 1 << 20
SAMPLES = 256
SAMPLE = 16 << 10
# A first build (or any catch-up) that reads at least this much from files no bigger than
# PARALLEL_MAX_FILE parses them in worker processes while this one writes the index.
PARALLEL_MIN_BYTES = 64 << 20
PARALLEL_MAX_FILE = 256 << 20

Row = tuple[int, int, str, int, int, int, str]  # file_id, ts, role, cjk, off, part, text


def collect(
    file_id: int,
    ex: Extracted,
    off: int,
    last_role: str | None,
    rows: list[Row],
    turns: Turns,
    with_turn: bool = True,
) -> str | None:
    """Add one message's rows and turn (unless `with_turn` is False: a line whose turn the index
    holds already); returns the role the next message follows. A run starts at the first
    assistant turn after anything but an assistant or tool message."""
    for part, (ts, role, text) in enumerate(ex.rows):
        rows.append((file_id, ts, role, int(has_unsegmented(text)), off, part, text))
    if with_turn:
        add_turn(turns, file_id, ex, last_role)
    return ex.role if ex.role is not None else last_role


def prefix_digest(fh: Any, off: int) -> bytes:
    """What identifies the first `off` bytes of an open transcript (b"" when it is shorter):
    a CRC-32 of every byte up to FULL_DIGEST_MAX, of sampled blocks beyond. Compared before
    reading only what was appended, so that an edit before the offset (an earlier line changed
    to the same length, then an append) reads the file again instead of leaving its old words
    findable."""
    import zlib

    if off <= FULL_DIGEST_MAX:
        spans = [(0, off)]
        kind = b"F"
    else:
        step = (off - 2 * EDGE - SAMPLE) // SAMPLES
        spans = [(0, EDGE)]
        spans += [(EDGE + i * step, SAMPLE) for i in range(SAMPLES)]
        spans.append((off - EDGE, EDGE))
        kind = b"S"
    crc = 0
    for start, length in spans:
        fh.seek(start)
        left = length
        while left:
            chunk = fh.read(min(left, 1 << 20))
            if not chunk:
                return b""
            crc = zlib.crc32(chunk, crc)
            left -= len(chunk)
    return kind + off.to_bytes(8, "big") + crc.to_bytes(4, "big")


def row_text(fh: Any, off: int, part: int) -> str | None:
    """The text of row `part` of the transcript line at byte `off` (None: not there any more)."""
    try:
        fh.seek(off)
        ex = extract(fh.readline().rstrip(b"\n"))
    except (OSError, ValueError):
        return None
    if ex is None or part >= len(ex.rows):
        return None
    return ex.rows[part][2]


def same_prefix(path: Path, off: int, digest: bytes | None) -> bool:
    """Whether the first `off` bytes of `path` still have the digest kept for them."""
    if off == 0:
        return True
    try:
        with open(path, "rb") as fh:
            return bool(digest) and prefix_digest(fh, off) == digest
    except OSError:
        return False


def only_appended(
    then: tuple[int, int, int], now: tuple[int, int, int], off: int, path: str, digest: bytes | None
) -> bool:
    """Whether a transcript read up to `off` when it was `then` (dev, ino, size) is, now that
    it is `now`, the same file with nothing changed before `off` as far as its digest tells:
    then a catch-up reads it on from `off`, else again from the start. The one rule for both
    readers of appended bytes: the index's catch-up and the budgets' record
    (reports/spend_cache.py), so that the two sums cannot differ on what counts as grown."""
    return (
        then[:2] == now[:2]
        and now[2] >= off
        # Changed without growing, where the digest samples: it cannot prove that nothing
        # changed (a rename or chmod also moves the ctime).
        and not (now[2] <= then[2] and off > FULL_DIGEST_MAX)
        and same_prefix(Path(path), off, digest)
    )


class Job(NamedTuple):
    """What to read of one transcript: bytes [off, size) after a message of `last_role`;
    `digest` is the (checked) digest of the bytes before `off`. With `text`, the messages'
    text rows too (what `search` needs; `usage` reads the turns alone); turns only of the lines
    from `turns_from` on (the text of a file whose turns were indexed without it is read from
    the start, its turns are not read twice). A named tuple and `Read` a plain class, not
    dataclasses: their creation was two thirds of this module's import, which the budgets'
    check pays when it reads an appended turn (reports/spend_cache.py)."""

    file_id: int
    path: str
    off: int
    size: int
    last_role: str | None
    st: os.stat_result
    digest: bytes = b""
    text: bool = True
    turns_from: int = 0


class Read:
    """What reading a Job gave: the rows and turns, how far it read (whole lines only), the
    digest of the bytes before that offset and the role the next line follows; or the OS
    error."""

    __slots__ = ("job", "off", "digest", "last_role", "rows", "turns", "error", "errno")

    def __init__(
        self, job: Job, off: int = 0, digest: bytes = b"", last_role: str | None = None
    ) -> None:
        self.job, self.off, self.last_role = job, off, last_role
        self.digest = digest  # of the bytes before `off`
        self.rows: list[Row] = []
        self.turns: Turns = []
        self.error: str | None = None
        self.errno: int | None = None


def read_job(job: Job) -> Read:
    """Parse a transcript's new lines. Runs in a worker process too: no SQLite here."""
    out = Read(job, job.off, b"", job.last_role)
    last_role = job.last_role
    # The digest of a prefix read whole is carried on over the bytes read now (no second read).
    crc: list[int] | None = None
    if job.off == 0:
        crc = [0]
    elif job.digest[:1] == b"F":
        crc = [int.from_bytes(job.digest[-4:], "big")]
    try:
        if job.text or job.turns_from > job.off:  # (no turns-only job starts before its turns)
            out.off, last_role = scan_lines(
                job.file_id,
                iter_complete_lines(Path(job.path), job.off, job.size, crc),
                (job.off, last_role, job.turns_from),
                rows=out.rows if job.text else [],
                turns=out.turns,
            )
        else:
            out.off, last_role = scan_turns(
                job.file_id,
                iter_complete_blocks(Path(job.path), job.off, job.size, crc),
                (job.off, last_role),
                out.turns,
            )
        if out.off == job.off and job.digest:
            out.digest = job.digest
        elif crc is not None and out.off <= FULL_DIGEST_MAX:
            out.digest = b"F" + out.off.to_bytes(8, "big") + crc[0].to_bytes(4, "big")
        elif out.off:
            with open(job.path, "rb") as fh:
                out.digest = prefix_digest(fh, out.off)
    except OSError as exc:
        out.error = exc.strerror or str(exc)
        out.errno = exc.errno
    out.last_role = last_role
    return out


def read_appended(path: str, off: int, size: int, digest: bytes) -> Read:
    """`read_job` of the bytes [off, size) of a transcript that `only_appended` found grown,
    turns only, for a reader that keeps no `files` row (the budgets' record): the same lines,
    turns and digest a catch-up of it would find. (`Job.st` is what a catch-up writes to
    `files`; `read_job` does not read it.)"""
    job = Job(
        file_id=0,
        path=path,
        off=off,
        size=size,
        last_role=None,
        st=os.stat_result((0,) * 10),
        digest=digest,
        text=False,
        turns_from=off,
    )
    return read_job(job)


def read_forked(jobs: list[Job], workers: int) -> Generator[Read, None, None]:
    """`read_job` of each job in forked worker processes, results as they come. Plain fork
    and pipes (no multiprocessing.Pool: no threads, nothing to hang on when a worker dies);
    each worker gets about an equal share of the bytes and sends length-prefixed pickles. A
    worker that dies sends no more: the jobs it did not answer are the caller's to read. The
    workers are always reaped (killed if need be) before this returns."""
    import pickle
    import selectors
    import signal
    import struct

    shares: list[list[Job]] = [[] for _ in range(max(1, min(workers, len(jobs))))]
    loads = [0] * len(shares)
    for job in sorted(jobs, key=lambda j: j.size - j.off, reverse=True):
        i = loads.index(min(loads))
        shares[i].append(job)
        loads[i] += job.size - job.off
    children: dict[int, int] = {}  # read fd → pid
    sel = selectors.DefaultSelector()
    try:
        for share in shares:
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the worker (its coverage is not collected)
                code = 1
                try:
                    os.close(r)
                    with os.fdopen(w, "wb") as out:
                        for job in share:
                            blob = pickle.dumps(read_job(job), protocol=pickle.HIGHEST_PROTOCOL)
                            out.write(struct.pack("<Q", len(blob)))
                            out.write(blob)
                    code = 0
                finally:
                    os._exit(code)
            os.close(w)
            children[r] = pid
            sel.register(r, selectors.EVENT_READ)
        bufs: dict[int, bytearray] = {r: bytearray() for r in children}
        while sel.get_map():
            for key, _ in sel.select():
                fd = int(key.fd)
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    sel.unregister(fd)
                    continue
                buf = bufs[fd]
                buf += chunk
                while len(buf) >= 8:
                    (n,) = struct.unpack_from("<Q", buf)
                    if len(buf) < 8 + n:
                        break
                    got = pickle.loads(bytes(buf[8 : 8 + n]))
                    del buf[: 8 + n]
                    yield got
    finally:
        sel.close()
        for r, pid in children.items():
            try:
                os.kill(pid, signal.SIGKILL)  # done already, unless we stopped early
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)
            os.close(r)


def can_fork() -> bool:
    """Worker processes are forked (a spawned one would run the CLI's `__main__` again), and
    only from a single-threaded process, where fork is safe."""
    import sys
    import threading

    return (
        sys.platform == "linux"
        and (os.cpu_count() or 1) > 1
        and threading.active_count() == 1
        and os.environ.get("SESSIONTOOL_INDEX_WORKERS") != "0"
    )


def parallel_min() -> int:
    """PARALLEL_MIN_BYTES; `SESSIONTOOL_INDEX_PARALLEL_MIN` lowers it (tests use the worker
    processes on small fixtures)."""
    env = os.environ.get("SESSIONTOOL_INDEX_PARALLEL_MIN", "")
    return int(env) if env.isdigit() else PARALLEL_MIN_BYTES


def worker_count() -> int:
    """Worker processes of a big catch-up (0: none). By default one per CPU beyond the one
    that writes the index, up to 4, and none on 2 CPUs: there the writer is the bottleneck and
    workers beside it cost CPU (a first search of 1 GB: 26.9 s of CPU and 29.3 s of wall with
    two, 23.9 and 26.2 s without; 100 MB: ~20% more CPU, no less wall)."""
    env = os.environ.get("SESSIONTOOL_INDEX_WORKERS", "")
    if env.isdigit() and int(env) > 0:
        return min(int(env), 16)
    n = min(4, (os.cpu_count() or 1) - 1)
    return n if n >= 2 else 0
