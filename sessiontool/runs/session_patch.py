"""A session's life fields, patched as OpenClaw 2026.9.6's `sessions.patch` patches them: the
rules the files writer applies to a `sessions.json` entry under the store lock (the gateway
writer sends the same patch to the gateway, which applies its own copy of them).

The fields, named as OpenClaw stores them:
- `archived: true` sets `archivedAt` (ms) and `archiveReason: "manual"` and drops `pinnedAt`;
  `archived: false` drops the three (a restore).
- `pinned: true` sets `pinnedAt` (kept when already pinned); refused for an archived session
  and for a child (a sub-agent key, `spawnedBy`, or a parent other than the agent's main).
- `model: "provider/model"` sets `providerOverride` + `modelOverride` (a bare name:
  `modelOverride` alone); `model: None` clears both.
- `thinkingLevel: LEVEL` sets OpenClaw's normalized level (`think hard` is `low`, `auto` is
  `adaptive`, ...); None clears it.
"""

from __future__ import annotations

from typing import Any

from sessiontool.errors import ForbiddenError, UsageError

Entry = dict[str, Any]

THINKING_LEVELS = ("off", "minimal", "low", "medium", "high", "xhigh", "adaptive", "max", "ultra")
_THINKING_ALIASES = {
    "none": "off",
    "on": "low",
    "enable": "low",
    "enabled": "low",
    "min": "minimal",
    "think": "minimal",
    "thinkhard": "low",
    "mid": "medium",
    "med": "medium",
    "thinkharder": "medium",
    "harder": "medium",
    "ultrathink": "high",
    "thinkhardest": "high",
    "highest": "high",
    "auto": "adaptive",
    "extrahigh": "xhigh",
}
DEFAULT_WORDS = ("default", "inherit", "inherited", "clear", "reset")


def normalize_thinking(raw: str) -> str:
    """OpenClaw's canonical thinking level for what a user typed, or exit 2 listing them."""
    text = raw.strip().lower()
    collapsed = "".join(c for c in text if c not in " _-")
    level = collapsed if collapsed in THINKING_LEVELS else _THINKING_ALIASES.get(collapsed)
    if level is None:
        raise UsageError(
            f"invalid thinking level {raw!r} (use {'|'.join(THINKING_LEVELS)}, or default)"
        )
    return level


def is_default_word(raw: str) -> bool:
    """`default` (and OpenClaw's other words for it) clears an override."""
    return raw.strip().lower() in DEFAULT_WORDS


def pinnable(key: str, entry: Entry) -> bool:
    """OpenClaw's rule: root sessions only (no sub-agent key, no `spawnedBy`, no parent other
    than the agent's main session)."""
    from sessiontool.state import keys

    if keys.is_subagent(key) or entry.get("spawnedBy"):
        return False
    parent = entry.get("parentSessionKey")
    if not parent:
        return True
    return bool(parent == keys.main_key_for(keys.agent_of(key)))


def check_expected(key: str, entry: Entry | None, expected: str | None) -> None:
    """Exit 4 when the key now names another generation than the caller saw (OpenClaw's
    `expectedSessionId`)."""
    if expected is None:
        return
    current = (entry or {}).get("sessionId")
    if current != expected:
        raise ForbiddenError(
            f"session changed: {key} is now sessionId {current} (expected {expected})",
            hint="re-read it with `sessiontool list` before deciding again",
            extra={"sessionKey": key, "sessionId": current},
        )


def apply_patch(key: str, entry: Entry, patch: dict[str, Any], now: int) -> Entry:
    """The entry after the patch (a new dict; the one given is not changed)."""
    out = dict(entry)
    if "archived" in patch:
        _set_archived(out, bool(patch["archived"]), now)
    if "pinned" in patch:
        _set_pinned(key, out, bool(patch["pinned"]), now)
    if "model" in patch:
        _set_model(out, patch["model"])
    if "thinkingLevel" in patch:
        level = patch["thinkingLevel"]
        if level is None:
            out.pop("thinkingLevel", None)
        else:
            out["thinkingLevel"] = normalize_thinking(str(level))
    updated = out.get("updatedAt")
    base = int(updated) if isinstance(updated, int | float) and not isinstance(updated, bool) else 0
    out["updatedAt"] = max(base, now)
    return out


def _set_archived(out: Entry, archived: bool, now: int) -> None:
    if archived:
        out.setdefault("archivedAt", now)
        out["archiveReason"] = out.get("archiveReason") or "manual"
        out.pop("pinnedAt", None)
    else:
        for name in ("archivedAt", "archivedBy", "archiveReason"):
            out.pop(name, None)


def _set_pinned(key: str, out: Entry, pinned: bool, now: int) -> None:
    if not pinned:
        out.pop("pinnedAt", None)
        return
    if out.get("archivedAt") is not None:
        raise ForbiddenError("cannot pin an archived session; restore it first")
    if not pinnable(key, out):
        raise ForbiddenError("cannot pin a child session; pin its parent session instead")
    out.setdefault("pinnedAt", now)


def _set_model(out: Entry, model: str | None) -> None:
    out.pop("modelOverride", None)
    out.pop("providerOverride", None)
    if model is None:
        return
    if "/" in model:
        out["providerOverride"], out["modelOverride"] = model.split("/", 1)
    else:
        out["modelOverride"] = model


def model_of(entry: Entry) -> str | None:
    """The session's model override as one name (`provider/model`), or None."""
    model = entry.get("modelOverride")
    if not isinstance(model, str) or not model:
        return None
    prov = entry.get("providerOverride")
    return f"{prov}/{model}" if isinstance(prov, str) and prov else model


def fork_source_of(key: str, session_id: str | None, entry_id: str | None) -> dict[str, str]:
    """A fork's `forkSource` as OpenClaw's `sessions.fork` records it (its `fork_source_*`
    columns): the source's key, its sessionId then, and the entry it was cut at (a whole-
    transcript fork has none)."""
    out = {"sessionKey": key}
    if session_id:
        out["sessionId"] = session_id
    if entry_id:
        out["entryId"] = entry_id
    return out
