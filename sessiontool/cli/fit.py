"""Fitting a terminal table into the terminal's width without folding a session key or a cut
column over lines (render.table): a key too long is shortened in the middle, its start and end
kept; a cut column (a run's result) is shortened at its end; both with sessiontool/termtext.py's
"…", as `top` cuts them."""

from __future__ import annotations

from collections.abc import Sequence

KEY_MIN = 24  # a session key is never shortened below this many characters
CUT_MIN = 12  # nor a cut column below this many
FOLDED_MAX = 12  # how wide the other columns are reckoned at most, as they fold


def key_width(
    columns: Sequence[str], cells: list[list[str]], keys: Sequence[str], width: int
) -> int:
    """How wide each `keys` column may be for the table to fit `width` (the other columns at
    most 12 wide, as they fold), never below KEY_MIN."""
    natural = _natural(columns, cells)
    gaps = 2 * (len(columns) - 1)
    if sum(natural) + gaps <= width:
        return max(natural)
    rest = sum(min(n, FOLDED_MAX) for c, n in zip(columns, natural, strict=True) if c not in keys)
    return max(KEY_MIN, (width - gaps - rest) // len(keys))


def cut_width(
    columns: Sequence[str], cells: list[list[str]], cut: Sequence[str], width: int
) -> int:
    """How wide each `cut` column may be for the table to fit `width` once its keys are fitted
    (every other column as wide as its widest cell: they are short words, ids and times),
    never below CUT_MIN."""
    natural = _natural(columns, cells)
    gaps = 2 * (len(columns) - 1)
    rest = sum(n for c, n in zip(columns, natural, strict=True) if c not in cut)
    return max(CUT_MIN, (width - gaps - rest) // len(cut))


def _natural(columns: Sequence[str], cells: list[list[str]]) -> list[int]:
    return [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
