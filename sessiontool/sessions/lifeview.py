"""A session's life as its entry holds it (OpenClaw's fields): archived (`archivedAt`),
pinned (`pinnedAt`), its own model and thinking level; and what `history` says of it above the
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
    (`session --model`), thinking level, archived, pinned."""
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
    return out


def life_line(entry: Entry | None) -> str:
    """The header as one line for a person (empty when nothing is set)."""
    head = life_header(entry)
    if not head:
        return ""
    parts = [f"model {head['model']}"] if "model" in head else []
    if "thinkingLevel" in head:
        parts.append(f"thinking {head['thinkingLevel']}")
    parts += [word for word in ("archived", "pinned") if head.get(word)]
    return "session: " + ", ".join(parts)
