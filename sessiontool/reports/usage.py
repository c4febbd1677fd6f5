"""`usage`: tokens, turns, runs and cost, summed from the transcripts' assistant messages.

The transcripts are the source of truth (OpenClaw writes each assistant message's `usage`), so
sessions another program ran count too. Per-message usage is kept in the search index and
caught up the same way, so a report over a year of transcripts reads only what changed.
Cost uses the config's prices (`models.providers.<p>.models[].cost`, USD per million tokens,
OpenClaw's field), read at report time; a model without a configured price falls back to the
cost the transcript recorded, and is listed under `unpriced` when it has neither."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sessiontool.context import Context
from sessiontool.errors import UsageError
from sessiontool.index import catalog
from sessiontool.index import sync as si
from sessiontool.index.db import each_turns
from sessiontool.protocol import MIRROR_MODEL, MIRROR_PROVIDER
from sessiontool.sessions.reading import read_scope
from sessiontool.state.prices import Price, prices_of
from sessiontool.state.prices import lookup as _lookup

if TYPE_CHECKING:  # for types only
    from typing import NotRequired, TypedDict

    class UsageResult(TypedDict):
        """What `usage` returns; `--json` writes it as is (rows and total: COUNTERS, cost)."""

        by: str
        since: int | None
        until: int | None
        currency: str
        rows: list[dict[str, Any]]
        total: dict[str, Any]
        unpriced: NotRequired[list[str]]
        budget: NotRequired[float]
        overBudget: NotRequired[bool]


GROUPS = ("session", "agent", "model", "day", "label")
COUNTERS = ("input", "output", "cacheRead", "cacheWrite", "turns", "runs")


def configured_prices(ctx: Context) -> dict[tuple[str, str], Price]:
    """(provider, model id) → price, from every provider's models that give a usable `cost`."""
    return prices_of(ctx.config.providers)


def cost_function(ctx: Context) -> Callable[[str, str, int, int, int, int, float | None], float]:
    """(provider, model, in, out, cache read, cache write, recorded cost) → USD, priced as this
    report prices a turn, for other reports of the same transcripts (the HTML pages)."""
    prices = configured_prices(ctx)

    def cost(
        provider: str, model: str, i: int, o: int, cr: int, cw: int, recorded: float | None
    ) -> float:
        price = _lookup(prices, provider, model)
        return price.of(i, o, cr, cw) if price is not None else float(recorded or 0.0)

    return cost


def _day_name(day_no: int) -> str:
    from datetime import UTC, datetime, timedelta

    return (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(days=day_no)).strftime("%Y-%m-%d")


_SUMS = (
    "sum(turns), sum(runs), sum(input), sum(output), sum(cache_read), sum(cache_write), "
    "sum(cost), sum(n_cost)"
)
# Groups whose name does not depend on the session (their rows need no file id).
_NO_REF = ("day", "model")
# A delivery mirror (protocol.is_delivery_mirror) is no turn: the reply it posted is counted.
_NO_MIRRORS = f" AND NOT (provider IS '{MIRROR_PROVIDER}' AND model IS '{MIRROR_MODEL}')"


def _sums(
    idx: si.Index, by: str, since_ms: int | None, until_ms: int | None, scoped: bool
) -> list[tuple[Any, ...]]:
    """(file_id, day number, provider, model, turns, runs, in, out, cache read, cache write,
    recorded cost, recorded-cost count) rows. Whole days come from the per-day summaries;
    only the partial days at a --since/--until boundary are summed from single turns. Rows
    may repeat a (file, day, model): the caller adds them up."""
    day = by == "day"
    scope = " AND file_id IN (SELECT id FROM temp.scope)" if scoped else ""
    scope += _NO_MIRRORS
    lo = -(-since_ms // si.DAY_MS) if since_ms is not None else None  # first whole day
    hi = until_ms // si.DAY_MS if until_ms is not None else None  # first day not whole
    out: list[tuple[Any, ...]] = []
    conn = idx.conn
    if lo is None or hi is None or lo < hi:
        where, args = "1" + scope, []
        if lo is not None:
            where += " AND day >= ?"
            args.append(lo)
        if hi is not None:
            where += " AND day < ?"
            args.append(hi)
        sql = (
            f"SELECT file_id, {'day' if day else '0'} AS d, provider, model, {_SUMS} "
            f"FROM days WHERE {where} GROUP BY file_id, d, provider, model"
        )
        if by in _NO_REF:
            # Summed over the files here, not per file in Python (flat in the number of
            # sessions); a model is unpriced when one file's row has tokens and no cost.
            sql = (
                f"SELECT NULL, {'day' if day else '0'} AS d, provider, model, {_SUMS.removesuffix(', sum(n_cost)')}, "
                "CASE WHEN max(n_cost = 0 AND (input OR output OR cache_read OR cache_write)) "
                f"THEN 0 ELSE 1 END FROM days WHERE {where} GROUP BY d, provider, model"
            )
        out += conn.execute(sql, args).fetchall()
        parts: list[tuple[int | None, int | None]] = []
        if since_ms is not None and lo is not None:
            parts.append((since_ms, lo * si.DAY_MS if hi is None else min(lo, hi) * si.DAY_MS))
        if until_ms is not None and hi is not None:
            parts.append((hi * si.DAY_MS if lo is None else max(hi, lo) * si.DAY_MS, until_ms))
    else:  # --since and --until within one day
        parts = [(since_ms, until_ms)]
    for a, b in parts:
        if a is None or b is None or a >= b:
            continue
        out += _partial(conn, day, a, until_ms=b, scope=scope)
    return out


def _partial(
    conn: Any, day: bool, since_ms: int, until_ms: int, scope: str
) -> list[tuple[Any, ...]]:
    """The rows of the turns at `since_ms` or later and before `until_ms` (within a day or
    two: a --since/--until boundary), summed from the single turns their days keep."""
    sums: dict[tuple[int, int, str, str], list[Any]] = {}
    for file_id, provider, model, each in conn.execute(
        f"SELECT file_id, provider, model, each FROM days WHERE day >= ? AND day <= ?{scope}",
        (since_ms // si.DAY_MS, (until_ms - 1) // si.DAY_MS),
    ):
        for ts, i, o, cr, cw, cost, run_start, *_tools in each_turns(each):
            if not since_ms <= ts < until_ms:
                continue
            key = (file_id, ts // si.DAY_MS if day else 0, provider, model)
            s = sums.get(key)
            if s is None:
                s = sums[key] = [0, 0, 0, 0, 0, 0, None, 0]
            s[0] += 1
            s[1] += run_start
            s[2] += i
            s[3] += o
            s[4] += cr
            s[5] += cw
            if cost is not None:
                s[6] = cost if s[6] is None else s[6] + cost
                s[7] += 1
    return [(*k, *v) for k, v in sums.items()]


@dataclass(frozen=True)
class Asked:
    """What a `usage` report sums: grouped `by`, over the turns from `since_ms` to before
    `until_ms` (epoch ms, None: open), of every agent's sessions or the requester agent's."""

    by: str
    since_ms: int | None
    until_ms: int | None
    all_agents: bool


def _empty() -> dict[str, Any]:
    return {**dict.fromkeys(COUNTERS, 0), "cost": 0.0}


def _read(
    ctx: Context, idx: si.Index, asked: Asked, progress: si.Progress | None
) -> tuple[list[tuple[Any, ...]], dict[int, catalog.SessionRef]]:
    """The sum rows and the sessions of their file ids (none when `by` needs no session)."""
    agents = catalog.agent_ids(ctx, asked.all_agents)
    found = catalog.indexed(ctx, idx, catalog.Wanted(agents, True, False), progress)
    si.left_out(idx, False)
    rows = _sums(idx, asked.by, asked.since_ms, until_ms=asked.until_ms, scoped=found.scoped)
    if asked.by in _NO_REF:
        return rows, {}
    refs = found.refs({r[0] for r in rows})
    return [r for r in rows if r[0] in refs], refs


def usage(
    ctx: Context,
    *,
    by: str = "session",
    since_ms: int | None = None,
    until_ms: int | None = None,
    budget: float | None = None,
    all_agents: bool = False,
    progress: si.Progress | None = None,
) -> UsageResult:
    """The requester agent's usage (every agent's with `all_agents`), as `list` and `search`
    scope their rows: the read commands agree on whose sessions they read. Reads the turns
    alone (no full-text index is built for it); `progress` hears how a catch-up goes."""
    if by not in GROUPS:
        raise UsageError(f"unknown --by {by!r} (valid: {', '.join(GROUPS)})")
    if budget is not None and (not math.isfinite(budget) or budget < 0):
        raise UsageError("--budget must be a non-negative amount in USD")
    since_ms, until_ms = si.clamp_ms(since_ms), si.clamp_ms(until_ms)

    def run(idx: si.Index) -> tuple[list[tuple[Any, ...]], dict[int, catalog.SessionRef]]:
        return _read(ctx, idx, Asked(by, since_ms, until_ms, all_agents), progress)

    with read_scope():
        rows, by_id = si.using_index(ctx.paths.tool_dir, run)
    prices = configured_prices(ctx)
    groups: dict[str, dict[str, Any]] = {}
    unpriced: set[str] = set()
    for file_id, day_no, provider, model, turns, runs, i, o, cr, cw, recorded, n_rec in rows:
        model_name = f"{provider}/{model}" if provider else (model or "(unknown)")
        price = _lookup(prices, provider, model)
        if price is not None:
            cost = price.of(i, o, cr, cw)
        else:
            cost = float(recorded or 0.0)
            if not n_rec and (i or o or cr or cw):
                unpriced.add(model_name)
        if by == "session":
            ref = by_id[file_id]
            name = ref.display_key(ctx) or f"{ref.session_id} (archived)"
        elif by == "agent":
            name = by_id[file_id].agent_id
        elif by == "model":
            name = model_name
        elif by == "day":
            name = _day_name(day_no)
        else:
            name = by_id[file_id].label or "(no label)"
        g = groups.setdefault(name, _empty())
        for k, v in zip(COUNTERS, (i, o, cr, cw, turns, runs), strict=True):
            g[k] += int(v or 0)
        g["cost"] += cost
    total = _empty()
    out_rows = []
    for name, g in groups.items():
        for k in (*COUNTERS, "cost"):
            total[k] += g[k]
        out_rows.append({by: name, **g})
    if by == "day":
        out_rows.sort(key=lambda r: r["day"])
    else:
        out_rows.sort(key=lambda r: (-r["cost"], -(r["input"] + r["output"]), r[by]))
    for r in (*out_rows, total):
        r["cost"] = round(r["cost"], 6)
    result: UsageResult = {
        "by": by,
        "since": since_ms,
        "until": until_ms,
        "currency": "USD",
        "rows": out_rows,
        "total": total,
    }
    if unpriced:
        result["unpriced"] = sorted(unpriced)
    if budget is not None:
        result["budget"] = budget
        result["overBudget"] = total["cost"] > budget
    return result
