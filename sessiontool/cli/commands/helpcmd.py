"""`help [COMMAND]...`: a command's help, as gh, llm and pueue have it. On the command line
`cli/main.py` turns `help X Y` into `X Y --help` before parsing (so the help is exactly that
command's, with its examples); this command is what the tree lists, completes and documents,
and answers the same when the app is run without that rewrite."""

from __future__ import annotations

import typer

from sessiontool.cli import render
from sessiontool.cli.app import app, command
from sessiontool.cli.completers import PROG


@app.command("help")
@command
def help_cmd(
    ctx: typer.Context,
    words: list[str] | None = typer.Argument(
        None, help="The command (and subcommand) whose help to print.", metavar="[COMMAND]..."
    ),
    man: bool = typer.Option(
        False,
        "--man",
        help="The manual page installed with sessiontool, in man on a terminal (found where "
        "uv tool install, pipx or pip put it, wherever `man sessiontool` looks); piped, its "
        "roff source.",
    ),
) -> None:
    """Print a command's help (the program's without one): `sessiontool help send` is
    `sessiontool send --help`; `sessiontool help --man` opens the manual page."""
    from sessiontool.cli.commands import register_all
    from sessiontool.errors import UsageError

    if man:
        from sessiontool.cli import manpage

        manpage.show()
        return
    register_all()
    root = typer.main.get_command(app)
    target, path = root, [PROG]
    for word in words or []:
        sub = getattr(target, "commands", {}).get(word)
        if sub is None:
            raise UsageError(f"no such command: {' '.join([*path[1:], word])}")
        target, path = sub, [*path, word]
    info = typer.Context(target, info_name=" ".join(path))
    render.write_out(target.get_help(info) + "\n")
