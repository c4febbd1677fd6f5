"""What OpenClaw's gateway shows of a transcript (its `chat.history`), one message at a time, for
every store OpenClaw serves: its SQLite store (2026.8+, `state/openclaw_sqlite.py`) and its
JSON-era store (sessions.json + JSONL in a state dir with `openclaw.json`, 2026.7.35 checked;
`state/reader.py`). Clawdbot's chat.history (a `clawdbot.json` state dir) and sessiontool's own
store show every message as stored.

The rules (see README, "OpenClaw 2026.8+"): silent control replies (protocol.py: REPLY_SKIP,
ANNOUNCE_SKIP, NO_REPLY) are not messages; a message another session sent with sessions_send is
shown as that session's assistant turn without the routing preamble (other inter-session
messages, a spawn's task or announce, stay what they are); a tool result's `details` are left
out."""

from __future__ import annotations

from pathlib import Path

from sessiontool.protocol import SILENT_REPLIES
from sessiontool.state.transcript import Message

INTER_SESSION_HEADER = "[Inter-session message]"
INTER_SESSION_NOTE = "This content was routed by OpenClaw"


def _text_of(msg: Message) -> str | None:
    c = msg.get("content")
    if isinstance(c, str):
        return c
    if (
        isinstance(c, list)
        and len(c) == 1
        and isinstance(c[0], dict)
        and c[0].get("type") == "text"
        and isinstance(c[0].get("text"), str)
    ):
        return str(c[0]["text"])
    return None


def display_message(msg: Message) -> Message | None:
    """One stored message as chat.history shows it (None: not shown)."""
    role = msg.get("role")
    if role == "user":
        prov = msg.get("provenance")
        content = msg.get("content")
        if (
            isinstance(prov, dict)
            and prov.get("kind") == "inter_session"
            and prov.get("sourceTool") == "sessions_send"  # chat.history's isForwardedUserMessage
            and isinstance(content, str)
        ):
            lines = content.split("\n")
            if lines and lines[0].startswith(INTER_SESSION_HEADER):
                lines = lines[1:]
                if lines and lines[0].startswith(INTER_SESSION_NOTE):
                    lines = lines[1:]
            return {**msg, "role": "assistant", "content": "\n".join(lines)}
        return msg
    if role == "assistant":
        text = _text_of(msg)
        if text is not None and text.strip() in SILENT_REPLIES:
            return None
        return msg
    if role == "toolResult" and "details" in msg:
        return {k: v for k, v in msg.items() if k != "details"}
    return msg


def openclaw_state(root: Path) -> bool:
    """Whether a state dir is OpenClaw's (its `openclaw.json`; not Clawdbot's `clawdbot.json`),
    whose JSON-era store OpenClaw's gateway shows by these rules."""
    return (root / "openclaw.json").is_file()
