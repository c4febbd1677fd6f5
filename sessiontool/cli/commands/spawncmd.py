"""`spawn`: a sub-agent run in a new isolated session, announced back when it ends."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

import typer

from sessiontool.cli import output, render
from sessiontool.cli.app import app, check_writable, command, gated, get_ctx, read_stdin, want_json
from sessiontool.cli.completers import choices, complete_agent_ids

# OpenClaw's thinking levels (runs/spawnopts.THINKING_LEVELS, spelled here for the completion
# without importing the run engine at start-up; a test keeps the two equal).
THINKING_LEVELS = ("off", "minimal", "low", "medium", "high", "xhigh", "adaptive", "max", "ultra")


# The command's flags, declared once: what a user types and reads in `--help`, with what Tab
# offers. Their own job, apart from the command's (what they become: a SpawnOptions, the
# request's fields, the gate and the output), so that the signature reads as the list it is.
Task = Annotated[str, typer.Argument(help="The task for the sub-agent ('-' reads stdin).")]
Label = Annotated[str | None, typer.Option("--label", help="A label for the child session.")]
AgentId = Annotated[
    str | None,
    typer.Option(
        "--agent-id", help="Spawn under this agent (allowlist).", autocompletion=complete_agent_ids
    ),
]
Model = Annotated[str | None, typer.Option("--model", help="Model override for the child.")]
RunTimeout = Annotated[
    str | None, typer.Option("--run-timeout", help="Kill the run after this long (600, 10m).")
]
Cleanup = Annotated[
    str,
    typer.Option(
        "--cleanup",
        help="keep or delete the child after the announce.",
        autocompletion=choices("keep", "delete"),
    ),
]
Thinking = Annotated[
    str | None,
    typer.Option(
        "--thinking",
        help="The child's thinking level (off minimal low medium high xhigh adaptive max ultra).",
        autocompletion=choices(*THINKING_LEVELS),
    ),
]
Cwd = Annotated[str | None, typer.Option("--cwd", help="The agent process's directory.")]
SpawnContext = Annotated[
    str,
    typer.Option(
        "--context",
        help="isolated, or fork: the requester's messages first.",
        autocompletion=choices("isolated", "fork"),
    ),
]
Attach = Annotated[list[str], typer.Option("--attach", help="A file (repeatable).", metavar="FILE")]
AttachAs = Annotated[
    str | None,
    typer.Option(
        "--attach-as",
        help="Where the child should see the attachments (OpenClaw's attachAs mountPath hint).",
        metavar="NAME",
    ),
]
Mode = Annotated[
    str,
    typer.Option(
        "--mode",
        help="run (one-shot) or session (kept, never swept).",
        autocompletion=choices("run", "session"),
    ),
]
TaskName = Annotated[str | None, typer.Option("--task-name", help="A stable alias.")]
QuietCompletion = Annotated[
    bool, typer.Option("--quiet-completion", help="Announce nothing when the child ends.")
]
CompletionTarget = Annotated[
    str | None,
    typer.Option(
        "--completion-target",
        help="parent: the result into the requester's transcript only, no channel delivery.",
        autocompletion=choices("parent"),
    ),
]
Sandbox = Annotated[
    str,
    typer.Option(
        "--sandbox",
        help="inherit, or require: the child must be sandboxed.",
        autocompletion=choices("inherit", "require"),
    ),
]
MaxCost = Annotated[
    float | None,
    typer.Option("--max-cost", help="Stop the run once it has spent USD.", metavar="USD"),
]
Force = Annotated[
    bool, typer.Option("--force", help="Start even when a budget is spent (sessiontool.budgets).")
]
Quiet = Annotated[bool, typer.Option("-q", "--quiet", help="The run id only.")]
Json = Annotated[bool, typer.Option("--json", help="JSON output.")]


@app.command("spawn")
@command
def spawn_cmd(
    task: Task,
    label: Label = None,
    agent_id: AgentId = None,
    model: Model = None,
    run_timeout: RunTimeout = None,
    cleanup: Cleanup = "keep",
    thinking: Thinking = None,
    cwd: Cwd = None,
    context: SpawnContext = "isolated",
    attach: Attach = [],  # noqa: B006 - Typer copies a repeatable option's default, never mutated
    attach_as: AttachAs = None,
    mode: Mode = "run",
    task_name: TaskName = None,
    quiet_completion: QuietCompletion = False,
    completion_target: CompletionTarget = None,
    sandbox: Sandbox = "inherit",
    max_cost: MaxCost = None,
    force: Force = False,
    quiet: Quiet = False,
    json_: Json = False,
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
