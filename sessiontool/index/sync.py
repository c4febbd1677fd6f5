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

`Index` is the open index and decides what to read again; it is composed of its parts: the
file (index/db.py), one `CatchUp` per catch-up that writes what changed (index/catchup.py),
and the kept snapshots of a full check, `snaps` (index/snapshots.py)."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from sessiontool import diag
from sessiontool.errors import BusyError, StorageError
from sessiontool.index.catchup import (
    RESTARTS,
    VIRTUAL_SEP,
    CatchUp,
    Progress,
    Restart,
    Virtual,
    unchanged,
)
from sessiontool.index.db import (
    DAY_MS,
    INDEX_NAME,
    FileRow,
    IndexCorrupt,
    IndexStale,
    file_rows,
    fts5_available,
    is_corruption,
    open_index,
    remove_index,
    trigram_available,
)
from sessiontool.index.extract import HIT, has_unsegmented
from sessiontool.index.scan import Job, row_text
from sessiontool.index.snapshots import Snapshots
from sessiontool.state import sqlite_conn

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


_STAMP_SQL = "SELECT path, id, dev, ino, size, mtime, ctime, text FROM files"

# What a sync wants: path (or virtual name) → the path to stat (None: a virtual transcript).
Wanted = dict[str, Path | str | None]


class Index:
    """An open index. Use as a context manager; `sync` before reading."""

    def __init__(self, root: Path) -> None:
        self.dir = root
        self.path = root / INDEX_NAME
        self.fts = fts5_available()
        self.trigram = self.fts and trigram_available()
        # Transcripts the last sync could not read (a directory, no permission): path → the
        # OSError. Their rows are dropped (no hit from words they may no longer hold); the
        # caller warns, or fails when that session was asked for.
        self.unreadable: dict[str, OSError] = {}
        self.conn = open_index(root, self.fts, self.trigram)
        self.snaps = Snapshots(self.conn)
        # The rows the last quick check found every wanted file equal to (path → row), for a
        # stat image made without reading them again (index/stamps.py); None after a catch-up.
        self.checked: dict[str, tuple[Any, ...]] | None = None

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- catching up -------------------------------------------------------------------------

    def _files(self, only: Wanted | None = None) -> dict[str, FileRow]:
        """path → its row, of every file or of those `only` names."""
        if only is None:
            rows = file_rows(self.conn)
        else:
            where = "path IN (SELECT value FROM json_each(?))"
            rows = file_rows(self.conn, where, (json.dumps(list(only)),))
        return {r.path: r for r in rows}

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
        snapshot, index/snapshots.py, are caught up alone). Returns path (or virtual name) →
        file id for those that exist. Without
        `text` (`usage`), the turns alone are read where no text is indexed yet (the text of
        a file whose text is indexed is kept current). `progress` is told how far a catch-up
        got after each file. A big catch-up is committed in parts: an interrupted one keeps
        what it finished, and the next sync goes on from there."""
        paths = list(paths)
        virtual = list(virtual)
        self.checked = None
        if not virtual:
            self.unreadable = {}
            quick = self._unchanged_files([os.fspath(p) for p in paths], others, text)
            if quick is not None:
                return quick
        wanted: Wanted = {os.fspath(p): p for p in paths}
        for v in virtual:
            wanted[v.name] = None
        for _attempt in range(RESTARTS):
            try:
                return self._sync(wanted, virtual, text, progress=progress, others=others)
            except Restart:
                continue  # another process wrote between two parts: look again
        raise BusyError(f"the search index {self.path} is busy")

    def _sync(
        self,
        wanted: Wanted,
        virtual: list[Virtual],
        text: bool,
        progress: Progress | None,
        others: bool,
    ) -> dict[str, int]:
        c = self.conn
        self.unreadable = {}
        # One stat per transcript, taken before the lock and used after it too: a file that
        # grows meanwhile is read up to the size seen here, the rest at the next catch-up.
        stats = _stats(wanted)
        seen = c.execute("PRAGMA data_version").fetchone()[0]
        only = None if others else wanted  # the others are neither checked nor dropped
        known = self._files(only)
        fast = unchanged(wanted, virtual, stats, known=known, text=text)
        if fast is not None:
            return fast
        try:
            c.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise BusyError(f"the search index {self.path} is busy") from exc
        try:
            if c.execute("PRAGMA data_version").fetchone()[0] != seen:
                known = self._files(only)  # another process wrote since: read again, under the lock
            got = c.execute("SELECT v FROM meta WHERE k = 'dead'").fetchone()
            dead = int(got[0]) if got else 0
            writer = CatchUp(conn=c, path=self.path, fts=self.fts, trigram=self.trigram, dead=dead)
            ids = {v.name: writer.virtual(v, known.get(v.name), text) for v in virtual}
            plan = _plan(writer, wanted, stats, known=known, text=text)
            ids.update(plan.ids)
            gone = plan.gone
            writer.run(plan.jobs, progress)
            self.unreadable = writer.unreadable
            for spath in writer.unreadable:
                ids.pop(spath, None)
            gone += [
                row.id
                for spath, row in known.items()
                if spath not in wanted and not os.path.exists(spath.partition(VIRTUAL_SEP)[0])
            ]
            if gone:  # their ids may be reused now: no snapshot may name them
                self.snaps.drop_all()
            for file_id in gone:
                writer.forget(file_id)
            self._commit(writer, dead)
        except BaseException:
            if c.in_transaction:
                c.execute("ROLLBACK")
            raise
        return ids

    def _commit(self, writer: CatchUp, dead_before: int) -> None:
        """Commit a catch-up; an index whose purged rows outnumber its live ones (past
        DEAD_REBUILD_MIN) is then rebuilt."""
        c = self.conn
        if writer.dead != dead_before:
            c.execute("INSERT OR REPLACE INTO meta(k, v) VALUES ('dead', ?)", (str(writer.dead),))
        c.execute("COMMIT")
        if self.fts and writer.dead > DEAD_REBUILD_MIN:
            live = c.execute("SELECT count(*) FROM msgs").fetchone()[0]
            if writer.dead > live:
                raise IndexStale("mostly stale entries")

    def _unchanged_files(
        self, wanted: list[str], others: bool, text: bool
    ) -> dict[str, int] | None:
        """`unchanged` for JSONL transcripts alone, in one pass (a stat and a comparison each,
        fewer columns read): the ids when every one is indexed as it is (with `others`, and
        no other file is indexed either), None to look closer."""
        sql = _STAMP_SQL
        if others:
            got = self.conn.execute(sql)
        else:
            sql += " WHERE path IN (SELECT value FROM json_each(?))"
            got = self.conn.execute(sql, (json.dumps(list(wanted)),))
        rows = {r[0]: r for r in got}  # the columns are unpacked by name below
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
            _path, file_id, dev, ino, size, mtime, ctime, has_text = row
            if (dev, ino, size, mtime, ctime) != (
                st.st_dev,
                st.st_ino,
                st.st_size,
                st.st_mtime_ns,
                st.st_ctime_ns,
            ) or (text and not has_text):
                return None
            ids[spath] = file_id
        if others:
            self.checked = rows
        return ids

    def stamp_rows(self, paths: list[str] | None = None) -> dict[str, tuple[Any, ...]]:
        """path → (path, id, dev, ino, size, mtime, ctime, text) of every file or of `paths`:
        the columns `_unchanged_files` reads, for a stat image (index/stamps.py)."""
        sql = _STAMP_SQL
        if paths is None:
            return {r[0]: r for r in self.conn.execute(sql)}
        sql += " WHERE path IN (SELECT value FROM json_each(?))"
        return {r[0]: r for r in self.conn.execute(sql, (json.dumps(paths),))}

    def file_count(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM files").fetchone()[0])

    def same_file(self, file_id: int, st: os.stat_result) -> bool:
        """Whether `st` is the file as the index last read it (identity, size, mtime, ctime)."""
        rows = file_rows(self.conn, "id = ?", (file_id,))
        return bool(rows) and rows[0].same_stat(st)

    # -- the sessions a store lists ----------------------------------------------------------

    def listed_rows(self, agent_id: str, ident: str) -> list[Any] | None:
        """The rows of the sessions a store lists, kept for `agent_id` under the store's
        identity `ident` (index/catalog.py `_listed`), or None."""
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

    def keep_listed_rows(self, agent_id: str, ident: str, rows: list[Any]) -> None:
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


def _stats(wanted: Wanted) -> dict[str, os.stat_result]:
    """The stat of each wanted file that exists (a virtual transcript has none)."""
    stats: dict[str, os.stat_result] = {}
    for spath, path in wanted.items():
        if path is not None:
            try:
                stats[spath] = os.stat(spath)
            except OSError:
                pass
    return stats


class Plan(NamedTuple):
    """What a catch-up does with the wanted files: their ids, what to read of them, and the
    ids of those named and gone."""

    ids: dict[str, int]
    jobs: list[Job]
    gone: list[int]


def _plan(
    writer: CatchUp,
    wanted: Wanted,
    stats: dict[str, os.stat_result],
    known: dict[str, FileRow],
    text: bool,
) -> Plan:
    """Each wanted file's id and what to read of it (a renamed file keeps its rows, under its
    new name). The gone and renamed ones are taken out of `known`."""
    by_inode = {(r.dev, r.ino): r for r in known.values()}
    plan = Plan({}, [], [])
    for spath, path in wanted.items():
        if path is None:
            continue
        st = stats.get(spath)
        row = known.get(spath)
        if st is None:
            if row is not None:  # named by a session, but its file is gone
                plan.gone.append(row.id)
                del known[spath]
            continue
        if row is None:
            moved = by_inode.get((st.st_dev, st.st_ino))
            if moved is not None and moved.path not in wanted and not os.path.exists(moved.path):
                # Renamed (archived by delete/reset): same bytes, new name.
                del known[moved.path]
                row = known[spath] = writer.rename(moved, spath)
        plan.ids[spath] = writer.file(Path(path), st, row, jobs=plan.jobs, text=text)
    return plan


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
