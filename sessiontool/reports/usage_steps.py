"""`usage --by tool` and `usage --by turn KEY`: cost per step and per tool, from the index.

`--by tool` sums the index's `tools` table (index/tool_shares.py: each model turn's tokens and
cost split evenly among the tools it called and the tools whose results it read; the rule in
docs/search-usage.md) as `--by model` sums `days`: a few rows per session, day and model.
Its --since/--until take whole UTC days (the table keeps days, not single turns).
`--by turn` reads one session's single turns (`days.each`), oldest first, with the tools each
called."""

from __future__ import annotations

from typing import Any

from sessiontool.context import Context
from sessiontool.errors import UsageError
from sessiontool.index import catalog
from sessiontool.index import sync as si
from sessiontool.index.db import each_turns
from sessiontool.protocol import MIRROR_MODEL, MIRROR_PROVIDER
from sessiontool.sessions.reading import read_scope
from sessiontool.state.prices import Prices, lookup, prices_of

_NO_MIRRORS = f" AND NOT (provider IS '{MIRROR_PROVIDER}' AND model IS '{MIRROR_MODEL}')"
TOOL_COUNTERS = ("calls", "errors", "turns", "input", "output", "cacheRead", "cacheWrite")
TURN_COUNTERS = ("input", "output", "cacheRead", "cacheWrite")


def _cost(
    prices: Prices, provider: str, model: str, tokens: tuple[Any, ...], recorded: Any
) -> tuple[float, bool]:
    """(USD, priced): the configured price, else the recorded cost (unpriced when none)."""
    price = lookup(prices, provider, model)
    if price is not None:
        return price.of(*tokens), True
    return float(recorded or 0.0), False


def _model_name(provider: str, model: str) -> str:
    return f"{provider}/{model}" if provider else (model or "(unknown)")


def _day_range(since_ms: int | None, until_ms: int | None) -> tuple[str, list[int]]:
    where, args = "", []
    if since_ms is not None:
        where += " AND day >= ?"
        args.append(since_ms // si.DAY_MS)
    if until_ms is not None:
        where += " AND day <= ?"
        args.append((until_ms - 1) // si.DAY_MS)
    return where, args


def by_tool(
    ctx: Context,
    *,
    since_ms: int | None = None,
    until_ms: int | None = None,
    all_agents: bool = False,
    progress: si.Progress | None = None,
) -> dict[str, Any]:
    """Each tool's calls, failed results, and the turns, tokens and cost attributed to it."""
    since_ms, until_ms = si.clamp_ms(since_ms), si.clamp_ms(until_ms)

    def run(idx: si.Index) -> list[tuple[Any, ...]]:
        agents = catalog.agent_ids(ctx, all_agents)
        found = catalog.indexed(ctx, idx, catalog.Wanted(agents, True, False), progress)
        si.left_out(idx, False)
        where, args = _day_range(since_ms, until_ms)
        if found.scoped:
            where += " AND file_id IN (SELECT id FROM temp.scope)"
        return idx.conn.execute(
            "SELECT tool, provider, model, sum(calls), sum(errors), sum(turns), sum(input), "
            "sum(output), sum(cache_read), sum(cache_write), sum(cost), sum(n_cost) FROM tools "
            f"WHERE 1{where}{_NO_MIRRORS} GROUP BY tool, provider, model",
            args,
        ).fetchall()

    with read_scope():
        got = si.using_index(ctx.paths.tool_dir, run)
    prices = prices_of(ctx.config.providers)
    groups: dict[str, dict[str, Any]] = {}
    unpriced: set[str] = set()
    for tool, provider, model, calls, errors, turns, i, o, cr, cw, recorded, n_rec in got:
        cost, priced = _cost(prices, provider, model, tokens=(i, o, cr, cw), recorded=recorded)
        if not priced and not n_rec and (i or o or cr or cw):
            unpriced.add(_model_name(provider, model))
        g = groups.setdefault(tool, {**dict.fromkeys(TOOL_COUNTERS, 0), "cost": 0.0})
        for k, v in zip(TOOL_COUNTERS, (calls, errors, turns, i, o, cr, cw), strict=True):
            g[k] += v or 0
        g["cost"] += cost
    return _finish("tool", groups, since_ms, until_ms=until_ms, unpriced=unpriced)


def _finish(
    by: str,
    groups: dict[str, dict[str, Any]],
    since_ms: int | None,
    until_ms: int | None,
    unpriced: set[str],
) -> dict[str, Any]:
    total: dict[str, Any] = {**dict.fromkeys(TOOL_COUNTERS, 0), "cost": 0.0}
    rows = []
    for name, g in groups.items():
        for k in (*TOOL_COUNTERS, "cost"):
            total[k] += g[k]
        rows.append({by: name, **g})
    for r in (*rows, total):
        for k in ("input", "output", "cacheRead", "cacheWrite", "calls", "errors"):
            r[k] = round(r[k])
        r["turns"] = round(r["turns"], 2)
        r["cost"] = round(r["cost"], 6)
    rows.sort(key=lambda r: (-r["cost"], -(r["input"] + r["output"]), r[by]))
    out: dict[str, Any] = {
        "by": by,
        "since": since_ms,
        "until": until_ms,
        "currency": "USD",
        "rows": rows,
        "total": total,
    }
    if unpriced:
        out["unpriced"] = sorted(unpriced)
    return out


def _session_ref(ctx: Context, idx: si.Index, key: str) -> catalog.SessionRef:
    from sessiontool.errors import NotFoundError
    from sessiontool.sessions.resolve import resolve

    r = resolve(ctx, key)
    sid = r.entry.get("sessionId") if r.entry else None
    for ref in catalog.live_sessions(ctx, [r.agent_id], idx):
        if ref.key == r.key and ref.session_id == sid:
            return ref
    raise NotFoundError(f"session {key} has no transcript to read")


def turns_of(ctx: Context, key: str) -> tuple[str, list[list[Any]]]:
    """A session's display key and its turns: [ts, provider, model, in, out, cr, cw, recorded
    cost, tools called], oldest first."""

    def run(idx: si.Index) -> tuple[str, list[list[Any]]]:
        ref = _session_ref(ctx, idx, key)
        found = catalog.indexed(ctx, idx, catalog.Wanted([ref.agent_id], False, False, [ref]))
        si.left_out(idx, True)
        ids = [
            int(r[0])
            for r in idx.conn.execute("SELECT id FROM files WHERE path = ?", (str(ref.path),))
            if found.ref(int(r[0])) is not None
        ]
        out: list[list[Any]] = []
        for file_id in ids:
            for provider, model, each in idx.conn.execute(
                f"SELECT provider, model, each FROM days WHERE file_id = ?{_NO_MIRRORS}",
                (file_id,),
            ):
                for ts, i, o, cr, cw, cost, _start, *rest in each_turns(each):
                    out.append([ts, provider, model, i, o, cr, cw, cost, rest[0] if rest else []])
        out.sort(key=lambda t: t[0])
        return ref.display_key(ctx) or ref.session_id, out

    with read_scope():
        return si.using_index(ctx.paths.tool_dir, run)


def by_turn(ctx: Context, key: str | None) -> dict[str, Any]:
    """One row per model turn of a session: its time, model, tokens, cost and the tools it
    called."""
    if not key:
        raise UsageError("--by turn needs a session: sessiontool usage --by turn KEY")
    shown, turns = turns_of(ctx, key)
    prices = prices_of(ctx.config.providers)
    rows = []
    total: dict[str, Any] = {**dict.fromkeys(TURN_COUNTERS, 0), "turns": 0, "cost": 0.0}
    unpriced: set[str] = set()
    for n, (ts, provider, model, i, o, cr, cw, recorded, tools) in enumerate(turns, 1):
        cost, priced = _cost(prices, provider, model, tokens=(i, o, cr, cw), recorded=recorded)
        if not priced and recorded is None and (i or o or cr or cw):
            unpriced.add(_model_name(provider, model))
        row = {"turn": n, "time": ts, "model": _model_name(provider, model)}
        row.update(zip(TURN_COUNTERS, (i, o, cr, cw), strict=True))
        row["cost"] = round(cost, 6)
        row["tools"] = list(tools)
        rows.append(row)
        for k in TURN_COUNTERS:
            total[k] += row[k]
        total["turns"] += 1
        total["cost"] += cost
    total["cost"] = round(total["cost"], 6)
    out: dict[str, Any] = {
        "by": "turn",
        "session": shown,
        "currency": "USD",
        "rows": rows,
        "total": total,
    }
    if unpriced:
        out["unpriced"] = sorted(unpriced)
    return out
