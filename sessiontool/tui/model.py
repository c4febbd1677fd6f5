"""What `top` shows, read through the functions the commands call: `list_sessions` (`list`),
`list_runs` (`runs`), `read_deliveries` (`deliveries`), `usage` (`usage --by session --since`
today) and the store and gateway facts `doctor` reports. Plain data, no Textual: `app.py` draws
it, tests read it."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sessiontool.context import Context
from sessiontool.errors import SessiontoolError

if TYPE_CHECKING:
    from sessiontool.flow.result_types import DeliveryRecord
    from sessiontool.runs.record_types import RunView

ACTIVE = ("running", "queued")
FINISHED_SHOWN = 20  # finished runs under the running ones
DELIVERIES_SHOWN = 50


@dataclass(frozen=True)
class Options:
    """What `top` was asked for: every agent's sessions or the current one's, a daily budget."""

    all_agents: bool = False
    budget: float | None = None


@dataclass
class Snapshot:
    sessions: list[dict[str, Any]] = field(default_factory=list)
    runs: list[RunView] = field(default_factory=list)
    deliveries: list[DeliveryRecord] = field(default_factory=list)
    formats: list[str] = field(default_factory=list)
    agents: list[str] = field(default_factory=list)  # whose stores the marker watches
    error: str | None = None  # a listing that failed: shown in the footer, the rest still drawn


@dataclass
class Shown:
    """What the panes draw: written by live.py as its reads come back, read by panes.py (and
    the keys: the selected run's status)."""

    snap: Snapshot = field(default_factory=Snapshot)
    rss: dict[str, int | None] = field(default_factory=dict)  # a running run's memory
    cost: Cost | None = None
    gateway: str = "…"
    filter: str = ""  # the sessions pane's, as typed after `/`


def agent_ids(ctx: Context, opts: Options) -> list[str]:
    from sessiontool.sessions.listing import list_agent_ids

    return list_agent_ids(ctx, opts.all_agents)


def read_snapshot(ctx: Context, opts: Options) -> Snapshot:
    """Everything the panes show, newest first, each pane as its command lists it."""
    from sessiontool.flow.delivery import read_deliveries
    from sessiontool.runs.listing import list_runs
    from sessiontool.sessions.listing import list_sessions
    from sessiontool.state.detect import detect

    snap = Snapshot()
    try:
        snap.sessions = list_sessions(ctx, limit=None, all_agents=opts.all_agents)["sessions"]
        snap.agents = agent_ids(ctx, opts)
        snap.formats = sorted({detect(ctx.paths, a).format for a in snap.agents})
        snap.runs = runs_in_order(list_runs(ctx)["runs"])
        if ctx.requester.is_operator:
            snap.deliveries = list(reversed(read_deliveries(ctx.paths)))[:DELIVERIES_SHOWN]
    except SessiontoolError as exc:
        snap.error = exc.message
    return snap


def through_gateway(ctx: Context) -> bool:
    """Whether a store on this disk is written through OpenClaw's gateway (its SQLite one);
    asked of the disk alone, so that it costs no call to the gateway."""
    from sessiontool.state.detect import detect, local_agent_ids

    return any(detect(ctx.paths, a).gateway_written for a in local_agent_ids(ctx.paths))


def runs_in_order(runs: list[RunView]) -> list[RunView]:
    """Running and queued runs first (oldest first: the one that waits longest on top), then the
    last finished ones, newest first."""
    active = [r for r in runs if r.get("status") in ACTIVE]
    active.sort(key=lambda r: (r.get("status") != "running", r.get("createdAt") or 0))
    done = [r for r in runs if r.get("status") not in ACTIVE][:FINISHED_SHOWN]
    return active + done


def run_pgid(ctx: Context, run_id: str) -> int | None:
    """The process group a local run's agent runs in (`abort` kills it), or the worker's own
    when its runner runs inside it (echo, llm, openai): from the record's private fields."""
    from sessiontool.runs.records import read_record

    try:
        rec = read_record(ctx.paths, run_id)
    except SessiontoolError:
        return None
    for name in ("agentPid", "pid"):
        pid = rec.get(name)
        if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0:
            return pid
    return None


def today_start_ms(now: float | None = None) -> int:
    """Local midnight, as `usage --since` reads a date."""
    t = time.localtime(now if now is not None else time.time())
    return int(time.mktime((t.tm_year, t.tm_mon, t.tm_mday, 0, 0, 0, 0, 0, -1)) * 1000)


@dataclass(frozen=True)
class Cost:
    total: float
    by_session: dict[str, float]
    currency: str = "USD"
    # Each `sessiontool.budgets` budget with its fill (reports/budgets.py `fills`).
    budgets: tuple[dict[str, Any], ...] = ()


def cost_today(ctx: Context, opts: Options) -> Cost:
    """Today's cost in all and per session key, as `usage --by session --since <today>`
    reports it (the search index is brought up to date first: seconds on a big state dir the
    first time, so `top` asks for it off the screen's thread and not on every change)."""
    from sessiontool.reports.budgets import fills
    from sessiontool.reports.usage import usage

    result = usage(ctx, by="session", since_ms=today_start_ms(), all_agents=opts.all_agents)
    by_session = {str(r["session"]): float(r["cost"]) for r in result["rows"]}
    currency = str(result.get("currency", "USD"))
    return Cost(float(result["total"]["cost"]), by_session, currency, tuple(fills(ctx)))


def gateway_state(ctx: Context) -> str:
    """`up`, `down` or `none` (no OpenClaw config names one): a TCP connect, as `doctor` decides
    reachability, made again each time it is asked (`gateway show` names the URL)."""
    from dataclasses import replace

    from sessiontool.openclaw.gateway import find
    from sessiontool.openclaw.target import bound_to

    if ctx.paths.openclaw_config() is None and bound_to(ctx.paths.root) is None:
        return "none"
    g = replace(find(ctx.paths), _reachable=None)
    return "up" if g.reachable() else "down"
