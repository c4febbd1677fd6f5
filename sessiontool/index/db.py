"""The search index's file, `<state>/sessiontool/index.sqlite`: its schema, opening (or
creating) it safely, its `files` rows by name (`FileRow`), writing parsed rows into its tables,
and deleting it. What to write is decided above (index/sync.py, index/catchup.py); this module
owns what SQLite sees, so a schema change touches one file (and bumps SCHEMA_VERSION: an index
of another version is rebuilt, never migrated — it is disposable)."""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing
from functools import partial
from itertools import compress
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from sessiontool.errors import BusyError, CorruptStateError, StorageError, UnsafePathError
from sessiontool.state import sqlite_conn
from sessiontool.state.paths import ensure_dir

if TYPE_CHECKING:  # types only: `open_if_current` needs none of the scan's modules
    from sessiontool.index.extract import Turn, Turns
    from sessiontool.index.scan import Row

SCHEMA_VERSION = 11
INDEX_NAME = "index.sqlite"
BUSY_TIMEOUT_S = 30.0

_SCHEMA = """
CREATE TABLE files(
  id INTEGER PRIMARY KEY, path TEXT UNIQUE NOT NULL, dev INTEGER, ino INTEGER,
  size INTEGER, mtime INTEGER, off INTEGER, digest BLOB, last_role TEXT, ctime INTEGER,
  text INTEGER NOT NULL DEFAULT 0, version TEXT);
CREATE TABLE msgs(
  id INTEGER PRIMARY KEY AUTOINCREMENT, file_id INTEGER NOT NULL, ts INTEGER, role TEXT,
  cjk INTEGER, off INTEGER, part INTEGER, text TEXT);
CREATE INDEX msgs_file ON msgs(file_id);
CREATE TABLE days(
  file_id INTEGER NOT NULL, day INTEGER NOT NULL, provider TEXT NOT NULL, model TEXT NOT NULL,
  turns INTEGER, runs INTEGER, input INTEGER, output INTEGER, cache_read INTEGER,
  cache_write INTEGER, cost REAL, n_cost INTEGER, each TEXT NOT NULL,
  PRIMARY KEY(file_id, day, provider, model)) WITHOUT ROWID;
CREATE TABLE tools(
  file_id INTEGER NOT NULL, day INTEGER NOT NULL, provider TEXT NOT NULL, model TEXT NOT NULL,
  tool TEXT NOT NULL, calls INTEGER, errors INTEGER, turns REAL, input REAL, output REAL,
  cache_read REAL, cache_write REAL, cost REAL, n_cost INTEGER,
  PRIMARY KEY(file_id, day, provider, model, tool)) WITHOUT ROWID;
CREATE TABLE meta(k TEXT PRIMARY KEY, v TEXT);
CREATE TABLE scopes(agent TEXT PRIMARY KEY, ident TEXT NOT NULL, rows BLOB NOT NULL);
"""
# `files`: one per transcript, as the last catch-up saw it (`FileRow` below). `files.digest`:
# `scan.prefix_digest` of the bytes before `off` (a JSONL file); `files.version`: the version
# of a virtual transcript (`catchup.Virtual`: OpenClaw's SQLite store, a compressed archive)
# when it was read, NULL for a file. Schema 11 split them (one `tail` column held either).
# `files.text`: 1 when the file's `msgs` (and FTS) rows cover what was read of it (up to `off`),
# 0 when only its turns were read (`usage` builds no FTS; the first `search` reads the text).
# `scopes`: per agent, the sessions a sessions.json file lists (see catalog.live_sessions), under
# that file's identity: a warm search over a 5 MB store reads a few kB here instead of parsing
# the store again (half of what a search costs beyond Python's start-up).
# `days`: each transcript's turns summed per UTC day and model, kept as the turns are indexed,
# so `usage` over a year of transcripts sums a few rows per session and day instead of every
# assistant message. `days.each` keeps the day's single turns, for the partial days at a
# --since/--until boundary: JSON arrays [ts, in, out, cache read, cache write, recorded cost,
# run start, tool names called] joined by commas (`each_turns` reads them). One text per day instead of a table
# row per turn: a table of turns and its two indexes were a quarter of a cold `usage`.
# `tools`: the turns' tokens and cost attributed to the tools they called and whose results
# they read, per file, UTC day, model and tool, with the calls and failed results
# (index/tool_shares.py; the rule: docs/search-usage.md). Schema 10 added it and the tool
# names at the end of each `days.each` turn.
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
# FTS5 flushes its pending terms to a new segment whenever they pass this size (1 MB by
# default): a first build of 1 GB made ~1000 small segments and spent half its time merging them.
FTS_HASHSIZE = 64 << 20


class FileRow(NamedTuple):
    """One `files` row, read by name (`FILE_COLUMNS` selects them in this order)."""

    id: int
    path: str
    dev: int
    ino: int
    size: int
    mtime: int  # ns
    off: int  # read up to here (whole lines)
    digest: bytes | None
    last_role: str | None  # the role of the last message read (where a run starts)
    ctime: int  # ns
    text: int  # 1: its text is indexed up to `off`; 0: its turns alone
    version: str | None  # a virtual transcript's version when read; None: a file

    def same_stat(self, st: os.stat_result) -> bool:
        """Whether `st` is the file as it was read: identity, size, mtime, ctime (the ctime
        catches a rewrite that kept the size and mtime: no one can set it back)."""
        return (self.dev, self.ino, self.size, self.mtime, self.ctime) == (
            st.st_dev,
            st.st_ino,
            st.st_size,
            st.st_mtime_ns,
            st.st_ctime_ns,
        )


FILE_COLUMNS = "id, path, dev, ino, size, mtime, off, digest, last_role, ctime, text, version"


def file_rows(
    conn: sqlite3.Connection, where: str = "", args: tuple[Any, ...] = ()
) -> list[FileRow]:
    """The `files` rows, all or those `where` (an SQL condition) picks. Made by
    `tuple.__new__`, not `FileRow._make` (its length check cost 13% of fetching 100,000 rows;
    this 3%): the columns are FILE_COLUMNS, in FileRow's order."""
    sql = f"SELECT {FILE_COLUMNS} FROM files" + (f" WHERE {where}" if where else "")
    return list(map(_new_file_row, conn.execute(sql, args)))


_new_file_row = partial(tuple.__new__, FileRow)


class IndexCorrupt(Exception):
    """The index file could not be used; the caller deletes it and tries once more."""


class IndexStale(IndexCorrupt):
    """Built by another schema version or a SQLite with other features: rebuilt silently."""


def _probe(sql: str) -> bool:
    try:
        with closing(sqlite_conn.connect(":memory:")) as c:
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


def is_corruption(exc: sqlite3.Error) -> bool:
    text = str(exc).lower()
    return (
        any(
            s in text
            for s in ("malformed", "not a database", "encrypted", "disk image", "no such table")
        )
        or isinstance(exc, sqlite3.DatabaseError)
        and not isinstance(exc, sqlite3.OperationalError)
    )


def open_index(root: Path, fts: bool, trigram: bool) -> sqlite3.Connection:
    """A connection to the index under `root`, created with the schema when new. Raises
    IndexStale for another schema version or SQLite feature set, IndexCorrupt when SQLite
    cannot use the file, BusyError when another process holds it too long."""
    path = root / INDEX_NAME
    ensure_dir(root)
    check_index_files(root)
    try:  # private text: owner-only from the first byte (WAL files copy the mode)
        os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
    except OSError as exc:
        check_index_files(root)  # a link or a directory planted meanwhile
        raise StorageError(f"cannot create {path}: {exc.strerror}") from exc
    try:
        conn = sqlite_conn.connect(str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None)
    except (sqlite3.Error, UnicodeDecodeError) as exc:
        raise IndexCorrupt(sqlite_conn.reason(exc)) from exc
    try:
        # SQLite opens the -wal/-shm/-journal files by name and follows links: checked
        # again now that they exist (WAL mode creates them at the first read).
        conn.execute("PRAGMA schema_version").fetchone()
        check_index_files(root)
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
            _create(conn, fts, trigram)
        elif version != SCHEMA_VERSION:
            raise IndexStale(f"schema version {version}")
        else:
            flags = dict(conn.execute("SELECT k, v FROM meta").fetchall())
            if flags.get("fts") != str(int(fts)) or (flags.get("trigram") != str(int(trigram))):
                raise IndexStale("built by a SQLite with other features")
    except sqlite3.OperationalError as exc:
        conn.close()
        if "locked" in str(exc).lower() or "busy" in str(exc).lower():
            raise BusyError(f"the search index {path} is busy") from exc
        raise IndexCorrupt(str(exc)) from exc
    except (sqlite3.Error, UnicodeDecodeError) as exc:
        conn.close()
        raise IndexCorrupt(sqlite_conn.reason(exc)) from exc
    except IndexCorrupt:
        conn.close()
        raise
    return conn


# A file as the index read it: (file id, offset read up to, digest of the bytes before it).
ReadTo = tuple[int, int, bytes | None]


def open_if_current(
    root: Path, paths: list[str]
) -> tuple[sqlite3.Connection, dict[str, ReadTo]] | None:
    """The index opened to read, without catching up, when it is of this schema and holds
    each of `paths` as it is now (identity, size, mtime and ctime: the comparison
    `Index.sync`'s quick path makes): the connection (the caller closes it) and each path's
    file id, with the offset it was read up to and that prefix's digest (the budgets' record
    keeps them, to read only what a transcript grew by later). None when it cannot say so (no index yet, another schema, a path not indexed or
    changed since, SQLite refusing): then open it as `Index` does and catch up. For a budget's
    check before a run (reports/budgets.py, bench `send_budget`): sqlite3 alone, none of the
    scan's modules. The `files` and `days` tables are the same with or without FTS5, so the
    features it was built with are not compared."""
    path = root / INDEX_NAME
    if not os.path.isfile(path):
        return None
    check_index_files(root)
    from urllib.parse import quote

    try:
        conn = sqlite_conn.connect(f"file:{quote(str(path))}?mode=ro", uri=True, timeout=1.0)
    except (sqlite3.Error, UnicodeDecodeError):
        return None
    try:
        check_index_files(root)
        # One read transaction to the caller's close: its sums are of the rows compared here
        # (the budgets keep them under these files' signatures, reports/spend_cache.py).
        conn.execute("BEGIN")
        got = _current_ids(conn, paths)
    except (sqlite3.Error, UnicodeDecodeError):
        got = None
    except BaseException:
        conn.close()
        raise
    if got is None:
        conn.close()
        return None
    return conn, got


def _current_ids(conn: sqlite3.Connection, paths: list[str]) -> dict[str, ReadTo] | None:
    if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
        return None
    import json

    rows = {
        r[0]: r
        for r in conn.execute(
            "SELECT path, id, dev, ino, size, mtime, ctime, off, digest FROM files "
            "WHERE path IN (SELECT value FROM json_each(?))",
            (json.dumps(paths),),
        )
    }
    ids: dict[str, ReadTo] = {}
    for spath in paths:
        row = rows.get(spath)
        try:
            st = os.stat(spath)
        except OSError:
            return None
        if row is None or row[2:7] != (
            st.st_dev,
            st.st_ino,
            st.st_size,
            st.st_mtime_ns,
            st.st_ctime_ns,
        ):
            return None
        ids[spath] = (row[1], row[7], row[8])
    return ids


def _create(conn: sqlite3.Connection, fts: bool, trigram: bool) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        if conn.execute("PRAGMA user_version").fetchone()[0] != 0:
            conn.execute("ROLLBACK")  # another process created it meanwhile
            return
        for stmt in _SCHEMA.split(";"):
            if stmt.strip():
                conn.execute(stmt)
        if fts:
            conn.execute(_FTS)
            conn.execute("INSERT INTO fts(fts, rank) VALUES ('hashsize', ?)", (FTS_HASHSIZE,))
        if trigram:
            conn.execute(_FTS_CJK)
            conn.execute(
                "INSERT INTO fts_cjk(fts_cjk, rank) VALUES ('hashsize', ?)", (FTS_HASHSIZE,)
            )
        conn.executemany(
            "INSERT INTO meta(k, v) VALUES (?, ?)",
            [("fts", str(int(fts))), ("trigram", str(int(trigram)))],
        )
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def insert_rows(
    conn: sqlite3.Connection,
    fts: bool,
    trigram: bool,
    rows: list[Row],
    turns: Turns,
    *,
    keep_text: bool = False,
) -> None:
    """Rows of file transcripts keep no text (it is read back from the line at `off`);
    a virtual transcript's rows keep theirs."""
    c = conn
    if rows:
        got = c.execute("SELECT seq FROM sqlite_sequence WHERE name = 'msgs'").fetchone()
        start = (int(got[0]) if got else 0) + 1
        if keep_text:
            c.executemany(
                "INSERT INTO msgs(file_id, ts, role, cjk, off, part, text) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
        else:  # (slices and zips: C loops, where a row's tuple built in Python showed)
            c.executemany(
                "INSERT INTO msgs(file_id, ts, role, cjk, off, part) VALUES (?, ?, ?, ?, ?, ?)",
                [r[:6] for r in rows],
            )
        last = c.execute("SELECT seq FROM sqlite_sequence WHERE name = 'msgs'").fetchone()
        if int(last[0]) != start + len(rows) - 1:
            raise IndexCorrupt("message ids out of sequence")
        ids = range(start, start + len(rows))
        if fts:
            c.executemany(
                "INSERT INTO fts(rowid, text) VALUES (?, ?)",
                zip(ids, map(itemgetter(6), rows), strict=True),
            )
        if trigram:
            c.executemany(
                "INSERT INTO fts_cjk(rowid, text) VALUES (?, ?)",
                compress(zip(ids, map(itemgetter(6), rows), strict=True), map(itemgetter(3), rows)),
            )
    if turns:
        from sessiontool.index.tool_shares import insert_tools

        model_turns = insert_tools(c, turns)  # before `days`: it reads a file's last turn there
        c.executemany(
            "INSERT INTO days(file_id, day, provider, model, turns, runs, input, output, "
            "cache_read, cache_write, cost, n_cost, each) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT(file_id, day, provider, model) DO UPDATE SET "
            "turns = turns + excluded.turns, runs = runs + excluded.runs, "
            "input = input + excluded.input, output = output + excluded.output, "
            "cache_read = cache_read + excluded.cache_read, "
            "cache_write = cache_write + excluded.cache_write, "
            "cost = cost + excluded.cost, n_cost = n_cost + excluded.n_cost, "
            "each = each || ',' || excluded.each",
            day_sums(model_turns),
        )


def day_sums(turns: list[Turn]) -> list[tuple[Any, ...]]:
    """Turns summed per file, UTC day and model, as `days` rows (with their `each`: [ts, in,
    out, cr, cw, cost, run_start, tools called] per turn). The turns are grouped as they are;
    each group's columns, and its `each` rows from them, are made by `zip` (in C: a tuple
    per turn built in Python was half of this)."""
    import orjson

    groups: dict[tuple[int, int, str, str], list[Turn]] = {}
    for t in turns:
        key = (t[0], t[3] // DAY_MS, t[1], t[2])
        g = groups.get(key)
        if g is None:
            groups[key] = [t]
        else:
            g.append(t)
    out: list[tuple[Any, ...]] = []
    for key, g in groups.items():
        _f, _p, _m, tss, ins, outs, crs, cws, costs, called, starts = zip(*g, strict=True)
        cost, n_cost = 0.0, 0
        for c in costs:
            if c is not None:
                cost += c
                n_cost += 1
        each = orjson.dumps(list(zip(tss, ins, outs, crs, cws, costs, starts, called, strict=True)))
        out.append(
            (*key, len(g), sum(starts), sum(ins), sum(outs), sum(crs), sum(cws), cost, n_cost)
            + (each[1:-1].decode(),)
        )
    return out


def each_turns(each: str) -> list[list[Any]]:
    """The single turns of a `days` row: [ts, in, out, cache read, cache write, recorded cost
    (None: none), run start, tool names called] each."""
    import orjson

    got: list[list[Any]] = orjson.loads("[" + each + "]")
    return got


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
