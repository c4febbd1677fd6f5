"""What `top` looks at between two redraws, cheaply: a change marker over the files every
writer replaces or appends to, and the memory of a run's process group.

The marker is a tuple of file facts (inode, size, mtime in ns), compared with the last one each
tick: a handful of `stat` calls however many sessions there are, so only a change costs a
re-read. Each fact is one a writer cannot avoid changing: sessions.json and a run record are
replaced by a rename (atomic_write), the outbox is appended to, OpenClaw's SQLite database
writes through its WAL file. The database is stat'ed, not opened for its `data_version`: an
open SQLite connection in this process would make every `send` from `top` start its worker as
a fresh program (state/sqlite_conn.py), and a stat tells the same thing here."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from sessiontool.state.detect import sqlite_path
from sessiontool.state.paths import StatePaths

Fact = tuple[int, int, int] | None
Marker = tuple[Fact, ...]


def _fact(path: Path | str) -> Fact:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def marker(paths: StatePaths, agent_ids: Iterable[str]) -> Marker:
    """The facts of everything a listing in `top` reads: the agents dir (an agent appears),
    each agent's sessions.json and OpenClaw database (with its WAL), the runs dir (a record
    created or replaced) and the outbox."""
    facts: list[Fact] = [_fact(paths.agents_dir), _fact(paths.runs_dir), _fact(paths.deliveries)]
    for agent_id in agent_ids:
        db = sqlite_path(paths, agent_id)
        facts += [_fact(paths.sessions_json(agent_id)), _fact(db), _fact(f"{db}-wal")]
    return tuple(facts)


# -- a run's memory ----------------------------------------------------------------------------

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def groups_rss(pgids: Iterable[int], proc: str = "/proc") -> dict[int, int]:
    """The resident memory, in bytes, of every process in each process group of `pgids` (a
    local run's agent and what it started: what `abort` kills), in one walk of /proc however
    many groups are asked for; a group with no process found (gone, or not Linux) is left out.
    Each /proc/PID/stat is read with os.read (no file object: a walk opens every process's)."""
    wanted = {str(p).encode() for p in pgids}
    try:
        names = os.listdir(proc) if wanted else []
    except OSError:
        return {}
    total: dict[int, int] = {}
    for name in names:
        if not name.isdigit():
            continue
        try:
            fd = os.open(f"{proc}/{name}/stat", os.O_RDONLY)
        except OSError:
            continue
        try:
            stat = os.read(fd, 4096)
        except OSError:
            continue
        finally:
            os.close(fd)
        # pid (comm) state ppid pgrp …: comm may hold spaces and parentheses, so split after
        # its last ')'. rss is field 24 (pages), the 22nd after the comm.
        fields = stat.rsplit(b")", 1)[-1].split()
        if len(fields) < 22 or fields[2] not in wanted:
            continue
        group = int(fields[2])
        total[group] = total.get(group, 0) + int(fields[21]) * _PAGE
    return total


def group_rss(pgid: int, proc: str = "/proc") -> int | None:
    """The resident memory of process group `pgid`, or None where /proc cannot say."""
    return groups_rss([pgid], proc).get(pgid)
