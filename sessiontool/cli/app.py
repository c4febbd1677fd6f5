"""The Typer application, its global options and the one place where failures become a message,
a JSON object and an exit code. Commands live in `commands/` and register on `app`."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import typer

from sessiontool import __version__, diag
from sessiontool.cli import render
from sessiontool.errors import ExitCode, SessiontoolError
from sessiontool.stores import perms

F = TypeVar("F", bound=Callable[..., Any])

app = typer.Typer(
    name="sessiontool",
    help="OpenClaw's agent session tools (list, history, send, spawn) over a local state dir.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    pretty_exceptions_show_locals=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@dataclass
class Globals:
    state_dir: str | None = None
    config: str | None = None
    agent: str | None = None
    as_key: str | None = None
    json: bool = False
    store: str = "auto"


G = Globals()


def _version(value: bool) -> None:
    if value:
        render.write_out(f"sessiontool {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def _global_options(
    state_dir: str | None = typer.Option(
        None, "--state-dir", help="State directory (env SESSIONTOOL_STATE_DIR).", metavar="DIR"
    ),
    config: str | None = typer.Option(
        None, "--config", help="sessiontool config file (env SESSIONTOOL_CONFIG).", metavar="FILE"
    ),
    agent: str | None = typer.Option(
        None, "--agent", help="Act for this agent (operator).", metavar="ID"
    ),
    as_key: str | None = typer.Option(
        None, "--as", help="Act as this session (env SESSIONTOOL_SESSION_KEY).", metavar="KEY"
    ),
    store: str = typer.Option(
        "auto",
        "--store",
        help="Session store format: auto (per agent), jsonl or openclaw-sqlite.",
        metavar="FORMAT",
    ),
    color: str = typer.Option("auto", "--color", help="auto, always or never.", metavar="WHEN"),
    json_: bool = typer.Option(False, "--json", help="JSON output for the command."),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    if color not in ("auto", "always", "never"):
        raise typer.BadParameter("expected auto, always or never", param_hint="--color")
    if store not in ("auto", "jsonl", "openclaw-sqlite"):
        raise typer.BadParameter("expected auto, jsonl or openclaw-sqlite", param_hint="--store")
    G.store = store
    G.state_dir, G.config, G.agent, G.as_key, G.json = state_dir, config, agent, as_key, json_
    render.set_color(color)


def get_ctx() -> Any:
    from sessiontool.context import build_context
    from sessiontool.stores import reader

    reader.set_override(G.store)
    ctx = build_context(G.state_dir, G.config, G.agent, G.as_key)
    perms.check_state_dir(ctx.paths.root)
    for w in ctx.config.warnings:
        diag.warn(w)
    return ctx


def want_json(local: bool) -> bool:
    return local or G.json


def _flush_warnings() -> None:
    for w in diag.drain():
        render.warning_line(w)


def report_error(exc: SessiontoolError, as_json: bool) -> int:
    _flush_warnings()
    render.error_line(exc.message, exc.hint)
    if as_json:
        render.emit_json(exc.to_json())
    return int(exc.code)


def command(fn: F) -> F:
    """Wrap a command: its SessiontoolError becomes one stderr line (+ JSON with --json) and
    its exit code; warnings gathered by core code are printed once."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        as_json = bool(kwargs.get("json_")) or G.json
        try:
            rv = fn(*args, **kwargs)
        except SessiontoolError as exc:
            raise typer.Exit(report_error(exc, as_json)) from None
        except KeyboardInterrupt:
            _flush_warnings()
            raise typer.Exit(int(ExitCode.INTERRUPTED)) from None
        _flush_warnings()
        if isinstance(rv, int) and rv:
            raise typer.Exit(rv)
        return rv

    return wrapper  # type: ignore[return-value]


class Terminated(BaseException):
    """SIGTERM, turned into an exception so that `finally` blocks release locks."""


def _on_sigterm(signum: int, frame: Any) -> None:
    raise Terminated()


def main(argv: list[str] | None = None) -> None:
    import signal

    from sessiontool.cli.commands import register_all

    register_all()
    try:
        signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:
        pass
    args = list(sys.argv[1:] if argv is None else argv)
    if os.environ.get("_SESSIONTOOL_COMPLETE"):
        # Shell completion (cmd.main below answers it and exits): register the completion
        # classes that understand `source_bash`/`complete_bash`; Click's own do not, and
        # add_completion=False means Typer never registers its own for us.
        from sessiontool.cli.commands.completers import register_shell_classes

        register_shell_classes()
    cmd = typer.main.get_command(app)
    code: int
    try:
        rv = cmd.main(args=args, prog_name="sessiontool", standalone_mode=False)
        code = rv if isinstance(rv, int) else 0
    except typer._click.exceptions.ClickException as exc:
        msg = exc.format_message()
        render.error_line(msg, "see: sessiontool --help" if exc.exit_code == 2 else None)
        if "--json" in args:
            render.emit_json({"status": "error", "error": msg, "code": exc.exit_code})
        code = exc.exit_code
    except typer.Abort:
        code = int(ExitCode.INTERRUPTED)
    except (KeyboardInterrupt, Terminated):
        code = int(ExitCode.INTERRUPTED)
    except SessiontoolError as exc:  # raised outside a wrapped command (e.g. completion)
        code = report_error(exc, "--json" in args)
    except Exception as exc:
        if os.environ.get("SESSIONTOOL_DEBUG") == "1":
            raise
        render.error_line(
            f"internal error: {type(exc).__name__}: {exc}",
            "set SESSIONTOOL_DEBUG=1 for a traceback",
        )
        code = int(ExitCode.FAILURE)
    try:
        sys.stdout.flush()
    except (BrokenPipeError, ValueError, OSError):
        pass
    sys.exit(code)
