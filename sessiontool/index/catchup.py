"""Catching the search index up with its transcripts, one file at a time: what to read of each
(from where, with or without its text), reading it (in worker processes on a big build) and
writing what was read, committed in parts so that an interrupted build keeps what it finished.
Which files changed, under which lock, is index/sync.py's `Index.sync`, which makes one
`CatchUp` per catch-up (under its write lock) and hands it the files to read."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sessiontool import testhooks
from sessiontool.errors import BusyError
from sessiontool.index.db import FileRow, insert_rows
from sessiontool.index.extract import Turns, extract_message
from sessiontool.index.scan import (
    PARALLEL_MAX_FILE,
    Job,
    Read,
    Row,
    can_fork,
    collect,
    only_appended,
    parallel_min,
    read_forked,
    read_job,
    worker_count,
)

VIRTUAL_SEP = "#"


@dataclass(frozen=True)
class Virtual:
    """A transcript that is not a JSONL file: `name` is `<database>#<sessionId>`, `version`
    changes whenever the session does, `load` returns its entries (`{"type": "message",
    "message": {...}}`, as JSONL lines are) oldest first."""

    name: str
    version: str
    load: Callable[[], list[dict[str, Any]]]


def unchanged(
    wanted: dict[str, Path | str | None],
    sources: list[Virtual],
    stats: dict[str, os.stat_result],
    known: dict[str, FileRow],
    text: bool = True,
) -> dict[str, int] | None:
    """The ids of `wanted` when nothing needs catching up (None otherwise), found without a
    write lock: each transcript's stat (`stats`, None: gone) against the identity, size
    and mtime stored for it (and, with `text`, whether its text is indexed), and a stat of
    each indexed file that is no longer wanted (gone: to purge)."""
    ids: dict[str, int] = {}
    for v in sources:
        row = known.get(v.name)
        if row is None or row.version != v.version or (text and not row.text):
            return None
        ids[v.name] = row.id
    for spath, path in wanted.items():
        if path is None:
            continue
        st = stats.get(spath)
        if st is None:
            if spath in known:
                return None
            continue
        row = known.get(spath)
        if row is None or not row.same_stat(st) or (text and not row.text):
            return None
        ids[spath] = row.id
    for spath in known:
        if spath not in wanted and not os.path.exists(spath.partition(VIRTUAL_SEP)[0]):
            return None
    return ids


# (files done, files to read, bytes done, bytes to read), after each file a catch-up reads.
Progress = Callable[[int, int, int, int], None]
# A catch-up commits whenever it has read this much since its last commit
# (`SESSIONTOOL_INDEX_COMMIT_BYTES` changes it: tests interrupt a build between two parts).
# Each commit ends an FTS5 segment (merged with the others later: work a single transaction
# would not do), so the parts are big: an interrupted build loses at most ~10 s of work.
COMMIT_BYTES = 256 << 20
# A sync starts over when another process committed between two of its parts (that one made
# progress, so this ends: the last to start finds everything done); the bound only guards
# against a bug.
RESTARTS = 1000


class Restart(Exception):
    """Another process wrote to the index between two parts of a catch-up."""


def commit_bytes() -> int:
    env = os.environ.get("SESSIONTOOL_INDEX_COMMIT_BYTES", "")
    return int(env) if env.isdigit() and int(env) > 0 else COMMIT_BYTES


# Rows and turns written per flush (a few MB of text at most).
BATCH_ROWS = 20_000


class _Batch:
    """What was read and not yet written: rows, turns and the files' new states."""

    def __init__(self) -> None:
        self.rows: list[Row] = []
        self.turns: Turns = []
        # (dev, ino, size, mtime, ctime, off, digest, last_role, text, id): an UPDATE's values
        self.files: list[tuple[Any, ...]] = []


class _Parts:
    """Counts a catch-up's progress: tells `progress`, and commits every commit_bytes()."""

    def __init__(self, writer: CatchUp, jobs: list[Job], progress: Progress | None) -> None:
        self.writer = writer
        self.progress = progress
        self.files = len(jobs)
        self.total = sum(j.size - j.off for j in jobs)
        self.step = commit_bytes()
        self.n = self.bytes = self.pending = 0

    def done(self, job: Job) -> None:
        size = job.size - job.off
        self.n += 1
        self.bytes += size
        self.pending += size
        if self.pending >= self.step and self.n < self.files:
            self.pending = 0
            self.writer.commit_part()
        if self.progress is not None:
            self.progress(self.n, self.files, self.bytes, self.total)
        testhooks.pause("index-part")


def _whole(file_id: int, path: Path, st: os.stat_result, text: bool) -> Job:
    """A job reading all of `path` as `st` found it; a read on from an offset replaces the
    fields that say where."""
    return Job(
        file_id=file_id,
        path=str(path),
        off=0,
        size=st.st_size,
        last_role=None,
        st=st,
        digest=b"",
        text=text,
        turns_from=0,
    )


class CatchUp:
    """One catch-up's writing, under the index's write lock: files added (`file`, `virtual`),
    read (`run`), purged and forgotten. `dead` counts the purged message rows (their words
    linger in the contentless FTS tables); `unreadable` names the transcripts it could not read
    (path → the OSError), whose rows it dropped."""

    def __init__(
        self, conn: sqlite3.Connection, path: Path, fts: bool, trigram: bool, dead: int
    ) -> None:
        self.conn = conn
        self.path = path
        self.fts = fts
        self.trigram = trigram
        self.dead = dead
        self.unreadable: dict[str, OSError] = {}
        self._batch = _Batch()

    def purge(self, file_id: int) -> None:
        """Drop a file's rows and forget what was read of it (its row is consistent with its
        rows at every commit: a build is committed in parts)."""
        c = self.conn
        cur = c.execute("DELETE FROM msgs WHERE file_id = ?", (file_id,))
        self.dead += max(0, cur.rowcount)
        c.execute("DELETE FROM days WHERE file_id = ?", (file_id,))
        c.execute("DELETE FROM tools WHERE file_id = ?", (file_id,))
        c.execute(
            "UPDATE files SET size = -1, mtime = 0, ctime = 0, off = 0, digest = NULL, "
            "last_role = NULL, text = 0, version = NULL WHERE id = ?",
            (file_id,),
        )

    def forget(self, file_id: int) -> None:
        """Drop a file from the index (it is gone; the caller drops the snapshots that name
        it)."""
        self.purge(file_id)
        self.conn.execute("DELETE FROM files WHERE id = ?", (file_id,))

    def rename(self, row: FileRow, path: str) -> FileRow:
        """The file of `row` under its new name (same bytes: its rows are kept)."""
        self.conn.execute("UPDATE files SET path = ? WHERE id = ?", (path, row.id))
        return row._replace(path=path)

    def virtual(self, v: Virtual, row: FileRow | None, text: bool) -> int:
        """A transcript another store holds (OpenClaw's SQLite): read whole again whenever its
        version (the session's updatedAt) changes, or when its text is wanted and not there."""
        c = self.conn
        if row is not None and row.version == v.version and (row.text or not text):
            return row.id
        text = text or bool(row is not None and row.text)
        if row is None:
            cur = c.execute(
                "INSERT INTO files(path, dev, ino, size, mtime, off) VALUES (?, 0, 0, 0, 0, 0)",
                (v.name,),
            )
            file_id = int(cur.lastrowid or 0)
        else:
            file_id = row.id
            self.purge(file_id)
        rows: list[Row] = []
        turns: Turns = []
        last_role: str | None = None
        for line in v.load():
            msg = line.get("message") if isinstance(line, dict) else None
            if line.get("type") == "message" and isinstance(msg, dict):
                ex = extract_message(msg, line)
                last_role = collect(file_id, ex, 0, last_role=last_role, rows=rows, turns=turns)
        self._insert(rows if text else [], turns, keep_text=True)
        c.execute(
            "UPDATE files SET version = ?, last_role = ?, text = ? WHERE id = ?",
            (v.version, last_role, int(text), file_id),
        )
        return file_id

    def _insert(self, rows: list[Row], turns: Turns, *, keep_text: bool = False) -> None:
        insert_rows(self.conn, self.fts, self.trigram, rows=rows, turns=turns, keep_text=keep_text)

    def file(
        self,
        path: Path,
        st: os.stat_result,
        row: FileRow | None,
        jobs: list[Job],
        text: bool,
    ) -> int:
        """The file's id; what must be read of it (from where) is added to `jobs`."""
        if row is None:
            cur = self.conn.execute(
                "INSERT INTO files(path, dev, ino, size, mtime, off) VALUES (?, ?, ?, 0, 0, 0)",
                (str(path), st.st_dev, st.st_ino),
            )
            file_id = int(cur.lastrowid or 0)
            jobs.append(_whole(file_id, path, st, text))
            return file_id
        file_id, off, has_text = row.id, row.off, row.text
        text = text or bool(has_text)  # a file whose text is indexed keeps it current
        if row.same_stat(st):
            if not has_text and text:
                # Unchanged, its turns indexed without its text: the text from the start.
                jobs.append(_whole(file_id, path, st, True)._replace(turns_from=off))
            return file_id
        then, now = (row.dev, row.ino, row.size), (st.st_dev, st.st_ino, st.st_size)
        if not only_appended(then, now, off, path=str(path), digest=row.digest):
            self.purge(file_id)  # replaced or rewritten: read it again from the start
            jobs.append(_whole(file_id, path, st, text))
        elif text and not has_text:  # grown; its text never read: from the start
            jobs.append(_whole(file_id, path, st, True)._replace(turns_from=off))
        else:
            jobs.append(
                _whole(file_id, path, st, text)._replace(
                    off=off, last_role=row.last_role, digest=row.digest or b"", turns_from=off
                )
            )
        return file_id

    def run(self, jobs: list[Job], progress: Progress | None) -> None:
        """Read what `jobs` ask for and write it to the index, with the cyclic collector off:
        the turns and rows read only grow until they are written, and hold no cycles (parsed
        JSON, tuples of it), so each of its passes walked them all again for nothing (~0.13 s
        of a cold `usage` of 50 MB: 158 young, 14 middle and one full collection, the last
        alone 58 ms). Reference counts free them as before."""
        from sessiontool import gcpause

        with gcpause.paused():
            self._run(jobs, progress)

    def _run(self, jobs: list[Job], progress: Progress | None) -> None:
        """The small and the many files in worker processes when there is much to read and
        more than one CPU, the rest here."""
        all_jobs = jobs
        parts = _Parts(self, jobs, progress)
        pool_jobs = [j for j in jobs if j.size - j.off <= PARALLEL_MAX_FILE]
        # Turns alone (a `usage` build) are read here: the parse is the whole of it, and a
        # worker's turns, pickled and read back, cost more CPU (~15% at 1 GB) than it saves.
        workers = worker_count()
        if (
            workers
            and any(j.text for j in pool_jobs)
            and sum(j.size - j.off for j in pool_jobs) >= parallel_min()
            and len(pool_jobs) > 1
            and can_fork()
        ):
            done: set[int] = set()
            with closing(read_forked(pool_jobs, workers)) as reads:
                for got in reads:
                    self._save_read(got)
                    done.add(got.job.file_id)
                    parts.done(got.job)
            jobs = [j for j in jobs if j.file_id not in done]  # what a dead worker left
        for j in jobs:
            self._save_read(read_job(j))
            parts.done(j)
        self._flush()
        if self.fts and any(j.text for j in all_jobs) and parts.total >= parallel_min():
            # A big catch-up leaves FTS5 a few big segments beside the small ones later
            # catch-ups add; when those pile up, FTS5 merges them all in one commit (16 s for
            # 1 GB, in some later search). Merged into one now, as part of the build.
            self.conn.execute("INSERT INTO fts(fts, rank) VALUES ('optimize', 0)")
            if self.trigram:
                self.conn.execute("INSERT INTO fts_cjk(fts_cjk, rank) VALUES ('optimize', 0)")

    def _save_read(self, got: Read) -> None:
        job = got.job
        if got.error is not None:
            self.unreadable[job.path] = OSError(got.errno or 0, got.error, job.path)
            # Forget what was read: once readable again it is read from the start.
            self.purge(job.file_id)
            return
        batch = self._batch
        batch.rows += got.rows
        batch.turns += got.turns
        st = job.st
        batch.files.append(
            (
                st.st_dev,
                st.st_ino,
                st.st_size,
                st.st_mtime_ns,
                st.st_ctime_ns,
                got.off,
                got.digest,
                got.last_role,
                int(job.text),
                job.file_id,
            )
        )
        if len(batch.rows) + len(batch.turns) >= BATCH_ROWS:
            self._flush()

    def _flush(self) -> None:
        """Write the rows, turns and file states read since the last flush: a few statements
        for many files (per file, they were most of what a build of small files cost)."""
        batch = self._batch
        self._insert(batch.rows, batch.turns)
        self.conn.executemany(
            "UPDATE files SET dev = ?, ino = ?, size = ?, mtime = ?, ctime = ?, off = ?, "
            "digest = ?, last_role = ?, text = ? WHERE id = ?",
            batch.files,
        )
        self._batch = _Batch()

    def commit_part(self) -> None:
        """Commit what was caught up so far and take the write lock again; when another
        process wrote in between, what this one planned may be stale: start over."""
        c = self.conn
        self._flush()
        c.execute("INSERT OR REPLACE INTO meta(k, v) VALUES ('dead', ?)", (str(self.dead),))
        c.execute("COMMIT")
        seen = c.execute("PRAGMA data_version").fetchone()[0]
        testhooks.pause("index-commit")  # the lock is free here: another writer may take it
        try:
            c.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise BusyError(f"the search index {self.path} is busy") from exc
        if c.execute("PRAGMA data_version").fetchone()[0] != seen:
            raise Restart
