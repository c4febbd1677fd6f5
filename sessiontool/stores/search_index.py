"""sessiontool's own index of transcripts: `<state>/sessiontool/index.sqlite` (standard library
sqlite3). Message text in an FTS5 table (unicode61 words; rows in unsegmented scripts also in a
trigram table), and each assistant message's token usage for `usage`.

It is disposable and always catches up before it answers: per transcript it remembers the
identity (device, inode), the size, mtime and ctime it saw, the offset it read to and a digest
of the bytes before that offset (`prefix_digest`: every byte up to FULL_DIGEST_MAX, sampled
blocks beyond). A grown file whose digest still matches is read from that offset only; a shrunk,
replaced or rewritten file is read again from the start; a vanished one is dropped. The ctime
is what catches a rewrite that kept the size and mtime (`cp -p`, `rsync -t`, a restore): no
one can set it back. When no transcript changed (one stat each), nothing is written and no
lock is taken. A missing index is rebuilt, an
unreadable one is deleted and rebuilt (the caller is told, to warn). OpenClaw never reads it."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from sessiontool import diag
from sessiontool.errors import BusyError, CorruptStateError, StorageError, UnsafePathError
from sessiontool.stores.index_text import (
    HIT,
    Extracted,
    extract,
    extract_message,
    has_unsegmented,
    iter_complete_lines,
)
from sessiontool.stores.paths import ensure_dir

__all__ = [
    "HIT",
    "Index",
    "Virtual",
    "has_unsegmented",
    "remove_index",
    "row_text",
    "using_index",
]

SCHEMA_VERSION = 6
INDEX_NAME = "index.sqlite"
# What a transcript's digest covers: every byte of a prefix up to this size (a few ms per MB,
# paid only when the file changed); beyond it the first and last EDGE bytes and SAMPLES blocks
# spread between them, so a catch-up after one new message in a huge transcript stays cheap.
FULL_DIGEST_MAX = 32 << 20
EDGE = 1 << 20
SAMPLES = 256
SAMPLE = 16 << 10
BUSY_TIMEOUT_S = 30.0
T = TypeVar("T")

_SCHEMA = """
CREATE TABLE files(
  id INTEGER PRIMARY KEY, path TEXT UNIQUE NOT NULL, dev INTEGER, ino INTEGER,
  size INTEGER, mtime INTEGER, off INTEGER, tail BLOB, last_role TEXT, ctime INTEGER);
CREATE TABLE msgs(
  id INTEGER PRIMARY KEY AUTOINCREMENT, file_id INTEGER NOT NULL, ts INTEGER, role TEXT,
  cjk INTEGER, off INTEGER, part INTEGER, text TEXT);
CREATE INDEX msgs_file ON msgs(file_id);
CREATE TABLE turns(
  file_id INTEGER NOT NULL, ts INTEGER, provider TEXT, model TEXT, input INTEGER,
  output INTEGER, cache_read INTEGER, cache_write INTEGER, cost REAL, run_start INTEGER);
CREATE INDEX turns_file ON turns(file_id);
CREATE INDEX turns_ts ON turns(ts);
CREATE TABLE days(
  file_id INTEGER NOT NULL, day INTEGER NOT NULL, provider TEXT NOT NULL, model TEXT NOT NULL,
  turns INTEGER, runs INTEGER, input INTEGER, output INTEGER, cache_read INTEGER,
  cache_write INTEGER, cost REAL, n_cost INTEGER,
  PRIMARY KEY(file_id, day, provider, model)) WITHOUT ROWID;
CREATE TABLE meta(k TEXT PRIMARY KEY, v TEXT);
CREATE TABLE scopes(agent TEXT PRIMARY KEY, ident TEXT NOT NULL, rows BLOB NOT NULL);
"""
# `scopes`: per agent, the sessions a sessions.json file lists (see catalog.live_sessions), under
# that file's identity: a warm search over a 5 MB store reads a few kB here instead of parsing
# the store again (half of what a search costs beyond Python's start-up).
# `days`: each transcript's turns summed per UTC day and model, kept as the turns are indexed,
# so `usage` over a year of transcripts sums a few rows per session and day instead of every
# assistant message (`turns` still answers the partial days at a --since/--until boundary).
DAY_MS = 86_400_000
# Contentless: the text stays in the transcripts (a hit's text is read back from its line), so
# the index holds words and positions only. A purged row leaves its words behind in the FTS
# tables; they match no `msgs` row (ids are never reused) and, when they outnumber the live
# rows, the index is rebuilt.
_FTS = (
    "CREATE VIRTUAL TABLE fts USING fts5(text, content='', "
    "tokenize='unicode61 remove_diacritics 2')"
)
_FTS_CJK = "CREATE VIRTUAL TABLE fts_cjk USING fts5(text, content='', tokenize='trigram')"
DEAD_REBUILD_MIN = 20_000
# FTS5 flushes its pending terms to a new segment whenever they pass this size (1 MB by
# default): a first build of 1 GB made ~1000 small segments and spent half its time merging them.
FTS_HASHSIZE = 64 << 20
# A first build (or any catch-up) that reads at least this much from files no bigger than
# PARALLEL_MAX_FILE parses them in worker processes while this one writes the index.
PARALLEL_MIN_BYTES = 64 << 20
PARALLEL_MAX_FILE = 256 << 20
BATCH_ROWS = 20_000


class IndexCorrupt(Exception):
    """The index file could not be used; the caller deletes it and tries once more."""


class IndexStale(IndexCorrupt):
    """Built by another schema version or a SQLite with other features: rebuilt silently."""


def _probe(sql: str) -> bool:
    try:
        with closing(sqlite3.connect(":memory:")) as c:
            c.execute(sql)
        return True
    except sqlite3.Error:
        return False


def fts5_available() -> bool:
    """Whether this Python's SQLite has FTS5 (`SESSIONTOOL_NO_FTS5=1` pretends it has not:
    the fallback is tested on every machine)."""
    if os.environ.get("SESSIONTOOL_NO_FTS5") == "1":
        return False
    return _probe("CREATE VIRTUAL TABLE t USING fts5(x)")


def trigram_available() -> bool:
    return fts5_available() and _probe("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='trigram')")


Row = tuple[int, int, str, int, int, int, str]  # file_id, ts, role, cjk, off, part, text


def _collect(
    file_id: int,
    ex: Extracted,
    off: int,
    last_role: str | None,
    rows: list[Row],
    turns: list[tuple[Any, ...]],
) -> str | None:
    """Add one message's rows and turn; returns the role the next message follows. A run
    starts at the first assistant turn after anything but an assistant or tool message."""
    for part, (ts, role, text) in enumerate(ex.rows):
        rows.append((file_id, ts, role, int(has_unsegmented(text)), off, part, text))
    if ex.turn is not None:
        turns.append((file_id, *ex.turn, int(last_role not in ("assistant", "toolResult"))))
    return ex.role if ex.role is not None else last_role


# Timestamps a bound may name: SQLite's integers are 64-bit, and `--since 99999999999999d`
# is further back than that (it means "everything", as it does for `list`).
MS_MIN, MS_MAX = -(2**62), 2**62


def clamp_ms(ms: int | None) -> int | None:
    return None if ms is None else max(MS_MIN, min(MS_MAX, ms))


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


VIRTUAL_SEP = "#"


@dataclass(frozen=True)
class Virtual:
    """A transcript that is not a JSONL file: `name` is `<database>#<sessionId>`, `version`
    changes whenever the session does, `load` returns its entries (`{"type": "message",
    "message": {...}}`, as JSONL lines are) oldest first."""

    name: str
    version: str
    load: Callable[[], list[dict[str, Any]]]


@dataclass(frozen=True)
class Job:
    """What to read of one transcript: bytes [off, size) after a message of `last_role`;
    `digest` is the (checked) digest of the bytes before `off`."""

    file_id: int
    path: str
    off: int
    size: int
    last_role: str | None
    st: os.stat_result
    digest: bytes = b""


@dataclass
class Read:
    """What reading a Job gave: the rows and turns, how far it read (whole lines only), the
    digest of the bytes before that offset and the role the next line follows; or the OS
    error."""

    job: Job
    off: int = 0
    tail: bytes = b""
    last_role: str | None = None
    rows: list[Row] = field(default_factory=list)
    turns: list[tuple[Any, ...]] = field(default_factory=list)
    error: str | None = None
    errno: int | None = None


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
        for end, raw in iter_complete_lines(Path(job.path), job.off, job.size, crc):
            start, out.off = out.off, end
            ex = extract(raw)
            if ex is not None:
                last_role = _collect(job.file_id, ex, start, last_role, out.rows, out.turns)
        if out.off == job.off and job.digest:
            out.tail = job.digest
        elif crc is not None and out.off <= FULL_DIGEST_MAX:
            out.tail = b"F" + out.off.to_bytes(8, "big") + crc[0].to_bytes(4, "big")
        elif out.off:
            with open(job.path, "rb") as fh:
                out.tail = prefix_digest(fh, out.off)
    except OSError as exc:
        out.error = exc.strerror or str(exc)
        out.errno = exc.errno
    out.last_role = last_role
    return out


def day_sums(turns: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Turns (file_id, ts, provider, model, in, out, cr, cw, cost, run_start) summed per
    file, UTC day and model, as `days` rows."""
    sums: dict[tuple[int, int, str, str], list[Any]] = {}
    for file_id, ts, provider, model, i, o, cr, cw, cost, run_start in turns:
        key = (file_id, ts // DAY_MS, provider, model)
        s = sums.get(key)
        if s is None:
            s = sums[key] = [0, 0, 0, 0, 0, 0, 0.0, 0]
        s[0] += 1
        s[1] += run_start
        s[2] += i
        s[3] += o
        s[4] += cr
        s[5] += cw
        if cost is not None:
            s[6] += cost
            s[7] += 1
    return [(*k, *v) for k, v in sums.items()]


def read_forked(jobs: list[Job], workers: int) -> Iterator[Read]:
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


def _can_fork() -> bool:
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


def _parallel_min() -> int:
    """PARALLEL_MIN_BYTES; `SESSIONTOOL_INDEX_PARALLEL_MIN` lowers it (tests use the worker
    processes on small fixtures)."""
    env = os.environ.get("SESSIONTOOL_INDEX_PARALLEL_MIN", "")
    return int(env) if env.isdigit() else PARALLEL_MIN_BYTES


def _workers() -> int:
    env = os.environ.get("SESSIONTOOL_INDEX_WORKERS", "")
    if env.isdigit() and int(env) > 0:
        return min(int(env), 16)
    return max(1, min(4, os.cpu_count() or 1))


# -- the index file --------------------------------------------------------------------------


def _is_corruption(exc: sqlite3.Error) -> bool:
    text = str(exc).lower()
    return (
        any(
            s in text
            for s in ("malformed", "not a database", "encrypted", "disk image", "no such table")
        )
        or isinstance(exc, sqlite3.DatabaseError)
        and not isinstance(exc, sqlite3.OperationalError)
    )


class Index:
    """An open index. Use as a context manager; `sync` before reading."""

    def __init__(self, root: Path) -> None:
        self.dir = root
        self.path = root / INDEX_NAME
        self.fts = fts5_available()
        self.trigram = self.fts and trigram_available()
        self.dead = 0
        # Transcripts the last sync could not read (a directory, no permission): path → the
        # OSError. Their rows are dropped (no hit from words they may no longer hold); the
        # caller warns, or fails when that session was asked for.
        self.unreadable: dict[str, OSError] = {}
        self.conn = self._open()

    def _open(self) -> sqlite3.Connection:
        ensure_dir(self.dir)
        check_index_files(self.dir)
        try:  # private text: owner-only from the first byte (WAL files copy the mode)
            os.close(
                os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            )
        except OSError as exc:
            check_index_files(self.dir)  # a link or a directory planted meanwhile
            raise StorageError(f"cannot create {self.path}: {exc.strerror}") from exc
        try:
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        except sqlite3.Error as exc:
            raise IndexCorrupt(str(exc)) from exc
        try:
            # SQLite opens the -wal/-shm/-journal files by name and follows links: checked
            # again now that they exist (WAL mode creates them at the first read).
            conn.execute("PRAGMA schema_version").fetchone()
            check_index_files(self.dir)
        except BaseException:
            conn.close()
            raise
        try:
            # No fsync, ever: the index is disposable (rebuilt from the transcripts when lost
            # or unreadable), and with NORMAL the checkpoint that closing the last connection
            # runs cost a search after one new message 5-20 ms of fsync on a busy disk.
            conn.execute("PRAGMA synchronous=OFF")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version == 0:
                conn.execute("PRAGMA journal_mode=WAL")  # persistent: set once, at creation
                self._create(conn)
            elif version != SCHEMA_VERSION:
                raise IndexStale(f"schema version {version}")
            else:
                flags = dict(conn.execute("SELECT k, v FROM meta").fetchall())
                if flags.get("fts") != str(int(self.fts)) or (
                    flags.get("trigram") != str(int(self.trigram))
                ):
                    raise IndexStale("built by a SQLite with other features")
        except sqlite3.OperationalError as exc:
            conn.close()
            if "locked" in str(exc).lower() or "busy" in str(exc).lower():
                raise BusyError(f"the search index {self.path} is busy") from exc
            raise IndexCorrupt(str(exc)) from exc
        except sqlite3.Error as exc:
            conn.close()
            raise IndexCorrupt(str(exc)) from exc
        except IndexCorrupt:
            conn.close()
            raise
        return conn

    def _create(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            if conn.execute("PRAGMA user_version").fetchone()[0] != 0:
                conn.execute("ROLLBACK")  # another process created it meanwhile
                return
            for stmt in _SCHEMA.split(";"):
                if stmt.strip():
                    conn.execute(stmt)
            if self.fts:
                conn.execute(_FTS)
                conn.execute("INSERT INTO fts(fts, rank) VALUES ('hashsize', ?)", (FTS_HASHSIZE,))
            if self.trigram:
                conn.execute(_FTS_CJK)
                conn.execute(
                    "INSERT INTO fts_cjk(fts_cjk, rank) VALUES ('hashsize', ?)", (FTS_HASHSIZE,)
                )
            conn.executemany(
                "INSERT INTO meta(k, v) VALUES (?, ?)",
                [("fts", str(int(self.fts))), ("trigram", str(int(self.trigram)))],
            )
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- catching up -------------------------------------------------------------------------

    def _purge(self, file_id: int) -> None:
        c = self.conn
        cur = c.execute("DELETE FROM msgs WHERE file_id = ?", (file_id,))
        self.dead += max(0, cur.rowcount)
        c.execute("DELETE FROM turns WHERE file_id = ?", (file_id,))
        c.execute("DELETE FROM days WHERE file_id = ?", (file_id,))

    def _files(self) -> dict[str, tuple[Any, ...]]:
        """path → (id, path, dev, ino, size, mtime, off, tail, last_role, ctime)."""
        return {r[1]: r for r in self.conn.execute("SELECT * FROM files").fetchall()}

    def _unchanged(
        self,
        wanted: dict[str, Path | None],
        sources: list[Virtual],
        stats: dict[str, os.stat_result],
        known: dict[str, tuple[Any, ...]],
    ) -> dict[str, int] | None:
        """The ids of `wanted` when nothing needs catching up (None otherwise), found without a
        write lock: each transcript's stat (`stats`, None: gone) against the identity, size
        and mtime stored for it, and a stat of each indexed file that is no longer wanted (gone:
        to purge)."""
        ids: dict[str, int] = {}
        for v in sources:
            row = known.get(v.name)
            if row is None or row[7] != v.version.encode():
                return None
            ids[v.name] = int(row[0])
        for spath, path in wanted.items():
            if path is None:
                continue
            st = stats.get(spath)
            if st is None:
                if spath in known:
                    return None
                continue
            row = known.get(spath)
            if row is None or (row[2], row[3], row[4], row[5], row[9]) != (
                st.st_dev,
                st.st_ino,
                st.st_size,
                st.st_mtime_ns,
                st.st_ctime_ns,
            ):
                return None
            ids[spath] = int(row[0])
        for spath in known:
            if spath not in wanted and not os.path.exists(spath.partition(VIRTUAL_SEP)[0]):
                return None
        return ids

    def sync(self, paths: Iterable[Path], virtual: Iterable[Virtual] = ()) -> dict[str, int]:
        """Bring the index up to date for `paths` and `virtual` transcripts; drop files that no
        longer exist. Returns path (or virtual name) → file id for those that exist."""
        c = self.conn
        self.unreadable = {}
        wanted: dict[str, Path | None] = {str(p): p for p in paths}
        sources = list(virtual)
        for v in sources:
            wanted[v.name] = None
        # One stat per transcript, taken before the lock and used after it too: a file that
        # grows meanwhile is read up to the size seen here, the rest at the next catch-up.
        stats: dict[str, os.stat_result] = {}
        for spath, path in wanted.items():
            if path is not None:
                try:
                    stats[spath] = os.stat(spath)
                except OSError:
                    pass
        seen = c.execute("PRAGMA data_version").fetchone()[0]
        known = self._files()
        fast = self._unchanged(wanted, sources, stats, known)
        if fast is not None:
            return fast
        try:
            c.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise BusyError(f"the search index {self.path} is busy") from exc
        try:
            got = c.execute("SELECT v FROM meta WHERE k = 'dead'").fetchone()
            self.dead = int(got[0]) if got else 0
            dead_before = self.dead
            if c.execute("PRAGMA data_version").fetchone()[0] != seen:
                known = self._files()  # another process wrote since: read again, under the lock
            by_inode = {(r[2], r[3]): r for r in known.values()}
            ids: dict[str, int] = {}
            jobs: list[Job] = []
            for v in sources:
                ids[v.name] = self._catch_up_virtual(v, known.get(v.name))
            gone: list[int] = []
            for spath, path in wanted.items():
                if path is None:
                    continue
                st = stats.get(spath)
                row = known.get(spath)
                if st is None:
                    if row is not None:  # named by a session, but its file is gone
                        gone.append(row[0])
                        del known[spath]
                    continue
                if row is None:
                    moved = by_inode.get((st.st_dev, st.st_ino))
                    if (
                        moved is not None
                        and moved[1] not in wanted
                        and not os.path.exists(moved[1])
                    ):
                        # Renamed (archived by delete/reset): same bytes, new name.
                        c.execute("UPDATE files SET path = ? WHERE id = ?", (spath, moved[0]))
                        del known[moved[1]]
                        row = (moved[0], spath, *moved[2:])
                        known[spath] = row
                ids[spath] = self._catch_up(path, st, row, jobs)
            self._run(jobs)
            for spath in self.unreadable:
                ids.pop(spath, None)
            for spath, row in known.items():
                if spath not in wanted and not os.path.exists(spath.partition(VIRTUAL_SEP)[0]):
                    gone.append(row[0])
            for file_id in gone:
                self._purge(file_id)
                c.execute("DELETE FROM files WHERE id = ?", (file_id,))
            if self.dead != dead_before:
                c.execute("INSERT OR REPLACE INTO meta(k, v) VALUES ('dead', ?)", (str(self.dead),))
            c.execute("COMMIT")
            if self.fts and self.dead > DEAD_REBUILD_MIN:
                live = c.execute("SELECT count(*) FROM msgs").fetchone()[0]
                if self.dead > live:
                    raise IndexStale("mostly stale entries")
        except BaseException:
            if c.in_transaction:
                c.execute("ROLLBACK")
            raise
        return ids

    def _catch_up_virtual(self, v: Virtual, row: tuple[Any, ...] | None) -> int:
        """A transcript another store holds (OpenClaw's SQLite): read whole again whenever its
        version (the session's updatedAt) changes."""
        c = self.conn
        version = v.version.encode()
        if row is not None and row[7] == version:
            return int(row[0])
        if row is None:
            cur = c.execute(
                "INSERT INTO files(path, dev, ino, size, mtime, off, tail, last_role) "
                "VALUES (?, 0, 0, 0, 0, 0, NULL, NULL)",
                (v.name,),
            )
            file_id = int(cur.lastrowid or 0)
        else:
            file_id = int(row[0])
            self._purge(file_id)
        rows: list[Row] = []
        turns: list[tuple[Any, ...]] = []
        last_role: str | None = None
        for line in v.load():
            msg = line.get("message") if isinstance(line, dict) else None
            if line.get("type") == "message" and isinstance(msg, dict):
                ex = extract_message(msg, line)
                last_role = _collect(file_id, ex, 0, last_role, rows, turns)
        self._insert(rows, turns, keep_text=True)
        c.execute(
            "UPDATE files SET tail = ?, last_role = ? WHERE id = ?", (version, last_role, file_id)
        )
        return file_id

    def _insert(
        self, rows: list[Row], turns: list[tuple[Any, ...]], *, keep_text: bool = False
    ) -> None:
        """Rows of file transcripts keep no text (it is read back from the line at `off`);
        a virtual transcript's rows keep theirs."""
        c = self.conn
        if rows:
            got = c.execute("SELECT seq FROM sqlite_sequence WHERE name = 'msgs'").fetchone()
            start = (int(got[0]) if got else 0) + 1
            c.executemany(
                "INSERT INTO msgs(file_id, ts, role, cjk, off, part, text) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(*r[:6], r[6] if keep_text else None) for r in rows],
            )
            last = c.execute("SELECT seq FROM sqlite_sequence WHERE name = 'msgs'").fetchone()
            if int(last[0]) != start + len(rows) - 1:
                raise IndexCorrupt("message ids out of sequence")
            if self.fts:
                c.executemany(
                    "INSERT INTO fts(rowid, text) VALUES (?, ?)",
                    ((start + i, r[6]) for i, r in enumerate(rows)),
                )
            if self.trigram:
                c.executemany(
                    "INSERT INTO fts_cjk(rowid, text) VALUES (?, ?)",
                    ((start + i, r[6]) for i, r in enumerate(rows) if r[3]),
                )
        if turns:
            c.executemany(
                "INSERT INTO turns(file_id, ts, provider, model, input, output, cache_read, "
                "cache_write, cost, run_start) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                turns,
            )
            c.executemany(
                "INSERT INTO days(file_id, day, provider, model, turns, runs, input, output, "
                "cache_read, cache_write, cost, n_cost) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(file_id, day, provider, model) DO UPDATE SET "
                "turns = turns + excluded.turns, runs = runs + excluded.runs, "
                "input = input + excluded.input, output = output + excluded.output, "
                "cache_read = cache_read + excluded.cache_read, "
                "cache_write = cache_write + excluded.cache_write, "
                "cost = cost + excluded.cost, n_cost = n_cost + excluded.n_cost",
                day_sums(turns),
            )

    def _same_prefix(self, path: Path, off: int, digest: bytes | None) -> bool:
        if off == 0:
            return True
        try:
            with open(path, "rb") as fh:
                return bool(digest) and prefix_digest(fh, off) == digest
        except OSError:
            return False

    def _catch_up(
        self, path: Path, st: os.stat_result, row: tuple[Any, ...] | None, jobs: list[Job]
    ) -> int:
        """The file's id; what must be read of it (from where) is added to `jobs`."""
        c = self.conn
        if row is None:
            cur = c.execute(
                "INSERT INTO files(path, dev, ino, size, mtime, off, tail, last_role) "
                "VALUES (?, ?, ?, 0, 0, 0, NULL, NULL)",
                (str(path), st.st_dev, st.st_ino),
            )
            file_id = int(cur.lastrowid or 0)
            off, last_role, digest = 0, None, b""
        else:
            file_id, _p, dev, ino, size, mtime, off, digest, last_role, ctime = row
            if (dev, ino, size, mtime, ctime) == (
                st.st_dev,
                st.st_ino,
                st.st_size,
                st.st_mtime_ns,
                st.st_ctime_ns,
            ):
                return int(file_id)
            if (
                (dev, ino) != (st.st_dev, st.st_ino)
                or st.st_size < off
                # Changed without growing, where the digest samples: it cannot prove that
                # nothing changed (a rename or chmod also moves the ctime).
                or (st.st_size <= size and off > FULL_DIGEST_MAX)
                or not self._same_prefix(path, off, digest)
            ):
                self._purge(file_id)  # replaced or rewritten: read it again from the start
                off, last_role, digest = 0, None, b""
        jobs.append(Job(int(file_id), str(path), off, st.st_size, last_role, st, digest or b""))
        return int(file_id)

    def _run(self, jobs: list[Job]) -> None:
        """Read what `jobs` ask for and write it to the index: the small and the many files in
        worker processes when there is much to read and more than one CPU, the rest here."""
        all_jobs = jobs
        pool_jobs = [j for j in jobs if j.size - j.off <= PARALLEL_MAX_FILE]
        if (
            sum(j.size - j.off for j in pool_jobs) >= _parallel_min()
            and len(pool_jobs) > 1
            and _can_fork()
        ):
            done: set[int] = set()
            for got in read_forked(pool_jobs, _workers()):
                self._store(got)
                done.add(got.job.file_id)
            jobs = [j for j in jobs if j.file_id not in done]  # what a dead worker left
        for j in jobs:
            self._store(read_job(j))
        if self.fts and sum(j.size - j.off for j in all_jobs) >= _parallel_min():
            # A big catch-up leaves FTS5 a few big segments beside the small ones later
            # catch-ups add; when those pile up, FTS5 merges them all in one commit (16 s for
            # 1 GB, in some later search). Merged into one now, as part of the build.
            self.conn.execute("INSERT INTO fts(fts, rank) VALUES ('optimize', 0)")
            if self.trigram:
                self.conn.execute("INSERT INTO fts_cjk(fts_cjk, rank) VALUES ('optimize', 0)")

    def _store(self, got: Read) -> None:
        job = got.job
        if got.error is not None:
            self.unreadable[job.path] = OSError(got.errno or 0, got.error, job.path)
            self._purge(job.file_id)
            # Forget what was read: once readable again it is read from the start.
            self.conn.execute(
                "UPDATE files SET size = -1, mtime = 0, ctime = 0, off = 0, tail = NULL, "
                "last_role = NULL WHERE id = ?",
                (job.file_id,),
            )
            return
        self._insert(got.rows, got.turns)
        st = job.st
        self.conn.execute(
            "UPDATE files SET dev = ?, ino = ?, size = ?, mtime = ?, ctime = ?, off = ?, "
            "tail = ?, last_role = ? WHERE id = ?",
            (
                st.st_dev,
                st.st_ino,
                st.st_size,
                st.st_mtime_ns,
                st.st_ctime_ns,
                got.off,
                got.tail,
                got.last_role,
                job.file_id,
            ),
        )

    # -- the sessions a store lists ----------------------------------------------------------

    def scope_rows(self, agent_id: str, ident: str) -> list[Any] | None:
        """The rows kept for `agent_id` under the store identity `ident`, or None."""
        got = self.conn.execute(
            "SELECT rows FROM scopes WHERE agent = ? AND ident = ?", (agent_id, ident)
        ).fetchone()
        if got is None:
            return None
        import orjson

        try:
            rows = orjson.loads(got[0])
        except orjson.JSONDecodeError:
            return None
        return rows if isinstance(rows, list) else None

    def keep_scope_rows(self, agent_id: str, ident: str, rows: list[Any]) -> None:
        """Keep `rows` for the next search; best effort (a busy index or rows orjson cannot
        write, such as a lone surrogate in a key, only mean the store is parsed next time)."""
        import orjson

        try:
            blob = orjson.dumps(rows)
        except orjson.JSONEncodeError:
            return
        try:
            self.conn.execute(
                "INSERT OR REPLACE INTO scopes(agent, ident, rows) VALUES (?, ?, ?)",
                (agent_id, ident, blob),
            )
        except sqlite3.OperationalError:
            pass

    # -- reading -----------------------------------------------------------------------------

    def set_scope(self, file_ids: Iterable[int]) -> bool:
        """Limit reads to these files: fills `temp.scope` and returns True, or returns False
        when they are every file in the index (no filter needed, none made)."""
        c = self.conn
        wanted = set(file_ids)
        if len(wanted) == c.execute("SELECT count(*) FROM files").fetchone()[0]:
            return False
        c.execute("PRAGMA temp_store = MEMORY")
        c.execute("CREATE TEMP TABLE IF NOT EXISTS scope(id INTEGER PRIMARY KEY)")
        c.execute("DELETE FROM temp.scope")
        c.executemany("INSERT OR IGNORE INTO temp.scope(id) VALUES (?)", ((i,) for i in wanted))
        return True


INDEX_FILES = ("", "-wal", "-shm", "-journal")


def check_index_files(root: Path) -> None:
    """Refuse (exit 5) when the index or a file SQLite keeps beside it is a link (SQLite
    follows one: a planted link would make it create or rewrite a file outside the state dir,
    even another program's database) or a directory (nothing sessiontool can delete or use)."""
    import stat

    for suffix in INDEX_FILES:
        p = root / (INDEX_NAME + suffix)
        try:
            st = os.lstat(p)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise StorageError(f"cannot use the search index file {p}: {exc.strerror}") from exc
        if stat.S_ISLNK(st.st_mode):
            raise UnsafePathError(
                f"refusing to open the search index through the link {p} -> "
                f"{os.path.realpath(p)}; remove it (rm {p}): the index is rebuilt",
                extra={"path": str(p)},
            )
        if not stat.S_ISREG(st.st_mode):
            raise CorruptStateError(
                f"the search index file {p} is not a regular file; move it aside (mv {p} "
                f"{p}.bak): the index is rebuilt",
                extra={"path": str(p)},
            )


def left_out(idx: Index, asked: bool) -> None:
    """Word the transcripts the last sync could not read: when the caller asked for that one
    session, its error (exit 5 for a directory, 4 for no permission); otherwise one warning
    each, naming it, and the answer goes on without it."""
    from sessiontool.errors import from_os_error

    for path, exc in idx.unreadable.items():
        if asked:
            raise from_os_error(exc, "read the transcript")
        diag.warn(f"cannot read {path}: {exc.strerror}; its messages are left out")


def using_index(root: Path, fn: Callable[[Index], T]) -> T:
    """Run `fn` on the index; an unreadable index is deleted, rebuilt (with a warning) and
    `fn` run once more."""
    for attempt in (0, 1):
        try:
            with Index(root) as idx:
                return fn(idx)
        except (IndexCorrupt, sqlite3.DatabaseError) as exc:
            if isinstance(exc, sqlite3.OperationalError) and not _is_corruption(exc):
                if "locked" in str(exc).lower() or "busy" in str(exc).lower():
                    raise BusyError(f"the search index {root / INDEX_NAME} is busy") from exc
                raise StorageError(f"search index {root / INDEX_NAME}: {exc}") from exc
            if attempt:
                raise StorageError(
                    f"the search index {root / INDEX_NAME} cannot be rebuilt: {exc}"
                ) from exc
            if not isinstance(exc, IndexStale):
                diag.warn(f"the search index {root / INDEX_NAME} was unreadable ({exc}): rebuilt")
            remove_index(root)
    raise AssertionError("unreachable")  # pragma: no cover


def remove_index(root: Path) -> None:
    check_index_files(root)
    for suffix in INDEX_FILES:
        try:
            os.unlink(root / (INDEX_NAME + suffix))
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise StorageError(
                f"cannot remove the search index {root / INDEX_NAME}: {exc.strerror}"
            ) from exc
