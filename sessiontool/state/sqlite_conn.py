"""Every SQLite database file sessiontool opens (OpenClaw's session databases, the search
index) is opened here, so that a fork can ask whether SQLite state would be inherited.

Why it matters: SQLite keeps per-process bookkeeping of the files it has open (their
descriptors, the POSIX locks it believes it holds, the WAL index mapped in memory). A forked
child inherits that bookkeeping but not the locks, and the worker's child also closes every
descriptor but its lane lock and reuses their numbers. A child that then opens the same
database again acts on that stale state: it closed a worker's lane lock (fd 3) and, believing
itself the last connection, checkpointed and deleted the WAL of a live OpenClaw gateway, whose
readers then failed with "disk I/O error" (SQLITE_IOERR_SHORT_READ) until it restarted. SQLite
says the same: a connection must not be carried across fork(). So the worker is forked without
exec only while no connection is open (runs/spawnproc.py asks `any_open`); otherwise it is a
fresh program.
"""

from __future__ import annotations

import sqlite3
import weakref
from typing import Any

# SQLite quotes a malformed schema's own text in its error message; where that text is not
# UTF-8, Python's sqlite3 raises UnicodeDecodeError (building the message) instead of
# DatabaseError. A corrupt file can do that on any statement, so every handler of an unreadable
# database catches both (the fuzz found it in `sqlite_master` of a page-corrupted database).
UNREADABLE: tuple[type[Exception], ...] = (sqlite3.DatabaseError, UnicodeDecodeError)


def reason(exc: Exception) -> str:
    """What went wrong, for an error line: SQLite's message, or what a message that could not
    be decoded was about."""
    if isinstance(exc, UnicodeDecodeError):
        return "malformed database schema (a name that is not UTF-8)"
    return str(exc)


class Connection(sqlite3.Connection):
    """A plain sqlite3 connection that this module can count (the base type takes no weak
    references; a subclass does)."""


_opened: weakref.WeakSet[Connection] = weakref.WeakSet()


def connect(database: str, **kwargs: Any) -> sqlite3.Connection:
    """`sqlite3.connect`, counted until closed or collected."""
    conn = sqlite3.connect(database, factory=Connection, **kwargs)
    _opened.add(conn)
    return conn


def any_open() -> bool:
    """True while a connection opened here is neither closed nor collected."""
    for conn in list(_opened):
        try:
            conn.total_changes  # noqa: B018 - raises ProgrammingError once closed
        except sqlite3.ProgrammingError:
            _opened.discard(conn)
            continue
        return True
    return False
