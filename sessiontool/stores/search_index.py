"""sessiontool's own index of transcripts: `<state>/sessiontool/index.sqlite` (standard library
sqlite3). Message text in an FTS5 table (unicode61 words; rows in unsegmented scripts also in a
trigram table), and each assistant message's token usage for `usage`.

It is disposable and always catches up before it answers: per transcript it remembers the
identity (device, inode), the size and mtime it saw, the offset it read to and the bytes just
before that offset. A grown file is read from that offset only; a shrunk, replaced or rewritten
file is read again from the start; a vanished one is dropped. A missing index is rebuilt, an
unreadable one is deleted and rebuilt (the caller is told, to warn). OpenClaw never reads it."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from sessiontool import diag
from sessiontool.errors import BusyError, StorageError
from sessiontool.stores.paths import ensure_dir

SCHEMA_VERSION = 1
INDEX_NAME = "index.sqlite"
CHUNK = 8 * 1024 * 1024
TAIL = 32  # bytes before the read offset remembered to notice a same-size rewrite
BUSY_TIMEOUT_S = 30.0
T = TypeVar("T")
HIT = ("\x02", "\x03")  # snippet markers: never in text we index (control characters dropped)

_SCHEMA = """
CREATE TABLE files(
  id INTEGER PRIMARY KEY, path TEXT UNIQUE NOT NULL, dev INTEGER, ino INTEGER,
  size INTEGER, mtime INTEGER, off INTEGER, tail BLOB, last_role TEXT);
CREATE TABLE msgs(
  id INTEGER PRIMARY KEY, file_id INTEGER NOT NULL, ts INTEGER, role TEXT, cjk INTEGER,
  text TEXT);
CREATE INDEX msgs_file ON msgs(file_id);
CREATE TABLE turns(
  file_id INTEGER NOT NULL, ts INTEGER, provider TEXT, model TEXT, input INTEGER,
  output INTEGER, cache_read INTEGER, cache_write INTEGER, cost REAL, run_start INTEGER);
CREATE INDEX turns_file ON turns(file_id);
CREATE TABLE meta(k TEXT PRIMARY KEY, v TEXT);
"""
_FTS = (
    "CREATE VIRTUAL TABLE fts USING fts5(text, content='msgs', content_rowid='id', "
    "tokenize='unicode61 remove_diacritics 2')"
)
_FTS_CJK = (
    "CREATE VIRTUAL TABLE fts_cjk USING fts5(text, content='msgs', content_rowid='id', "
    "tokenize='trigram')"
)


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


# -- what a transcript line contributes ------------------------------------------------------

_UNSEGMENTED = (
    (0x0E00, 0x0EFF),  # Thai, Lao
    (0x1000, 0x109F),  # Myanmar
    (0x1780, 0x17FF),  # Khmer
    (0x2E80, 0x9FFF),  # CJK radicals, kana, ideographs
    (0xA960, 0xA97F),
    (0xAC00, 0xD7AF),  # Hangul syllables
    (0xF900, 0xFAFF),
    (0xFF66, 0xFF9F),
    (0x20000, 0x2FA1F),
)


def is_unsegmented(ch: str) -> bool:
    o = ord(ch)
    return any(lo <= o <= hi for lo, hi in _UNSEGMENTED)


def has_unsegmented(text: str) -> bool:
    return any(ord(c) >= 0x0E00 and is_unsegmented(c) for c in text)


def _clean(text: str) -> str:
    # The snippet markers must never occur in indexed text.
    return text.replace(HIT[0], " ").replace(HIT[1], " ")


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    out: list[str] = []
    if isinstance(content, list):
        for b in content:
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str):
                out.append(b["text"])
    return out


def _flat_values(v: Any, out: list[str], depth: int = 0) -> None:
    """A tool call's argument values (not its keys), for `--role tool` only."""
    if depth > 20:
        return
    if isinstance(v, str):
        out.append(v)
    elif isinstance(v, bool) or v is None:
        return
    elif isinstance(v, int | float):
        out.append(str(v))
    elif isinstance(v, list):
        for x in v:
            _flat_values(x, out, depth + 1)
    elif isinstance(v, dict):
        for x in v.values():
            _flat_values(x, out, depth + 1)


def _int(v: Any) -> int:
    return int(v) if isinstance(v, int | float) and not isinstance(v, bool) and v == v else 0


def _ts(msg: dict[str, Any], line: dict[str, Any]) -> int:
    t = msg.get("timestamp")
    if isinstance(t, int | float) and not isinstance(t, bool) and t == t:
        return int(t)
    s = line.get("timestamp")
    if isinstance(s, str):
        from sessiontool.clock import parse_iso_ms

        return parse_iso_ms(s) or 0
    return 0


@dataclass
class Extracted:
    rows: list[tuple[int, str, str]]  # (ts, role, text)
    turn: tuple[Any, ...] | None  # (ts, provider, model, in, out, cr, cw, recorded cost)
    role: str | None


def extract(raw: bytes) -> Extracted | None:
    """Rows and usage of one transcript line; None for lines that are not messages."""
    if b'"message"' not in raw:
        return None
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict) or obj.get("type") != "message":
        return None
    msg = obj.get("message")
    if not isinstance(msg, dict):
        return None
    role = msg.get("role")
    ts = _ts(msg, obj)
    rows: list[tuple[int, str, str]] = []
    turn = None
    if role == "user":
        from sessiontool.sessions import strip_envelope_text

        text = "\n".join(strip_envelope_text(t) for t in _texts(msg.get("content")))
        if not text and isinstance(msg.get("text"), str):
            text = strip_envelope_text(msg["text"])
        if text.strip():
            rows.append((ts, "user", _clean(text)))
    elif role == "assistant":
        content = msg.get("content")
        text = "\n".join(_texts(content))
        if text.strip():
            rows.append((ts, "assistant", _clean(text)))
        if isinstance(content, list):
            for b in content:
                if isinstance(b, dict) and b.get("type") == "toolCall":
                    vals: list[str] = [str(b.get("name") or "")]
                    _flat_values(b.get("arguments"), vals)
                    call = " ".join(v for v in vals if v)
                    if call.strip():
                        rows.append((ts, "toolCall", _clean(call)))
        raw_usage = msg.get("usage")
        usage: dict[str, Any] = raw_usage if isinstance(raw_usage, dict) else {}
        cost = usage.get("cost")
        recorded = cost.get("total") if isinstance(cost, dict) else None
        turn = (
            ts,
            str(msg.get("provider") or ""),
            str(msg.get("model") or ""),
            _int(usage.get("input")),
            _int(usage.get("output")),
            _int(usage.get("cacheRead")),
            _int(usage.get("cacheWrite")),
            float(recorded)
            if isinstance(recorded, int | float) and not isinstance(recorded, bool)
            else None,
        )
    elif role == "toolResult":
        text = "\n".join(_texts(msg.get("content")))
        if text.strip():
            rows.append((ts, "toolResult", _clean(text)))
    else:
        return Extracted([], None, str(role) if isinstance(role, str) else None)
    return Extracted(rows, turn, role)


def iter_complete_lines(path: Path, start: int, end: int) -> Iterator[tuple[int, bytes]]:
    """(offset after the line, line) for each newline-terminated line in [start, end)."""
    with open(path, "rb") as fh:
        fh.seek(start)
        pos = start
        pending = b""
        while pos < end:
            block = fh.read(min(CHUNK, end - pos))
            if not block:
                break
            pos += len(block)
            data = pending + block if pending else block
            cut = data.rfind(b"\n")
            if cut < 0:
                pending = data
                continue
            base = pos - len(data)
            i = 0
            while i <= cut:
                j = data.index(b"\n", i)
                yield base + j + 1, data[i:j]
                i = j + 1
            pending = data[cut + 1 :]


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
        self.conn = self._open()

    def _open(self) -> sqlite3.Connection:
        ensure_dir(self.dir)
        if not self.path.exists():
            try:  # private text: owner-only from the first byte (WAL files copy the mode)
                os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600))
            except OSError as exc:
                raise StorageError(f"cannot create {self.path}: {exc.strerror}") from exc
        try:
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        except sqlite3.Error as exc:
            raise IndexCorrupt(str(exc)) from exc
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version == 0:
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
            if self.trigram:
                conn.execute(_FTS_CJK)
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
        if self.fts:
            c.execute(
                "INSERT INTO fts(fts, rowid, text) SELECT 'delete', id, text FROM msgs "
                "WHERE file_id = ?",
                (file_id,),
            )
        if self.trigram:
            c.execute(
                "INSERT INTO fts_cjk(fts_cjk, rowid, text) SELECT 'delete', id, text FROM msgs "
                "WHERE file_id = ? AND cjk = 1",
                (file_id,),
            )
        c.execute("DELETE FROM msgs WHERE file_id = ?", (file_id,))
        c.execute("DELETE FROM turns WHERE file_id = ?", (file_id,))

    def sync(self, paths: Iterable[Path]) -> dict[str, int]:
        """Bring the index up to date for `paths`; drop files that no longer exist. Returns
        path → file id for the paths that exist."""
        c = self.conn
        wanted = {str(p): p for p in paths}
        try:
            c.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise BusyError(f"the search index {self.path} is busy") from exc
        try:
            known: dict[str, tuple[Any, ...]] = {
                r[1]: r for r in c.execute("SELECT * FROM files").fetchall()
            }
            by_inode = {(r[2], r[3]): r for r in known.values()}
            ids: dict[str, int] = {}
            for spath, path in wanted.items():
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                row = known.get(spath)
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
                ids[spath] = self._catch_up(path, st, row)
            for spath, row in known.items():
                if spath not in wanted and not os.path.exists(spath):
                    self._purge(row[0])
                    c.execute("DELETE FROM files WHERE id = ?", (row[0],))
            c.execute("COMMIT")
        except BaseException:
            if c.in_transaction:
                c.execute("ROLLBACK")
            raise
        return ids

    def _same_tail(self, path: Path, off: int, tail: bytes | None) -> bool:
        if off == 0:
            return True
        n = min(TAIL, off)
        try:
            with open(path, "rb") as fh:
                fh.seek(off - n)
                return fh.read(n) == (tail or b"")
        except OSError:
            return False

    def _catch_up(self, path: Path, st: os.stat_result, row: tuple[Any, ...] | None) -> int:
        c = self.conn
        if row is None:
            cur = c.execute(
                "INSERT INTO files(path, dev, ino, size, mtime, off, tail, last_role) "
                "VALUES (?, ?, ?, 0, 0, 0, NULL, NULL)",
                (str(path), st.st_dev, st.st_ino),
            )
            file_id = int(cur.lastrowid or 0)
            off, last_role = 0, None
        else:
            file_id, _p, dev, ino, size, mtime, off, tail, last_role = row
            if (
                (dev, ino) == (st.st_dev, st.st_ino)
                and st.st_size == size
                and st.st_mtime_ns == mtime
            ):
                return int(file_id)
            if (
                (dev, ino) != (st.st_dev, st.st_ino)
                or st.st_size < off
                or not self._same_tail(path, off, tail)
            ):
                self._purge(file_id)  # replaced or rewritten: read it again from the start
                off, last_role = 0, None
        new_off, last_role = self._read(file_id, path, off, st.st_size, last_role)
        tail_bytes = b""
        if new_off:
            with open(path, "rb") as fh:
                fh.seek(max(0, new_off - TAIL))
                tail_bytes = fh.read(min(TAIL, new_off))
        c.execute(
            "UPDATE files SET dev = ?, ino = ?, size = ?, mtime = ?, off = ?, tail = ?, "
            "last_role = ? WHERE id = ?",
            (
                st.st_dev,
                st.st_ino,
                st.st_size,
                st.st_mtime_ns,
                new_off,
                tail_bytes,
                last_role,
                file_id,
            ),
        )
        return int(file_id)

    def _read(
        self, file_id: int, path: Path, off: int, size: int, last_role: str | None
    ) -> tuple[int, str | None]:
        c = self.conn
        rows: list[tuple[int, int, str, int, str]] = []
        turns: list[tuple[Any, ...]] = []
        new_off = off
        try:
            for end, raw in iter_complete_lines(path, off, size):
                new_off = end
                ex = extract(raw)
                if ex is None:
                    continue
                for ts, role, text in ex.rows:
                    rows.append((file_id, ts, role, int(has_unsegmented(text)), text))
                if ex.turn is not None:
                    run_start = int(last_role not in ("assistant", "toolResult"))
                    turns.append((file_id, *ex.turn, run_start))
                if ex.role is not None:
                    last_role = ex.role
        except OSError as exc:
            raise StorageError(f"cannot read transcript {path}: {exc.strerror}") from exc
        if rows:
            first = c.execute("SELECT coalesce(max(id), 0) FROM msgs").fetchone()[0]
            c.executemany(
                "INSERT INTO msgs(file_id, ts, role, cjk, text) VALUES (?, ?, ?, ?, ?)", rows
            )
            if self.fts:
                c.execute(
                    "INSERT INTO fts(rowid, text) SELECT id, text FROM msgs WHERE id > ?", (first,)
                )
            if self.trigram:
                c.execute(
                    "INSERT INTO fts_cjk(rowid, text) SELECT id, text FROM msgs "
                    "WHERE id > ? AND cjk = 1",
                    (first,),
                )
        if turns:
            c.executemany(
                "INSERT INTO turns(file_id, ts, provider, model, input, output, cache_read, "
                "cache_write, cost, run_start) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                turns,
            )
        return new_off, last_role

    # -- reading -----------------------------------------------------------------------------

    def set_scope(self, file_ids: Iterable[int]) -> None:
        c = self.conn
        c.execute("CREATE TEMP TABLE IF NOT EXISTS scope(id INTEGER PRIMARY KEY)")
        c.execute("DELETE FROM temp.scope")
        c.executemany("INSERT OR IGNORE INTO temp.scope(id) VALUES (?)", ((i,) for i in file_ids))


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
    for suffix in ("", "-wal", "-shm", "-journal"):
        try:
            os.unlink(root / (INDEX_NAME + suffix))
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise StorageError(
                f"cannot remove the search index {root / INDEX_NAME}: {exc.strerror}"
            ) from exc
