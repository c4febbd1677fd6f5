"""`spawn`: a sub-agent run in a new isolated session, announced back when it ends."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import typer

from sessiontool.cli import output, render
from sessiontool.cli.app import app, check_writable, command, get_ctx, read_stdin, want_json
from sessiontool.cli.completers import choices, complete_agent_ids


@app.command("spawn")
@command
def spawn_cmd(
    task: str = typer.Argument(..., help="The task for the sub-agent ('-' reads stdin)."),
    label: str | None = typer.Option(None, "--label", help="A label for the child session."),
    agent_id: str | None = typer.Option(
        None,
        "--agent-id",
        help="Spawn under this agent (allowlist).",
        autocompletion=complete_agent_ids,
    ),
    model: str | None = typer.Option(None, "--model", help="Model override for the child."),
    run_timeout: str | None = typer.Option(
        None, "--run-timeout", help="Kill the run after this long (600, 10m)."
    ),
    cleanup: str = typer.Option(
        "keep",
        "--cleanup",
        help="keep or delete the child after the announce.",
        autocompletion=choices("keep", "delete"),
    ),
    max_cost: float | None = typer.Option(
        None, "--max-cost", help="Stop the run once it has spent USD.", metavar="USD"
    ),
    force: bool = typer.Option(
        False, "--force", help="Start even when a budget is spent (sessiontool.budgets)."
    ),
    quiet: bool = typer.Option(False, "-q", "--quiet", help="The run id only."),
    json_: bool = typer.Option(False, "--json", help="JSON output."),
) -> None:
    """Start a sub-agent run; returns at once with its run id and child session key.

    A --label already used by another session of that agent is refused (exit 2); a spent
    budget (sessiontool.budgets) with exit 6, unless --force."""

    from sessiontool.durations import parse_duration
    from sessiontool.reports.budgets import BudgetGate
    from sessiontool.runs.submit import spawn

    if task == "-":
        task = read_stdin("the task")
    timeout_s = parse_duration(run_timeout, option="--run-timeout") if run_timeout else None
    ctx = get_ctx()
    check_writable(ctx)
    ctx = ctx.with_gate(BudgetGate(ctx, max_cost, force))
    result = spawn(
        ctx,
        task,
        label=label,
        agent_id=agent_id,
        model=model,
        run_timeout=timeout_s,
        cleanup=cleanup,
    )
    view = output.View(result, text=lambda r: _spawned(r, quiet))
    output.show(view, output.look(ctx.options), as_json=want_json(json_))


def _spawned(result: Mapping[str, Any], quiet: bool) -> str:
    if quiet:
        return f"{result['runId']}\n"
    return f"{result['runId']}\t{render.esc(result['childSessionKey'])}\n"
