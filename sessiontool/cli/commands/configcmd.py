"""`config schema`: the JSON Schema of sessiontool.json5, generated from the config table
(state/config_schema.py), for an editor or a check before a file is deployed."""

from __future__ import annotations

import typer

from sessiontool.cli import output
from sessiontool.cli.app import app, command, look, want_json
from sessiontool.cli.completers import choices
from sessiontool.errors import UsageError

ACTIONS = ("schema",)


@app.command("config")
@command
def config_cmd(
    action: str = typer.Argument(..., help="schema.", autocompletion=choices(*ACTIONS)),
    json_: bool = typer.Option(False, "--json", help="The schema on one line."),
) -> None:
    """Print the JSON Schema of sessiontool.json5 (every key, its type, range and meaning).

    It is generated from the table the loader checks every value with, so a file it accepts
    is one every command accepts. Point a file at a copy with `"$schema": "PATH"`."""
    if action not in ACTIONS:
        raise UsageError(f"unknown action {action!r} (valid: {', '.join(ACTIONS)})")
    from sessiontool.state.config_schema import schema, schema_text

    view = output.View(schema(), text=lambda _: schema_text())
    output.show(view, look(), as_json=want_json(json_))
