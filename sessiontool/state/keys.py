"""Pure session-key logic: the canonical stored form, the display form, kind, channel and chat
type, following OpenClaw's key grammar `agent:<agentId>:<rest>`."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

DEFAULT_AGENT_ID = "main"
DEFAULT_MAIN_KEY = "main"
RESERVED_KEYS = frozenset({"global", "unknown"})
KINDS = ("main", "group", "cron", "hook", "node", "other")

_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.IGNORECASE)
_AGENT_ID_BAD = re.compile(r"[^a-z0-9_-]")


def normalize_agent_id(value: str | None) -> str:
    """OpenClaw's rule: trimmed, lower-cased, outside [a-z0-9_-] becomes '-', at most 64."""
    text = (value or "").strip().lower()
    text = _AGENT_ID_BAD.sub("-", text)[:64]
    return text or DEFAULT_AGENT_ID


def looks_like_uuid(value: str) -> bool:
    return bool(_UUID.match(value.strip()))


def split_agent_key(key: str) -> tuple[str, str] | None:
    """`agent:<id>:<rest>` → (id, rest); anything else → None."""
    if not key.startswith("agent:"):
        return None
    parts = key.split(":", 2)
    if len(parts) < 3 or not parts[1] or not parts[2]:
        return None
    return parts[1], parts[2]


def agent_of(key: str, fallback: str = DEFAULT_AGENT_ID) -> str:
    parsed = split_agent_key(key)
    return normalize_agent_id(parsed[0]) if parsed else fallback


def rest_of(key: str) -> str:
    parsed = split_agent_key(key)
    return parsed[1] if parsed else key


def main_key_for(agent_id: str, main_key: str = DEFAULT_MAIN_KEY, scope: str = "per-sender") -> str:
    if scope == "global":
        return "global"
    return f"agent:{agent_id}:{main_key}"


def canonical(
    key: str, agent_id: str, main_key: str = DEFAULT_MAIN_KEY, scope: str = "per-sender"
) -> str:
    """The full stored form of an input key, for a requester whose agent is `agent_id`."""
    key = key.strip()
    if key == "main" or key == main_key and scope != "global":
        return main_key_for(agent_id, main_key, scope)
    if key in RESERVED_KEYS:
        return key
    parsed = split_agent_key(key)
    if parsed:
        return f"agent:{normalize_agent_id(parsed[0])}:{parsed[1]}"
    return f"agent:{agent_id}:{key}"


def stored_to_full(stored_key: str, store_agent: str) -> str:
    """A key as found in a store: legacy un-prefixed keys belong to that store's agent."""
    if stored_key.startswith("agent:"):  # split_agent_key's test without the split (a fold
        # of 100,000 keys makes one each)
        i = stored_key.find(":", 6)
        if 6 < i < len(stored_key) - 1:
            return stored_key
    if stored_key in RESERVED_KEYS or split_agent_key(stored_key):
        return stored_key
    return f"agent:{store_agent}:{stored_key}"


def display(
    full_key: str, requester_agent: str, main_key: str = DEFAULT_MAIN_KEY, scope: str = "per-sender"
) -> str:
    """The requester agent's main key (and `global`) shows as `main`; every other key in full."""
    if full_key == "global" or full_key == main_key_for(requester_agent, main_key, scope):
        return "main"
    if scope != "global" and full_key == f"agent:{requester_agent}:{main_key}":
        return "main"
    return full_key


def is_subagent(key: str) -> bool:
    return rest_of(key).startswith("subagent:")


def _segments(rest: str) -> list[str]:
    return rest.split(":")


def _group_segment(rest: str) -> tuple[str, str] | None:
    """(channel, 'group'|'channel') when the key names a group or channel."""
    segs = _segments(rest)
    for i, seg in enumerate(segs):
        if seg in ("group", "channel") and i > 0:
            return segs[i - 1], seg
    for i, seg in enumerate(segs):
        if seg in ("group", "channel"):
            return (segs[i - 1] if i > 0 else ""), seg
    return None


def kind_of(
    full_key: str, entry: Mapping[str, Any] | None = None, main_key: str = DEFAULT_MAIN_KEY
) -> str:
    if full_key == "global":
        return "main"
    rest = rest_of(full_key)
    if rest == main_key:
        return "main"
    if rest.startswith("cron:"):
        return "cron"
    if rest.startswith("hook:"):
        return "hook"
    if rest.startswith(("node-", "node:")):
        return "node"
    if _group_segment(rest) is not None:
        return "group"
    chat_type = (entry or {}).get("chatType")
    if chat_type in ("group", "channel"):
        return "group"
    return "other"


def key_channel_segment(full_key: str) -> str | None:
    """The channel a group/channel key names (`agent:main:discord:group:1` → `discord`)."""
    seg = _group_segment(rest_of(full_key))
    if seg and seg[0]:
        return seg[0].lower()
    return None


def key_group_target(full_key: str) -> tuple[str, str] | None:
    """(channel, to) for a key naming a group/channel: `to` is `group:<id>` or `channel:<id>`."""
    segs = _segments(rest_of(full_key))
    for i, seg in enumerate(segs):
        if seg in ("group", "channel") and i > 0 and i + 1 < len(segs):
            return segs[i - 1].lower(), f"{seg}:{':'.join(segs[i + 1 :])}"
    return None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def row_channel(
    full_key: str,
    entry: Mapping[str, Any],
    main_key: str = DEFAULT_MAIN_KEY,
    kind: str | None = None,
) -> str:
    if kind is None:
        kind = kind_of(full_key, entry, main_key)
    if kind in ("cron", "hook", "node"):
        return "internal"
    if kind == "group":
        return _text(entry.get("channel")) or key_channel_segment(full_key) or "unknown"
    dc = entry.get("deliveryContext")
    if isinstance(dc, Mapping) and _text(dc.get("channel")):
        return str(dc["channel"])
    return _text(entry.get("lastChannel")) or "unknown"


def chat_type(full_key: str, entry: Mapping[str, Any] | None) -> str:
    ct = (entry or {}).get("chatType")
    if ct in ("direct", "group", "channel"):
        return str(ct)
    seg = _group_segment(rest_of(full_key))
    if seg:
        return seg[1]
    return "direct"


def policy_channel(full_key: str, entry: Mapping[str, Any] | None) -> str | None:
    """The channel send-policy rules match: the key's segment, else the entry's channel, else
    lastChannel; lower-cased."""
    seg = key_channel_segment(full_key)
    if seg:
        return seg
    e = entry or {}
    value = _text(e.get("channel")) or _text(e.get("lastChannel"))
    return value.lower() if value else None
