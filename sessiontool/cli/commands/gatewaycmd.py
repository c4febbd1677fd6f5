"""`gateway show` (which OpenClaw gateway this command line talks to, and how it authenticates)
and `gateway forget URL` (drop the device token stored for a gateway)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import typer

from sessiontool.cli import output, render
from sessiontool.cli.app import G, app, command, global_options, look, want_json
from sessiontool.cli.completers import choices
from sessiontool.errors import UsageError

ACTIONS = ("show", "forget")


def _show() -> dict[str, Any]:
    from sessiontool.openclaw import gateway, target
    from sessiontool.state.paths import StatePaths, resolve_state_dir

    explicit = global_options().gateway
    base = StatePaths(resolve_state_dir(G.state_dir))
    t = target.resolve(base, explicit)
    if t is None:
        g = gateway.find(base)
        return {
            "remote": False,
            "url": g.url,
            "source": f"the state dir's config ({g.config})" if g.config else "default port",
            "reachable": g.reachable(),
            "stateDir": str(base.root),
        }
    paths = target.select(base, explicit)
    return {
        "remote": True,
        **t.to_json(),
        "reachable": gateway.find(paths).reachable(),
        "stateDir": str(paths.root),
    }


@app.command("gateway")
@command
def gateway_cmd(
    action: str = typer.Argument(..., help="show or forget.", autocompletion=choices(*ACTIONS)),
    url: str | None = typer.Argument(None, help="forget: the gateway's URL.", metavar="[URL]"),
    json_: bool = typer.Option(False, "--json", help="JSON output."),
) -> None:
    """Show which OpenClaw gateway is used, or forget a gateway's stored device token."""
    if action not in ACTIONS:
        raise UsageError(f"unknown action {action!r} (valid: {', '.join(ACTIONS)})")
    if action == "show":
        if url is not None:
            raise UsageError("gateway show takes no URL (use --gateway URL)")
        result = _show()
    else:
        if url is None:
            raise UsageError("gateway forget needs the gateway's URL")
        from sessiontool.openclaw import target
        from sessiontool.state.paths import StatePaths, resolve_state_dir

        result = target.forget(StatePaths(resolve_state_dir(G.state_dir)), url)
    if action == "forget":
        view = output.View(result, text=_forgotten)
    else:  # `field<TAB>value` lines, on a terminal too
        view = output.View(
            result, cells=_fields, table=lambda _, r: render.write_out(render.tsv(_fields(r)))
        )
    output.show(view, look(), as_json=want_json(json_))


def _fields(result: Mapping[str, Any]) -> list[list[Any]]:
    return [[k, v] for k, v in result.items() if v is not None]


def _forgotten(result: Mapping[str, Any]) -> str:
    what = "removed" if result["removed"] else "no device token stored"
    if result.get("deviceId"):
        what += (
            f" (device {result['deviceId'][:16]}; on the gateway's host, "
            f"openclaw devices remove {result['deviceId']} revokes it there too)"
        )
    return f"{render.esc(result['url'])}: {what}\n"
