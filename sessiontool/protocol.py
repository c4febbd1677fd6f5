"""OpenClaw's protocol words: the exact replies with which an agent stays silent. The prompts
name them, the run engine obeys them, and the SQLite reader hides them as OpenClaw's
chat.history does, so each is spelled once, here. Also the marks of a delivery mirror, which the
runners keep out of a model's context and the views show as a delivery, not a reply."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

REPLY_SKIP = "REPLY_SKIP"  # ends the agent-to-agent reply-back turns
ANNOUNCE_SKIP = "ANNOUNCE_SKIP"  # keeps an announce step silent
NO_REPLY = "NO_REPLY"  # OpenClaw's silent answer to a message that wants none
SILENT_REPLIES = frozenset({REPLY_SKIP, ANNOUNCE_SKIP, NO_REPLY})


def is_reply_skip(text: str | None) -> bool:
    """Exactly the token once trimmed: a reply that merely mentions it goes on."""
    return text is not None and text.strip() == REPLY_SKIP


def is_announce_skip(text: str | None) -> bool:
    """A reply of exactly ANNOUNCE_SKIP (after trimming) keeps the announce silent."""
    return text is not None and text.strip() == ANNOUNCE_SKIP


# An assistant message no model wrote (chat.inject's note, the spec's announce result): zero
# usage, and no turn of any model.
INJECTED = "injected"

# The assistant message OpenClaw appends to a transcript after posting a reply to a channel.
MIRROR_PROVIDER = "openclaw"
MIRROR_MODEL = "delivery-mirror"


def is_delivery_mirror(message: Mapping[str, Any]) -> bool:
    """The marks by which OpenClaw recognises a delivery mirror and keeps it out of context."""
    return message.get("provider") == MIRROR_PROVIDER and message.get("model") == MIRROR_MODEL
