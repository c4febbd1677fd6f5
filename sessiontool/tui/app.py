"""`top`'s screen: the sessions, runs and deliveries panes over a footer, kept live by a change
marker (watch.py) looked at twice a second, and the keys that act on the selected row through
the functions the commands call (`abort`, `send`, `wait`, `history --follow`).

Whatever may block (a listing, a run's end, a reply, the gateway's TCP connect, the index
behind today's cost) runs in a daemon thread (threads.py) and hands its result back to the
screen's own thread: the screen never waits, and leaving never waits for a run (nor for a
listing of 100,000 sessions: `q` ends the app, and the process exits without waiting for its
daemon threads, cli/main.py)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from functools import partial
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Footer, Input, Label, Static

from sessiontool.clock import now_ms
from sessiontool.context import Context
from sessiontool.errors import SessiontoolError
from sessiontool.tui import fmt, model, rows, tables, threads, watch
from sessiontool.tui.screens import (
    DIALOG_CSS,
    ConfirmScreen,
    MessageScreen,
    PromptScreen,
    TranscriptScreen,
)
from sessiontool.tui.subscribe import Subscription

if TYPE_CHECKING:
    from sessiontool.runs.result_types import AbortResult, SendResult

TICK_S = 0.5  # how often the change marker is looked at: a change shows within a second
GATEWAY_EVERY_S = 10.0
COST_EVERY_S = 30.0
REMOTE_EVERY_S = 5.0  # a remote gateway's store has no file to stat: listed again this often
REMOTE_LIVE_EVERY_S = 60.0  # ... or, while its sessions.changed events come, this often
RSS_TICKS = 10  # the running runs' memory: every 5 s (a walk of /proc)
# The newest sessions drawn (as `list` shows 200 by default); `/` searches all of them. A table
# measures every cell it is given: 1,000 rows cost a second of CPU per redraw, 200 a fifth.
SESSIONS_SHOWN = 200
AGES_TICKS = 120  # the sessions' ages, redrawn once a minute when nothing changed

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
    """The live view. `exit` value: 0 (q, Ctrl-C)."""

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
        self.ctx, self.opts = ctx, opts
        self.snap = model.Snapshot()
        self.agents: list[str] = []
        self.filter = ""
        self.mark: watch.Marker | None = None
        self.reading = False
        self.rss: dict[str, int | None] = {}
        self.cost: model.Cost | None = None
        self.cost_at = 0.0
        self.cost_due = False  # after the first listing: the two would race for the gateway
        self.gateway = "…"
        self.gateway_at = 0.0
        self.ticks = 0
        self.sub: Subscription | None = None  # a remote gateway's sessions.changed events
        self.serial = False  # every gateway call under gateway_lock (guard)
        self.gateway_lock = threading.RLock()
        self.status_shown: tuple[str, bool] | None = None

    # -- layout ------------------------------------------------------------------------------

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

    def on_mount(self) -> None:
        for label, width in zip(rows.SESSION_COLUMNS, rows.SESSION_WIDTHS, strict=True):
            self.table("sessions").add_column(label, width=width)
        for label, width in zip(rows.RUN_COLUMNS, rows.RUN_WIDTHS, strict=True):
            self.table("runs").add_column(label, width=width)
        self.table("deliveries").add_columns(*rows.DELIVERY_COLUMNS)
        self.table("sessions").focus()
        if _remote(self.ctx):
            self.sub = Subscription(self.ctx.paths)
            self.sub.start()
        self.serial = self.sub is not None or model.through_gateway(self.ctx)
        self.tick()
        self.set_interval(TICK_S, self.tick)

    def table(self, name: str) -> tables.LiveTable:
        return self.query_one(f"#{name}", tables.LiveTable)

    # -- live --------------------------------------------------------------------------------

    def current_marker(self) -> watch.Marker:
        mark = watch.marker(self.ctx.paths, self.agents)
        if self.sub is not None:  # a remote gateway: its events, else every few seconds
            every = REMOTE_LIVE_EVERY_S if self.sub.live else REMOTE_EVERY_S
            mark += ((self.sub.generation(), int(time.monotonic() // every), 0),)
        return mark

    def tick(self) -> None:
        """Twice a second: re-read when the marker moved; once a second the running runs'
        clocks; every other second their memory; now and then the gateway and the cost."""
        self.ticks += 1
        mark = self.current_marker()
        if mark != self.mark and not self.reading:
            self.reading = True
            self.mark = mark
            self.background(lambda: self.locked(model.read_snapshot, self.opts), self.apply)
        active = [r["runId"] for r in self.snap.runs if r.get("status") in model.ACTIVE]
        if active and self.ticks % 2 == 0:
            self.draw_clocks()
        if active and self.ticks % RSS_TICKS == 0:
            self.background(lambda: self.read_rss(active), self.apply_rss)
        if self.ticks % AGES_TICKS == 0:
            self.draw_sessions()  # the UPDATED ages
        now = time.monotonic()
        if now - self.gateway_at >= GATEWAY_EVERY_S:
            self.gateway_at = now
            self.background(lambda: model.gateway_state(self.ctx), self.apply_gateway)
        if self.cost_due and now - self.cost_at >= COST_EVERY_S:
            self.cost_at, self.cost_due = now, False
            self.background(lambda: self.locked(model.cost_today, self.opts), self.apply_cost)

    def apply(self, snap: model.Snapshot | BaseException) -> None:
        self.reading = False
        if isinstance(snap, BaseException) or snap.error:
            # A listing that failed (a store torn mid-write, a gateway gone): the panes keep what
            # they showed, the footer says why; the next change is read again.
            if isinstance(snap, BaseException) and not isinstance(snap, SessiontoolError):
                raise snap
            self.snap.error = snap.message if isinstance(snap, SessiontoolError) else snap.error
            self.draw_status()
            return
        self.snap = snap
        self.cost_due = True
        self.agents = snap.agents
        self.draw_sessions()
        self.draw_runs()
        self.draw_deliveries()
        self.draw_status()
        active = [r["runId"] for r in snap.runs if r.get("status") == "running"]
        if any(rid not in self.rss for rid in active):  # a new run's memory: now, not in 5 s
            self.background(lambda: self.read_rss(active), self.apply_rss)

    def read_rss(self, run_ids: list[str]) -> dict[str, int | None]:
        """The running runs' memory, in one walk of /proc for all of them."""
        groups = {rid: model.run_pgid(self.ctx, rid) for rid in run_ids}
        rss = watch.groups_rss(g for g in groups.values() if g is not None)
        return {rid: rss.get(g) if g is not None else None for rid, g in groups.items()}

    def apply_rss(self, rss: dict[str, int | None] | BaseException) -> None:
        """Kept for the next clock tick (within a second), which draws it with the clocks:
        one redraw a second, not two."""
        if isinstance(rss, dict):
            self.rss = rss

    def apply_gateway(self, state: str | BaseException) -> None:
        self.gateway = state if isinstance(state, str) else "?"
        if self.sub is not None:
            self.gateway += ", events" if self.sub.live else f", listed every {REMOTE_EVERY_S:g} s"
        self.draw_status()

    def apply_cost(self, cost: model.Cost | BaseException) -> None:
        if isinstance(cost, model.Cost):
            changed = self.cost is None or cost.by_session != self.cost.by_session
            self.cost = cost
            if changed:
                self.draw_sessions()
        self.draw_status()

    # -- drawing -----------------------------------------------------------------------------

    def draw_sessions(self) -> None:
        found = rows.matching(self.snap.sessions, self.filter)
        shown = found[:SESSIONS_SHOWN]
        by_session = self.cost.by_session if self.cost else {}
        tables.fill(self.table("sessions"), rows.session_rows(shown, by_session, now_ms()))
        title = rows.sessions_title(len(found), len(shown), len(self.snap.sessions), self.filter)
        self.query_one("#sessions-title", Label).update(Text(title))

    def draw_runs(self) -> None:
        tables.fill(self.table("runs"), rows.run_rows(self.snap.runs, self.rss, now_ms()))

    def draw_clocks(self) -> None:
        tables.update_clocks(self.table("runs"), self.snap.runs, self.rss)

    def draw_deliveries(self) -> None:
        cells = rows.delivery_rows(self.snap.deliveries, self.ctx.display, now_ms())
        tables.fill(self.table("deliveries"), cells)

    def draw_status(self) -> None:
        """The footer, drawn again only when its text changed (the gateway's state is asked
        every 10 s, and mostly says the same)."""
        line, over = rows.status_line(self.snap, self.gateway, self.cost, self.opts.budget)
        if (line, over) == self.status_shown:
            return
        self.status_shown = (line, over)
        status = self.query_one("#status", Static)
        status.set_class(over, "over")
        status.update(Text(line))

    # -- keys --------------------------------------------------------------------------------

    def selected(self, name: str) -> str | None:
        t = self.table(name)
        if t.row_count == 0:
            return None
        key = t.coordinate_to_cell_key(t.cursor_coordinate).row_key.value
        return str(key) if key is not None else None

    def action_leave(self) -> None:
        if self.sub is not None:
            self.sub.stop()
        self.exit(0)

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.add_class("shown")
        self.screen.set_focus(box)  # now: keys typed right after the / are the filter's

    def action_clear_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.value = ""
        box.remove_class("shown")
        self.table("sessions").focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "filter":
            self.filter = event.value.strip()
            self.draw_sessions()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            if not event.value.strip():
                event.input.remove_class("shown")
            self.table("sessions").focus()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter on a session: its transcript, followed live."""
        key = self.selected("sessions") if event.data_table.id == "sessions" else None
        if key is not None:
            self.push_screen(TranscriptScreen(self.ctx, key, self.post, self.guard))

    def action_abort(self) -> None:
        rid = self.selected("runs")
        run = next((r for r in self.snap.runs if r["runId"] == rid), None)
        if rid is None or run is None or run.get("status") not in model.ACTIVE:
            self.notify("select a running or queued run (Tab to the runs pane)", severity="warning")
            return
        question = f"Abort run {rid[:8]} of {run.get('sessionKey')}? Its agent is killed."

        def answered(yes: bool | None) -> None:
            if yes:
                self.background(lambda: self.locked(_abort, rid), self.aborted)

        self.push_screen(ConfirmScreen(fmt.esc(question)), answered)

    def aborted(self, result: dict[str, Any] | BaseException) -> None:
        if self.reported(result):
            return
        assert isinstance(result, dict)
        self.notify(fmt.esc(f"run {result['runId'][:8]}: {result['status']}"), markup=False)
        self.mark = None  # re-read at the next tick

    def action_send(self) -> None:
        key = self.selected("sessions")
        if key is None:
            self.notify("no session selected", severity="warning")
            return

        def typed(text: str | None) -> None:
            if text and text.strip():
                self.notify(f"sending to {fmt.esc(key)}…", markup=False)
                job = partial(_send_and_wait, self.ctx, self.guard, key, text)
                self.background(job, self.replied)

        self.push_screen(PromptScreen(fmt.esc(f"Message to {key} (Enter: send)")), typed)

    def replied(self, result: dict[str, Any] | BaseException) -> None:
        if self.reported(result):
            return
        assert isinstance(result, dict)
        self.push_screen(MessageScreen(*_result_text(result)))

    def action_wait(self) -> None:
        rid = self.selected("runs")
        if rid is None:
            self.notify("no run selected (Tab to the runs pane)", severity="warning")
            return
        self.notify(f"waiting for run {fmt.esc(rid[:8])}…", markup=False)
        self.background(lambda: _wait(self.ctx, rid), self.replied)

    # -- threads -----------------------------------------------------------------------------

    def reported(self, result: object) -> bool:
        """An expected failure (SessiontoolError, OSError) is a notice; anything else is a bug
        and is raised here, so it ends the app as any bug does."""
        if isinstance(result, SessiontoolError):
            self.notify(fmt.one_line(result.message), severity="error", markup=False)
            return True
        if isinstance(result, BaseException):
            raise result
        return False

    def post(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run `fn(*args)` on the screen's thread (from another); dropped once gone; nothing it
        raises reaches the calling thread (threads.py)."""
        threads.post(self, fn, *args)

    def guard(self) -> AbstractContextManager[Any]:
        """Held around every call that may speak to OpenClaw's gateway when this state dir's
        store is written (or read) through it: the process has one connection per gateway
        (openclaw/wsclient.py), which two threads must not use at once."""
        return self.gateway_lock if self.serial else nullcontext()

    def locked(self, fn: Callable[..., Any], *args: Any) -> Any:
        with self.guard():
            return fn(self.ctx, *args)

    def background(self, work: Callable[[], Any], done: Callable[[Any], None]) -> None:
        threads.background(self, work, done)


def _remote(ctx: Context) -> bool:
    from sessiontool.state.detect import gateway_url

    return gateway_url(ctx.paths) is not None


def _abort(ctx: Context, run_id: str) -> AbortResult:
    """`sessiontool abort RUN_ID`."""
    from sessiontool.runs.control import abort_run

    return abort_run(ctx, run_id)


def _send_and_wait(
    ctx: Context, guard: Callable[[], AbstractContextManager[Any]], key: str, text: str
) -> SendResult:
    """`sessiontool send KEY TEXT --timeout 0`, then `sessiontool wait RUN_ID` (the wait reads
    run records only: the gateway is free for the panes meanwhile)."""
    from sessiontool.runs.submit import send
    from sessiontool.state import safefs

    dirs, files = ctx.paths.written_paths()
    safefs.preflight(ctx.paths.root, dirs, files)
    with guard():
        result, _ = send(ctx, key, text, timeout=0)
    if result.get("status") != "accepted":
        return result
    return _wait(ctx, str(result["runId"]))


def _wait(ctx: Context, run_id: str) -> SendResult:
    """`sessiontool wait RUN_ID`: until the run ends."""
    from sessiontool.runs.control import full_run_id
    from sessiontool.runs.submit import get_run, run_result
    from sessiontool.runs.wait import wait_for

    run_id = full_run_id(ctx, run_id)
    get_run(ctx, run_id)
    result, _ = run_result(ctx, wait_for(ctx.paths, run_id, None))
    return result


def _result_text(result: dict[str, Any]) -> tuple[str, str]:
    """A MessageScreen's title (escaped here) and body (escaped and folded there)."""
    rid = str(result.get("runId", ""))[:8]
    if result.get("status") == "ok" and "reply" in result:
        return fmt.esc(f"Reply from {result.get('sessionKey')} (run {rid})"), str(result["reply"])
    if "sendPolicy" in result:
        return "Send policy", f"{result.get('sessionKey')}: {result['sendPolicy'] or 'inherit'}"
    title = f"Run {rid}: {result.get('runStatus') or result.get('status')}"
    return fmt.esc(title), str(result.get("error") or "")


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
