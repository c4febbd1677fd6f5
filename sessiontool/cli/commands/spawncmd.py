"""`spawn`: a sub-agent run in a new isolated session, announced back when it ends."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import typer

from sessiontool.cli import output, render
from sessiontool.cli.app import app, check_writable, command, gated, get_ctx, read_stdin, want_json
from sessiontool.cli.completers import choices, complete_agent_ids

# OpenClaw's thinking levels (runs/spawnopts.THINKING_LEVELS, spelled here for the completion
# without importing the run engine at start-up; a test keeps the two equal).
THINKING_LEVELS = ("off", "minimal", "low", "medium", "high", "xhigh", "adaptive", "max", "ultra")


_CONTEXTS: dict[str, Any] = {"autocompletion": choices("isolated", "fork")}
_MODES: dict[str, Any] = {"autocompletion": choices("run", "session")}
_SANDBOX: dict[str, Any] = {"autocompletion": choices("inherit", "require")}


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
    thinking: str | None = typer.Option(
        None,
        "--thinking",
        help="The child's thinking level (off minimal low medium high xhigh adaptive max ultra).",
        autocompletion=choices(*THINKING_LEVELS),
    ),
    cwd: str | None = typer.Option(None, "--cwd", help="The agent process's directory."),
    context: str = typer.Option(
        "isolated",
        "--context",
        help="isolated, or fork: the requester's messages first.",
        **_CONTEXTS,
    ),
    attach: list[str] = typer.Option([], "--attach", help="A file (repeatable).", metavar="FILE"),
    attach_as: str | None = typer.Option(
        None,
        "--attach-as",
        help="Where the child should see the attachments (OpenClaw's attachAs mountPath hint).",
        metavar="NAME",
    ),
    mode: str = typer.Option(
        "run", "--mode", help="run (one-shot) or session (kept, never swept).", **_MODES
    ),
    task_name: str | None = typer.Option(None, "--task-name", help="A stable alias."),
    quiet_completion: bool = typer.Option(
        False, "--quiet-completion", help="Announce nothing when the child ends."
    ),
    completion_target: str | None = typer.Option(
        None,
        "--completion-target",
        help="parent: the result into the requester's transcript only, no channel delivery.",
        autocompletion=choices("parent"),
    ),
    sandbox: str = typer.Option(
        "inherit", "--sandbox", help="inherit, or require: the child must be sandboxed.", **_SANDBOX
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

    Refused: a --label another session of that agent has, or a --cwd that is no directory (exit
    2); a spawn past agents.defaults.subagents.maxSpawnDepth (exit 4, OpenClaw's words; 1 on
    sessiontool's store, 5 on OpenClaw's); a spent budget unless --force (exit 6)."""

    from sessiontool.durations import parse_duration
    from sessiontool.runs.attachments import read_files
    from sessiontool.runs.spawnopts import SpawnOptions
    from sessiontool.runs.submit import spawn

    if task == "-":
        task = read_stdin("the task")
    options = SpawnOptions(
        run_timeout=parse_duration(run_timeout, option="--run-timeout") if run_timeout else None,
        cleanup=cleanup,
        thinking=thinking,
        cwd=cwd,
        context=context,
        mode=mode,
        task_name=task_name,
        expects_completion=not quiet_completion,
        completion_target=completion_target,
        sandbox=sandbox,
        attachments=tuple(read_files(attach)),
        attach_as=attach_as,
    )
    ctx = get_ctx()
    check_writable(ctx)
    ctx = gated(ctx, max_cost, force)
    result = spawn(ctx, task, label=label, agent_id=agent_id, model=model, options=options)
    view = output.View(result, text=lambda r: _spawned(r, quiet))
    output.show(view, output.look(ctx.options), as_json=want_json(json_))


def _spawned(result: Mapping[str, Any], quiet: bool) -> str:
    if quiet:
        return f"{result['runId']}\n"
    return f"{result['runId']}\t{render.esc(result['childSessionKey'])}\n"
