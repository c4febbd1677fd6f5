"""A session's life as its entry holds it (OpenClaw's fields): archived (`archivedAt`),
pinned (`pinnedAt`), its own model and thinking level, the session it was forked from
(`forkSource`: OpenClaw's `fork_source_*` columns); and what `history` says of it above the
messages."""

from __future__ import annotations

from typing import Any

from sessiontool.state.sessions_json import Entry


def is_archived(entry: Entry | None) -> bool:
    return entry is not None and entry.get("archivedAt") not in (None, False)


def is_pinned(entry: Entry | None) -> bool:
    return entry is not None and entry.get("pinnedAt") not in (None, False)


def life_header(entry: Entry | None) -> dict[str, Any]:
    """What `history` says of the session above its messages, only what is set: its own model
    (`session --model`), thinking level, archived, pinned, forked from."""
    e = entry or {}
    out: dict[str, Any] = {}
    model = e.get("modelOverride")
    if isinstance(model, str) and model:
        prov = e.get("providerOverride")
        out["model"] = f"{prov}/{model}" if isinstance(prov, str) and prov else model
    if isinstance(e.get("thinkingLevel"), str):
        out["thinkingLevel"] = e["thinkingLevel"]
    if is_archived(e):
        out["archived"] = True
    if is_pinned(e):
        out["pinned"] = True
    source = fork_source(e)
    if source is not None:
        out["forkSource"] = source
    return out


def fork_source(entry: Entry | None) -> dict[str, str] | None:
    """Where the session was forked from (`fork`; OpenClaw's `sessions.fork`): the source's
    `sessionKey`, its `sessionId` then, and the `entryId` it was cut at (none: the whole of it)."""
    raw = (entry or {}).get("forkSource")
    if not isinstance(raw, dict) or not isinstance(raw.get("sessionKey"), str):
        return None
    return {k: v for k, v in raw.items() if k in FORK_FIELDS and isinstance(v, str) and v}


FORK_FIELDS = ("sessionKey", "sessionId", "entryId")


def life_line(entry: Entry | None) -> str:
    """The header as one line for a person (empty when nothing is set)."""
    head = life_header(entry)
    if not head:
        return ""
    parts = [f"model {head['model']}"] if "model" in head else []
    if "thinkingLevel" in head:
        parts.append(f"thinking {head['thinkingLevel']}")
    parts += [word for word in ("archived", "pinned") if head.get(word)]
    source = head.get("forkSource")
    if source is not None:
        at = f" at {source['entryId']}" if source.get("entryId") else ""
        parts.append(f"forked from {source['sessionKey']}{at}")
    return "session: " + ", ".join(parts)
