"""OpenClaw 2026.8+'s per-agent SQLite session store, read-only.

`agents/<id>/agent/openclaw-agent.sqlite` (WAL mode, held open by the running gateway):
- `session_nodes`: one row per session key; `entry_json` is the entry object sessions.json held.
- `transcript_events`: one row per transcript line (`event_json`, or `event_zstd`: a plain zstd
  frame of the same JSON); `session_transcript_active_events` orders the active branch.
- `session_transcript_cold_archives`: transcripts moved to `sessions/cold/<sha256>.jsonl.zst`
  (or into the row's blob), JSONL records of kind header/event/active/....

Safety: the database is opened with `mode=ro&readonly_shm=1` (no write to the database, its WAL
or its shared-memory index, never a checkpoint), with a busy timeout, inside one read
transaction per scope (`sessions/reading.py` `read_scope`), so a listing is one committed snapshot while the
gateway writes. When the `-wal`/`-shm` files are absent nobody holds the database open in WAL
mode and the main file is complete: it is opened `immutable=1` (SQLite would otherwise create
them). A non-empty WAL without its index (a crashed gateway) is read from a private copy under
the system temp dir. Columns are checked by name; a schema without them is refused with its
version, never misread; so is a schema version newer than the newest known (the schemas and
their columns: `openclaw_releases.SQLITE_SCHEMAS`). Either is read through the running gateway
instead when there is one (`sessions/reading.py` `_sqlite_or_gateway`).
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sessiontool.errors import BusyError, CorruptStateError
from sessiontool.state import sqlite_conn
from sessiontool.state.chat_display import display_message
from sessiontool.state.detect import StoreInfo
from sessiontool.state.paths import StatePaths
from sessiontool.state.sessions_json import Entry, Folded, normalize_entry
from sessiontool.state.transcript import Message, ReadResult

BUSY_TIMEOUT_S = 5.0


class UnsupportedStoreError(CorruptStateError):
    """The database's schema lacks what sessiontool reads, or is newer than the one it knows:
    refused, never misread (exit 5), or read through the gateway (sessions/reading.py)."""


def _ms_of_iso(value: Any) -> int | None:
    if not isinstance(value, str):
        return None
    from sessiontool.clock import parse_iso_ms

    return parse_iso_ms(value)


def reset_message(event: dict[str, Any]) -> Message:
    msg: Message = {"role": "system", "content": [{"type": "text", "text": "Reset"}]}
    ts = _ms_of_iso(event.get("timestamp"))
    if ts is not None:
        msg["timestamp"] = ts
    return msg


def open_uri(path: Path) -> tuple[str, str | None]:
    """The URI to open the database read-only with, and the private temp dir holding a copy
    (None when it is read in place): see the module's docstring."""
    db = str(path)
    wal, shm = db + "-wal", db + "-shm"
    has_wal, has_shm = os.path.exists(wal), os.path.exists(shm)
    if has_wal and has_shm:
        return f"file:{quote(db)}?mode=ro&readonly_shm=1", None
    if not has_wal or os.path.getsize(wal) == 0:
        # Nobody holds it open in WAL mode: the main file is the whole committed state.
        return f"file:{quote(db)}?mode=ro&immutable=1", None
    # Committed pages in a WAL whose index is gone: read a private copy, never rebuild the
    # index in the state dir.
    import shutil
    import tempfile

    tmpdir = tempfile.mkdtemp(prefix="sessiontool-oc-")
    copy = os.path.join(tmpdir, "db.sqlite")
    shutil.copyfile(db, copy)
    shutil.copyfile(wal, copy + "-wal")
    return f"file:{quote(copy)}?mode=ro", tmpdir


def check_schema(c: sqlite3.Connection, db: Path) -> tuple[int | None, dict[str, set[str]]]:
    """The schema version and the columns of the tables read; refuses (UnsupportedStoreError)
    a schema that lacks a required column or is newer than the newest known. The schemas are
    one table (`openclaw_releases.py`), loaded here: a JSON-era read does without it."""
    from sessiontool.openclaw_releases import known_schema, schema_columns

    version: int | None = None
    columns: dict[str, set[str]] = {}
    tables = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "schema_meta" in tables:
        cols = {r[1] for r in c.execute("PRAGMA table_info(schema_meta)")}
        if "schema_version" in cols:
            row = c.execute("SELECT max(schema_version) FROM schema_meta").fetchone()
            version = row[0] if row and isinstance(row[0], int) else None
    if version is None:
        row = c.execute("PRAGMA user_version").fetchone()
        version = row[0] if row and row[0] else None
    required = schema_columns(version)
    for table in [*required, "session_transcript_cold_archives"]:
        if table in tables:
            columns[table] = {r[1] for r in c.execute(f"PRAGMA table_info({table})")}
    missing = [
        f"{t}.{col}"
        for t, cols in required.items()
        for col in cols
        if col not in columns.get(t, set())
    ]
    if missing:
        v = version if version is not None else "unknown"
        raise UnsupportedStoreError(
            f"{db}: OpenClaw schema version {v} lacks {', '.join(missing)}; "
            f"sessiontool reads schema {known_schema()} and refuses to guess",
            hint="start OpenClaw's gateway (sessiontool then reads through it), update "
            "sessiontool, or read it with `openclaw sessions --json`",
        )
    if isinstance(version, int) and version > known_schema():
        # A later schema may keep a column's name and change what it holds: the columns
        # being there is not enough to read it (added columns and tables within the known
        # version are fine, and so are the earlier versions 19 and 21).
        raise UnsupportedStoreError(
            f"{db}: OpenClaw schema version {version} is newer than the schema "
            f"sessiontool reads ({known_schema()})",
            hint="start OpenClaw's gateway (sessiontool then reads through it), update "
            "sessiontool, or read it with `openclaw sessions --json`",
        )
    return version, columns


class SqliteReader:
    """One agent's database, read in one snapshot (the read transaction `conn` opens)."""

    def __init__(self, paths: StatePaths, info: StoreInfo) -> None:
        self.paths = paths
        self.info = info
        self.db = info.location
        self._conn: sqlite3.Connection | None = None
        self._tmpdir: str | None = None
        self._columns: dict[str, set[str]] = {}
        self._version: int | None = None
        self._sessions: dict[str, Folded] | None = None
        self._fields: tuple[str, ...] | None = None
        self._marks: dict[str, str] | None = None

    # -- connection ---------------------------------------------------------------------

    def conn(self) -> sqlite3.Connection:
        if self._conn is not None:
            return self._conn
        if not self.db.is_file():
            raise CorruptStateError(f"no OpenClaw session database at {self.db}")
        try:
            uri, self._tmpdir = open_uri(self.db)
            conn = sqlite_conn.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        except sqlite3.Error as exc:
            raise CorruptStateError(f"cannot open {self.db} read-only: {exc}") from exc
        try:
            conn.execute("PRAGMA query_only=1")
            conn.execute("BEGIN")  # deferred: the first read takes the snapshot
            self._conn = conn
            self._version, self._columns = check_schema(conn, self.db)
        except sqlite3.OperationalError as exc:
            self.close()
            if "locked" in str(exc) or "busy" in str(exc):
                raise BusyError(f"{self.db} stayed locked for {BUSY_TIMEOUT_S:g}s") from exc
            raise CorruptStateError(f"unreadable OpenClaw database {self.db}: {exc}") from exc
        except sqlite_conn.UNREADABLE as exc:
            self.close()
            raise CorruptStateError(
                f"unreadable OpenClaw database {self.db}: {sqlite_conn.reason(exc)}"
            ) from exc
        return conn

    def _q(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        """All rows of one query. Fetched inside the `try`: SQLite finds a malformed page only
        while stepping through the rows, and that must be exit 5 like any unreadable database."""
        return list(self._stepped(sql, args))

    def _stepped(self, sql: str, args: Sequence[Any] = ()) -> Iterator[Any]:
        """The rows of one query, stepped only as far as the caller reads: `history --limit
        20` of a session of 100,000 events fetches 20 rows, not all of them (fetching them all
        made it 3x the time of a 100-event session). Errors as `_q` (raised while stepping)."""
        try:
            yield from self.conn().execute(sql, args)
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise BusyError(f"{self.db} stayed locked for {BUSY_TIMEOUT_S:g}s") from exc
            raise CorruptStateError(f"unreadable OpenClaw database {self.db}: {exc}") from exc
        except sqlite_conn.UNREADABLE as exc:
            raise CorruptStateError(
                f"unreadable OpenClaw database {self.db}: {sqlite_conn.reason(exc)}"
            ) from exc

    def schema_version(self) -> int | None:
        self.conn()
        return self._version

    def _has(self, table: str, column: str) -> bool:
        self.conn()
        return column in self._columns.get(table, set())

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.execute("COMMIT")
            except (sqlite3.Error, UnicodeDecodeError):
                pass
            self._conn.close()
            self._conn = None
        if self._tmpdir is not None:
            import shutil

            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None

    # -- sessions -----------------------------------------------------------------------

    def session(self, full_key: str) -> Folded | None:
        return self.sessions().get(full_key)

    def sessions(self, fields: Sequence[str] | None = None) -> dict[str, Folded]:
        want = tuple(fields) if fields is not None else None
        if self._sessions is not None and (self._fields is None or self._fields == want):
            return self._sessions
        archived = " WHERE archived_at IS NULL" if self._has("session_nodes", "archived_at") else ""
        out: dict[str, Folded] = {}
        if want is None:
            life = _life_columns(self)
            rows = self._q(
                "SELECT session_key, current_session_id, updated_at, entry_json"
                + life
                + " FROM session_nodes"
                + archived
            )
            for key, sid, updated, raw, *cols in rows:
                try:
                    entry = json.loads(raw)
                except (ValueError, RecursionError, TypeError):
                    entry = None
                if not isinstance(entry, dict):
                    from sessiontool import diag

                    diag.warn(f"{self.db}: session {key}: unreadable entry_json, skipped")
                    continue
                self._add(out, key, sid, updated=updated, entry=_with_life(entry, cols))
        else:
            # Only the fields asked for, extracted by SQLite in C: an entry_json is ~15 KB
            # (skills snapshot, prompt report) and a listing needs a dozen small fields.
            # json_extract with two or more paths returns one JSON array: always >= 2 here.
            names = [
                f for f in dict.fromkeys(("sessionId", "updatedAt", *want)) if f.isidentifier()
            ]
            paths_sql = ", ".join("'$." + n + "'" for n in names)
            life = _life_columns(self)
            rows = self._q(
                "SELECT session_key, current_session_id, updated_at, "
                f"json_extract(entry_json, {paths_sql}){life} FROM session_nodes" + archived
            )
            for key, sid, updated, packed, *cols in rows:
                try:
                    values = json.loads(packed) if isinstance(packed, str) else []
                except ValueError:
                    values = []
                if not isinstance(values, list):
                    values = []
                entry = {n: v for n, v in zip(names, values, strict=False) if v is not None}
                self._add(out, key, sid, updated=updated, entry=_with_life(entry, cols))
        self._sessions, self._fields = out, want
        return out

    def _add(self, out: dict[str, Folded], key: Any, sid: Any, updated: Any, entry: Entry) -> None:
        if not isinstance(key, str):
            return
        entry = normalize_entry(entry)
        if not isinstance(entry.get("sessionId"), str) and isinstance(sid, str):
            entry["sessionId"] = sid
        if "updatedAt" not in entry and isinstance(updated, int):
            entry["updatedAt"] = updated
        out[key] = Folded(key, entry, [key])

    # -- transcripts --------------------------------------------------------------------

    def _session_id(self, full_key: str, entry: Entry) -> str | None:
        sid = entry.get("sessionId")
        return sid if isinstance(sid, str) else None

    def events_newest_first(self, session_id: str) -> Iterator[Any]:
        """The active branch's events, newest first, fetched and decoded as they are read."""
        rows = self._stepped(
            "SELECT e.event_json, e.event_zstd FROM session_transcript_active_events a "
            "JOIN transcript_events e ON e.session_id = a.session_id AND e.seq = a.event_seq "
            "WHERE a.session_id = ? ORDER BY a.active_position DESC",
            (session_id,),
        )
        any_row = False
        for text, blob in rows:
            any_row = True
            yield self._decode(text, blob)
        if not any_row:
            yield from reversed(self._cold_events(session_id))

    def _decode(self, text: Any, blob: Any) -> Any:
        try:
            if text is not None:
                return json.loads(text)
            if blob is not None:
                from sessiontool.state.openclaw_cold import decompress

                return json.loads(decompress(bytes(blob)))
        except Exception:  # noqa: BLE001 - a bad row is skipped and counted
            return None
        return None

    def _cold_events(self, session_id: str) -> list[Any]:
        """A cold-stored transcript's active branch, oldest first ([] when none)."""
        cols = self._columns.get("session_transcript_cold_archives")
        if not cols or not {"archive_name", "storage"} <= cols:
            return []
        blob_col = "archive_blob" if "archive_blob" in cols else "NULL"
        rows = self._q(
            f"SELECT archive_name, storage, {blob_col} FROM session_transcript_cold_archives "
            "WHERE session_id = ?",
            (session_id,),
        )
        if not rows:
            return []
        from sessiontool.state.openclaw_cold import cold_events

        name, storage, blob = rows[0]
        texts = cold_events(self.db, session_id, name, storage=storage, blob=blob)
        return [self._decode(text, None) for text in texts]

    def messages(
        self,
        full_key: str,
        entry: Entry,
        limit: int | None,
        keep: Callable[[Message], bool] | None = None,
        *,
        stop: Callable[[Message], bool] | None = None,
        skip_line: Callable[[bytes], bool] | None = None,  # events are not lines: unused
    ) -> ReadResult:
        result = ReadResult()
        sid = self._session_id(full_key, entry)
        if sid is None:
            result.exists = False
            return result
        if limit is not None and limit <= 0:
            return result
        collected: list[Message] = []
        for ev in self.events_newest_first(sid):
            if not isinstance(ev, dict):
                result.bad_lines += 1
                continue
            kind = ev.get("type")
            if kind == "reset":
                msg: Message | None = reset_message(ev)
            elif kind == "message" and isinstance(ev.get("message"), dict):
                msg = display_message(ev["message"])
            else:
                continue
            if msg is not None and stop is not None and stop(msg):
                break
            if msg is not None and (keep is None or keep(msg)):
                collected.append(msg)
                result.ids.append(ev.get("id") if isinstance(ev.get("id"), str) else None)
            if kind == "reset" or (limit is not None and len(collected) >= limit):
                break
        collected.reverse()
        result.ids.reverse()
        result.messages = collected
        if result.bad_lines:
            from sessiontool import diag

            diag.warn(f"{self.db}: session {sid}: skipped {result.bad_lines} unreadable event(s)")
        return result

    def participants(self) -> dict[str, list[dict[str, Any]]]:
        """Per session key, who prompted it, as OpenClaw's own rows show it
        (`[{"identity": {..., "id": actor}}]`, oldest first); {} without that table."""
        tables = {
            r[0]
            for r in self._q("SELECT name FROM sqlite_master WHERE name='session_participants'")
        }
        if not tables:
            return {}
        cols = {r[1] for r in self._q("PRAGMA table_info(session_participants)")}
        if not {"session_key", "identity_namespace", "actor_id"} <= cols:
            return {}
        order = " ORDER BY first_prompted_at" if "first_prompted_at" in cols else ""
        out: dict[str, list[dict[str, Any]]] = {}
        for key, ns, actor in self._q(
            f"SELECT session_key, identity_namespace, actor_id FROM session_participants{order}"
        ):
            try:
                ident = json.loads(ns) if isinstance(ns, str) else {}
            except ValueError:
                ident = {}
            if not isinstance(ident, dict):
                ident = {}
            out.setdefault(str(key), []).append({"identity": {**ident, "id": actor}})
        return out

    def event_marks(self) -> dict[str, str]:
        """Per session id, what changes whenever its transcript does: the number of events and
        the highest seq, and the same of its active branch. The entry's updatedAt is not
        enough: OpenClaw appends mid-turn events (and a reset's) without bumping it. Read from
        the primary keys only (no event is decoded)."""
        if self._marks is None:
            marks: dict[str, list[Any]] = {}
            for sid, n, top in self._q(
                "SELECT session_id, count(*), max(seq) FROM transcript_events GROUP BY session_id"
            ):
                marks[str(sid)] = [n, top, 0, None]
            for sid, n, top in self._q(
                "SELECT session_id, count(*), max(active_position) "
                "FROM session_transcript_active_events GROUP BY session_id"
            ):
                marks.setdefault(str(sid), [0, None, 0, None])[2:] = [n, top]
            self._marks = {sid: ":".join(map(str, m)) for sid, m in marks.items()}
        return self._marks

    def counts(self) -> dict[str, int]:
        """For doctor/paths: sessions and transcript events in the snapshot."""
        n_sessions = self._q("SELECT count(*) FROM session_nodes")[0][0]
        n_events = self._q("SELECT count(*) FROM transcript_events")[0][0]
        return {"sessions": int(n_sessions), "events": int(n_events)}


# OpenClaw's promoted columns of a session's pin and fork origin (its entry writer projects
# `pinnedAt` and `forkSource.{sessionKey, sessionId, entryId}` into them).
LIFE_COLUMNS = (
    "pinned_at",
    "fork_source_session_key",
    "fork_source_session_id",
    "fork_source_entry_id",
)


def _life_columns(reader: SqliteReader) -> str:
    """The columns OpenClaw 2026.9.6 projects a session's pin and fork origin into, selected
    when the schema has them (`_with_life`)."""
    if all(reader._has("session_nodes", c) for c in LIFE_COLUMNS):
        return ", " + ", ".join(LIFE_COLUMNS)
    return ""


def _with_life(entry: Entry, cols: Sequence[Any]) -> Entry:
    """The entry with its pin and fork origin from OpenClaw's columns where its entry_json
    does not say them (a row whose entry lost them, or an asked-for field list without them):
    `pinnedAt` from `pinned_at`, `forkSource` from `fork_source_*`."""
    if len(cols) != len(LIFE_COLUMNS):
        return entry
    pinned, src_key, src_id, src_entry = cols
    if isinstance(pinned, int) and not isinstance(pinned, bool) and "pinnedAt" not in entry:
        entry["pinnedAt"] = pinned
    if isinstance(src_key, str) and src_key and not isinstance(entry.get("forkSource"), dict):
        source = {"sessionKey": src_key}
        for name, value in (("sessionId", src_id), ("entryId", src_entry)):
            if isinstance(value, str) and value:
                source[name] = value
        entry["forkSource"] = source
    return entry


def archived_sessions(reader: SqliteReader) -> dict[str, Folded]:
    """The sessions OpenClaw archived (`archived_at` set), which `sessions()` leaves out."""
    out: dict[str, Folded] = {}
    if not reader._has("session_nodes", "archived_at"):
        return out
    rows = reader._q(
        "SELECT session_key, current_session_id, updated_at, entry_json, archived_at "
        "FROM session_nodes WHERE archived_at IS NOT NULL"
    )
    for key, sid, updated, raw, archived_at in rows:
        try:
            entry = json.loads(raw)
        except (ValueError, RecursionError, TypeError):
            continue
        if isinstance(entry, dict):
            entry.setdefault("archivedAt", archived_at)
            reader._add(out, key, sid, updated=updated, entry=entry)
    return out
