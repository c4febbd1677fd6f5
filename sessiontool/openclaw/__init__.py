"""Living beside today's OpenClaw: its running gateway (finding it, its version, which write
mode applies, writes in their gateway form) and exporting its SQLite store as a state dir.
Reading that store is `state.openclaw_sqlite`, one reader among the store readers."""

from __future__ import annotations

from pathlib import Path


def install_store_guard() -> None:
    """Make every sessions.json write of this process ask the running gateway's facts first
    (`gateway.guard_store_write`: refused beside a lock-ignoring gateway, else its lock payload).
    The store module knows nothing of gateways: the command layer and the worker install this,
    and the gateway module is imported only when a write to an OpenClaw state dir asks."""
    from sessiontool.state import sessions_json

    sessions_json.set_write_guard(_guard)


def _guard(store_path: Path) -> str:
    from sessiontool.openclaw.gateway import guard_store_write

    return guard_store_write(store_path)
