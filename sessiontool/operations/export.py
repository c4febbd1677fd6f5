"""`sessiontool export --to DIR`: an OpenClaw SQLite-era state dir's sessions written as a
sessiontool state dir (`agents/<id>/sessions/sessions.json` + `<sessionId>.jsonl`), readable by
sessiontool and by Clawdbot-era tools, for archiving and offline work.

Each entry is copied whole (skills snapshot and all). Each transcript holds the session's
messages as `history` shows them (the active branch of the current window, with the
gateway's display rules applied), one `message` line each after a version-3 session header, so
`list` and `history` on the export equal the same commands on the database. A re-run rewrites
only the sessions whose entry changed and adds new ones; it never deletes anything in DIR and
never replaces a transcript it did not write (a live one: DIR is someone's state dir). DIR is
compared with the state dir once links and `..` are resolved: nothing is written inside the
state dir it exports (OpenClaw's `agents/` tree). The reverse direction is OpenClaw's own `openclaw doctor --fix`, which imports a sessions.json store.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sessiontool import diag
from sessiontool.context import Context
from sessiontool.errors import UsageError
from sessiontool.sessions.reading import read_scope, reader_for
from sessiontool.state import outdir, safefs
from sessiontool.state.detect import sqlite_path
from sessiontool.state.jsonio import atomic_write, compact_utf8
from sessiontool.state.paths import StatePaths, ensure_dir, is_plain_name
from sessiontool.state.reader import JsonlReader, SessionReader
from sessiontool.state.safefs import resolves_inside
from sessiontool.state.sessions_json import read_store, update_store

if TYPE_CHECKING:
    from typing import TypedDict

    class ExportResult(TypedDict):
        """What `export` returns: DIR, and how many agents and sessions it went through, how
        many transcripts it wrote, found already up to date, or skipped."""

        to: str
        agents: int
        sessions: int
        written: int
        unchanged: int
        skipped: int


def _transcript_bytes(session_id: str, entry: dict[str, Any], messages: list[Any]) -> bytes:
    from sessiontool.clock import iso

    started = entry.get("sessionStartedAt") or entry.get("createdAt") or entry.get("updatedAt")
    ts = started if isinstance(started, int) else 0
    header = {"type": "session", "version": 3, "id": session_id, "timestamp": iso(ts), "cwd": ""}
    lines = [compact_utf8(header)]
    parent = None
    for i, msg in enumerate(messages):
        mts = msg.get("timestamp")
        line_id = f"{i:08x}"
        when = iso(mts) if isinstance(mts, int) else iso(ts)
        lines.append(
            compact_utf8(
                {
                    "type": "message",
                    "id": line_id,
                    "parentId": parent,
                    "timestamp": when,
                    "message": msg,
                }
            )
        )
        parent = line_id
    return b"\n".join(lines) + b"\n"


def _ours(path: Path, session_id: str, data: bytes) -> bool:
    """Whether the transcript at `path` is one export wrote (the same header, then only
    `message` lines with its 8-hex-digit ids) or already holds `data`: only such a file may be
    replaced; a live transcript (model changes, custom entries, other ids) never is."""
    import json
    import stat

    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode):
            return False
        with open(path, "rb") as fh:
            have = fh.read()
    except OSError:
        return False
    if have == data:
        return True
    lines = have.splitlines()
    try:
        head = json.loads(lines[0]) if lines else None
        if not isinstance(head, dict) or {k: head.get(k) for k in ("type", "version", "id")} != {
            "type": "session",
            "version": 3,
            "id": session_id,
        }:
            return False
        if head.get("cwd") != "":
            return False
        for raw in lines[1:]:
            obj = json.loads(raw)
            lid = obj.get("id") if isinstance(obj, dict) else None
            if (
                not isinstance(obj, dict)
                or obj.get("type") != "message"
                or not isinstance(lid, str)
                or len(lid) != 8
                or any(c not in "0123456789abcdef" for c in lid)
            ):
                return False
    except (ValueError, RecursionError):
        return False
    return True


def _stored_messages(rd: SessionReader, key: str, entry: dict[str, Any]) -> list[Any]:
    """Every message of a session's transcript: a JSON store's as stored (an export is a copy,
    not what a gateway would show of it), another store's as its reader gives them."""
    if isinstance(rd, JsonlReader):
        return rd.stored_messages(entry)
    return rd.messages(key, entry, None).messages


def _written_here(name: str) -> bool:
    """The files export writes in a sessions dir (whose dead temp files a re-run removes)."""
    return name == "sessions.json" or (name.endswith(".jsonl") and is_plain_name(name))


def export(ctx: Context, dest: str, *, agent: str | None, all_agents: bool) -> ExportResult:
    from sessiontool.openclaw.target import local_root
    from sessiontool.sessions.resolve import all_agent_ids

    state_root = local_root(ctx.paths.root)
    out_root = outdir.open_dir(dest, "--to", state_root)
    out = StatePaths(out_root)
    agent_ids = all_agent_ids(ctx) if all_agents else [agent or ctx.agent_id]
    counts: ExportResult = {
        "to": str(out_root),
        "agents": 0,
        "sessions": 0,
        "written": 0,
        "unchanged": 0,
        "skipped": 0,
    }
    # Everything is read and checked before anything is written: a refusal leaves DIR as it was.
    plans: list[tuple[Path, dict[str, Any], list[tuple[Path, bytes]]]] = []
    with read_scope():
        for agent_id in agent_ids:
            if not is_plain_name(agent_id):
                continue
            if resolves_inside(out.sessions_dir(agent_id), state_root):
                raise UsageError(
                    f"--to must be outside the state dir it exports: {out.sessions_dir(agent_id)}"
                    f" leads into {state_root}"
                )
            # A link on the way to the sessions dir, leading out of DIR: refused before any
            # agent's files are written.
            safefs.check_inside(out.sessions_dir(agent_id), out_root)
            if sqlite_path(out, agent_id).exists():
                raise UsageError(f"{out_root} holds an OpenClaw database for agent {agent_id}")
            rd = reader_for(ctx.paths, agent_id)
            sessions = rd.sessions()
            # OpenClaw keeps who prompted a session beside its entry: kept in the export.
            who_of = getattr(rd, "participants", None)
            who: dict[str, list[Any]] = who_of() if who_of is not None else {}
            counts["agents"] += 1
            store_path = out.sessions_json(agent_id)
            if os.path.islink(store_path):
                raise outdir.refuse_link(store_path, out_root, "--to")
            try:
                old = read_store(store_path)
            except FileNotFoundError:  # pragma: no cover - read_store returns {}
                old = {}
            changed: dict[str, dict[str, Any]] = {}
            files: list[tuple[Path, bytes]] = []
            for key, f in sessions.items():
                counts["sessions"] += 1
                sid = f.entry.get("sessionId")
                if not isinstance(sid, str) or not is_plain_name(sid):
                    # A remote gateway's store may hold any id: its transcript has no file name.
                    counts["skipped"] += 1
                    diag.warn(
                        f"session {key} not exported: its session id {sid!r} is not a plain"
                        " file name"
                    )
                    continue
                entry = dict(f.entry)
                if key in who and "participants" not in entry:
                    entry["participants"] = who[key]
                tpath = out.transcript(agent_id, sid)
                if old.get(key) == entry and tpath.exists():
                    counts["unchanged"] += 1
                    continue
                msgs = _stored_messages(rd, key, f.entry)
                data = _transcript_bytes(sid, entry, msgs)
                if os.path.islink(tpath):
                    raise outdir.refuse_link(tpath, out_root, "--to")
                if os.path.lexists(tpath) and not _ours(tpath, sid, data):
                    raise outdir.foreign(tpath, out_root, "a transcript")
                files.append((tpath, data))
                changed[key] = entry
            plans.append((store_path, changed, files))
    for store_path, changed, files in plans:
        ensure_dir(store_path.parent)
        outdir.sweep_temps(store_path.parent, _written_here)
        for tpath, data in files:
            atomic_write(tpath, data)
            counts["written"] += 1
        if changed or not store_path.exists():

            def merge(store: dict[str, Any], changed: dict[str, Any] = changed) -> None:
                store.update(changed)

            update_store(store_path, merge)
    return counts
