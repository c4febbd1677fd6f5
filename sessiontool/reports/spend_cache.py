"""The budgets' last spend read, kept beside the index (`StatePaths.budget_spend`,
`<state>/sessiontool/budget-spend.json`) under the stat signatures of the transcripts it was
read from, so that a warm `send` whose transcripts are as they were answers its budget check
without SQLite (issue 44: the check's budget is 10 ms; importing sqlite3 and opening the index
were most of what it cost).

Sound by its key, never by its age: today's turns are used only for the same UTC day, the same
index file and exactly the same transcripts written today, each with the identity, size, mtime
and ctime it had when the index was read as current for it (the comparison the index's own
quick path makes); the session's turns only for its transcript as it was. A turn appended since
(by a run, by OpenClaw), a transcript new today or one removed changes the key: the spend is
read from the index again and the record rewritten. What it holds are token sums, not prices:
a price changed in the config applies to them. Losing it costs one index read; a record that
cannot be read is no record."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import sessiontool

INDEX_NAME = "index.sqlite"  # index/db.py's (which imports sqlite3: what this record spares)
FORMAT = 2
# One transcript as it was read: [agent id, name, dev, ino, size, mtime ns, ctime ns], its name
# within the agent's sessions directory (today's) or its path (the session's own).
Sig = list[Any]


if TYPE_CHECKING:  # a TypedDict's creation was a third of this module's import

    class Record(TypedDict, total=False):
        """The file's content (`v` its format, `tool` the sessiontool version that wrote it, `index`
        the index file's [dev, ino]); `files`/`today` and `own`/`session` each present together."""

        v: int
        tool: str
        index: list[int]
        day: int
        files: list[Sig]
        today: list[list[Any]]
        own: Sig
        session: list[list[Any]]


def sig(agent_id: str, name: str, st: os.stat_result) -> Sig:
    return [agent_id, name, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def index_key(tool_dir: Path) -> list[int] | None:
    """The index file's identity (a rebuilt index, another schema's, drops the record); None:
    no index."""
    try:
        st = os.stat(tool_dir / INDEX_NAME)
    except OSError:
        return None
    return [st.st_dev, st.st_ino]


def load(path: Path, index: list[int]) -> Record:
    """The record when it was written by this format and version for this index; else empty."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK  # a planted FIFO: no wait
    try:
        fd = os.open(path, flags)
    except OSError:
        return {}
    try:
        with os.fdopen(fd, "rb") as fh:
            got = json.loads(fh.read())
    except (OSError, ValueError):
        return {}
    if (
        not isinstance(got, dict)
        or got.get("v") != FORMAT
        or got.get("tool") != sessiontool.__version__
        or got.get("index") != index
    ):
        return {}
    rec: Record = got  # type: ignore[assignment]  # checked by its key, written below
    return rec


def today(rec: Record, day: int, files: list[Sig]) -> list[tuple[Any, ...]] | None:
    """Today's turns when `files` (today's transcripts as they are now) are those they were
    read from; None: read them."""
    if rec.get("day") != day or rec.get("files") != files:
        return None
    return _rows(rec.get("today"))


def session(rec: Record, own: Sig) -> list[tuple[Any, ...]] | None:
    """The session's turns when its transcript is as it was when they were read."""
    if rec.get("own") != own:
        return None
    return _rows(rec.get("session"))


def _rows(got: Any) -> list[tuple[Any, ...]] | None:
    """Summed rows as budgets.Turns reads them (7 fields each); None: not such a list."""
    if not isinstance(got, list) or not all(isinstance(t, list) and len(t) == 7 for t in got):
        return None
    return [tuple(t) for t in got]


def save(path: Path, rec: Record) -> None:
    """Replaced whole (readers see the old record or the new); a failure to write is no error:
    the next check reads the index."""
    from sessiontool.errors import SessiontoolError
    from sessiontool.state.jsonio import atomic_write

    rec["v"], rec["tool"] = FORMAT, sessiontool.__version__
    try:
        atomic_write(path, json.dumps(rec).encode(), durable=False)
    except SessiontoolError:
        pass
