"""`top`'s data kept current: a change marker (watch.py) looked at twice a second, the listing
read again when it moved, the running runs' clocks and memory, the gateway's state and today's
cost now and then; each result handed to the panes (panes.py) to draw.

Its own job, apart from the panes and the keys: what is read and when, and the one lock that
keeps two threads off the gateway's single connection. Every read runs in a daemon thread
(threads.py) through the `background` it is given."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from sessiontool.context import Context
from sessiontool.errors import SessiontoolError
from sessiontool.tui import model, watch
from sessiontool.tui.panes import Panes
from sessiontool.tui.subscribe import Subscription

TICK_S = 0.5  # how often the change marker is looked at: a change shows within a second
GATEWAY_EVERY_S = 10.0
COST_EVERY_S = 30.0
REMOTE_EVERY_S = 5.0  # a remote gateway's store has no file to stat: listed again this often
REMOTE_LIVE_EVERY_S = 60.0  # ... or, while its sessions.changed events come, this often
RSS_TICKS = 10  # the running runs' memory: every 5 s (a walk of /proc)
AGES_TICKS = 120  # the sessions' ages, redrawn once a minute when nothing changed

Background = Callable[[Callable[[], Any], Callable[[Any], None]], None]


class Live:
    """Reads what `shown` holds and has `panes` draw it; `tick` is called every TICK_S."""

    def __init__(
        self, ctx: Context, opts: model.Options, *, panes: Panes, background: Background
    ) -> None:
        self.ctx, self.opts = ctx, opts
        self.panes, self.shown = panes, panes.shown
        self.background = background
        self.agents: list[str] = []
        self.mark: watch.Marker | None = None
        self.reading = False
        self.cost_at = 0.0
        self.cost_due = False  # after the first listing: the two would race for the gateway
        self.gateway_at = 0.0
        self.ticks = 0
        self.sub: Subscription | None = None  # a remote gateway's sessions.changed events
        self.serial = False  # every gateway call under gateway_lock (guard)
        self.gateway_lock = threading.RLock()

    def start(self) -> None:
        """The first read, and a remote gateway's events subscribed to."""
        if _remote(self.ctx):
            self.sub = Subscription(self.ctx.paths)
            self.sub.start()
        self.serial = self.sub is not None or model.through_gateway(self.ctx)
        self.tick()

    def stop(self) -> None:
        if self.sub is not None:
            self.sub.stop()

    def forget(self) -> None:
        """Read again at the next tick (after a key changed what is listed)."""
        self.mark = None

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
        active = [r["runId"] for r in self.shown.snap.runs if r.get("status") in model.ACTIVE]
        if active and self.ticks % 2 == 0:
            self.panes.draw_clocks()
        if active and self.ticks % RSS_TICKS == 0:
            self.background(lambda: self.read_rss(active), self.apply_rss)
        if self.ticks % AGES_TICKS == 0:
            self.panes.draw_sessions()  # the UPDATED ages
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
            self.shown.snap.error = (
                snap.message if isinstance(snap, SessiontoolError) else snap.error
            )
            self.panes.draw_status()
            return
        self.shown.snap = snap
        self.cost_due = True
        self.agents = snap.agents
        self.panes.draw_all()
        active = [r["runId"] for r in snap.runs if r.get("status") == "running"]
        if any(rid not in self.shown.rss for rid in active):  # a new run's memory: now, not in 5 s
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
            self.shown.rss = rss

    def apply_gateway(self, state: str | BaseException) -> None:
        gateway = state if isinstance(state, str) else "?"
        if self.sub is not None:
            gateway += ", events" if self.sub.live else f", listed every {REMOTE_EVERY_S:g} s"
        self.shown.gateway = gateway
        self.panes.draw_status()

    def apply_cost(self, cost: model.Cost | BaseException) -> None:
        if isinstance(cost, model.Cost):
            before = self.shown.cost
            self.shown.cost = cost
            if before is None or cost.by_session != before.by_session:
                self.panes.draw_sessions()
        self.panes.draw_status()

    def guard(self) -> AbstractContextManager[Any]:
        """Held around every call that may speak to OpenClaw's gateway when this state dir's
        store is written (or read) through it: the process has one connection per gateway
        (openclaw/wsclient.py), which two threads must not use at once."""
        return self.gateway_lock if self.serial else nullcontext()

    def locked(self, fn: Callable[..., Any], *args: Any) -> Any:
        with self.guard():
            return fn(self.ctx, *args)


def _remote(ctx: Context) -> bool:
    from sessiontool.state.detect import gateway_url

    return gateway_url(ctx.paths) is not None
