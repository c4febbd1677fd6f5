"""`top`'s panes as tables: their rows replaced or changed in place, and a running run's clock
ticked at the cost of its own row.

Textual's `DataTable.update_cell` makes the whole table draw again: each of its render caches
is keyed by a count that any change bumps, so one clock moving in one row re-renders every
visible cell of the pane (about 20 ms a second with a pane of runs: issue 47's idle CPU).
`LiveTable.tick` changes cells whose column stays as wide (the clocks' columns are as wide as
their widest value) and forgets only those cells' and their row's renders, so only they are drawn again; a
cell wider than its column takes DataTable's own update. Every pane is a LiveTable: an age
that moves, a cost that comes in, redraw their row."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rich.text import Text
from textual.widgets import DataTable
from textual.widgets.data_table import Column, ColumnKey, RowKey

from sessiontool.clock import now_ms
from sessiontool.tui import model, rows

Row = tuple[str | None, list[str]]


class LiveTable(DataTable[Any]):
    """A DataTable whose cells can change one row at a time."""

    def tick(self, key: str, cells: Mapping[ColumnKey, str]) -> None:
        """Show `cells` in row `key`; a cell wider than its column, or a table whose caches
        are not as this version of Textual keeps them, takes DataTable's own (whole) update."""
        row_key = RowKey(key)
        if any(len(text) > _room(self.columns[c]) for c, text in cells.items()):
            for column, text in cells.items():
                self.update_cell(row_key, column, Text(text), update_width=True)
            return
        try:
            data = self._data[row_key]
            cells_cache, rows_cache = self._cell_render_cache, self._row_render_cache
            renderables, lines = self._row_renderable_cache, self._line_cache
        except AttributeError:  # pragma: no cover - a Textual that keeps them otherwise
            for column, text in cells.items():
                self.update_cell(row_key, column, Text(text))
            return
        for column, text in cells.items():
            data[column] = Text(text)
        index = self.get_row_index(row_key)
        _forget(cells_cache, lambda k: k[0] == row_key and k[1] in cells)  # the cells changed,
        _forget(rows_cache, lambda k: k[0] == row_key)  # their row's rendered lines,
        _forget(renderables, lambda k: k[1] == index)  # its cells as renderables
        lines.clear()  # keyed by line number: rebuilt from the rows' renders, which stay
        self.refresh_row(index)


def _room(column: Column) -> int:
    """How wide a cell may be without changing its column's width."""
    return column.content_width if column.auto_width else column.width


def _forget(cache: Any, which: Callable[[Any], bool]) -> None:
    for key in [k for k in cache.keys() if which(k)]:  # noqa: SIM118 - an LRUCache, no dict
        cache.discard(key)


def update_clocks(table: LiveTable, runs: Sequence[Mapping[str, Any]], rss: dict[str, Any]) -> None:
    """Once a second: only the ELAPSED and RSS cells of the running and queued runs, and only
    those whose text changed, each row drawn again on its own."""
    keys = [table.ordered_columns[i].key for i in rows.CLOCKS]
    active = [r for r in runs if r.get("status") in model.ACTIVE]
    for key, cells in rows.run_rows(active, rss, now_ms()):
        if key is None or key not in table.rows:
            continue
        changed = {
            column: cells[i]
            for column, i in zip(keys, rows.CLOCKS, strict=True)
            if str(table.get_cell(key, column)) != cells[i]
        }
        if changed:
            table.tick(key, changed)


def fill(table: LiveTable, cells: Sequence[Row]) -> None:
    """Replace the rows, keeping the cursor on the same row key where it still is. The same
    keyed rows in the same order (a clock moved, a cost came in, an age): only the cells that
    changed, each row drawn again on its own."""
    if (
        cells
        and all(k is not None for k, _ in cells)
        and [k for k, _ in cells] == [k.value for k in table.rows]
    ):
        for key, texts in cells:
            assert key is not None
            changed = {
                column.key: text
                for column, text in zip(table.ordered_columns, texts, strict=True)
                if str(table.get_cell(key, column.key)) != text
            }
            if changed:
                table.tick(key, changed)
        return
    keep = None
    if table.row_count:
        keep = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
    table.clear()
    for key, texts in cells:
        table.add_row(*(Text(c) for c in texts), key=key)
    if keep is not None:
        try:
            table.move_cursor(row=table.get_row_index(keep), animate=False)
        except Exception:  # noqa: BLE001 - the row is gone: the cursor stays where clear left it
            pass
