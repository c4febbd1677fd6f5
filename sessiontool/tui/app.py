"""`top`'s screen: the sessions, runs and deliveries panes over a footer (panes.py), kept live by
a change marker looked at twice a second (live.py), and the keys that act on the selected row
through the functions the commands call (keys.py: `abort`, `send`, `wait`; Enter: `history
--follow`). This module binds the keys and events to those three.

Whatever may block (a listing, a run's end, a reply, the gateway's TCP connect, the index
behind today's cost) runs in a daemon thread (threads.py) and hands its result back to the
screen's own thread: the screen never waits, and leaving never waits for a run (nor for a
listing of 100,000 sessions: `q` ends the app, and the process exits without waiting for its
daemon threads, cli/main.py)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Input

from sessiontool.context import Context
from sessiontool.tui import model, threads
from sessiontool.tui.keys import Keys
from sessiontool.tui.live import TICK_S, Live
from sessiontool.tui.panes import Panes
from sessiontool.tui.screens import DIALOG_CSS, TranscriptScreen

CSS = (
    """
#sessions { height: 1fr; }
#runs { height: 25%; min-height: 4; }
#deliveries { height: 15%; min-height: 3; }
.title { background: $boost; width: 100%; text-style: bold; }
#filter { display: none; height: 1; border: none; padding: 0 1; }
#filter.shown { display: block; }
#status { height: 1; background: $panel; }
#status.over { color: $error; }
"""
    + DIALOG_CSS
)


class TopApp(App[int]):
    """The live view: its bindings and events, handed to the three jobs it is made of: the
    panes (panes.py: layout and drawing), what they show kept current (live.py) and what the
    keys do (keys.py). `exit` value: 0 (q, Ctrl-C)."""

    CSS = CSS
    TITLE = "sessiontool top"
    BINDINGS = [
        Binding("q", "leave", "quit"),
        Binding("ctrl+c", "leave", "quit", show=False, priority=True),
        Binding("slash", "filter", "filter"),
        Binding("a", "abort", "abort run"),
        Binding("s", "send", "send"),
        Binding("w", "wait", "wait run"),
        Binding("escape", "clear_filter", "clear filter", show=False),
    ]

    def __init__(self, ctx: Context, opts: model.Options) -> None:
        super().__init__()
        self.ctx = ctx
        self.panes = Panes(self, ctx, opts)
        self.shown = self.panes.shown
        self.live = Live(ctx, opts, panes=self.panes, background=self.background)
        self.keys = Keys(self, self.live)

    def compose(self) -> ComposeResult:
        yield from self.panes.compose()

    def on_mount(self) -> None:
        self.panes.mount()
        self.live.start()
        self.set_interval(TICK_S, self.live.tick)

    def action_leave(self) -> None:
        self.live.stop()
        self.exit(0)

    def action_filter(self) -> None:
        box = self.panes.filter_box()
        box.add_class("shown")
        self.screen.set_focus(box)  # now: keys typed right after the / are the filter's

    def action_clear_filter(self) -> None:
        box = self.panes.filter_box()
        box.value = ""
        box.remove_class("shown")
        self.panes.table("sessions").focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "filter":
            self.shown.filter = event.value.strip()
            self.panes.draw_sessions()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            if not event.value.strip():
                event.input.remove_class("shown")
            self.panes.table("sessions").focus()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter on a session: its transcript, followed live."""
        key = self.panes.selected("sessions") if event.data_table.id == "sessions" else None
        if key is not None:
            self.push_screen(TranscriptScreen(self.ctx, key, self.post, self.live.guard))

    def action_abort(self) -> None:
        self.keys.abort()

    def action_send(self) -> None:
        self.keys.send()

    def action_wait(self) -> None:
        self.keys.wait()

    def post(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run `fn(*args)` on the screen's thread (from another); dropped once gone; nothing it
        raises reaches the calling thread (threads.py)."""
        threads.post(self, fn, *args)

    def background(self, work: Callable[[], Any], done: Callable[[Any], None]) -> None:
        threads.background(self, work, done)


@contextmanager
def color_env(colored: bool) -> Iterator[None]:
    """Textual reads NO_COLOR when the app is made: `--color never` sets it, `--color always`
    takes it away, for that moment only (the workers `top` starts inherit the environment)."""
    before = os.environ.get("NO_COLOR")
    if colored:
        os.environ.pop("NO_COLOR", None)
    else:
        os.environ["NO_COLOR"] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("NO_COLOR", None)
        else:
            os.environ["NO_COLOR"] = before


def make_app(ctx: Context, opts: model.Options, *, colored: bool) -> TopApp:
    with color_env(colored):
        return TopApp(ctx, opts)
