"""`export`: an OpenClaw SQLite-era store as a sessions.json + JSONL state dir."""

from __future__ import annotations

import typer

from sessiontool.cli import render
from sessiontool.cli.app import app, command, get_ctx, want_json


@app.command("export")
@command
def export_cmd(
    to: str = typer.Option(..., "--to", help="The state dir to write (created).", metavar="DIR"),
    agent: str | None = typer.Option(
        None, "--agent", help="Only this agent (default: the current one).", metavar="ID"
    ),
    all_agents: bool = typer.Option(False, "--all-agents", help="Every agent."),
    json_: bool = typer.Option(False, "--json", help="JSON output."),
) -> None:
    """Write sessions as sessions.json + JSONL transcripts in DIR (re-runs add what changed).

    For archiving and offline work on an OpenClaw 2026.8+ (SQLite) state dir; the export is read
    by sessiontool and by Clawdbot-era tools. OpenClaw's `openclaw doctor --fix` imports such a
    store back."""
    from sessiontool.errors import UsageError
    from sessiontool.openclaw.export import export

    if agent is not None and all_agents:
        raise UsageError("give --agent or --all-agents, not both")
    result = export(get_ctx(), to, agent=agent, all_agents=all_agents)
    if want_json(json_):
        render.emit_json(result)
    else:
        render.write_out(
            f"exported {result['sessions']} session(s) of {result['agents']} agent(s) to "
            f"{result['to']}: {result['written']} written, {result['unchanged']} unchanged\n"
        )
