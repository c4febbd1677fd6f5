"""`top`: the live full-screen view (sessiontool/tui/, the optional extra `.[tui]`). Textual is
imported only when the command runs, so no other command pays for it."""

from __future__ import annotations

import math
import sys

import typer

from sessiontool.cli import output
from sessiontool.cli.app import app, command, get_ctx
from sessiontool.errors import ExitCode, UsageError

# sessiontool is not on a package index: name the package itself, and the checkout's extra.
INSTALL = (
    "pip install 'textual>=8,<9' in sessiontool's environment (from a checkout: "
    "pip install '.[tui]'; with pipx: pipx inject sessiontool 'textual>=8,<9')"
)


def require_textual() -> None:
    """The one-line error (exit 2), with the install command, when Textual is missing."""
    from importlib import util

    try:
        found = util.find_spec("textual") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise UsageError(
            f"sessiontool top needs Textual (package `textual`), not installed: {INSTALL}"
        )


def require_terminal() -> None:
    """A full-screen view needs a terminal: keys come from stdin, and Textual draws on stderr
    (stdout is checked first: that is what a script pipes). Piped, the same facts are a command
    away (exit 2)."""
    for stream in (sys.stdout, sys.stdin, sys.stderr):
        try:
            tty = stream.isatty()
        except (AttributeError, ValueError):
            tty = False
        if not tty:
            raise UsageError(
                "top is a full-screen view and needs a terminal; for scripts use "
                "`sessiontool list --json` and `sessiontool runs --json`"
            )


@app.command("top")
@command
def top_cmd(
    all_agents: bool = typer.Option(
        False, "--all-agents", help="Every agent's sessions (operator)."
    ),
    budget: float | None = typer.Option(
        None, "--budget", help="Show today's cost against this many USD.", metavar="USD"
    ),
) -> int:
    """Watch sessions, runs and deliveries live, and act on them, full screen.

    Keys: / filters the sessions; Enter follows the selected session's transcript; s sends it a
    message and shows the reply; Tab moves to the runs, where a aborts the selected run (after a
    confirm) and w waits for it; q or Ctrl-C leaves. Needs a terminal and Textual (the
    optional extra named tui)."""
    if budget is not None and (not math.isfinite(budget) or budget < 0):
        raise UsageError("--budget must be a non-negative amount in USD")
    require_textual()
    require_terminal()
    ctx = get_ctx(reads=True)
    from sessiontool.tui.app import make_app
    from sessiontool.tui.model import Options

    top = make_app(
        ctx,
        Options(all_agents=all_agents, budget=budget),
        colored=output.look(ctx.options).colored(),
    )
    value = top.run()
    if top.return_code:  # it ended on an error: Textual has printed what went wrong
        return int(ExitCode.FAILURE)
    return value if isinstance(value, int) else 0
