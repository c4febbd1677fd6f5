"""The agent-to-agent prompts of a send between two sessions (spec §5.3): the context of the
primary run, the reply-back turns and the announce step.

The texts are OpenClaw's, word for word, because agents (and the echo runner) key on them and on
the two skip tokens. Pure functions only: the worker decides when each step runs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from sessiontool.protocol import ANNOUNCE_SKIP, REPLY_SKIP
from sessiontool.state import keys

ANNOUNCE_STEP_MESSAGE = "Agent-to-agent announce step."
NOT_AVAILABLE = "(not available)"

_REQUESTER = "Agent 1 (requester)"
_TARGET = "Agent 2 (target)"


def _known(value: str | None) -> str | None:
    """A value worth a prompt line: OpenClaw leaves a line out rather than print a placeholder
    like `unknown`, which would only mislead the model."""
    if value is None:
        return None
    text = value.strip()
    if not text or text == "unknown":
        return None
    return text


def _party_lines(
    requester_key: str,
    requester_channel: str | None,
    target_key: str,
    target_channel: str | None,
) -> list[str]:
    lines = [f"{_REQUESTER} session: {requester_key}."]
    if (rc := _known(requester_channel)) is not None:
        lines.append(f"{_REQUESTER} channel: {rc}.")
    lines.append(f"{_TARGET} session: {target_key}.")
    if (tc := _known(target_channel)) is not None:
        lines.append(f"{_TARGET} channel: {tc}.")
    return lines


def context_prompt(requester_key: str, requester_channel: str | None, target_key: str) -> str:
    """System prompt of the primary run of an agent-to-agent send: tells the target who is
    asking. The target's own channel is not named here (OpenClaw does not either)."""
    lines = ["Agent-to-agent message context:"]
    lines += _party_lines(requester_key, requester_channel, target_key, None)
    return "\n".join(lines)


def reply_prompt(
    *,
    current: Literal["requester", "target"],
    turn: int,
    max_turns: int,
    requester_key: str,
    requester_channel: str | None,
    target_key: str,
    target_channel: str | None,
) -> str:
    """System prompt of one reply-back turn; odd turns run in the requester's session, even
    turns in the target's, and either side ends the loop by answering REPLY_SKIP."""
    who = _REQUESTER if current == "requester" else _TARGET
    lines = [
        "Agent-to-agent reply step:",
        f"Current agent: {who}.",
        f"Turn {turn} of {max_turns}.",
    ]
    lines += _party_lines(requester_key, requester_channel, target_key, target_channel)
    lines.append(f'If you want to stop the ping-pong, reply exactly "{REPLY_SKIP}".')
    return "\n".join(lines)


def _reply_or_missing(value: str | None) -> str:
    return value if value is not None and value.strip() else NOT_AVAILABLE


def announce_prompt(
    *,
    requester_key: str,
    requester_channel: str | None,
    target_key: str,
    target_channel: str | None,
    original: str,
    round1: str | None,
    latest: str | None,
) -> str:
    """System prompt of the announce step in the target session. `latest` falls back to the
    round-1 reply (no loop turn produced anything), then to "(not available)"."""
    latest_text = latest if latest is not None and latest.strip() else round1
    lines = ["Agent-to-agent announce step:"]
    lines += _party_lines(requester_key, requester_channel, target_key, target_channel)
    lines += [
        f"Original request: {original}",
        f"Round 1 reply: {_reply_or_missing(round1)}",
        f"Latest reply: {_reply_or_missing(latest_text)}",
        f'If you want to remain silent, reply exactly "{ANNOUNCE_SKIP}".',
        "Any other reply will be posted to the target channel.",
        "After this reply, the agent-to-agent conversation is over.",
    ]
    return "\n".join(lines)


def session_channel(full_key: str, entry: Mapping[str, Any] | None) -> str | None:
    """The channel to name in the prompts: the one a group/channel key names (entries of group
    sessions often say `webchat`, the gateway's internal channel), else where the session was
    last reached (deliveryContext, then lastChannel). None when nothing says."""
    seg = keys.key_channel_segment(full_key)
    if seg:
        return seg
    e = entry or {}
    dc = e.get("deliveryContext")
    if isinstance(dc, Mapping):
        ch = dc.get("channel")
        if isinstance(ch, str) and ch.strip():
            return ch.strip()
    last = e.get("lastChannel")
    if isinstance(last, str) and last.strip():
        return last.strip()
    return None
