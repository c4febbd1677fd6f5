"""`history --fields a,b`: only these keys of each message, as gh's `--json FIELDS` picks keys.
With `--json`/`--format json|jsonl`, each message object holds only them (a key a message lacks
is null); in text, one message per line as TSV, those keys in that order (a value that is no
string, such as a list of content parts, as compact JSON). The `history --format` row asked for
is wrapped with them (`historyformats.picking`: jsonl), or the transcript's View is given them
(cli/historyformats.py), so the page and the messages `--follow` adds are picked alike.

A name is valid if a message may carry it (`columns.MESSAGE_KEYS`) or one of the page's
messages has it: a typo is a usage error naming the valid keys, before anything is written."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sessiontool.errors import UsageError

Message = dict[str, Any]


def parse(fields: str | None) -> list[str] | None:
    if fields is None:
        return None
    names = [f.strip() for f in fields.split(",") if f.strip()]
    if not names:
        raise UsageError("--fields needs at least one field name")
    return names


def check(names: Sequence[str], messages: Sequence[Message]) -> None:
    from sessiontool.cli.columns import MESSAGE_KEYS

    valid = dict.fromkeys(MESSAGE_KEYS)
    for m in messages:
        valid.update(dict.fromkeys(m))
    for n in names:
        if n not in valid:
            raise UsageError(f"unknown field {n!r} (valid: {', '.join(valid)})")


def pick(m: Message, names: Sequence[str]) -> Message:
    return {n: m.get(n) for n in names}


def _cell(v: Any) -> Any:
    if v is None or isinstance(v, str | int | float | bool):
        return "" if v is None else v
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


def cells(messages: Sequence[Message], names: Sequence[str]) -> list[list[Any]]:
    """The TSV rows of these messages: `names` of each, in that order."""
    return [[_cell(m.get(n)) for n in names] for m in messages]
