"""The cells of a session's life in `list`'s table: archived or pinned beside its kind, and
the model its next run uses (its own, `session --model`, marked `*`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def kind_cell(r: Mapping[str, Any]) -> str:
    """The kind, and whether the session is archived or pinned (`archive`, `pin`)."""
    if r.get("archived") or r.get("archivedAt") is not None:
        return f"{r['kind']} (archived)"
    return f"{r['kind']} (pinned)" if r.get("pinnedAt") is not None else str(r["kind"])


def model_cell(r: Mapping[str, Any]) -> str:
    """The session's own model when it has one (marked `*`), else the one it last ran on."""
    over = r.get("modelOverride")
    if isinstance(over, str) and over:
        prov = r.get("providerOverride")
        return (f"{prov}/{over}" if isinstance(prov, str) and prov else over) + "*"
    return str(r.get("model", ""))


def for_table(result: Mapping[str, Any]) -> dict[str, Any]:
    """`list`'s result as its table shows it (the JSON and TSV keep the stored values)."""
    rows = [dict(r, kind=kind_cell(r), model=model_cell(r)) for r in result["sessions"]]
    return {**result, "sessions": rows}
