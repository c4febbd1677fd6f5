"""The channel envelope OpenClaw stores inside user text (`[WhatsApp +1555 +2m 2026-01-24 10:11
UTC] `, `[message_id: ...]` lines), dropped as its history does: by the `history` and `list`
results, the run engine's reply-back turns and the search index alike."""

from __future__ import annotations

import re

from sessiontool.state.transcript import Message

_ENVELOPE = re.compile(r"^\[([^\]]+)\]\s*")
_ENVELOPE_CHANNELS = (
    "WebChat",
    "WhatsApp",
    "Telegram",
    "Signal",
    "Slack",
    "Discord",
    "Google Chat",
    "iMessage",
    "Teams",
    "Matrix",
    "Zalo",
    "Zalo Personal",
    "BlueBubbles",
)
_ISO_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}Z\b")
_DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}\b")
_MESSAGE_ID_LINE = re.compile(r"^\s*\[message_id:\s*[^\]]+\]\s*$", re.IGNORECASE)


def _looks_like_envelope(header: str) -> bool:
    if _ISO_TIME.search(header) or _DATE_TIME.search(header):
        return True
    return any(header.startswith(ch + " ") for ch in _ENVELOPE_CHANNELS)


def strip_envelope_text(text: str) -> str:
    """Drop the channel envelope (`[WhatsApp +1555 +2m 2026-01-24 10:11 UTC] `) and
    `[message_id: ...]` lines that OpenClaw stores inside user text, as its history does."""
    m = _ENVELOPE.match(text)
    if m and _looks_like_envelope(m.group(1)):
        text = text[m.end() :]
    if "[message_id:" in text:
        lines = re.split(r"\r?\n", text)
        kept = [ln for ln in lines if not _MESSAGE_ID_LINE.match(ln)]
        if len(kept) != len(lines):
            text = "\n".join(kept)
    return text


def strip_envelope(msg: Message) -> Message:
    if str(msg.get("role", "")).lower() != "user":
        return msg
    content = msg.get("content")
    if isinstance(content, str):
        new = strip_envelope_text(content)
        return msg if new == content else {**msg, "content": new}
    if isinstance(content, list):
        changed = False
        blocks = []
        for b in content:
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str):
                t = strip_envelope_text(b["text"])
                if t != b["text"]:
                    b = {**b, "text": t}
                    changed = True
            blocks.append(b)
        return {**msg, "content": blocks} if changed else msg
    if isinstance(msg.get("text"), str):
        t = strip_envelope_text(msg["text"])
        return msg if t == msg["text"] else {**msg, "text": t}
    return msg


def strip_envelopes(msgs: list[Message]) -> list[Message]:
    return [strip_envelope(m) for m in msgs]
