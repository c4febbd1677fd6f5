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
cannot be read is no record.

A transcript that only grew since (another program appended a turn) is read on from where the
index had read it, as the index's catch-up would read it (`index/scan.only_appended`, the same
digest of the bytes before that offset; `scan.read_appended`, the same complete lines and
turns), and its turns added to the sums: no SQLite for that either. The record keeps each
transcript's offset and digest for this (`ends`, `own_end`); the index catches up on its own
later (`search`, `usage`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import orjson  # loaded already by every command (state/jsonio.py); ~20x json's encoding speed

import sessiontool
from sessiontool.protocol import MIRROR_MODEL, MIRROR_PROVIDER

INDEX_NAME = "index.sqlite"  # index/db.py's (which imports sqlite3: what this record spares)
FORMAT = 3
DAY_MS = 86_400_000
# One transcript as it was read: [agent id, name, dev, ino, size, mtime ns, ctime ns], its name
# within the agent's sessions directory (today's) or its path (the session's own).
Sig = list[Any]
# Where a transcript's sums stop: [offset read up to (whole lines), hex digest of the bytes
# before it (index/scan.prefix_digest)], as the index read it or as this record read it on.
End = list[Any]


if TYPE_CHECKING:  # a TypedDict's creation was a third of this module's import

    class Record(TypedDict, total=False):
        """The file's content (`v` its format, `tool` the sessiontool version that wrote it, `index`
        the index file's [dev, ino]); `files`/`ends`/`today` and `own`/`own_end`/`session` each
        present together (`ends[i]` is where `files[i]`'s sums stop)."""

        v: int
        tool: str
        index: list[int]
        day: int
        files: list[Sig]
        ends: list[End]
        today: list[list[Any]]
        own: Sig
        own_end: End
        session: list[list[Any]]


def sig(agent_id: str, name: str, st: os.stat_result) -> Sig:
    return [agent_id, name, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def end(off: int, digest: bytes | None) -> End:
    return [off, (digest or b"").hex()]


def put_today(
    rec: Record, day: int, files: list[Sig], turns: list[tuple[Any, ...]], reads: list[Any]
) -> None:
    """Today's turns as the index read them from `files` (`reads`: each one's index/db.ReadTo,
    where it was read up to)."""
    rec["day"], rec["files"], rec["today"] = day, files, [list(t) for t in turns]
    rec["ends"] = [end(off, digest) for _id, off, digest in reads]


def put_session(rec: Record, own: Sig, turns: list[tuple[Any, ...]], read: Any) -> None:
    """The session's turns as the index read them from its transcript `own` (`read`: its
    index/db.ReadTo)."""
    rec["own"], rec["session"] = own, [list(t) for t in turns]
    rec["own_end"] = end(read[1], read[2])


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
            got = orjson.loads(fh.read())
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


def grown_today(
    rec: Record, day: int, files: list[Sig], path_of: Callable[[Sig], str]
) -> list[tuple[Any, ...]] | None:
    """Today's turns when `files` (today's transcripts as they are now, `path_of` the path of
    one) are those the record read, each as it was or grown since: its sums and the turns of
    today in the lines added (`_appended`). The record is updated to them. None: read the
    index."""
    old, ends, rows = rec.get("files"), rec.get("ends"), _rows(rec.get("today"))
    if rec.get("day") != day or rows is None or not isinstance(old, list):
        return None
    if not isinstance(ends, list) or not len(old) == len(ends) == len(files):
        return None
    new_ends = list(ends)
    for i, now in enumerate(files):
        was = old[i]
        if was == now:
            continue
        got = _appended(path_of(now), was, now, ends[i])
        if got is None:
            return None
        turns, new_ends[i] = got
        rows = _added(rows, now[0], [t for t in turns if t[2] // DAY_MS == day])
    rec["files"], rec["ends"], rec["today"] = files, new_ends, [list(t) for t in rows]
    return rows


def grown_session(rec: Record, own: Sig) -> list[tuple[Any, ...]] | None:
    """The session's turns when its transcript is the one the record read, grown since: its
    sums and the turns of the lines added. The record is updated to them. None: read the
    index."""
    rows = _rows(rec.get("session"))
    got = _appended(own[1], rec.get("own"), own, rec.get("own_end")) if rows is not None else None
    if rows is None or got is None:
        return None
    turns, rec["own_end"] = got
    rows = _added(rows, own[0], turns)
    rec["own"], rec["session"] = own, [list(t) for t in rows]
    return rows


def _appended(path: str, was: Any, now: Sig, at: Any) -> tuple[list[Any], End] | None:
    """The model turns of the complete lines a transcript grew by since `was` (its signature
    when read up to `at`), read as the index's catch-up reads them, and its new end; None when
    it did not only grow (replaced, rewritten, the bytes before `at` changed: the index's own
    rule) or cannot be read."""
    if (
        not isinstance(was, list)
        or len(was) != 7
        or was[:2] != now[:2]
        or not all(type(x) is int for x in was[2:])
        or not isinstance(at, list)
        or len(at) != 2
        or type(at[0]) is not int
        or not isinstance(at[1], str)
    ):
        return None
    try:
        digest = bytes.fromhex(at[1])
    except ValueError:
        return None
    from sessiontool.index import scan

    off = at[0]
    if not scan.only_appended(
        (was[2], was[3], was[4]), (now[2], now[3], now[4]), off, path=path, digest=digest
    ):
        return None
    got = scan.read_appended(path, off, now[4], digest)
    if got.error is not None:
        return None
    # (file id, provider, model, ts, in, out, cache read, cache write, cost, ...); a failed
    # tool result's marker has 3 fields (what `days` leaves out, index/db.insert_rows).
    return [t[1:9] for t in got.turns if len(t) != 3], end(got.off, got.digest)


def _added(rows: list[tuple[Any, ...]], agent: str, turns: list[Any]) -> list[tuple[Any, ...]]:
    """`rows` with `turns` ((provider, model, ts, in, out, cache read, cache write, recorded
    cost) each) summed in, as the index's `days` sums them and budgets._sums reads them: the
    mirrors' own turns left out, no recorded cost counted as 0."""
    out = [list(r) for r in rows]
    at = {(r[0], r[1]): r for r in out}
    for p, m, _ts, i, o, cr, cw, cost in turns:
        if p == MIRROR_PROVIDER and m == MIRROR_MODEL:
            continue
        name = f"{p}/{m}" if p else m
        row = at.get((agent, name))
        if row is None:
            row = at[(agent, name)] = [agent, name, 0, 0, 0, 0, 0.0]
            out.append(row)
        row[2:] = [row[2] + i, row[3] + o, row[4] + cr, row[5] + cw, row[6] + (cost or 0.0)]
    return [tuple(r) for r in out]


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
        atomic_write(path, orjson.dumps(rec), durable=False)
    except (SessiontoolError, orjson.JSONEncodeError):  # (a number past 64 bits: no record)
        pass
