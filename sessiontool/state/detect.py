"""Which format each agent's sessions are stored in, and whether sessiontool may write it.

- `jsonl`: sessiontool's own format, OpenClaw's up to 2026.7 (`agents/<id>/sessions/sessions.json`
  plus one `<sessionId>.jsonl` transcript per session).
- `openclaw-sqlite`: OpenClaw 2026.8+ (`agents/<id>/agent/openclaw-agent.sqlite`), read by
  `state/openclaw_sqlite.py`, never written.

- `gateway`: a remote OpenClaw gateway's store (`--gateway URL`, openclaw/target.py), read by
  `openclaw/gateway_reader.py` through `sessions.list` and `chat.history`.

Detection: a state dir bound to a remote gateway → `gateway`; the database present →
`openclaw-sqlite` (even when an old sessions.json is still on disk after OpenClaw's own
migration), read through the state dir's running gateway when its schema is one sessiontool
cannot read; otherwise `jsonl`. The global `--store` option (or SESSIONTOOL_STORE) overrides it
for every agent of a local state dir.

The read interface and the JSONL reader are in `state/reader.py`; the reader chosen per agent,
the read scope and `iter_sessions`/`read_messages` in `sessions/reading.py`. Here too:
`require_writable(paths, agent_ids, command)`, which refuses (exit 4) a write to an agent whose
store is written through OpenClaw's gateway; the store writers ask it, so it imports no reader.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sessiontool.errors import ForbiddenError, UsageError
from sessiontool.state.paths import StatePaths, is_plain_name
from sessiontool.structs import Value

FORMAT_CHOICES = ("auto", "jsonl", "openclaw-sqlite")
SQLITE_NAME = "openclaw-agent.sqlite"


def check_store(value: str | None) -> str | None:
    """The `--store` global option checked: auto (None), jsonl or openclaw-sqlite. The choice
    travels in `StatePaths.store`, chosen once per context, not in a process global."""
    if value is not None and value not in FORMAT_CHOICES:
        raise UsageError(f"unknown store {value!r} (valid: {', '.join(FORMAT_CHOICES)})")
    return None if value in (None, "auto") else value


def override(paths: StatePaths) -> str | None:
    """The store format forced on `paths` (`--store`), else SESSIONTOOL_STORE's, else None."""
    if paths.store is not None:
        return paths.store
    env = os.environ.get("SESSIONTOOL_STORE", "").strip()
    if env and env != "auto":
        if env not in FORMAT_CHOICES:
            raise UsageError(
                f"SESSIONTOOL_STORE={env!r} is not a store (valid: {', '.join(FORMAT_CHOICES)})"
            )
        return env
    return None


def sqlite_path(paths: StatePaths, agent_id: str) -> Path:
    return paths.agents_dir / agent_id / "agent" / SQLITE_NAME


class StoreInfo(Value):
    """Which format an agent's sessions are read from, where, and why."""

    __slots__ = ("agent_id", "format", "location", "reason")

    agent_id: str
    format: str  # "jsonl" | "openclaw-sqlite" | "gateway" (a remote gateway's store)
    location: Path  # sessions.json, the database, or the gateway's URL
    reason: str

    def __init__(self, agent_id: str, format: str, location: Path, reason: str) -> None:
        self.agent_id = agent_id
        self.format = format
        self.location = location
        self.reason = reason

    @property
    def gateway_written(self) -> bool:
        """Writes to this store go through OpenClaw's gateway, never through files."""
        return self.format in ("openclaw-sqlite", "gateway")

    def to_json(self) -> dict[str, str]:
        return {"format": self.format, "location": str(self.location), "reason": self.reason}


# State-dir roots whose session store is a remote gateway (`--gateway URL`; openclaw/target.py
# binds them): root → the gateway's URL.
_gateway_roots: dict[str, str] = {}


def bind_gateway(root: Path, url: str) -> None:
    _gateway_roots[str(root)] = url


def gateway_url(paths: StatePaths) -> str | None:
    """The remote gateway this state dir's sessions are read from, or None (local files)."""
    return _gateway_roots.get(str(paths.root))


def detect(paths: StatePaths, agent_id: str) -> StoreInfo:
    url = gateway_url(paths)
    if url is not None:
        return StoreInfo(agent_id, "gateway", Path(url), f"the remote gateway {url}")
    forced = override(paths)
    db = sqlite_path(paths, agent_id)
    if forced == "openclaw-sqlite":
        return StoreInfo(agent_id, forced, db, "--store openclaw-sqlite")
    if forced == "jsonl":
        return StoreInfo(agent_id, forced, paths.sessions_json(agent_id), "--store jsonl")
    if db.is_file():
        legacy = paths.sessions_json(agent_id)
        why = f"{db.relative_to(paths.root)} present"
        if legacy.is_file():
            why += " (the old sessions.json beside it is OpenClaw's pre-migration copy)"
        return StoreInfo(agent_id, "openclaw-sqlite", db, why)
    return StoreInfo(
        agent_id,
        "jsonl",
        paths.sessions_json(agent_id),
        "no OpenClaw SQLite database for this agent",
    )


def local_agent_ids(paths: StatePaths) -> list[str]:
    """Agents with a sessions dir or an OpenClaw database on this disk, sorted (a remote
    gateway's agents: sessions/reading.py `agent_ids_on_disk`)."""
    try:
        names = os.listdir(paths.agents_dir)
    except (FileNotFoundError, NotADirectoryError):
        return []
    out = []
    for n in names:
        if not is_plain_name(n):
            continue
        base = paths.agents_dir / n
        if (base / "sessions").is_dir() or (base / "agent" / SQLITE_NAME).is_file():
            out.append(n)
    return sorted(out)


# -- writes ----------------------------------------------------------------------------------


def gateway_agents(paths: StatePaths, agent_ids: Iterable[str]) -> list[str]:
    return [a for a in agent_ids if is_plain_name(a) and detect(paths, a).gateway_written]


def require_writable(paths: StatePaths, agent_ids: Iterable[str], command: str) -> None:
    """Exit 4 before anything is written when one of these agents' store is OpenClaw's SQLite
    database: it is written through OpenClaw's gateway only (never by sessiontool's files)."""
    found = gateway_agents(paths, agent_ids)
    if found:
        raise ForbiddenError(
            f"{command}: agent {found[0]}'s sessions are in OpenClaw's SQLite store, which is "
            "written through OpenClaw's gateway only; sessiontool reads it but never writes it",
        )


def describe(paths: StatePaths, agent_id: str) -> dict[str, Any]:
    return detect(paths, agent_id).to_json()
