"""`agents` (which agent ids the requester may spawn under) and `sweep` (archive expired
sub-agents). `spawn` itself lives in `spawncmd`."""

from __future__ import annotations

from typing import Any

import typer

from .. import render
from ..app import app, command, get_ctx, want_json
from ..context import Context


def allowed_agents(ctx: Context) -> dict[str, Any]:
    """OpenClaw's agents_list result: the requester agent first, then the others it may spawn
    under, sorted. With `allowAgents: ["*"]` that is every configured agent."""
    from .. import policy

    policy.check_tool(ctx, "agents_list")
    allow_any, ids = policy.spawn_allowed_agents(ctx)
    configured = {a.id: a for a in ctx.config.agents()}
    requester = ctx.agent_id
    others = set(configured) if allow_any else set(ids)
    others.discard(requester)
    agents: list[dict[str, Any]] = []
    for agent_id in [requester, *sorted(others)]:
        item: dict[str, Any] = {"id": agent_id}
        conf = configured.get(agent_id)
        if conf is not None and conf.name:
            item["name"] = conf.name
        item["configured"] = conf is not None
        agents.append(item)
    return {"requester": requester, "allowAny": allow_any, "agents": agents}


@app.command("agents")
@command
def agents_cmd(
    quiet: bool = typer.Option(False, "-q", "--quiet", help="Ids only, without marks."),
    json_: bool = typer.Option(False, "--json", help="JSON output."),
) -> None:
    """List the agent ids this requester may spawn sub-agents under."""
    result = allowed_agents(get_ctx())
    if want_json(json_):
        render.emit_json(result)
        return
    lines = []
    for item in result["agents"]:
        if quiet:
            lines.append(item["id"])
            continue
        # Tab-separated, so `cut -f1` gives clean ids.
        marks = ["requester"] if item["id"] == result["requester"] else []
        if not item["configured"]:
            marks.append("not configured")
        cols = [item["id"], item.get("name", ""), ", ".join(marks)]
        lines.append("\t".join(cols).rstrip("\t"))
    render.write_out("".join(line + "\n" for line in lines))


@app.command("sweep")
@command
def sweep_cmd(
    dry_run: bool = typer.Option(False, "--dry-run", help="Name what would be archived; change nothing."),
    json_: bool = typer.Option(False, "--json", help="JSON output."),
) -> None:
    """Archive expired sub-agent sessions that sessiontool spawned (operator only)."""
    from .. import policy
    from ..archive import sweep

    ctx = get_ctx()
    policy.require_operator(ctx, "sweep")
    result = sweep(ctx, dry_run=dry_run)
    if want_json(json_):
        render.emit_json(result)
    else:
        render.write_out("".join(key + "\n" for key in result["archived"]))
