"""The first rows of each agent's `list`, kept beside the index (`<state>/sessiontool/list-head.json`)
under the identity of the sessions.json they were read from, so that `list --limit 20` over
100,000 sessions reads a few hundred rows instead of parsing a 12 MB store (issue 47: the parse
alone cost 1.8× the whole command at 1,000 sessions).

Sound by its key, never by its age: a head is used only for the very file it was read from
(device, inode, size, mtime and ctime: `sessions_json.file_identity`, which gives none for a
store under 1 MiB or on a file system with whole-second times: those are parsed every time) and
for the sessiontool version that wrote it. Every writer of sessions.json, OpenClaw's and ours,
replaces the file or changes it in place; either moves its ctime, which no program can set.
A head is kept only for a store whose ctime is at least RACY_NS old when the head is written, so
a change within the same clock tick as the read it came from cannot go unseen. What it holds is
each row as `list` selects it before anything is decided of it (the stored entry; the kind,
visibility and row are made from it each time), in `list`'s order, and how many rows the store
has in all: a page that reads past the head, or any filter but `--kinds`, lists in full.
Losing it costs one parse; a record that cannot be read is no record."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import orjson

import sessiontool
from sessiontool.state import sessions_json
from sessiontool.state.paths import StatePaths

FORMAT = 1
HEAD_ROWS = 500  # past `list`'s default page (200), with room for what `--kinds` skips
RACY_NS = 1_000_000_000

# A row as kept: [updatedAt as list sorts it, full key, the stored entry].
KeptRow = list[Any]


class Head:
    """One agent's kept head: its first rows in list order, and the number of rows in all."""

    __slots__ = ("rows", "total")

    def __init__(self, rows: list[KeptRow], total: int) -> None:
        self.rows = rows
        self.total = total

    @property
    def complete(self) -> bool:
        return len(self.rows) >= self.total


def _load(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            rec = orjson.loads(fh.read())
    except (OSError, orjson.JSONDecodeError):
        return {}
    ok = (
        isinstance(rec, dict)
        and rec.get("v") == FORMAT
        and rec.get("tool") == sessiontool.__version__
    )
    heads = rec.get("agents") if ok else None
    return heads if isinstance(heads, dict) else {}


def _row_ok(row: Any) -> bool:
    """A kept row has the shape `keep` writes (the file is one anyone could edit)."""
    return (
        type(row) is list
        and len(row) == 3
        and type(row[0]) in (int, float)
        and type(row[1]) is str
        and type(row[2]) is dict
    )


def head(paths: StatePaths, agent_id: str, store: Path) -> Head | None:
    """The head kept for `agent_id` when it was read from the store file now at `store`."""
    ident = sessions_json.file_identity(store)
    if ident is None:
        return None
    got = _load(paths.list_head).get(agent_id)
    if not isinstance(got, dict) or got.get("store") != os.fspath(store):
        return None
    rows, total = got.get("rows"), got.get("total")
    if got.get("ident") != list(ident) or type(total) is not int or type(rows) is not list:
        return None
    if len(rows) != min(total, HEAD_ROWS) or not all(_row_ok(r) for r in rows):
        return None
    return Head(rows, total)


def keep(paths: StatePaths, heads: dict[str, tuple[Path, list[KeptRow], int]]) -> None:
    """Keep each agent's first rows (`heads`: agent → (its store, its rows in list order, its
    row count)) when the store they came from is the file the parse kept
    (`sessions_json.kept_identity`) and old enough. A failure to write is no error: the next
    `list` parses the store."""
    from sessiontool.errors import SessiontoolError
    from sessiontool.state.jsonio import atomic_write

    kept: dict[str, Any] = {}
    for agent_id, (store, rows, total) in heads.items():
        ident = sessions_json.kept_identity(store)
        if ident is None or time.time_ns() - ident[4] < RACY_NS:
            continue
        part = rows[:HEAD_ROWS]
        try:
            if orjson.loads(orjson.dumps(part)) != part:  # NaN (written as null): not kept
                continue
        except orjson.JSONEncodeError:  # a number past 64 bits
            continue
        kept[agent_id] = {"store": os.fspath(store), "ident": list(ident), "total": total}
        kept[agent_id]["rows"] = part
    if not kept or not paths.tool_dir.is_dir():  # a state dir sessiontool never wrote to
        return
    path = paths.list_head
    record = {"v": FORMAT, "tool": sessiontool.__version__, "agents": {**_load(path), **kept}}
    try:
        atomic_write(path, orjson.dumps(record), durable=False)
    except (SessiontoolError, OSError, orjson.JSONEncodeError):
        pass
