"""The one output path (issue 36 item 1): a command hands its typed result to `emit` as a `View`
(which of its keys are the rows, their columns, its terminal view), and the table of formats
below turns it into JSON, TSV, a terminal table, the ids alone or a line of text. One row per
format (pre-commit's `all_languages.py`, as `historyformats.py` is for `history`): a new format
for every listing is one row here; no command decides between JSON, TSV and a table.

The choice follows one rule for every command (`choose`): `--json` → json; `-q` → ids;
`--fields` → tsv; else a table on a terminal and TSV when piped. How it looks (`--color`) comes
from the frozen `Options` as a `render.Look`, passed in, never from a module global.

Loaded by `list --json` too: it imports nothing beyond render, and cli/columns.py (the TSV
columns) only when a TSV is written."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from sessiontool.cli import render
from sessiontool.cli.render import Look

R = TypeVar("R")  # a View's result: a command's TypedDict
M = TypeVar("M", bound="Mapping[str, Any]")  # an item a `--follow` prints

if TYPE_CHECKING:
    from typing import TypedDict, Unpack

    from sessiontool.cli.columns import Getter
    from sessiontool.context import Options

    class ViewParts(TypedDict, Generic[R], total=False):
        """What a View may say besides its data and rows (View's attributes), each typed
        over the View's result `R`: mypy checks the renderers take what the operation returns."""

        columns: Callable[[], Columns] | None
        cells: Callable[[R], Sequence[Sequence[Any]]] | None
        table: Callable[[Look, R], None] | None
        text: Callable[[R], str] | None
        ids: str | None
        empty: str | None


Columns = tuple["Mapping[str, Getter]", Sequence[str]]
Row = Mapping[str, Any]  # one row of a listing (a TypedDict)


class View(Generic[R]):
    """One result as every format sees it. Only `data` is required: a result without rows is
    written as its JSON, or as `text` for a person and a pipe alike. `rows` reads a listing's
    rows out of the result (`lambda r: r["hits"]`: a key mypy checks against the result's
    TypedDict); the JSON writes them under the key that holds them, streamed. (Plain classes
    here: a NamedTuple costs `list --json` 0.2 ms to create.)"""

    __slots__ = ("data", "rows", "columns", "cells", "table", "text", "ids", "empty")

    data: R  # the typed result: what --json writes, byte for byte
    rows: Callable[[R], Sequence[Row]] | None  # its rows (streamed by json, one line each)
    columns: Callable[[], Columns] | None  # (every column, the default ones), lazily
    cells: Callable[[R], Sequence[Sequence[Any]]] | None  # TSV rows not in `rows`
    table: Callable[[Look, R], None] | None  # the terminal view of `data`
    text: Callable[[R], str] | None  # the whole text, for a terminal or a pipe
    ids: str | None  # the field `-q` prints, one a line
    empty: str | None  # said on a terminal (stderr) when there are no rows

    def __init__(
        self,
        data: R,
        rows: Callable[[R], Sequence[Row]] | None = None,
        **parts: Unpack[ViewParts[R]],
    ) -> None:
        self.data, self.rows = data, rows
        self.columns = parts.get("columns")
        self.cells = parts.get("cells")
        self.table = parts.get("table")
        self.text = parts.get("text")
        self.ids = parts.get("ids")
        self.empty = parts.get("empty")


def _rows(view: View[Any]) -> Sequence[Row]:
    return view.rows(view.data) if view.rows is not None else []


def _json(view: View[Any], look: Look, fields: Sequence[str] | None) -> None:
    rows = _rows(view)
    data = view.data
    # The rows' own key in the result (the one whose value they are), for streaming them.
    key = next((k for k, v in data.items() if v is rows), None) if view.rows else None
    if key is None:
        render.emit_json(data)
        return
    if fields:
        rows = [{k: r.get(k) for k in fields} for r in rows]
    # The rows go last, after the listing's other keys (`count`, `hasMore`, ...), as every
    # release before wrote them: streamed, and what scripts and pinned outputs expect.
    head = {k: v for k, v in data.items() if k != key}
    render.emit_json_rows(head, key, rows)


def _tsv(view: View[Any], look: Look, fields: Sequence[str] | None) -> None:
    if view.cells is not None:
        render.write_out(render.tsv(view.cells(view.data)))
        return
    if view.columns is None:
        _text(view, look, fields)
        return
    from sessiontool.cli import columns

    if view.empty and not _rows(view):
        render.empty(look, view.empty)
    spec, default = view.columns()
    render.write_out(render.tsv(columns.rows(spec, list(fields or default), _rows(view))))


def _table(view: View[Any], look: Look, fields: Sequence[str] | None) -> None:
    if view.rows is not None and view.empty and not _rows(view):
        render.empty(look, view.empty)
    elif view.table is not None:
        view.table(look, view.data)
    else:
        _text(view, look, fields)


def _ids(view: View[Any], look: Look, fields: Sequence[str] | None) -> None:
    ids = view.ids
    if ids is None:  # a result that is no listing: its text is all it has
        _text(view, look, fields)
        return
    render.write_out("".join(render.esc(r[ids]) + "\n" for r in _rows(view)))


def _text(view: View[Any], look: Look, fields: Sequence[str] | None) -> None:
    if view.text is not None:
        render.write_out(view.text(view.data))
    elif view.columns is not None or view.cells is not None:  # a listing: its lines
        _tsv(view, look, fields)
    else:  # nothing written for a person: the JSON is all there is
        _json(view, look, fields)


def _html(view: View[Any], look: Look, fields: Sequence[str] | None) -> None:
    """A listing (or a result's lines) as one HTML table, every cell escaped; a result that
    is only text has no table: its text. Built as the pages are (`reports.htmlbase`'s Markup
    helpers), so no cell reaches the page unescaped by a missed call."""
    from sessiontool.cli import columns
    from sessiontool.reports.htmlbase import Markup, fill, h, join

    if view.columns is not None:
        spec, default = view.columns()
        names = list(fields or default)
        cells: Sequence[Sequence[Any]] = list(columns.rows(spec, names, _rows(view)))
    elif view.cells is not None:
        names, cells = [], view.cells(view.data)
    else:
        _text(view, look, fields)
        return

    def row(tag: str, values: Sequence[Any]) -> Markup:
        cell = Markup(f"<{tag}>{{}}</{tag}>")
        return fill(
            Markup("<tr>{}</tr>\n"),
            join(Markup(""), (fill(cell, h(render.tsv([[v]])[:-1])) for v in values)),
        )

    head = fill(Markup("<thead>{}</thead>\n"), row("th", names)) if names else Markup("")
    body = join(Markup(""), (row("td", r) for r in cells))
    page = fill(Markup("<table>\n{}<tbody>\n{}</tbody>\n</table>\n"), head, body)
    render.write_out(str(page))


class Format:
    """One row of FORMATS: its writer, and whether `--fields` applies (it writes columns)."""

    __slots__ = ("write", "columns")

    def __init__(
        self, write: Callable[[View[Any], Look, Sequence[str] | None], None], columns: bool = False
    ) -> None:
        self.write, self.columns = write, columns


FORMATS: dict[str, Format] = {
    "json": Format(_json, columns=True),
    "tsv": Format(_tsv, columns=True),
    "table": Format(_table),
    "ids": Format(_ids),
    "text": Format(_text),
    "html": Format(_html, columns=True),
}


def look(options: Options) -> Look:
    """How output looks under these options (`--color`, `--output-format`)."""
    return Look(options.color, options.output)


def check_format(name: str | None) -> str | None:
    """`--output-format NAME`: a row of FORMATS (auto: None, each command's rule)."""
    if name is None or name == "auto":
        return None
    if name not in FORMATS:
        from sessiontool.errors import UsageError

        raise UsageError(f"unknown output format {name!r} (valid: auto, {', '.join(FORMATS)})")
    return name


def choose(look: Look, *, as_json: bool, quiet: bool = False, fields: Any = None) -> str:
    """The one rule: `--json`, then `-q`, then `--output-format`, then `--fields` (TSV even on
    a terminal), then a table for a person and TSV for a pipe."""
    if as_json:
        return "json"
    if quiet:
        return "ids"
    if look.format is not None:
        return look.format
    if fields:
        return "tsv"
    return "table" if look.terminal() else "tsv"


def emit(
    view: View[Any],
    look: Look,
    fmt: str,
    fields: Sequence[str] | None = None,
) -> None:
    """Write `view` in the format named `fmt` (a row of FORMATS)."""
    row = FORMATS[fmt]
    row.write(view, look, fields if row.columns else None)


def show(
    view: View[Any],
    look: Look,
    *,
    as_json: bool,
    quiet: bool = False,
    fields: Sequence[str] | None = None,
) -> None:
    """`choose` then `emit`: what a command calls."""
    emit(view, look, choose(look, as_json=as_json, quiet=quiet, fields=fields), fields)


def stream(
    items: Iterable[M],
    view: Callable[[M], View[Any]],
    look: Look,
    fmt: str,
    fields: Sequence[str] | None = None,
) -> None:
    """What a `--follow` prints: each item as it arrives, alone, in the format `choose` picked
    for the command (JSON: one document a line, JSON Lines; a table or a pipe: the item's own
    lines), flushed at once. `view` makes the item's View; the rule and the writers are the
    same as for a whole result."""
    import sys

    for item in items:
        if fmt == "json":  # each item its own line (JSON Lines), not a listing of one
            emit(View({k: item.get(k) for k in fields} if fields else item), look, fmt)
        else:
            emit(view(item), look, fmt, fields)
        sys.stdout.flush()
