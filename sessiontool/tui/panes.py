"""`top`'s panes: the sessions, runs and deliveries tables over a footer, laid out once and drawn
from what `Shown` holds (model.py) whenever live.py has read something new or a key changed the
filter. Drawing only: what is read, and when, is live.py's; what a key does, keys.py's."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import App, ComposeResult
from textual.widgets import Footer, Input, Label, Static

from sessiontool.clock import now_ms
from sessiontool.context import Context
from sessiontool.tui import model, rows, tables

# The newest sessions drawn (as `list` shows 200 by default); `/` searches all of them. A table
# measures every cell it is given: 1,000 rows cost a second of CPU per redraw, 200 a fifth.
SESSIONS_SHOWN = 200


class Panes:
    """The widgets of `app`'s screen and how `shown` is drawn on them."""

    def __init__(self, app: App[Any], ctx: Context, opts: model.Options) -> None:
        self.app, self.ctx, self.opts = app, ctx, opts
        self.shown = model.Shown()
        self.status_shown: tuple[str, bool] | None = None

    def compose(self) -> ComposeResult:
        yield Label("Sessions", classes="title", id="sessions-title")
        yield Input(placeholder="filter sessions (Enter: keep, Esc: clear)", id="filter")
        yield tables.LiveTable(id="sessions", cursor_type="row", zebra_stripes=True)
        yield Label("Runs", classes="title")
        yield tables.LiveTable(id="runs", cursor_type="row")
        yield Label("Deliveries", classes="title")
        yield tables.LiveTable(id="deliveries", cursor_type="row", show_cursor=False)
        yield Static(id="status")
        yield Footer()

    def mount(self) -> None:
        """The tables' columns, and the keys to the sessions pane."""
        for label, width in zip(rows.SESSION_COLUMNS, rows.SESSION_WIDTHS, strict=True):
            self.table("sessions").add_column(label, width=width)
        for label, width in zip(rows.RUN_COLUMNS, rows.RUN_WIDTHS, strict=True):
            self.table("runs").add_column(label, width=width)
        self.table("deliveries").add_columns(*rows.DELIVERY_COLUMNS)
        self.table("sessions").focus()

    def table(self, name: str) -> tables.LiveTable:
        return self.app.query_one(f"#{name}", tables.LiveTable)

    def filter_box(self) -> Input:
        return self.app.query_one("#filter", Input)

    def selected(self, name: str) -> str | None:
        """The key of the row under the cursor in pane `name` (None: an empty pane)."""
        t = self.table(name)
        if t.row_count == 0:
            return None
        key = t.coordinate_to_cell_key(t.cursor_coordinate).row_key.value
        return str(key) if key is not None else None

    def draw_all(self) -> None:
        self.draw_sessions()
        self.draw_runs()
        self.draw_deliveries()
        self.draw_status()

    def draw_sessions(self) -> None:
        snap, cost = self.shown.snap, self.shown.cost
        found = rows.matching(snap.sessions, self.shown.filter)
        shown = found[:SESSIONS_SHOWN]
        by_session = cost.by_session if cost else {}
        tables.fill(self.table("sessions"), rows.session_rows(shown, by_session, now_ms()))
        title = rows.sessions_title(len(found), len(shown), len(snap.sessions), self.shown.filter)
        self.app.query_one("#sessions-title", Label).update(Text(title))

    def draw_runs(self) -> None:
        cells = rows.run_rows(self.shown.snap.runs, self.shown.rss, now_ms())
        tables.fill(self.table("runs"), cells)

    def draw_clocks(self) -> None:
        tables.update_clocks(self.table("runs"), self.shown.snap.runs, self.shown.rss)

    def draw_deliveries(self) -> None:
        cells = rows.delivery_rows(self.shown.snap.deliveries, self.ctx.display, now_ms())
        tables.fill(self.table("deliveries"), cells)

    def draw_status(self) -> None:
        """The footer, drawn again only when its text changed (the gateway's state is asked
        every 10 s, and mostly says the same)."""
        s = self.shown
        line, over = rows.status_line(s.snap, s.gateway, s.cost, self.opts.budget)
        if (line, over) == self.status_shown:
            return
        self.status_shown = (line, over)
        status = self.app.query_one("#status", Static)
        status.set_class(over, "over")
        status.update(Text(line))
