"""Fitting a terminal table into the terminal's width without wrapping a session key
(render.table): a key too long is shortened in the middle, its start and end kept."""

from __future__ import annotations

from collections.abc import Sequence

KEY_MIN = 24  # a session key is never shortened below this many characters


def middle_ellipsis(text: str, width: int) -> str:
    """`text` in `width` characters, its start and end kept around a "…" (a key's agent and
    kind lead, its id or peer ends it)."""
    if len(text) <= width:
        return text
    head = (width - 1) // 2
    return text[:head] + "…" + text[len(text) - (width - 1 - head) :]


def key_width(
    columns: Sequence[str], cells: list[list[str]], keys: Sequence[str], width: int
) -> int:
    """How wide each `keys` column may be for the table to fit `width` (the other columns at
    most 12 wide, as they fold), never below KEY_MIN."""
    natural = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    gaps = 2 * (len(columns) - 1)
    if sum(natural) + gaps <= width:
        return max(natural)
    rest = sum(min(n, 12) for c, n in zip(columns, natural, strict=True) if c not in keys)
    return max(KEY_MIN, (width - gaps - rest) // len(keys))
