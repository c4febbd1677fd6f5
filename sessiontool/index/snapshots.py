"""Snapshots of a full check, kept in the search index: what lets a warm `search` or `usage` over
100,000 sessions cost about what it costs over 1,000 (issue 34).

A full check lists every session (sessions.json, the requester's visibility) and stats every
transcript. When it finds everything indexed, the session list it resolved is kept here under
a scope (who asked, which agents, with or without the archived transcripts and the text) with
the store's change markers it saw before it started (each agent's sessions dir and
sessions.json, index/warm.py) and its *hot* transcripts: those written or whose session
was updated recently, each until HOT_MS after that change (it ages by itself: a state dir
copied minutes ago is not stat'ed in full for days). While the markers stay the same, the next
command stats the hot transcripts only and reads the session list back from here, one row per
hit (whose file is checked then: reports/search.py drops a hit in a file changed since). The
tables are `Snapshots`, a part of the open `Index` (`idx.snaps`).

Why that is enough: a writer that follows the store's protocol appends under the transcript's
lock (`<file>.lock`, made and removed beside it: the sessions dir's mtime moves) and updates the
session's entry (its `updatedAt`) in sessions.json when a turn starts or ends; either moves the
markers. A file appended to by
hand, with no sessions.json change, whose session was idle for a day, is seen at the next
marker change (`SESSIONTOOL_INDEX_FULL_CHECK=1` forces a full check: docs/reference.md).

The tables are created on the first write (an index without them has no snapshot) and every
snapshot is dropped when a transcript leaves the index (file ids are then free to be reused)."""

from __future__ import annotations

import os
import sqlite3
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from sessiontool.index.db import file_rows

_TABLES = (
    "CREATE TABLE IF NOT EXISTS snap_scopes(id INTEGER PRIMARY KEY, scope TEXT UNIQUE NOT NULL, "
    "list INTEGER NOT NULL, markers BLOB NOT NULL, hot BLOB NOT NULL)",
    # A session list, shared by the scopes that resolved the same one (`search` and `usage`).
    "CREATE TABLE IF NOT EXISTS snap_lists(id INTEGER PRIMARY KEY, digest BLOB UNIQUE NOT NULL, "
    "n INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS snap_rows(list INTEGER NOT NULL, file_id INTEGER NOT NULL, "
    "agent TEXT NOT NULL, key TEXT, sid TEXT NOT NULL, label TEXT, archived INTEGER NOT NULL, "
    "PRIMARY KEY(list, file_id)) WITHOUT ROWID",
    # A scope's stat image (index/stamps.py): its files' ids and stamps in the listing's order.
    "CREATE TABLE IF NOT EXISTS snap_images(scope TEXT PRIMARY KEY, digest BLOB NOT NULL, "
    "ids BLOB NOT NULL, stamps BLOB NOT NULL)",
)
# Scopes kept at once (a search, a usage, an --include-archived search, another requester...).
KEEP = 8

# (file id, agent, full key or None, sessionId, label, archived)
SnapRow = tuple[int, str, str | None, str, str | None, int]
# A hot transcript: [file id (None: no file yet), path, hot until (epoch ms; None: always)].
# It stops being hot HOT_MS after its last change (its mtime or its session's updatedAt), by
# itself: a warm command drops the ones past their time without a stat (issue 47).
Hot = list[Any]


def hot_until(h: Hot) -> int | None:
    """When `h` stops being hot (None: never; a snapshot kept before issue 47 has no time)."""
    until = h[2] if len(h) > 2 else None
    return until if isinstance(until, int) else None


class Snapshot(NamedTuple):
    """A kept snapshot: its session list, the markers it was kept under, its hot transcripts
    (orjson of `Hot`s) and the number of files it holds."""

    list_id: int
    markers: bytes
    hot: bytes
    n: int


class Image(NamedTuple):
    """A kept stat image (index/stamps.py): the digest of its paths, their file ids and their
    stamps, in order."""

    digest: bytes
    ids: array[int]
    stamps: array[int]


class SnapRef(NamedTuple):
    """One file of a snapshot and the session it counts under (a `SnapRow` with its path)."""

    file_id: int
    agent: str
    key: str | None
    sid: str
    label: str | None
    archived: int
    path: str


@dataclass(frozen=True)
class Kept:
    """A full check to keep: its scope and markers, its files' rows, the transcripts hot for
    another reason than their mtime (their session's updatedAt; no file yet), the time (ns)
    from which an mtime makes a transcript hot, and for how long after it (ms)."""

    scope: str
    markers: bytes
    rows: list[SnapRow]
    hot: list[Hot]
    since_ns: int
    hot_ms: int
    image: Image | None = None


class Snapshots:
    """The snapshot tables of an open index (`Index.snaps`, over its connection)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def get(self, scope: str) -> Snapshot | None:
        """The snapshot kept for `scope`, or None."""
        try:
            got = self.conn.execute(
                "SELECT s.list, s.markers, s.hot, l.n FROM snap_scopes s "
                "JOIN snap_lists l ON l.id = s.list WHERE s.scope = ?",
                (scope,),
            ).fetchone()
        except sqlite3.OperationalError:  # no such table: no snapshot kept yet
            return None
        if got is None:
            return None
        list_id, markers, hot, n = got
        return Snapshot(int(list_id), bytes(markers), bytes(hot), int(n))

    def image(self, scope: str) -> Image | None:
        """The stat image kept for `scope`, or None."""
        try:
            got = self.conn.execute(
                "SELECT digest, ids, stamps FROM snap_images WHERE scope = ?", (scope,)
            ).fetchone()
        except sqlite3.OperationalError:  # no such table: none kept yet
            return None
        if got is None:
            return None
        ids, stamps = array("q"), array("q")
        try:
            ids.frombytes(got[1])
            stamps.frombytes(got[2])
        except (TypeError, ValueError):  # not whole numbers of 8 bytes: a damaged row
            return None
        if len(stamps) != 5 * len(ids):
            return None
        return Image(bytes(got[0]), ids, stamps)

    def keep(self, snap: Kept, version: int) -> None:
        """Keep a snapshot; best effort (busy: the next full check keeps one). Not when another
        process wrote to the index since `version` (`PRAGMA data_version` after this process's
        sync): the file ids in its rows might have changed meanwhile. The rows of the last
        snapshot of the scope are kept when they are the same (most store writes change a
        session's fields, not the list): only the markers and the hot transcripts are new."""
        import hashlib

        import orjson

        c = self.conn
        digest = hashlib.sha256(orjson.dumps(snap.rows)).digest()
        try:
            c.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:
            return
        try:
            if c.execute("PRAGMA data_version").fetchone()[0] != version:
                c.execute("ROLLBACK")
                return
            for stmt in _TABLES:
                c.execute(stmt)
            got = c.execute("SELECT id FROM snap_lists WHERE digest = ?", (digest,)).fetchone()
            list_id = int(got[0]) if got is not None else self._insert_list(digest, snap.rows)
            hot = {
                file_id: [file_id, path, mtime // 1_000_000 + snap.hot_ms]
                for file_id, path, mtime in c.execute(
                    "SELECT f.id, f.path, f.mtime FROM snap_rows s JOIN files f "
                    "ON f.id = s.file_id WHERE s.list = ? AND f.mtime >= ?",
                    (list_id, snap.since_ns),
                )
            }
            for h in snap.hot:
                old = hot.get(h[0]) if h[0] is not None else None
                if old is None:
                    hot[h[0] if h[0] is not None else h[1]] = h
                else:
                    until = hot_until(h)
                    old[2] = None if until is None else max(until, old[2])
            hot_list = list(hot.values())
            c.execute(
                "INSERT OR REPLACE INTO snap_scopes(scope, list, markers, hot) VALUES (?, ?, ?, ?)",
                (snap.scope, list_id, snap.markers, orjson.dumps(hot_list)),
            )
            c.execute(
                "DELETE FROM snap_scopes WHERE id NOT IN "
                f"(SELECT id FROM snap_scopes ORDER BY id DESC LIMIT {KEEP})"
            )
            self._keep_image(snap)
            for (old,) in c.execute(
                "SELECT id FROM snap_lists WHERE id NOT IN (SELECT list FROM snap_scopes)"
            ).fetchall():
                c.execute("DELETE FROM snap_rows WHERE list = ?", (old,))
                c.execute("DELETE FROM snap_lists WHERE id = ?", (old,))
            c.execute("COMMIT")
        except BaseException:
            if c.in_transaction:
                c.execute("ROLLBACK")
            raise

    def _keep_image(self, snap: Kept) -> None:
        c = self.conn
        if snap.image is None:
            c.execute("DELETE FROM snap_images WHERE scope = ?", (snap.scope,))
        else:
            img = snap.image
            c.execute(
                "INSERT OR REPLACE INTO snap_images(scope, digest, ids, stamps) VALUES (?, ?, ?, ?)",
                (snap.scope, img.digest, img.ids.tobytes(), img.stamps.tobytes()),
            )
        c.execute("DELETE FROM snap_images WHERE scope NOT IN (SELECT scope FROM snap_scopes)")

    def _insert_list(self, digest: bytes, rows: list[SnapRow]) -> int:
        c = self.conn
        cur = c.execute("INSERT INTO snap_lists(digest, n) VALUES (?, ?)", (digest, len(rows)))
        list_id = int(cur.lastrowid or 0)
        c.executemany(
            "INSERT OR IGNORE INTO snap_rows VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(list_id, *r) for r in rows],
        )
        return list_id

    def drop_all(self) -> None:
        """Forget every snapshot (a file left the index: its id may be reused)."""
        for table in ("snap_scopes", "snap_lists", "snap_rows", "snap_images"):
            try:
                self.conn.execute(f"DELETE FROM {table}")
            except sqlite3.OperationalError:  # no such table
                return

    def rehot(self, scope: str, markers: bytes, hot: list[Hot]) -> None:
        """Keep `hot` as the hot transcripts of `scope`'s snapshot while its markers are still
        `markers` (those past their time dropped, those caught up hot for longer); best effort
        and never waiting: a busy index keeps the old list, read and aged again next time (a
        warm read waits for no writer)."""
        import orjson

        c = self.conn
        wait = c.execute("PRAGMA busy_timeout").fetchone()[0]
        c.execute("PRAGMA busy_timeout = 0")
        try:
            c.execute(
                "UPDATE snap_scopes SET hot = ? WHERE scope = ? AND markers = ?",
                (orjson.dumps(hot), scope, markers),
            )
        except sqlite3.OperationalError:
            pass
        finally:
            c.execute(f"PRAGMA busy_timeout = {int(wait)}")

    def hot_changed(self, hot: list[Hot], text: bool) -> list[Path] | None:
        """The hot transcripts that changed since they were indexed (to catch up), or None when
        one is gone, replaced by a file of another id or new (a full check is needed)."""
        import orjson

        ids = [h[0] for h in hot if h[0] is not None]
        where = "id IN (SELECT value FROM json_each(?))"
        rows = {r.id: r for r in file_rows(self.conn, where, (orjson.dumps(ids),))}
        changed: list[Path] = []
        for file_id, path, *_ in hot:
            try:
                st = os.stat(path)
            except OSError:
                return None
            row = rows.get(file_id)
            if row is None or row.path != path:
                return None
            if not row.same_stat(st) or (text and not row.text):
                changed.append(Path(path))
        return changed

    def limit_reads(self, snap: Snapshot) -> bool:
        """Limit reads to the snapshot's files (as `Index.set_scope`): False when they are
        every file in the index (no new file since: ids are not reused while a snapshot is
        kept)."""
        c = self.conn
        if snap.n == c.execute("SELECT count(*) FROM files").fetchone()[0]:
            return False
        c.execute("PRAGMA temp_store = MEMORY")
        c.execute("CREATE TEMP TABLE IF NOT EXISTS scope(id INTEGER PRIMARY KEY)")
        c.execute("DELETE FROM temp.scope")
        c.execute(
            "INSERT INTO temp.scope(id) SELECT file_id FROM snap_rows WHERE list = ?",
            (snap.list_id,),
        )
        return True

    _REFS = (
        "SELECT s.file_id, s.agent, s.key, s.sid, s.label, s.archived, f.path FROM snap_rows s "
        "JOIN files f ON f.id = s.file_id WHERE s.list = ?"
    )

    def ref(self, snap: Snapshot, file_id: int) -> SnapRef | None:
        """One file of a snapshot, with its session."""
        got = self.conn.execute(self._REFS + " AND s.file_id = ?", (snap.list_id, file_id))
        row = got.fetchone()
        return None if row is None else SnapRef._make(row)

    def refs(self, snap: Snapshot) -> list[SnapRef]:
        """Every file of a snapshot, with its session."""
        return list(map(SnapRef._make, self.conn.execute(self._REFS, (snap.list_id,))))
