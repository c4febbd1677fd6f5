"""The program: `main` is the console script and `python -m sessiontool`. It reads the command
line, registers only the command it names (`commands.register_for`; help, completion and an
unknown name register them all), runs it on the app and ends the process with its exit code.
It sits above the app and the commands, which never import it: the app builds the Typer object,
its global options and what every command shares, and knows no command; the command modules
register on it."""

from __future__ import annotations

import os
import sys
from typing import Any

import typer

from sessiontool.cli import render
from sessiontool.cli.app import Terminated, app, report_error
from sessiontool.cli.commands import COMMANDS, OPENCLAW_WORDS, register_all, register_for
from sessiontool.cli.completers import COMPLETE_VAR, PROG, register_shell_classes
from sessiontool.errors import ExitCode, SessiontoolError, from_os_error

GLOBAL_VALUE_OPTIONS = (
    "--state-dir",
    "--config",
    "--agent",
    "--as",
    "--store",
    "--color",
    "--output-format",
    "--gateway",
)
GLOBAL_FLAGS = ("--create-agent",)  # moved like the value options (`--json` stays: see below)


def hoist_global_options(args: list[str]) -> list[str]:
    """Global options may also follow the command (`list --state-dir X`): move them in front
    of it, where Click expects them. Only options before a `--` move; `--json` is an option
    of every command too and stays where it is."""
    # Find the command: the first word that is not a global option or its value.
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            return args
        if a in GLOBAL_VALUE_OPTIONS:
            i += 2
            continue
        if a.startswith("-"):
            i += 1
            continue
        break
    if i >= len(args):
        return args
    head, rest = args[: i + 1], args[i + 1 :]
    moved: list[str] = []
    kept: list[str] = []
    j = 0
    while j < len(rest):
        a = rest[j]
        if a == "--":
            kept.extend(rest[j:])
            break
        if a in GLOBAL_VALUE_OPTIONS and j + 1 < len(rest):
            moved.extend(rest[j : j + 2])
            j += 2
            continue
        if a in GLOBAL_FLAGS or any(a.startswith(o + "=") for o in GLOBAL_VALUE_OPTIONS):
            moved.append(a)
            j += 1
            continue
        kept.append(a)
        j += 1
    return moved + head + kept


def _help_hint(exc: Any) -> str:
    """Point at the help of the command that refused the option (`sessiontool list --help`),
    not the program's, as `gh` does."""
    ctx = getattr(exc, "ctx", None)
    path = ctx.command_path if ctx is not None and getattr(ctx, "command_path", None) else None
    return f"see: {path or PROG} --help"


def unwrap_help(cmd: Any) -> None:
    """Docstrings are hard-wrapped at 100 columns for the source; Rich would keep those breaks
    and wrap again at the terminal's width, breaking lines mid-sentence. Each paragraph becomes
    one line here, so help is wrapped once, at the width of the terminal."""
    import re

    seen: list[Any] = [cmd]
    while seen:
        c = seen.pop()
        text = getattr(c, "help", None)
        if isinstance(text, str) and "\n" in text:
            import inspect

            paras = re.split(r"\n\s*\n", inspect.cleandoc(text))
            c.help = "\n\n".join(" ".join(p.split()) for p in paras if p.strip())
        seen.extend(getattr(c, "commands", {}).values())


def add_examples_for_help(cmd: Any, args: list[str]) -> None:
    """A command's help ends with its examples (cli/examples.py), read only when help is asked
    for: a run or a completion loads neither the table nor rich for it."""
    if os.environ.get(COMPLETE_VAR) or not ("--help" in args or "-h" in args):
        return
    from sessiontool.cli.examples import add_examples

    add_examples(cmd)


def refuse_repeated_options() -> None:
    """An option that takes one value, given twice (`runs --kind send --kind spawn`), is a
    usage error: Click would keep the last one silently, hiding the mistake. Options that take
    a list (`--kinds`) and flags are unaffected."""
    from typer._click import parser
    from typer._click.exceptions import BadOptionUsage

    if getattr(parser._Option.process, "_refuses_repeats", False):
        return
    original = parser._Option.process

    def process(self: Any, value: Any, state: Any) -> None:
        if self.action == "store" and self.dest in state.opts:
            name = max([*self._long_opts, *self._short_opts], key=len)
            raise BadOptionUsage(name, f"{name} was given twice; it takes one value")
        original(self, value, state)

    original_parse = parser._OptionParser.parse_args

    def parse_args(self: Any, args: list[str]) -> Any:
        try:
            return original_parse(self, args)
        except BadOptionUsage as exc:
            exc.ctx = exc.ctx or self.ctx  # for the hint: the command's own --help
            raise

    process._refuses_repeats = True  # type: ignore[attr-defined]
    parser._Option.process = process  # type: ignore[method-assign]
    parser._OptionParser.parse_args = parse_args  # type: ignore[method-assign]


def _on_sigterm(signum: int, frame: Any) -> None:
    raise Terminated()


def main(argv: list[str] | None = None, *, fast_exit: bool | None = None) -> None:
    """Run the CLI. As the program itself (no `argv` given) it ends the process right after
    flushing its output instead of tearing the interpreter down, which costs tens of ms with
    Typer loaded: `send` returns within milliseconds of its run's end."""
    if fast_exit is None:
        fast_exit = argv is None
    import signal

    try:
        signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:
        pass
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        args = ["--help"]  # bare `sessiontool`: the help, exit 0
    elif not os.environ.get(COMPLETE_VAR):
        args = rewrite_words(hoist_global_options(args))
    if os.environ.get(COMPLETE_VAR):
        register_all()
        # Shell completion (cmd.main below answers it and exits): register the completion
        # classes that understand `source_bash`/`complete_bash`; Click's own do not, and
        # add_completion=False means Typer never registers its own for us.
        register_shell_classes()
    else:
        register_for(command_name(args))
    cmd = typer.main.get_command(app)
    unwrap_help(cmd)
    add_examples_for_help(cmd, args)
    refuse_repeated_options()
    code: int
    try:
        rv = cmd.main(args=args, prog_name=PROG, standalone_mode=False)
        code = rv if isinstance(rv, int) else 0
    except typer._click.exceptions.ClickException as exc:
        msg = exc.format_message()
        render.error_line(msg, _help_hint(exc) if exc.exit_code == 2 else None)
        if "--json" in args:
            render.emit_json({"status": "error", "error": msg, "code": exc.exit_code})
        code = exc.exit_code
    except typer.Abort:
        code = int(ExitCode.INTERRUPTED)
    except KeyboardInterrupt:
        code = int(ExitCode.INTERRUPTED)
    except Terminated:
        code = int(ExitCode.TERMINATED)
    except SessiontoolError as exc:  # raised outside a wrapped command (e.g. completion)
        code = report_error(exc, "--json" in args)
    except OSError as exc:
        code = report_error(from_os_error(exc), "--json" in args)
    except Exception as exc:
        if os.environ.get("SESSIONTOOL_DEBUG") == "1":
            raise
        render.error_line(
            f"internal error: {type(exc).__name__}: {exc}",
            "set SESSIONTOOL_DEBUG=1 for a traceback",
        )
        code = int(ExitCode.FAILURE)
    if fast_exit:
        _exit(code)
    try:
        sys.stdout.flush()
    except (BrokenPipeError, ValueError, OSError):
        pass
    sys.exit(code)


def _exit(code: int) -> None:
    """End the process once its output is out. The interpreter's own teardown (freeing every
    object, a 100 MB store's included, module by module) does nothing a user can see, so it is
    skipped with os._exit, after the atexit handlers and with stdout and stderr flushed. A
    thread that is not a daemon (none of sessiontool's commands leaves one) gets the normal
    exit, which waits for it; daemon threads are not waited for either way (`top` leaves its
    own, maybe in the middle of listing 100,000 sessions: `q` must not wait for them)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass
    threading = sys.modules.get("threading")
    if threading is not None and any(
        not t.daemon for t in threading.enumerate() if t is not threading.main_thread()
    ):
        sys.exit(code)
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass
    os._exit(code)


def _command_index(args: list[str]) -> int | None:
    """Where the command word is (after the global options, hoisted in front of it)."""
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            return i + 1 if i + 1 < len(args) else None
        if a.startswith("-"):
            i += 2 if a in GLOBAL_VALUE_OPTIONS else 1
            continue
        return i
    return None


def rewrite_words(args: list[str]) -> list[str]:
    """`help X Y` is `X Y --help`; OpenClaw's words (`sessions`, `sessions list`, `agents list`,
    `sessions X` for a command X of ours) are the sessiontool command they mean."""
    i = _command_index(args)
    if i is None:
        return args
    head, word, rest = args[:i], args[i], args[i + 1 :]
    if word == "help":
        if "--man" in rest:  # the manual page: the help command itself opens it
            return args
        words = [w for w in rest if not w.startswith("-")]
        return [*head, *words, "--help"] if words or not rest else args
    if word == "sessions" and rest and rest[0] in COMMANDS and rest[0] != "list":
        return [*head, *rest]
    for n in (2, 1):
        key = (word, *rest[: n - 1])
        if len(key) == n and key in OPENCLAW_WORDS:
            return [*head, *OPENCLAW_WORDS[key], *rest[n - 1 :]]
    return args


def command_name(args: list[str]) -> str | None:
    it = iter(args)
    for arg in it:
        if arg == "--":
            return next(it, None)
        if arg.startswith("-"):
            if arg in GLOBAL_VALUE_OPTIONS:
                next(it, None)
            continue
        return arg
    return None
