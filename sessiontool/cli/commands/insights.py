"""`search` and `usage`: what was said in every session, and what it cost."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import typer

from sessiontool.cli import output, render
from sessiontool.cli.app import app, command, get_ctx, want_json
from sessiontool.cli.completers import complete_keys
from sessiontool.context import Context
from sessiontool.errors import ExitCode, UsageError

ROLES = ("user", "assistant", "tool")
GROUPS = ("session", "agent", "model", "day", "label", "tool", "turn")


def _complete_roles(incomplete: str) -> list[str]:
    return [r for r in ROLES if r.startswith(incomplete)]


def _complete_groups(incomplete: str) -> list[str]:
    return [g for g in GROUPS if g.startswith(incomplete)]


def _time(value: str | None, option: str) -> int | None:
    from sessiontool.durations import parse_since

    return parse_since(value, option=option) if value else None


@app.command("search")
@command
def search_cmd(
    query: str = typer.Argument(
        ..., help='Words, "exact phrase", prefix*, AND/OR/NOT (SQLite FTS5 syntax).'
    ),
    session: str | None = typer.Option(
        None,
        "--session",
        help="Only this session (key or sessionId).",
        autocompletion=complete_keys,
    ),
    label: str | None = typer.Option(None, "--label", help="Only the session with this label."),
    all_agents: bool = typer.Option(False, "--all-agents", help="Every agent's sessions."),
    role: str | None = typer.Option(
        None,
        "--role",
        help="user, assistant or tool (tool results and tool-call arguments).",
        autocompletion=_complete_roles,
    ),
    since: str | None = typer.Option(
        None, "--since", help="Only messages since (30m, 2h, 1d or an ISO date)."
    ),
    until: str | None = typer.Option(
        None, "--until", help="Only messages before (30m, 2h, 1d or an ISO date)."
    ),
    limit: int = typer.Option(20, "--limit", help="At most N hits (max 1000)."),
    include_archived: bool = typer.Option(
        False, "--include-archived", help="Also deleted, reset and orphaned transcripts."
    ),
    fields: str | None = typer.Option(
        None,
        "--fields",
        help="Only these columns, in this order, as TSV (on a terminal too): key, sessionId, "
        "timestamp, role, snippet, label, messageId; with --json, any key of a hit.",
        metavar="F,..",
    ),
    json_: bool = typer.Option(False, "--json", help="JSON output (highlights as offsets)."),
) -> None:
    """Search every session's messages, best match first.

    Piped: TSV without a header, one hit per line: key, sessionId, timestamp, role, snippet
    (each match as [match]); --fields picks and orders them."""
    from sessiontool.cli import columns
    from sessiontool.cli.progress import build_progress
    from sessiontool.reports.search import search

    keys = columns.search_json_keys() if fields and want_json(json_) else ()
    names = columns.pick(columns.SEARCH, fields, columns.SEARCH_DEFAULT, keys) if fields else None

    if session is not None and label is not None:
        raise UsageError("give --session or --label, not both")
    ctx = get_ctx(reads=True)
    look = output.look(ctx.options)
    with build_progress(want_json(json_), look) as progress:
        result = search(
            ctx,
            query,
            session=session,
            label=label,
            all_agents=all_agents,
            role=role,
            since_ms=_time(since, "--since"),
            until_ms=_time(until, "--until"),
            limit=limit,
            include_archived=include_archived,
            progress=progress,
        )
    view = output.View(
        result,
        rows=lambda r: r["hits"],
        columns=lambda: (columns.SEARCH, columns.SEARCH_DEFAULT),
        table=render.search_rich,
        empty="No matches.",
    )
    output.show(view, look, as_json=want_json(json_), fields=names)


@app.command("usage")
@command
def usage_cmd(
    key: str | None = typer.Argument(
        None, help="With --by turn: the session (key or sessionId).", autocompletion=complete_keys
    ),
    by: str = typer.Option(
        "session",
        "--by",
        help="Group by session, agent, model, day, label, tool; or turn (of session KEY).",
        autocompletion=_complete_groups,
    ),
    since: str | None = typer.Option(
        None, "--since", help="Only messages since (30m, 2h, 1d or an ISO date)."
    ),
    until: str | None = typer.Option(
        None, "--until", help="Only messages before (30m, 2h, 1d or an ISO date)."
    ),
    budget: float | None = typer.Option(
        None, "--budget", help="Exit 6 when the period's cost is over USD.", metavar="USD"
    ),
    cost_only: bool = typer.Option(False, "--cost-only", help="Print only the total cost."),
    all_agents: bool = typer.Option(False, "--all-agents", help="Every agent's sessions."),
    json_: bool = typer.Option(False, "--json", help="JSON output."),
) -> int:
    """Tokens, turns, runs and cost from the transcripts, with a totals row.

    Piped: TSV without a header: the group (session, agent, model, day or label), input,
    output, cacheRead, cacheWrite, turns, runs, cost; the TOTAL row last. --by tool: tool,
    calls, errors, turns, input, output, cacheRead, cacheWrite, cost (each model turn split
    evenly among the tools it called and whose results it read; whole UTC days). --by turn
    KEY: turn, time, model, input, output, cacheRead, cacheWrite, cost, tools.

    Like list and search: the current agent's sessions (--agent ID picks it), every agent's
    with --all-agents."""
    from sessiontool.cli.progress import build_progress
    from sessiontool.reports.usage import usage

    as_json = want_json(json_)
    ctx = get_ctx(reads=True)
    look = output.look(ctx.options)
    if key is not None and by != "turn":
        raise UsageError("a session KEY goes with --by turn only")
    if by in ("tool", "turn"):
        return _usage_steps(
            ctx, key, by, how=(since, until, budget, all_agents, cost_only), as_json=as_json
        )
    with build_progress(as_json, look) as progress:
        result = usage(
            ctx,
            by=by,
            since_ms=_time(since, "--since"),
            until_ms=_time(until, "--until"),
            budget=budget,
            all_agents=all_agents,
            progress=progress,
        )
    if cost_only:
        cost = result["total"]["cost"]
        slim = {"cost": cost, "currency": "USD"}
        slim.update((k, result[k]) for k in ("budget", "overBudget", "unpriced") if k in result)
        output.show(output.View(slim, text=_cost_line), look, as_json=as_json)
    else:
        view = output.View(result, cells=render.usage_cells, table=render.usage_table)
        output.show(view, look, as_json=as_json)
    if result.get("unpriced") and not as_json:
        render.warning_line("no price configured for: " + ", ".join(result["unpriced"]))
    if result.get("overBudget"):
        render.err(
            f"sessiontool: over budget: cost {result['total']['cost']:.4f} USD "
            f"> {result['budget']:g} USD"
        )
        return int(ExitCode.OVER_BUDGET)
    return 0


def _cost_line(slim: Mapping[str, Any]) -> str:
    """`usage --cost-only`: the cost alone, for a script."""
    return f"{slim['cost']:.4f}\n"


def _usage_steps(
    ctx: Context, key: str | None, by: str, how: tuple[Any, ...], as_json: bool
) -> int:
    """`usage --by tool` and `usage --by turn KEY` (reports/usage_steps.py)."""
    from sessiontool.cli import render_steps
    from sessiontool.cli.progress import build_progress
    from sessiontool.reports.usage_steps import by_tool, by_turn

    since, until, budget, all_agents, cost_only = how
    if budget is not None:
        raise UsageError(f"--budget goes with the other groupings, not --by {by}")
    look = output.look(ctx.options)
    if by == "turn":
        if since or until or all_agents:
            raise UsageError("--by turn reads one session: no --since, --until or --all-agents")
        result = by_turn(ctx, key)
        view = output.View(result, cells=render_steps.turn_cells, table=render_steps.turn_table)
    else:
        with build_progress(as_json, look) as progress:
            result = by_tool(
                ctx,
                since_ms=_time(since, "--since"),
                until_ms=_time(until, "--until"),
                all_agents=all_agents,
                progress=progress,
            )
        view = output.View(result, cells=render_steps.tool_cells, table=render_steps.tool_table)
    if cost_only:
        slim = {"cost": result["total"]["cost"], "currency": "USD"}
        output.show(output.View(slim, text=_cost_line), look, as_json=as_json)
    else:
        output.show(view, look, as_json=as_json)
    if result.get("unpriced") and not as_json:
        render.warning_line("no price configured for: " + ", ".join(result["unpriced"]))
    return 0
