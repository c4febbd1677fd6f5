"""`sessiontool export --to DIR`: an OpenClaw SQLite-era store's sessions written as a
sessiontool state dir (`agents/<id>/sessions/sessions.json` + `<sessionId>.jsonl`), readable by
sessiontool and by Clawdbot-era tools, for archiving and offline work.

Each entry is copied whole (skills snapshot and all). Each transcript holds the session's
messages as `history` shows them (the active branch of the current window, with the
gateway's display rules applied), one `message` line each after a version-3 session header, so
`list` and `history` on the export equal the same commands on the database. A re-run rewrites
only the sessions whose entry changed and adds new ones; it never deletes anything in DIR. The
reverse direction is OpenClaw's own `openclaw doctor --fix`, which imports a sessions.json store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sessiontool.context import Context
from sessiontool.errors import UsageError
from sessiontool.stores.jsonio import atomic_write, compact_utf8
from sessiontool.stores.paths import StatePaths, ensure_dir, is_plain_name
from sessiontool.stores.reader import read_scope, reader_for, sqlite_path
from sessiontool.stores.sessions_json import read_store, update_store


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


def export(ctx: Context, dest: str, *, agent: str | None, all_agents: bool) -> dict[str, Any]:
    from sessiontool.sessions import all_agent_ids

    out_root = Path(dest).expanduser().absolute()
    if out_root == ctx.paths.root or ctx.paths.root in out_root.parents:
        raise UsageError("--to must be outside the state dir it exports")
    out = StatePaths(out_root)
    agent_ids = all_agent_ids(ctx) if all_agents else [agent or ctx.agent_id]
    counts = {"agents": 0, "sessions": 0, "written": 0, "unchanged": 0}
    with read_scope():
        for agent_id in agent_ids:
            if not is_plain_name(agent_id):
                continue
            if sqlite_path(out, agent_id).exists():
                raise UsageError(f"{out_root} holds an OpenClaw database for agent {agent_id}")
            rd = reader_for(ctx.paths, agent_id)
            sessions = rd.sessions()
            counts["agents"] += 1
            store_path = out.store(agent_id)
            try:
                old = read_store(store_path)
            except FileNotFoundError:  # pragma: no cover - read_store returns {}
                old = {}
            ensure_dir(store_path.parent)
            changed: dict[str, dict[str, Any]] = {}
            for key, f in sessions.items():
                counts["sessions"] += 1
                sid = f.entry.get("sessionId")
                if not isinstance(sid, str) or not is_plain_name(sid):
                    continue
                tpath = out.transcript(agent_id, sid)
                if old.get(key) == f.entry and tpath.exists():
                    counts["unchanged"] += 1
                    continue
                msgs = rd.messages(key, f.entry, None).messages
                atomic_write(tpath, _transcript_bytes(sid, f.entry, msgs))
                changed[key] = f.entry
                counts["written"] += 1
            if changed or not store_path.exists():

                def merge(store: dict[str, Any], changed: dict[str, Any] = changed) -> None:
                    store.update(changed)

                update_store(store_path, merge)
    return {"to": str(out_root), **counts}
