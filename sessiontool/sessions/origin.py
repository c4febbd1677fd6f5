"""Where a message came from when another session sent it, as every view names it: the
`history` text and Markdown label (`user (from agent:ops:main via sessions_send)`) and the HTML
page's "from … via …" line. An agent-to-agent message carries OpenClaw's `provenance`
(`inter_session`, the source key and tool); a Clawdbot-era sub-agent announce is a plain user
message naming its source only in its Stats line."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from sessiontool.sessions.mirrors import content_text

# The Stats line of a sub-agent's announce (flow/announce.py, OpenClaw's format).
_ANNOUNCE_STATS = re.compile(r"^Stats: .*?\bsessionKey (\S+)", re.MULTILINE)


def origin(msg: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """The session an inter-session message came from, and the tool that brought it; (None,
    None) for a message of the session's own."""
    prov = msg.get("provenance")
    if isinstance(prov, Mapping) and prov.get("kind") == "inter_session":
        src, via = prov.get("sourceSessionKey"), prov.get("sourceTool")
        return (
            src if isinstance(src, str) and src else "another session",
            via if isinstance(via, str) and via else None,
        )
    if msg.get("role") == "user":
        text = content_text(msg.get("content"))
        if "Stats: " in text:
            m = _ANNOUNCE_STATS.search(text)
            if m:
                return m.group(1), "announce"
    return None, None


def from_label(msg: Mapping[str, Any]) -> str | None:
    """`from agent:ops:main via sessions_send` for an inter-session message, else None."""
    src, via = origin(msg)
    if src is None:
        return None
    return f"from {src}" + (f" via {via}" if via else "")
