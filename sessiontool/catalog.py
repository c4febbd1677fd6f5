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
from sessiontool.sessions import agent_sessions, list_agent_ids
from sessiontool.stores import reader as store_reader
from sessiontool.stores.paths import is_plain_name, transcript_path_for
from sessiontool.stores.search_index import VIRTUAL_SEP, Virtual
from sessiontool.stores.sessions_json import Entry, listable

# `<id>.jsonl.deleted.<stamp>` (delete, archive) and `<id>.jsonl.reset.<stamp>` (reset).
_ARCHIVED = re.compile(r"^(?P<sid>.+?)\.jsonl\.(?P<why>deleted|reset)\.")


@dataclass(frozen=True)
class SessionRef:
    """One transcript and the session it belongs to. `key` is None for an archived or orphaned
    transcript (no index entry names it any more)."""

    agent_id: str
    key: str | None
    session_id: str
    path: Path
    label: str | None = None
    archived: bool = False
    # Set for a transcript that is not a JSONL file (OpenClaw's SQLite store): how to read it.
    virtual: Virtual | None = field(default=None, compare=False)

    def display_key(self, ctx: Context) -> str | None:
        return ctx.display(self.key) if self.key is not None else None


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


def agent_ids(ctx: Context, all_agents: bool) -> list[str]:
    return list_agent_ids(ctx, all_agents)


def _loader(ctx: Context, agent_id: str, key: str, entry: Entry) -> Callable[[], list[Any]]:
    """The session's transcript entries, oldest first. Usage must see every assistant message
    (a silent reply cost tokens too, and so did the turns before an in-place reset), so the
    reader's raw events are used where it has them, not the chat view `history` shows."""

    def load() -> list[Any]:
        events = store_reader.raw_events(ctx.paths, agent_id, entry)
        if events is None:
            msgs = store_reader.read_messages(ctx.paths, agent_id, key, entry)
            return [{"type": "message", "message": m} for m in msgs]
        return events

    return load


def live_sessions(ctx: Context, agents: list[str]) -> list[SessionRef]:
    """Every listable session the requester may see, with where its transcript is. Call inside
    `stores.reader.read_scope()`: a virtual transcript is read through the same snapshot."""
    out: list[SessionRef] = []
    for agent_id in agents:
        info = store_reader.detect(ctx.paths, agent_id)
        sdir = ctx.paths.sessions_dir(agent_id)
        for full_key, f in agent_sessions(ctx, agent_id).items():
            if not listable(full_key) or not policy.visible(ctx, full_key, f.entry):
                continue
            sid = f.entry.get("sessionId")
            if not isinstance(sid, str) or not is_plain_name(sid):
                continue
            label = _str(f.entry.get("label"))
            if info.kind == "jsonl":
                path = transcript_path_for(sdir, sid, f.entry.get("sessionFile"))
                out.append(SessionRef(agent_id, full_key, sid, path, label))
                continue
            name = f"{info.location}{VIRTUAL_SEP}{sid}"
            version = f"{f.entry.get('updatedAt')}"
            v = Virtual(name, version, _loader(ctx, agent_id, full_key, f.entry))
            out.append(SessionRef(agent_id, full_key, sid, Path(name), label, virtual=v))
    return out


def archived_transcripts(
    ctx: Context, agents: list[str], live: list[SessionRef]
) -> list[SessionRef]:
    """Transcripts on disk that no live session names: archived (`.deleted.`/`.reset.`) and
    orphaned `.jsonl` files. Only the operator sees them."""
    if not ctx.requester.is_operator:
        return []
    taken = {str(r.path) for r in live}
    out: list[SessionRef] = []
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
            elif name.endswith(".jsonl"):
                sid = name[: -len(".jsonl")]
            else:
                continue
            path = sdir / name
            if str(path) in taken or not path.is_file():
                continue
            out.append(SessionRef(agent_id, None, sid, path, None, archived=True))
    return out
