"""The `mcp` server's read-only report tools, `usage` and `diff`: the reports
(reports/usage.py, usage_steps.py, diff.py) sit beside the MCP server, not under the run
engine's tool table, so the `mcp` command registers them (runs/tools.py
`register_transport_tool`); a model's runner never offers them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sessiontool.context import Context
from sessiontool.runs.tools import CallOptions, ToolDef, register_transport_tool

GROUPS = ["session", "agent", "model", "day", "label", "tool", "turn"]


def _usage(ctx: Context, args: Mapping[str, Any], opts: CallOptions) -> dict[str, Any]:
    from sessiontool.durations import parse_since

    by = str(args.get("by", "session"))
    since = parse_since(args["since"], option="since") if args.get("since") else None
    all_agents = bool(args.get("allAgents", False))
    if by == "turn":
        from sessiontool.reports.usage_steps import by_turn

        return by_turn(ctx, args.get("sessionKey"))
    if by == "tool":
        from sessiontool.reports.usage_steps import by_tool

        return by_tool(ctx, since_ms=since, all_agents=all_agents)
    from sessiontool.reports.usage import usage

    return dict(usage(ctx, by=by, since_ms=since, all_agents=all_agents))


def _diff(ctx: Context, args: Mapping[str, Any], opts: CallOptions) -> dict[str, Any]:
    from sessiontool.reports.diff import diff_runs, diff_sessions

    if args.get("runs"):
        return diff_runs(ctx, args["a"], args["b"])
    return diff_sessions(ctx, args["a"], args["b"])


USAGE = ToolDef(
    name="usage",
    title="Usage and cost",
    description=(
        "Tokens, turns, runs and cost from the transcripts, grouped by session, agent, model, "
        "day, label or tool (each model turn split among the tools it called and read), or "
        "one row per turn of a session (by: turn, with sessionKey). As `sessiontool usage "
        "--json`: {by, rows, total, currency, unpriced?}."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "by": {"type": "string", "enum": GROUPS, "description": "The grouping (session)."},
            "sessionKey": {"type": "string", "description": "With by: turn, the session."},
            "since": {"type": "string", "description": "Only turns since (30m, 2h, 1d, a date)."},
            "allAgents": {"type": "boolean", "description": "Every agent's sessions."},
        },
        "additionalProperties": False,
    },
    handler=_usage,
    read_only=True,
    idempotent=True,
    output_schema={
        "type": "object",
        "properties": {
            "by": {"type": "string"},
            "currency": {"type": "string"},
            "rows": {"type": "array", "items": {"type": "object"}},
            "total": {"type": "object"},
        },
        "required": ["by", "currency", "rows", "total"],
    },
)
DIFF = ToolDef(
    name="diff",
    title="Compare two sessions or runs",
    description=(
        "Two sessions (or two runs, runs: true) side by side: turns, tokens, cost, duration, "
        "tool calls, and the first divergence (a user message, tool call or reply). As "
        "`sessiontool diff --json`: {kind, a, b, divergence, same, sameTools}."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "a": {"type": "string", "description": "The first session key (or run id)."},
            "b": {"type": "string", "description": "The second session key (or run id)."},
            "runs": {"type": "boolean", "description": "a and b are run ids."},
        },
        "required": ["a", "b"],
        "additionalProperties": False,
    },
    handler=_diff,
    read_only=True,
    idempotent=True,
    output_schema={
        "type": "object",
        "properties": {
            "kind": {"type": "string", "enum": ["sessions", "runs"]},
            "a": {"type": "object"},
            "b": {"type": "object"},
            "divergence": {"type": ["object", "null"]},
            "same": {"type": "boolean"},
            "sameTools": {"type": "boolean"},
        },
        "required": ["kind", "a", "b", "divergence", "same", "sameTools"],
    },
)
NAMES = (USAGE.name, DIFF.name)


def register() -> None:
    for t in (USAGE, DIFF):
        register_transport_tool(t)
