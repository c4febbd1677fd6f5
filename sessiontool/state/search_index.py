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
lock is taken. A missing index is rebuilt, an unreadable one is deleted and rebuilt (the
caller is told, to warn). OpenClaw never reads it.

The index's file (schema, opening, writing rows) is state/index_db.py; parsing the transcripts
(also in worker processes) is state/index_scan.py; this module decides what to read again and
keeps the index in step with the transcripts."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from sessiontool import diag
from sessiontool.errors import BusyError, StorageError
from sessiontool.state import sqlite_conn
from sessiontool.state.index_db import (
    DAY_MS,
    INDEX_NAME,
    IndexCorrupt,
    IndexStale,
    fts5_available,
    insert_rows,
    is_corruption,
    open_index,
    remove_index,
    trigram_available,
)
from sessiontool.state.index_scan import (
    FULL_DIGEST_MAX,
    PARALLEL_MAX_FILE,
    Job,
    Read,
    Row,
    can_fork,
    collect,
    parallel_min,
    read_forked,
    read_job,
    row_text,
    same_prefix,
    worker_count,
)
from sessiontool.state.index_text import HIT, extract_message, has_unsegmented

__all__ = [
    "DAY_MS",
    "HIT",
    "Index",
    "Virtual",
    "has_unsegmented",
    "remove_index",
    "row_text",
    "using_index",
]

T = TypeVar("T")
# When purged rows (their words linger in the contentless FTS tables) pass this many and outnumber
# the live rows, the index is rebuilt.
DEAD_REBUILD_MIN = 20_000


# is further back than that (it means "everything", as it does for `list`).
MS_MIN, MS_MAX = -(2**62), 2**62


def clamp_ms(ms: int | None) -> int | None:
    return None if ms is None else max(MS_MIN, min(MS_MAX, ms))


VIRTUAL_SEP = "#"


@dataclass(frozen=True)
class Virtual:
    """A transcript that is not a JSONL file: `name` is `<database>#<sessionId>`, `version`
    changes whenever the session does, `load` returns its entries (`{"type": "message",
    "message": {...}}`, as JSONL lines are) oldest first."""

    name: str
    version: str
    load: Callable[[], list[dict[str, Any]]]


def unchanged(
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
        self.conn = open_index(root, self.fts, self.trigram)

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
        fast = unchanged(wanted, sources, stats, known)
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
                last_role = collect(file_id, ex, 0, last_role, rows, turns)
        self._insert(rows, turns, keep_text=True)
        c.execute(
            "UPDATE files SET tail = ?, last_role = ? WHERE id = ?", (version, last_role, file_id)
        )
        return file_id

    def _insert(
        self, rows: list[Row], turns: list[tuple[Any, ...]], *, keep_text: bool = False
    ) -> None:
        insert_rows(self.conn, self.fts, self.trigram, rows, turns, keep_text=keep_text)

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
                or not same_prefix(path, off, digest)
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
            sum(j.size - j.off for j in pool_jobs) >= parallel_min()
            and len(pool_jobs) > 1
            and can_fork()
        ):
            done: set[int] = set()
            for got in read_forked(pool_jobs, worker_count()):
                self._save_read(got)
                done.add(got.job.file_id)
            jobs = [j for j in jobs if j.file_id not in done]  # what a dead worker left
        for j in jobs:
            self._save_read(read_job(j))
        if self.fts and sum(j.size - j.off for j in all_jobs) >= parallel_min():
            # A big catch-up leaves FTS5 a few big segments beside the small ones later
            # catch-ups add; when those pile up, FTS5 merges them all in one commit (16 s for
            # 1 GB, in some later search). Merged into one now, as part of the build.
            self.conn.execute("INSERT INTO fts(fts, rank) VALUES ('optimize', 0)")
            if self.trigram:
                self.conn.execute("INSERT INTO fts_cjk(fts_cjk, rank) VALUES ('optimize', 0)")

    def _save_read(self, got: Read) -> None:
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
        except (IndexCorrupt, sqlite3.DatabaseError, UnicodeDecodeError) as exc:
            if isinstance(exc, sqlite3.OperationalError) and not is_corruption(exc):
                if "locked" in str(exc).lower() or "busy" in str(exc).lower():
                    raise BusyError(f"the search index {root / INDEX_NAME} is busy") from exc
                raise StorageError(f"search index {root / INDEX_NAME}: {exc}") from exc
            if attempt:
                raise StorageError(
                    f"the search index {root / INDEX_NAME} cannot be rebuilt: {sqlite_conn.reason(exc)}"
                ) from exc
            if not isinstance(exc, IndexStale):
                diag.warn(
                    f"the search index {root / INDEX_NAME} was unreadable ({sqlite_conn.reason(exc)}): rebuilt"
                )
            remove_index(root)
    raise AssertionError("unreachable")  # pragma: no cover
