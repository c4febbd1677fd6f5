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

import json
import os
import sqlite3
from collections.abc import Callable, Iterable
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
    is_corruption,
    open_index,
    remove_index,
    trigram_available,
)
from sessiontool.state.index_scan import Job, row_text
from sessiontool.state.index_snap import Snapshots
from sessiontool.state.index_sync import (
    RESTARTS,
    VIRTUAL_SEP,
    CatchUp,
    Progress,
    Virtual,
    _Restart,
    unchanged,
)
from sessiontool.state.index_text import HIT, has_unsegmented

__all__ = [
    "DAY_MS",
    "HIT",
    "Index",
    "Progress",
    "VIRTUAL_SEP",
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


class Index(CatchUp, Snapshots):
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

    def _files(
        self, only: dict[str, Path | str | None] | None = None
    ) -> dict[str, tuple[Any, ...]]:
        """path → (id, path, dev, ino, size, mtime, off, tail, last_role, ctime, text), of
        every file or of those `only` names."""
        if only is not None:
            got = self.conn.execute(
                "SELECT * FROM files WHERE path IN (SELECT value FROM json_each(?))",
                (json.dumps(list(only)),),
            ).fetchall()
            return {r[1]: r for r in got}
        return {r[1]: r for r in self.conn.execute("SELECT * FROM files").fetchall()}

    def sync(
        self,
        paths: Iterable[Path | str],
        virtual: Iterable[Virtual] = (),
        *,
        text: bool = True,
        progress: Progress | None = None,
        others: bool = True,
    ) -> dict[str, int]:
        """Bring the index up to date for `paths` and `virtual` transcripts; drop files that no
        longer exist (without `others`, only those of `paths`: the hot transcripts of a
        snapshot, state/index_snap.py, are caught up alone). Returns path (or virtual name) →
        file id for those that exist. Without
        `text` (`usage`), the turns alone are read where no text is indexed yet (the text of
        a file whose text is indexed is kept current). `progress` is told how far a catch-up
        got after each file. A big catch-up is committed in parts: an interrupted one keeps
        what it finished, and the next sync goes on from there."""
        paths = list(paths)
        virtual = list(virtual)
        if not virtual:
            self.unreadable = {}
            quick = self._unchanged_files([os.fspath(p) for p in paths], others, text)
            if quick is not None:
                return quick
        for _attempt in range(RESTARTS):
            try:
                return self._sync(paths, virtual, text, progress, others)
            except _Restart:
                continue  # another process wrote between two parts: look again
        raise BusyError(f"the search index {self.path} is busy")

    def _sync(
        self,
        paths: list[Path | str],
        virtual: list[Virtual],
        text: bool,
        progress: Progress | None,
        others: bool = True,
    ) -> dict[str, int]:
        c = self.conn
        self.unreadable = {}
        wanted: dict[str, Path | str | None] = {os.fspath(p): p for p in paths}
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
        only = None if others else wanted  # the others are neither checked nor dropped
        known = self._files(only)
        fast = unchanged(wanted, sources, stats, known, text)
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
                known = self._files(only)  # another process wrote since: read again, under the lock
            by_inode = {(r[2], r[3]): r for r in known.values()}
            ids: dict[str, int] = {}
            jobs: list[Job] = []
            for v in sources:
                ids[v.name] = self._catch_up_virtual(v, known.get(v.name), text)
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
                ids[spath] = self._catch_up(Path(path), st, row, jobs, text)
            self._run(jobs, progress)
            for spath in self.unreadable:
                ids.pop(spath, None)
            for spath, row in known.items():
                if spath not in wanted and not os.path.exists(spath.partition(VIRTUAL_SEP)[0]):
                    gone.append(row[0])
            self._forget(gone)
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

    def _unchanged_files(
        self, wanted: list[str], others: bool, text: bool
    ) -> dict[str, int] | None:
        """`unchanged` for JSONL transcripts alone, in one pass (a stat and a comparison each,
        fewer columns read): the ids when every one is indexed as it is (with `others`, and
        no other file is indexed either), None to look closer."""
        sql = "SELECT path, id, dev, ino, size, mtime, ctime, text FROM files"
        if others:
            rows = {r[0]: r for r in self.conn.execute(sql)}
        else:
            sql += " WHERE path IN (SELECT value FROM json_each(?))"
            rows = {r[0]: r for r in self.conn.execute(sql, (json.dumps(list(wanted)),))}
        if len(rows) != len(wanted):
            return None  # one not indexed yet, one indexed that is not wanted, or twice asked
        ids: dict[str, int] = {}
        stat = os.stat
        for spath in wanted:
            row = rows.get(spath)
            if row is None:
                return None
            try:
                st = stat(spath)
            except OSError:
                return None
            if (row[2], row[3], row[4], row[5], row[6]) != (
                st.st_dev,
                st.st_ino,
                st.st_size,
                st.st_mtime_ns,
                st.st_ctime_ns,
            ) or (text and not row[7]):
                return None
            ids[spath] = row[1]
        return ids

    def _forget(self, gone: list[int]) -> None:
        """Drop these files from the index, and every snapshot with them (their ids may be
        reused now)."""
        if gone:
            self._drop_snaps()
        for file_id in gone:
            self._purge(file_id)
            self.conn.execute("DELETE FROM files WHERE id = ?", (file_id,))

    def same_file(self, file_id: int, st: os.stat_result) -> bool:
        """Whether `st` is the file as the index last read it (identity, size, mtime, ctime)."""
        got = self.conn.execute(
            "SELECT dev, ino, size, mtime, ctime FROM files WHERE id = ?", (file_id,)
        ).fetchone()
        return got is not None and tuple(got) == (
            st.st_dev,
            st.st_ino,
            st.st_size,
            st.st_mtime_ns,
            st.st_ctime_ns,
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
