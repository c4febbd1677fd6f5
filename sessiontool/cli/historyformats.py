"""Every `history --format`, one row each (pre-commit's `all_languages.py`): the name → how the
transcript is written whole, how one message that arrives under `--follow` is written, and
what the format needs. A new format is one row here plus its renderer (and its word in the
`--format` help, which a test checks against this table).

Loaded only by `history` (not by `list`, which shares its command module): cron's
`list --json` every minute does without it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from sessiontool.cli import render

if TYPE_CHECKING:
    from sessiontool.context import Context
    from sessiontool.sessions.history import History

Message = dict[str, Any]


class HistoryFormat(NamedTuple):
    # The transcript whole; None for text, which is drawn (plain or rich) where it goes.
    whole: Callable[[Context, History], str | bytes | None]
    # One message that arrived under --follow (after `key`'s first view); None: cannot follow.
    message: Callable[[str, Message], str | bytes] | None
    # The format --follow writes instead (a JSON document cannot grow: its lines can).
    follow_as: str | None = None
    # Tool results always included (a page shows them folded).
    tools: bool = False


def _text(ctx: Context, h: History) -> None:
    return None


def _text_message(key: str, m: Message) -> str:
    return render.history_plain(key, [m])


def _json(ctx: Context, h: History) -> bytes:
    h.with_ids = True  # the command's JSON: the ids `fork --at` and `rewind` take
    return render.json_bytes(h.to_json())


def _jsonl(ctx: Context, h: History) -> bytes:
    return b"".join(render.json_bytes(m) for m in h.messages)


def _json_message(key: str, m: Message) -> bytes:
    return render.json_bytes(m)


def _markdown(ctx: Context, h: History) -> str:
    return render.history_markdown(h.session_key, h.messages)


def _markdown_message(key: str, m: Message) -> str:
    return render.history_markdown(key, [m]).split("\n", 2)[-1]  # without the heading


def _html(ctx: Context, h: History) -> str:
    from sessiontool.reports.site import standalone_page

    return standalone_page(ctx, h)


FORMATS: dict[str, HistoryFormat] = {
    "text": HistoryFormat(_text, _text_message),
    "markdown": HistoryFormat(_markdown, _markdown_message),
    "json": HistoryFormat(_json, _json_message, follow_as="jsonl"),
    "jsonl": HistoryFormat(_jsonl, _json_message),
    "html": HistoryFormat(_html, None, tools=True),
}


def complete(incomplete: str) -> list[str]:
    """What Tab offers after `--format`."""
    return [name for name in FORMATS if name.startswith(incomplete)]
