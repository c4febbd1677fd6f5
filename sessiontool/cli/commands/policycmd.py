"""`policy` (the per-session send override) and `deliveries` (the announce outbox): the two
operator commands about where agents' words may go."""

from __future__ import annotations

from typing import Any

import typer

from sessiontool.cli import render
from sessiontool.cli.app import app, command, get_ctx, want_json
from sessiontool.cli.commands.completers import complete_keys


def _decision_line(result: dict[str, Any]) -> str:
    line = f"{result['sessionKey']}: send {result['effective']} ({result['decidedBy']})"
    if "sendPolicy" in result:
        value = result["sendPolicy"]
        line += " — override " + ("cleared" if value is None else f"set to {value}")
    return line + "\n"


@app.command("policy")
@command
def policy_cmd(
    key: str | None = typer.Argument(
        None,
        help="Session key, bare key, 'main' or sessionId.",
        autocompletion=complete_keys,
        metavar="KEY",
    ),
    action: str | None = typer.Argument(
        None,
        help="allow, deny or inherit (also on, off); omit to show the effective policy.",
        metavar="ACTION",
    ),
    label: str | None = typer.Option(None, "--label", help="Pick the session by its label."),
    json_: bool = typer.Option(False, "--json", help="JSON output."),
) -> None:
    """Show or set a session's send policy override (operator only)."""
    from sessiontool.flow.sendpolicy import is_action, policy_status, set_send_policy

    if label is not None and key is not None and action is None and is_action(key):
        key, action = None, key  # `policy --label L deny`: the one positional is the action
    ctx = get_ctx()
    if action is None:
        result = policy_status(ctx, key, label)
    else:
        result = set_send_policy(ctx, key, label, action)
    if want_json(json_):
        render.emit_json(result)
    else:
        render.write_out(_decision_line(result))


_TSV_FIELDS = ("ts", "mode", "status", "sessionKey", "channel", "to", "text")


def _readable(rec: dict[str, Any]) -> str:
    target = " ".join(str(rec[k]) for k in ("channel", "to") if rec.get(k)) or "(no target)"
    text = str(rec.get("text") or "").replace("\n", " ")
    if len(text) > 160:
        text = text[:157] + "..."
    head = f"{rec.get('ts', '')}  {rec.get('status', '?')}  {rec.get('mode', '?')}"
    line = f"{head}  {rec.get('sessionKey', '?')} → {target}: {text}"
    if rec.get("error"):
        line += f"  [{rec['error']}]"
    return line + "\n"


@app.command("deliveries")
@command
def deliveries_cmd(
    follow: bool = typer.Option(
        False, "-f", "--follow", help="Keep printing records as they are appended."
    ),
    since: str | None = typer.Option(
        None, "--since", help="Only records since (30m, 2h, 1d or an ISO date)."
    ),
    json_: bool = typer.Option(
        False, "--json", help="JSON output (one line per record with --follow)."
    ),
) -> None:
    """Read or follow the announce outbox (operator only)."""
    from sessiontool.durations import parse_since
    from sessiontool.flow.delivery import follow_deliveries, read_deliveries
    from sessiontool.flow.policy import require_operator

    ctx = get_ctx()
    require_operator(ctx, "deliveries")
    since_ms = parse_since(since) if since is not None else None

    def shown(rec: dict[str, Any]) -> dict[str, Any]:
        key = rec.get("sessionKey")
        return {**rec, "sessionKey": ctx.display(key)} if isinstance(key, str) else rec

    as_json = want_json(json_)
    if not follow:
        records = [shown(r) for r in read_deliveries(ctx.paths, since_ms)]
        if as_json:
            render.emit_json({"count": len(records), "deliveries": records})
        elif render.is_terminal():
            if not records:
                render.err("No deliveries.")
            for rec in records:
                render.write_out(_readable(rec))
        else:
            render.write_out(render.tsv([rec.get(f) for f in _TSV_FIELDS] for rec in records))
        return
    terminal = render.is_terminal()
    for rec in follow_deliveries(ctx.paths, since_ms):
        rec = shown(rec)
        if as_json:
            render.emit_json(rec)
        elif terminal:
            render.write_out(_readable(rec))
        else:
            render.write_out(render.tsv([[rec.get(f) for f in _TSV_FIELDS]]))
