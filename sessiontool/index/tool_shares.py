"""The search index's `tools` table: each model turn's tokens and cost attributed to tools.

The rule (docs/search-usage.md): a model turn is attributed to the tools it called (the turn
that led to their calls) and to the tools whose results it read (the previous turn's calls,
when this turn follows them in the same run); its tokens and cost are split evenly among those
tools, so the tools' shares add up to the turns' total. A turn with neither is `(none)`. A
tool's calls are its toolCall blocks; its errors, the tool results marked `isError`.

Written as the turns are indexed (index/db.py `insert_rows`), summed per file, UTC day,
model and tool as `days` is, so `usage --by tool` sums a few rows per session and day."""

from __future__ import annotations

import sqlite3
from typing import Any

from sessiontool.index.extract import Failed, Turn, Turns

NO_TOOL = "(none)"
DAY_MS = 86_400_000


def _last_called(conn: sqlite3.Connection, file_id: int) -> list[str]:
    """The tools the last turn the index holds of a file called (the boundary of a catch-up:
    the first new turn may read their results)."""
    import orjson

    row = conn.execute("SELECT max(day) FROM days WHERE file_id = ?", (file_id,)).fetchone()
    if row is None or row[0] is None:
        return []
    last: list[Any] | None = None
    for (each,) in conn.execute(
        "SELECT each FROM days WHERE file_id = ? AND day = ?", (file_id, row[0])
    ):
        for turn in orjson.loads("[" + each + "]"):
            if last is None or turn[0] >= last[0]:
                last = turn
    called = last[7] if last is not None and len(last) > 7 else []
    return [str(n) for n in called] if isinstance(called, list) else []


# A `tools` row's key, (file id, UTC day, provider, model, tool), and its sums: [calls,
# errors, turns, input, output, cache read, cache write, cost, turns with a recorded cost].
ToolKey = tuple[int, int, str, str, str]
_NO_TURN: Turn = (0, "", "", 0, 0, 0, 0, 0, None, [], 0)


def _add(sums: dict[ToolKey, list[Any]], key: ToolKey, t: Turn, share: float, calls: int) -> None:
    _fid, _p, _m, _ts, i, o, cr, cw, cost, _called, _start = t
    s = sums.get(key)
    if s is None:
        s = sums[key] = [0, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0]
    s[0] += calls
    s[2] += share
    s[3] += i * share
    s[4] += o * share
    s[5] += cr * share
    s[6] += cw * share
    if cost is not None:
        s[7] += cost * share
        s[8] += 1


def _failed(sums: dict[ToolKey, list[Any]], f: Failed) -> None:
    fid, tool, ts = f
    key = (fid, ts // DAY_MS, "", "", tool)
    _add(sums, key, _NO_TURN, share=0.0, calls=0)
    sums[key][1] += 1


def tool_sums(conn: sqlite3.Connection, turns: Turns) -> list[tuple[Any, ...]]:
    """`tools` rows of turns and failed-result markers, in file order. A turn shared by one
    tool (or by none: most turns) is added whole, without `_add`'s call and products, which
    were most of this per turn (share 1.0: the same sums, `i * 1.0 == i` as a float)."""
    sums: dict[ToolKey, list[Any]] = {}
    prev: dict[int, list[str]] = {}
    for t in turns:
        if len(t) == 3:  # a failed tool result
            _failed(sums, t)
            continue
        fid, provider, model, ts, i, o, cr, cw, cost, called, run_start = t
        if run_start:
            read: list[str] = []
        else:
            got = prev.get(fid)
            read = _last_called(conn, fid) if got is None else got
        prev[fid] = called
        names = _names(called, read)
        if len(names) > 1:
            share = 1.0 / len(names)
            day = ts // DAY_MS
            for name in names:
                _add(
                    sums,
                    (fid, day, provider, model, name),
                    t,
                    share=share,
                    calls=called.count(name),
                )
            continue
        key = (fid, ts // DAY_MS, provider, model, names[0])
        s = sums.get(key)
        if s is None:
            s = sums[key] = [0, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0]
        s[0] += len(called)  # the one name's calls: every call, or none
        s[2] += 1.0
        s[3] += i
        s[4] += o
        s[5] += cr
        s[6] += cw
        if cost is not None:
            s[7] += cost
            s[8] += 1
    return [(*k, *v) for k, v in sums.items()]


_NONE = [NO_TOOL]


def _names(called: list[str], read: list[str]) -> list[str]:
    """The tools a turn is attributed to: those it called and those whose results it read,
    each once, sorted; `(none)` for neither."""
    if read:
        return sorted(set(called).union(read))
    if len(called) > 1:
        return sorted(set(called))
    return called or _NONE


def insert_tools(conn: sqlite3.Connection, turns: Turns) -> list[Turn]:
    """Write the turns' `tools` rows; returns the turns without the failed-result markers
    (what `days` sums)."""
    conn.executemany(
        "INSERT INTO tools(file_id, day, provider, model, tool, calls, errors, turns, input, "
        "output, cache_read, cache_write, cost, n_cost) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT(file_id, day, provider, model, tool) DO UPDATE SET "
        "calls = calls + excluded.calls, errors = errors + excluded.errors, "
        "turns = turns + excluded.turns, input = input + excluded.input, "
        "output = output + excluded.output, cache_read = cache_read + excluded.cache_read, "
        "cache_write = cache_write + excluded.cache_write, cost = cost + excluded.cost, "
        "n_cost = n_cost + excluded.n_cost",
        tool_sums(conn, turns),
    )
    return [t for t in turns if len(t) != 3]
