"""Which transcripts `search` and `usage` read, and under which session each one counts.

The one seam between those commands and the store reader: everything they learn about sessions
comes through `live_sessions` and `archived_transcripts`, so moving them onto another reader
(OpenClaw's SQLite store, a gateway) changes this module only."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sessiontool.context import Context
from sessiontool.flow import policy
from sessiontool.index.snapshots import SnapRef, Snapshot
from sessiontool.index.sync import VIRTUAL_SEP, Index, Progress, Virtual
from sessiontool.openclaw_releases import openclaw_session_file
from sessiontool.sessions import reading
from sessiontool.sessions.listing import list_agent_ids
from sessiontool.sessions.resolve import agent_sessions
from sessiontool.state import detect, sessions_json
from sessiontool.state.keys import RESERVED_KEYS
from sessiontool.state.paths import is_plain_name, transcript_file_for
from sessiontool.state.sessions_json import Entry, listable

# `<id>.jsonl.deleted.<stamp>` (delete, archive) and `<id>.jsonl.reset.<stamp>` (reset).
_ARCHIVED = re.compile(r"^(?P<sid>.+?)\.jsonl\.(?P<why>deleted|reset)\.")


@dataclass(slots=True)
class SessionRef:
    """One transcript and the session it belongs to. `key` is None for an archived or orphaned
    transcript (no store entry names it any more). Not frozen: a frozen dataclass sets each
    field through `object.__setattr__`, a cost a full check pays 100,000 times over."""

    agent_id: str
    key: str | None
    session_id: str
    # The transcript's path (or a virtual transcript's name), a string: a full check makes
    # 100,000 of them, and pathlib would cost more than the rest of the listing (issue 47).
    where: str
    label: str | None = None
    archived: bool = False
    # Set for a transcript that is not a JSONL file (OpenClaw's SQLite store): how to read it.
    virtual: Virtual | None = field(default=None, compare=False)
    # OpenClaw's SQLite store resets a session in place: the turns before its last reset are
    # this second transcript, archived (JSONL stores rename them to `.reset.`).
    pre_reset: Virtual | None = field(default=None, compare=False)
    # The entry's updatedAt (epoch ms), when it has one: a recently updated session's
    # transcript is hot in a snapshot (index/warm.py).
    updated: int | None = field(default=None, compare=False)

    @property
    def path(self) -> Path:
        return Path(self.where)

    def display_key(self, ctx: Context) -> str | None:
        return ctx.display(self.key) if self.key is not None else None


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


def agent_ids(ctx: Context, all_agents: bool) -> list[str]:
    return list_agent_ids(ctx, all_agents)


def _loader(
    ctx: Context, agent_id: str, key: str, entry: Entry, *, pre_reset: bool = False
) -> Callable[[], list[Any]]:
    """The session's transcript entries, oldest first: those after its last in-place reset
    (what `history` shows), or with `pre_reset` those up to it (archived). Usage must see
    every assistant message (a silent reply cost tokens too), so the reader's raw events are
    used where it has them, not the chat view `history` shows."""

    def load() -> list[Any]:
        events = reading.raw_events(ctx.paths, agent_id, entry)
        if events is None:
            if pre_reset:
                return []
            msgs = reading.read_messages(ctx.paths, agent_id, key, entry)
            return [{"type": "message", "message": m} for m in msgs]
        cut = 0
        for i, ev in enumerate(events):
            if ev.get("type") == "reset":
                cut = i + 1
        return events[:cut] if pre_reset else events[cut:]

    return load


def _zst_loader(path: Path) -> Callable[[], list[Any]]:
    """An archived transcript OpenClaw compressed (`<id>.jsonl.deleted.<time>.zst`): its JSONL
    lines. An unreadable archive gives none, with a warning naming it."""

    def load() -> list[Any]:
        import json

        import zstandard

        from sessiontool import diag

        try:
            with open(path, "rb") as fh, zstandard.ZstdDecompressor().stream_reader(fh) as r:
                data = r.read()
        except (OSError, zstandard.ZstdError) as exc:
            diag.warn(f"cannot read the archived transcript {path}: {exc}; left out")
            return []
        out = []
        for line in data.splitlines():
            try:
                obj = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if isinstance(obj, dict):
                out.append(obj)
        return out

    return load


def live_sessions(ctx: Context, agents: list[str], kept: Index | None = None) -> list[SessionRef]:
    """Every listable session the requester may see, with where its transcript is. Call inside
    `sessions.reading.read_scope()`: a virtual transcript is read through the same snapshot. With
    `kept` (the open search index), what a sessions.json lists is kept there under the file's
    identity and read back while the file is unchanged."""
    out: list[SessionRef] = []
    for agent_id in agents:
        info = detect.detect(ctx.paths, agent_id)
        if info.format == "jsonl":
            out += _jsonl_sessions(ctx, agent_id, info.location, kept)
            continue
        marks_of = getattr(reading.reader_for(ctx.paths, agent_id), "event_marks", None)
        marks: dict[str, str] = marks_of() if marks_of is not None else {}
        for full_key, f in agent_sessions(ctx, agent_id).items():
            if not listable(full_key) or not policy.visible(ctx, full_key, f.entry):
                continue
            sid = f.entry.get("sessionId")
            if not isinstance(sid, str) or not is_plain_name(sid):
                continue
            name = f"{info.location}{VIRTUAL_SEP}{sid}"
            version = f"{f.entry.get('updatedAt')}/{marks.get(sid, '')}"
            v = Virtual(name, version, _loader(ctx, agent_id, full_key, f.entry))
            pre = Virtual(
                f"{name}{VIRTUAL_SEP}pre-reset",
                version,
                _loader(ctx, agent_id, full_key, f.entry, pre_reset=True),
            )
            label = _str(f.entry.get("label"))
            out.append(
                SessionRef(
                    agent_id=agent_id,
                    key=full_key,
                    session_id=sid,
                    where=name,
                    label=label,
                    virtual=v,
                    pre_reset=pre,
                )
            )
    return out


def _jsonl_sessions(
    ctx: Context, agent_id: str, store: Path, kept: Index | None
) -> list[SessionRef]:
    sdir = os.fspath(ctx.paths.sessions_dir(agent_id))
    listed = _listed(ctx, agent_id, store, kept)
    if not ctx.requester.is_operator:  # the operator sees every session: no entry asked
        listed = [r for r in listed if policy.visible(ctx, r[0], r[4])]
    # One comprehension: 100,000 of them (issue 47).
    return [
        SessionRef(
            agent_id=agent_id,
            key=key,
            session_id=sid,
            where=f"{sdir}/{sid}.jsonl" if sf is None else transcript_file_for(sdir, sid, sf),
            label=label,
            updated=up if type(up := seen.get("updatedAt")) is int else None,
        )
        for key, sid, sf, label, seen in listed
    ]


# One listed session: [full key, sessionId, sessionFile, label, the entry's fields that
# policy.visible reads]. Plain JSON, so the search index can keep a store's rows.
Listed = list[Any]


def _listed(ctx: Context, agent_id: str, store: Path, kept: Index | None) -> list[Listed]:
    tag = _tag(sessions_json.file_identity(store)) if kept is not None else None
    if kept is not None and tag is not None:
        rows = kept.listed_rows(agent_id, tag)
        if rows is not None and all(_row_ok(r) for r in rows):
            return rows
    raw = getattr(reading.reader_for(ctx.paths, agent_id), "store", None)
    if raw is not None:  # the JSONL reader's store, read as it reads it (never written here)
        rows = _rows(sessions_json.read_listing(store), agent_id)
    else:  # pragma: no cover - a JSONL store is read by the JSONL reader
        rows = _rows({f.key: f.entry for f in agent_sessions(ctx, agent_id).values()}, agent_id)
    if kept is not None:
        tag = _tag(sessions_json.kept_identity(store))
        if tag is not None:
            kept.keep_listed_rows(agent_id, tag, rows)
    return rows


_SEEN = (*policy.VISIBILITY_FIELDS, "updatedAt")


def _rows(store: dict[str, Any], agent_id: str) -> list[Listed]:
    """The listable sessions of a parsed sessions.json, as `sessions_json.fold` folds it (a
    legacy bare key and its full form are one session, the newer `updatedAt` wins), with only
    the fields a listing needs: one pass, no entry copied, no call per session where the
    common case needs none (issue 47: 100,000 sessions)."""
    rows: list[Listed] = []
    add = rows.append
    reserved = RESERVED_KEYS
    for full, e in sessions_json.winners(store, agent_id).items():
        sid = e["sessionId"]
        if full in reserved or not is_plain_name(sid):
            continue
        session_file = e.get("sessionFile")
        label = e.get("label")
        seen = {}
        for k in _SEEN:
            if k in e:
                seen[k] = e[k]
        add(
            [
                full,
                sid,
                session_file if type(session_file) is str else None,
                label if type(label) is str and label else None,
                seen,
            ]
        )
    return rows


def _tag(ident: tuple[int, ...] | None) -> str | None:
    return ":".join(map(str, ident)) if ident is not None else None


def _row_ok(row: Any) -> bool:
    """A kept row has the shape `_listed` writes (the index is a file anyone could edit)."""
    return (
        isinstance(row, list)
        and len(row) == 5
        and isinstance(row[0], str)
        and isinstance(row[1], str)
        and is_plain_name(row[1])
        and (row[2] is None or isinstance(row[2], str))
        and (row[3] is None or isinstance(row[3], str))
        and isinstance(row[4], dict)
    )


def archived_transcripts(
    ctx: Context, agents: list[str], live: list[SessionRef]
) -> list[SessionRef]:
    """Transcripts on disk that no live session names: archived (`.deleted.`/`.reset.`) and
    orphaned `.jsonl` files. Only the operator sees them."""
    if not ctx.requester.is_operator:
        return []
    taken = {r.where for r in live}
    out: list[SessionRef] = []
    for r in live:
        if r.pre_reset is not None and r.agent_id in agents:
            where = r.pre_reset.name
            out.append(
                SessionRef(
                    agent_id=r.agent_id,
                    key=None,
                    session_id=r.session_id,
                    where=where,
                    label=None,
                    archived=True,
                    virtual=r.pre_reset,
                )
            )
    for agent_id in agents:
        sdir = ctx.paths.sessions_dir(agent_id)
        try:
            names = sorted(os.listdir(sdir))
        except OSError:
            continue
        for name in names:
            m = _ARCHIVED.match(name)
            if m:
                sid = m.group("sid")
            elif name.endswith(".jsonl") and not openclaw_session_file(name):
                sid = name[: -len(".jsonl")]
            else:
                continue
            path = sdir / name
            if str(path) in taken or not path.is_file():
                continue
            virtual = None
            if name.endswith(".zst"):
                st = path.stat()
                stamp = f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"
                virtual = Virtual(str(path), stamp, _zst_loader(path))
            out.append(
                SessionRef(
                    agent_id=agent_id,
                    key=None,
                    session_id=sid,
                    where=str(path),
                    label=None,
                    archived=True,
                    virtual=virtual,
                )
            )
    return out


@dataclass(frozen=True)
class Indexed:
    """The transcripts a command reads, caught up in the index: `ref` names the session of a
    file id (None: not one of them), `scoped` says whether `temp.scope` limits the reads to
    them (`Index.set_scope`)."""

    ref: Callable[[int], SessionRef | None]
    scoped: bool
    # Every file id's session at once, where one at a time would be slower (a snapshot).
    every: Callable[[], dict[int, SessionRef]] | None = None

    def refs(self, ids: set[int]) -> dict[int, SessionRef]:
        """The sessions of `ids` (those that are one of them)."""
        if self.every is not None and len(ids) > 100:
            got = self.every()
            return {i: got[i] for i in ids if i in got}
        out = {i: self.ref(i) for i in ids}
        return {i: r for i, r in out.items() if r is not None}

    def path(self, file_id: int) -> Path | None:
        ref = self.ref(file_id)
        return ref.path if ref is not None and ref.virtual is None else None


@dataclass(frozen=True)
class Wanted:
    """What `indexed` catches up: the listable sessions of `agents` (with `archived`, the
    archived transcripts too), or just `refs`; with their text or (`usage`) turns alone."""

    agents: list[str]
    archived: bool
    text: bool
    refs: list[SessionRef] | None = None


def indexed(ctx: Context, idx: Index, want: Wanted, progress: Progress | None = None) -> Indexed:
    """`want`'s transcripts caught up in the index. Over JSONL stores whose markers did not
    move since a full check, from that check's snapshot (index/warm.py): no session
    listed, only the hot transcripts stat'ed. Call `sync.left_out` after it.

    With the cyclic collector off: a full check over 100,000 sessions makes several objects
    for each (its rows, refs, stamps, the snapshot's rows), none in a cycle, all freed by their
    reference counts; the collections they set off walked them again and again (a fifth of
    the check, issue 47)."""
    from sessiontool import gcpause

    with gcpause.paused():
        return _indexed(ctx, idx, want, progress)


def _indexed(ctx: Context, idx: Index, want: Wanted, progress: Progress | None) -> Indexed:
    from sessiontool.index import warm

    agents, text, refs = want.agents, want.text, want.refs
    scope = marks = None
    if refs is None:
        marks = warm.markers(ctx, agents)
        if marks is not None:
            scope = warm.scope_key(ctx, agents, want.archived, text)
            snap = warm.snapshot(idx, scope, marks, text)
            if snap is not None:
                return Indexed(
                    _snap_refs(idx, snap), idx.snaps.limit_reads(snap), lambda: _every(idx, snap)
                )
        refs = live_sessions(ctx, agents, idx)
        if want.archived:
            refs += archived_transcripts(ctx, agents, refs)
    paths = [r.where for r in refs if r.virtual is None]
    virtual = [r.virtual for r in refs if r.virtual is not None]
    checked = warm.by_image(idx, scope, paths, text) if scope and not virtual else None
    if checked is not None:
        ids, now = checked
    else:
        ids, now = idx.sync(paths, virtual, text=text, progress=progress), None
    by_id = {ids[r.where]: r for r in refs if r.where in ids}
    scoped = idx.set_scope(by_id)
    if scope is not None and marks is not None and _snapshot_ok(idx, refs):
        img = warm.image(idx, paths, ids, text=text, now=now)
        warm.keep(idx, scope, marks, warm.Checked(refs, ids, img))
    return Indexed(by_id.get, scoped)


def _snapshot_ok(idx: Index, refs: list[SessionRef]) -> bool:
    """A snapshot holds JSONL transcripts only, all of them readable."""
    return not idx.unreadable and all(r.virtual is None for r in refs)


def _ref(got: SnapRef) -> SessionRef:
    return SessionRef(
        agent_id=got.agent,
        key=got.key,
        session_id=got.sid,
        where=got.path,
        label=got.label,
        archived=bool(got.archived),
    )


def _snap_refs(idx: Index, snap: Snapshot) -> Callable[[int], SessionRef | None]:
    """A snapshot's sessions, read one file id at a time (only the hits' are needed)."""
    cache: dict[int, SessionRef | None] = {}

    def ref(file_id: int) -> SessionRef | None:
        if file_id not in cache:
            got = idx.snaps.ref(snap, file_id)
            cache[file_id] = None if got is None else _ref(got)
        return cache[file_id]

    return ref


def _every(idx: Index, snap: Snapshot) -> dict[int, SessionRef]:
    return {got.file_id: _ref(got) for got in idx.snaps.refs(snap)}
