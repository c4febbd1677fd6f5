"""`export`: an OpenClaw SQLite-era state dir as a sessions.json + JSONL one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import typer

from sessiontool.cli import output
from sessiontool.cli.app import app, command, get_ctx, want_json


@app.command("export")
@command
def export_cmd(
    to: str | None = typer.Option(
        None, "--to", help="The state dir to write (created).", metavar="DIR"
    ),
    html: str | None = typer.Option(
        None, "--html", help="Write a static HTML site of the sessions instead.", metavar="DIR"
    ),
    since: str | None = typer.Option(
        None, "--since", help="With --html: only sessions active since (2h, 7d or an ISO date)."
    ),
    agent: str | None = typer.Option(
        None, "--agent", help="Only this agent (default: the current one).", metavar="ID"
    ),
    all_agents: bool = typer.Option(False, "--all-agents", help="Every agent."),
    json_: bool = typer.Option(False, "--json", help="JSON output."),
) -> None:
    """Write sessions as a state dir (--to) or a static HTML site (--html); re-runs add what changed.

    For archiving and offline work on an OpenClaw 2026.8+ (SQLite) state dir; the export is read
    by sessiontool and by Clawdbot-era tools. OpenClaw's `openclaw doctor --fix` imports such a
    store back."""
    from sessiontool.errors import UsageError
    from sessiontool.operations.export import export

    if agent is not None and all_agents:
        raise UsageError("give --agent or --all-agents, not both")
    if (to is None) == (html is None):
        raise UsageError("give --to DIR (a state dir) or --html DIR (a site), one of them")
    if html is not None:
        _export_html(html, agent, all_agents, since=since, as_json=want_json(json_))
        return
    if since is not None:
        raise UsageError("--since goes with --html (--to exports every session)")
    assert to is not None
    ctx = get_ctx()
    result = export(ctx, to, agent=agent, all_agents=all_agents)
    output.show(
        output.View(result, text=_exported), output.look(ctx.options), as_json=want_json(json_)
    )


def _exported(result: Mapping[str, Any]) -> str:
    skipped = f", {result['skipped']} skipped" if result["skipped"] else ""
    return (
        f"exported {result['sessions']} session(s) of {result['agents']} agent(s) to "
        f"{result['to']}: {result['written']} written, {result['unchanged']} unchanged"
        f"{skipped}\n"
    )


def _pages(result: Mapping[str, Any]) -> str:
    return (
        f"exported {result['sessions']} session(s) as {result['pages']} page(s) to "
        f"{result['to']}: {result['written']} written, {result['unchanged']} unchanged\n"
    )


def _export_html(
    dest: str, agent: str | None, all_agents: bool, since: str | None, as_json: bool
) -> None:
    from sessiontool.cli.progress import page_progress
    from sessiontool.durations import parse_since
    from sessiontool.reports.site import SiteSpec, export_site

    since_ms = parse_since(since) if since else None
    ctx = get_ctx()
    look = output.look(ctx.options)
    with page_progress(as_json, look) as progress:  # on a terminal only: piped, nothing
        result = export_site(ctx, dest, SiteSpec(agent, all_agents, since_ms), progress)
    output.show(output.View(result, text=_pages), look, as_json=as_json)
