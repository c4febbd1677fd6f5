"""`agents` (which agent ids the requester may spawn under) and `sweep` (archive expired
sub-agents). `spawn` itself lives in `spawncmd`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import typer

from sessiontool.cli import output, render
from sessiontool.cli.app import app, command, get_ctx, want_json


@app.command("agents")
@command
def agents_cmd(
    quiet: bool = typer.Option(False, "-q", "--quiet", help="Ids only, without marks."),
    json_: bool = typer.Option(False, "--json", help="JSON output."),
) -> None:
    """List the agent ids this requester may spawn sub-agents under."""
    from sessiontool.flow.policy import agents_list

    ctx = get_ctx()
    view = output.View(agents_list(ctx), text=lambda r: _agent_lines(r, quiet))
    output.show(view, output.look(ctx.options), as_json=want_json(json_))


def _agent_lines(result: Mapping[str, Any], quiet: bool) -> str:
    lines = []
    for item in result["agents"]:
        if quiet:
            lines.append(render.esc(item["id"]))
            continue
        # Tab-separated, so `cut -f1` gives clean ids.
        marks = ["requester"] if item["id"] == result["requester"] else []
        if not item["configured"]:
            marks.append("not configured")
        cols = [render.esc(item["id"]), render.esc(item.get("name", "")), ", ".join(marks)]
        lines.append("\t".join(cols).rstrip("\t"))
    return "".join(line + "\n" for line in lines)


@app.command("sweep")
@command
def sweep_cmd(
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Name what would be archived; change nothing."
    ),
    quiet: bool = typer.Option(False, "-q", "--quiet", help="Print nothing (for cron)."),
    json_: bool = typer.Option(False, "--json", help="JSON output."),
) -> None:
    """Archive expired sub-agent sessions that sessiontool spawned (operator only).

    Prints one line per session (`archived KEY`, or `would archive KEY` with --dry-run) and a
    count; -q prints nothing."""
    from sessiontool.flow import policy
    from sessiontool.runs.archive import sweep

    ctx = get_ctx()
    policy.require_operator(ctx, "sweep")
    from sessiontool.sessions.resolve import all_agent_ids
    from sessiontool.state.detect import require_writable

    require_writable(ctx.paths, all_agent_ids(ctx), "sweep")
    result = sweep(ctx, dry_run=dry_run)
    view = output.View(result, text=lambda r: "" if quiet else sweep_text(r["archived"], dry_run))
    output.show(view, output.look(ctx.options), as_json=want_json(json_))


def sweep_text(archived: list[str], dry_run: bool) -> str:
    verb = "would archive" if dry_run else "archived"
    lines = [f"{verb}\t{render.esc(key)}\n" for key in archived]
    n = len(archived)
    if not n:
        lines.append("nothing to archive" + (" (dry run)" if dry_run else "") + "\n")
    else:
        plural = "s" if n != 1 else ""
        tail = " (dry run: nothing changed)" if dry_run else ""
        lines.append(f"{verb} {n} sub-agent session{plural}{tail}\n")
    return "".join(lines)
