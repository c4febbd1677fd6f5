"""Delivery mirrors as the views show them. After posting a reply to a channel OpenClaw appends
the posted text to the session's transcript again, as an assistant message of 0 tokens
(`openclaw/delivery-mirror`, protocol.is_delivery_mirror); shown like a reply it reads as the
agent repeating itself. `history` and the HTML pages show it as a small mark instead ("delivered
to telegram", or "in the outbox for telegram" when no delivery command sent it), with its text
only when that is not the reply just above it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sessiontool.protocol import is_delivery_mirror
from sessiontool.state import keys

__all__ = ["is_delivery_mirror", "mark", "repeats_reply"]


def mark(session_key: str, message: Mapping[str, Any] | None = None) -> str:
    """`delivered to <channel>` when the key names its channel, else `delivered`; a mirror of
    a delivery that was only recorded in the outbox (no delivery command: `deliveryStatus`
    `outbox`) says that instead, never "delivered"."""
    channel = keys.key_channel_segment(session_key)
    if message is not None and message.get("deliveryStatus") == "outbox":
        where = f" for {channel}" if channel else ""
        return f"in the outbox{where} (not sent: no delivery command)"
    return f"delivered to {channel}" if channel else "delivered"


def content_text(content: Any) -> str:
    """A message's `content` as its text: the string, or its text blocks joined by lines."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "\n".join(
        b["text"]
        for b in content
        if isinstance(b, Mapping) and b.get("type") == "text" and isinstance(b.get("text"), str)
    )


def _text(message: Mapping[str, Any]) -> str:
    return content_text(message.get("content")).strip()


def repeats_reply(messages: Sequence[Mapping[str, Any]], i: int) -> bool:
    """Whether mirror `messages[i]` posted the text of the reply before it (the latest
    assistant message that is not a mirror; tool results in between are skipped)."""
    for j in range(i - 1, -1, -1):
        m = messages[j]
        if m.get("role") == "toolResult" or is_delivery_mirror(m):
            continue
        return m.get("role") == "assistant" and _text(m) == _text(messages[i]) != ""
    return False
