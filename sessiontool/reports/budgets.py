"""The budgets' spend, read from the search index, and the gate a new run passes
(context.py `SpendGate`): refused (exit 6) when a budget over it is spent, else given the room the
tightest budget leaves as its cost limit, which its worker holds it to (runs/runners/spend.py).

The spend is what `usage` counts (the transcripts' assistant turns, priced by the config), over
a budget's window: today (UTC) for `day`, the session's transcript for `session`, nothing yet
for `run`. It is read from the index's per-day sums, which catch up one stat per transcript on
a warm index (docs/budgets.md; bench `send-budget`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sessiontool.clock import now_ms
from sessiontool.context import Context
from sessiontool.errors import OverBudgetError, UsageError
from sessiontool.protocol import MIRROR_MODEL, MIRROR_PROVIDER
from sessiontool.reports import catalog
from sessiontool.state import search_index as si
from sessiontool.state.budget_config import Budget, same_model
from sessiontool.state.prices import Prices, lookup, prices_of

_NO_MIRRORS = f" AND NOT (provider IS '{MIRROR_PROVIDER}' AND model IS '{MIRROR_MODEL}')"
_SUMS = "sum(input), sum(output), sum(cache_read), sum(cache_write), sum(cost)"


@dataclass(frozen=True)
class Turns:
    """Summed turns: (agent id, "provider/model", in, out, cache read, cache write, recorded
    cost) rows of one window."""

    rows: list[tuple[str, str, int, int, int, int, float]]

    def cost(self, prices: Prices, agent: str | None, model: str | None) -> float:
        total = 0.0
        for a, name, i, o, cr, cw, recorded in self.rows:
            if agent is not None and a != agent:
                continue
            if model is not None and not same_model(model, name):
                continue
            provider, _, m = name.partition("/") if "/" in name else ("", "", name)
            price = lookup(prices, provider, m)
            total += price.of(i, o, cr, cw) if price is not None else float(recorded or 0.0)
        return total


def _name(provider: str, model: str) -> str:
    return f"{provider}/{model}" if provider else model


def _today(idx: si.Index, found: catalog.Indexed) -> Turns:
    """Today's turns (UTC), every session's that `found` covers."""
    scope = " AND file_id IN (SELECT id FROM temp.scope)" if found.scoped else ""
    got = idx.conn.execute(
        f"SELECT file_id, provider, model, {_SUMS} FROM days WHERE day = ?{scope}{_NO_MIRRORS} "
        "GROUP BY file_id, provider, model",
        (now_ms() // si.DAY_MS,),
    ).fetchall()
    refs = found.refs({r[0] for r in got})
    return Turns([(refs[f].agent_id, _name(p, m), *sums) for f, p, m, *sums in got if f in refs])


def _session(idx: si.Index, agent_id: str, paths: list[str]) -> Turns:
    """Every turn of a session's transcript (the files at `paths`, as the index names them)."""
    got = idx.conn.execute(
        f"SELECT provider, model, {_SUMS} FROM days WHERE file_id IN "
        "(SELECT id FROM files WHERE path IN (SELECT value FROM json_each(?)))"
        f"{_NO_MIRRORS} GROUP BY provider, model",
        (json.dumps(paths),),
    ).fetchall()
    return Turns([(agent_id, _name(p, m), *sums) for p, m, *sums in got])


def _session_paths(ctx: Context, agent_id: str, entry: Mapping[str, Any] | None) -> list[str]:
    """What the index calls a session's transcript: its JSONL file, or the virtual transcript
    of a SQLite store's session."""
    from sessiontool.state import detect
    from sessiontool.state.paths import is_plain_name, transcript_path_for

    sid = entry.get("sessionId") if entry else None
    if not isinstance(sid, str) or not is_plain_name(sid):
        return []
    assert entry is not None
    sdir = ctx.paths.sessions_dir(agent_id)
    session_file = entry.get("sessionFile")
    path = transcript_path_for(sdir, sid, session_file if isinstance(session_file, str) else None)
    info = detect.detect(ctx.paths, agent_id)
    return [str(path), f"{info.location}{si.VIRTUAL_SEP}{sid}"]


@dataclass(frozen=True)
class Spend:
    """What the budgets of one new run read: today's turns and its session's."""

    today: Turns
    session: Turns


def read_spend(
    ctx: Context, agent_id: str, entry: Mapping[str, Any] | None, windows: set[str]
) -> Spend:
    """Today's and the session's turns from the index (each only when a budget needs it)."""
    from sessiontool.sessions.reading import read_scope

    empty = Turns([])

    def run(idx: si.Index) -> Spend:
        today = session = empty
        if "day" in windows:
            agents = catalog.agent_ids(ctx, True)
            found = catalog.indexed(ctx, idx, catalog.Wanted(agents, False, False))
            si.left_out(idx, False)
            today = _today(idx, found)
            if "session" in windows and entry is not None:
                session = _session(idx, agent_id, _session_paths(ctx, agent_id, entry))
        elif "session" in windows and entry is not None:
            refs = [
                r
                for r in catalog.live_sessions(ctx, [agent_id], idx)
                if r.session_id == entry.get("sessionId")
            ]
            catalog.indexed(ctx, idx, catalog.Wanted([agent_id], False, False, refs))
            session = _session(idx, agent_id, _session_paths(ctx, agent_id, entry))
        return Spend(today, session)

    if not windows & {"day", "session"}:
        return Spend(empty, empty)
    with read_scope():
        return si.using_index(ctx.paths.tool_dir, run)


def window_words(b: Budget, key: str | None) -> str:
    if b.window == "day":
        from datetime import UTC, datetime

        return "today (" + datetime.now(UTC).strftime("%Y-%m-%d") + " UTC)"
    if b.window == "session":
        return f"in session {key}" if key else "in this session"
    return "in one run"


def fill(b: Budget, spend: Spend, prices: Prices, agent_id: str | None) -> float:
    """What a budget's window has spent (`agent_id`: the run's agent, for a session budget)."""
    if b.window == "day":
        return spend.today.cost(prices, b.agent, b.model)
    if b.window == "session":
        return spend.session.cost(prices, None, b.model)
    return 0.0


class BudgetGate:
    """The context.SpendGate of a command: the config's budgets (unless `force`) and
    `--max-cost`."""

    def __init__(self, ctx: Context, max_cost: float | None = None, force: bool = False) -> None:
        import math

        if max_cost is not None and (not math.isfinite(max_cost) or max_cost < 0):
            raise UsageError("--max-cost must be a non-negative amount in USD")
        self.ctx = ctx
        self.max_cost = max_cost
        self.budgets = () if force else ctx.config.budgets

    def allow(
        self, agent_id: str, key: str, entry: Mapping[str, Any] | None, model: str | None
    ) -> dict[str, Any] | None:
        """The new run's cost limit (None: no limit), or OverBudgetError (exit 6)."""
        ctx = self.ctx
        model = model or _run_model(ctx, agent_id, key, entry)
        over = [b for b in self.budgets if b.applies(agent_id, model)]
        limit: dict[str, Any] | None = None
        if self.max_cost is not None:
            limit = {"usd": self.max_cost, "limit": self.max_cost, "window": "run"}
        if not over:
            return limit
        prices = prices_of(ctx.config.providers)
        spend = read_spend(ctx, agent_id, entry, {b.window for b in over})
        for b in over:
            spent = round(fill(b, spend, prices, agent_id), 6)
            shown = ctx.display(key)
            if spent >= b.limit:
                raise OverBudgetError(
                    f"budget {b.name}: {spent:.4f} USD spent {window_words(b, shown)}, at or "
                    f"over its limit of {b.limit:g} USD; the run was not started",
                    hint="--force starts it anyway; or raise the limit in sessiontool.budgets",
                    extra={"budget": b.name, "window": b.window, "limit": b.limit, "spend": spent},
                )
            room = round(b.limit - spent, 6)
            if limit is None or room < limit["usd"]:
                limit = {"usd": room, "budget": b.name, "limit": b.limit, "window": b.window}
                limit["spend"] = spent
        return limit


def _run_model(
    ctx: Context, agent_id: str, key: str, entry: Mapping[str, Any] | None
) -> str | None:
    """The model a run of this session will use, as its worker resolves it."""
    from pathlib import Path

    from sessiontool.runs.execute import Session, resolve_model

    provider, model = resolve_model(
        ctx.config, Session(agent_id, key, dict(entry or {}), "", Path())
    )
    return f"{provider}/{model}" if provider else model


def fills(ctx: Context) -> list[dict[str, Any]]:
    """Each `day` and `run` budget with what it has spent today (top, doctor): name, window,
    limit, spend (None: a session or run budget, spent per session or run), fill (0-1+)."""
    budgets = ctx.config.budgets
    prices = prices_of(ctx.config.providers)
    spend = read_spend(ctx, ctx.agent_id, None, {b.window for b in budgets})
    out = []
    for b in budgets:
        spent = round(fill(b, spend, prices, None), 6) if b.window == "day" else None
        row: dict[str, Any] = {"budget": b.name, "window": b.window, "limit": b.limit}
        row["spend"] = spent
        row["fill"] = (spent / b.limit if b.limit else 1.0) if spent is not None else None
        out.append(row)
    return out
