"""`history`'s output: the transcript as a `cli/output.py` View (`transcript_view`: JSON,
text, a person's view on a terminal, TSV of `--fields`, whichever the one rule of every command
picks), and the documents only `history --format` writes, one row each (pre-commit's
`all_languages.py`): the name → how the transcript is written whole, how one message that
arrives under `--follow` is written, and what the format needs. A new document format is one
row here plus its renderer (and its word in the `--format` help, which a test checks against
this table); a new format for every command's result, the transcript included, is a row of
`cli/output.py`'s FORMATS.

Loaded only by `history` (not by `list`, which shares its command module): cron's
`list --json` every minute does without it."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from sessiontool.cli import output, render

if TYPE_CHECKING:
    from pathlib import Path

    from sessiontool.context import Context
    from sessiontool.sessions.history import History, HistoryResult

Message = dict[str, Any]


class HistoryFormat(NamedTuple):
    # The transcript whole as this document; None: the transcript is a View that cli/output.py
    # writes (text and json are every command's formats, chosen by its one rule).
    whole: Callable[[Context, History], str | bytes] | None
    # One message that arrived under --follow (after `key`'s first view); None: cannot follow.
    message: Callable[[str, Message], str | bytes] | None = None
    # Tool results always included (a page shows them folded).
    tools: bool = False


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
    "text": HistoryFormat(None),
    "markdown": HistoryFormat(_markdown, _markdown_message),
    "json": HistoryFormat(None),
    "jsonl": HistoryFormat(_jsonl, _json_message),
    "html": HistoryFormat(_html, None, tools=True),
}


class Writing(NamedTuple):
    """How `history` writes: its `--format` row (a document, or the transcript's View when
    `whole` is None), the format asked for, `--json`, `--fields`' names, `-o`'s path."""

    row: HistoryFormat
    fmt: str | None
    as_json: bool
    names: list[str] | None
    dest: Path | None  # -o FILE
    follow: bool


def picking(fmt: str, row: HistoryFormat, names: Sequence[str]) -> HistoryFormat:
    """The document row that writes only `names` of each message (JSON Lines: the message
    objects; the transcript's JSON and TSV are cli/output.py's, given the names)."""
    from sessiontool.cli import messagefields

    if fmt == "jsonl" and row.whole is not None and row.message is not None:
        write_page, write_one = row.whole, row.message

        def whole(ctx: Context, h: History) -> str | bytes:
            messagefields.check(names, h.messages)
            h.messages = [messagefields.pick(m, names) for m in h.messages]
            return write_page(ctx, h)

        return row._replace(
            whole=whole, message=lambda key, m: write_one(key, messagefields.pick(m, names))
        )
    from sessiontool.errors import UsageError

    raise UsageError(f"--fields writes text (TSV), json or jsonl, not {fmt}")


def complete(incomplete: str) -> list[str]:
    """What Tab offers after `--format`."""
    return [name for name in FORMATS if name.startswith(incomplete)]


# -- the transcript through cli/output.py -----------------------------------------------------


def output_format(
    fmt: str | None, as_json: bool, look: render.Look, names: Sequence[str] | None
) -> str:
    """The row of cli/output.py's FORMATS that writes the transcript: `--format json` or
    `--json`: json; `--format text`: a person's view on a terminal, the text when piped (what
    it always meant); neither: every command's rule (`--output-format`,
    `SESSIONTOOL_OUTPUT_FORMAT`, `--fields`, a terminal or a pipe). `--fields` outside JSON is
    TSV of those keys."""
    if fmt == "json" or (fmt is None and as_json):
        return "json"
    if fmt == "text":
        out = "table" if look.terminal() else "text"
    else:
        out = output.choose(look, as_json=False, fields=names)
    return "tsv" if names and out != "json" else out


def transcript_view(
    h: History, names: Sequence[str] | None, *, empty: bool = True
) -> output.View[HistoryResult]:
    """The transcript for every output format: its JSON (the messages' entry ids included:
    those `fork --at` and `rewind` take), its text, its view on a terminal (rich when colored),
    or with `--fields` TSV of those keys, one message a line. `empty`: say so when there are no
    messages (not under `--follow`, where they come later)."""
    from sessiontool.cli import messagefields

    if names:
        messagefields.check(names, h.messages)
    h.with_ids = True

    def table(look: render.Look, data: HistoryResult) -> None:
        if empty and not data["messages"]:
            render.empty(look, "No messages.")
        if look.colored():
            render.write_out(_life(h))
            render.history_rich(look, h.session_key, data["messages"])
            render.write_out(_spawned(h))
        else:
            render.write_out(plain(h))

    return output.View(
        h.to_json(),
        lambda r: r["messages"],
        table=table,
        text=lambda _: plain(h),
        cells=(lambda r: messagefields.cells(r["messages"], names)) if names else None,
    )


def message_view(key: str, names: Sequence[str] | None) -> Callable[[Message], output.View[Any]]:
    """One message that arrived under `--follow`, as the transcript's View writes it (`output.
    stream` writes each alone, JSON a line each)."""
    from sessiontool.cli import messagefields

    def view(m: Message) -> output.View[Message]:
        def table(look: render.Look, one: Message) -> None:
            if look.colored():  # the same view as the messages above it
                render.history_rich(look, key, [one])
            else:
                render.write_out(render.history_plain(key, [one]))

        return output.View(
            m,
            table=table,
            text=lambda one: render.history_plain(key, [one]),
            cells=(lambda one: messagefields.cells([one], names)) if names else None,
        )

    return view


def stream(messages: Iterable[Message], key: str, look: render.Look, how: Writing) -> None:
    """`history --follow`'s messages, each as it arrives, through cli/output.py in the format
    the rule picks (JSON: a line each)."""
    fmt = output_format(how.fmt, how.as_json, look, how.names)
    output.stream(messages, message_view(key, how.names), look, fmt, fields=how.names)


def file_body(
    h: History, view: output.View[HistoryResult], fmt: str, names: Sequence[str] | None
) -> str | bytes:
    """`history -o FILE` (no terminal there): the JSON (only `names` of each message), TSV of
    `--fields`, or the text."""
    from sessiontool.cli import messagefields

    if fmt == "json":
        data = view.data
        if names:  # the same keys, in the same order, the messages picked
            data = {**data, "messages": [messagefields.pick(m, names) for m in data["messages"]]}
        return render.json_bytes(data)
    if names:
        return render.tsv(messagefields.cells(h.messages, names))
    return plain(h)


def plain(h: History) -> str:
    return _life(h) + render.history_plain(h.session_key, h.messages) + _spawned(h)


def _life(h: History) -> str:
    """The session's own model, thinking level, archived or pinned, above its messages."""
    from sessiontool.sessions.lifeview import life_line

    line = life_line(h.resolved.entry)
    return render.esc(line) + "\n\n" if line else ""


def _spawned(h: History) -> str:
    """Under the transcript, the sessions spawned from it, one a line, worded as the HTML
    pages link them ("Spawned KEY"); `--json` has them as `children`."""
    return "".join(f"Spawned {render.esc(k)}\n" for k in h.children)
