"""The Typer application, its global options, what every command asks of them (its context, the
JSON switch) and the one place where a command's failure becomes a message, a JSON object and an
exit code. Commands live in `commands/` and register on `app`; `main.py`, above both, registers
the one a command line names and runs it. Nothing here imports a command."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import typer

from sessiontool import TESTED_WITH, __version__, diag
from sessiontool.cli import render
from sessiontool.cli.completers import choices, complete_agent_ids
from sessiontool.errors import ExitCode, SessiontoolError, from_os_error
from sessiontool.state import perms

if TYPE_CHECKING:
    from pathlib import Path

    from sessiontool.context import Context, Options
    from sessiontool.state.config import Config

F = TypeVar("F", bound=Callable[..., Any])

# The one wording of where global options go: the root --help, the man page and the README
# (a test checks that the README carries it verbatim).
GLOBAL_OPTIONS_NOTE = (
    "Global options (--state-dir, --config, --agent, --as, --store, --gateway, --color, "
    "--output-format, --json, --create-agent) go before "
    "or after the command: `sessiontool list --state-dir X` is `sessiontool --state-dir X list`."
)

app = typer.Typer(
    name="sessiontool",
    help="OpenClaw's agent session tools (list, history, send, spawn) over a local state dir.\n\n"
    + GLOBAL_OPTIONS_NOTE,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    pretty_exceptions_show_locals=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


class Globals:
    state_dir: str | None = None
    config: str | None = None
    agent: str | None = None
    as_key: str | None = None
    json: bool = False
    store: str = "auto"
    create_agent: bool = False
    gateway: str | None = None
    color: str = "auto"
    output_format: str | None = None


G = Globals()


def global_options() -> Options:
    """The options every context of this command line carries, frozen (a bad `--gateway` URL
    is exit 2 here). Built from what the Typer callback parsed; nothing below the CLI reads `G`."""
    from sessiontool.context import Options

    return Options(G.store, G.gateway, G.color, output_format())


def output_format() -> str | None:
    """`--output-format`: one output format (a row of cli/output.py's FORMATS) for every
    command's result instead of each one's rule; SESSIONTOOL_OUTPUT_FORMAT is its default, as
    AWS_DEFAULT_OUTPUT is `aws --output`'s."""
    from sessiontool.cli.output import check_format

    return check_format(G.output_format or os.environ.get("SESSIONTOOL_OUTPUT_FORMAT") or None)


def _complete_formats(incomplete: str) -> list[str]:
    """The names of cli/output.py's FORMATS (the one table), read only when Tab asks."""
    from sessiontool.cli.output import FORMATS

    return [n for n in ("auto", *FORMATS) if n.startswith(incomplete)]


def look() -> render.Look:
    """How this command's output looks (`--color`, the output format), before its context is
    built; afterwards `output.look(ctx.options)` gives the same."""
    return render.Look(G.color, output_format())


def _version(value: bool) -> None:
    if value:
        render.write_out(f"sessiontool {__version__} (tested against {TESTED_WITH})\n")
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
        None,
        "--agent",
        help="Act for this agent (operator).",
        metavar="ID",
        autocompletion=complete_agent_ids,
    ),
    create_agent: bool = typer.Option(
        False,
        "--create-agent",
        help="With --agent: start that agent although it is neither configured nor on disk.",
    ),
    as_key: str | None = typer.Option(
        None, "--as", help="Act as this session (env SESSIONTOOL_SESSION_KEY).", metavar="KEY"
    ),
    store: str = typer.Option(
        "auto",
        "--store",
        help="Session store format: auto (per agent), jsonl or openclaw-sqlite.",
        metavar="FORMAT",
        autocompletion=choices("auto", "jsonl", "openclaw-sqlite"),
    ),
    gateway: str | None = typer.Option(
        None,
        "--gateway",
        help="A remote OpenClaw gateway, ws:// or wss:// (env SESSIONTOOL_GATEWAY_URL).",
        metavar="URL",
    ),
    color: str = typer.Option(
        "auto",
        "--color",
        help="auto, always or never.",
        metavar="WHEN",
        autocompletion=choices("auto", "always", "never"),
    ),
    output_format: str | None = typer.Option(
        None,
        "--output-format",
        help="One output format for every command's result (a name of the output formats' "
        "table: auto, json, tsv, table, ids, text, html; env SESSIONTOOL_OUTPUT_FORMAT).",
        metavar="FORMAT",
        autocompletion=_complete_formats,
    ),
    json_: bool = typer.Option(False, "--json", help="JSON output for the command."),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    if color not in ("auto", "always", "never"):
        raise typer.BadParameter("expected auto, always or never", param_hint="--color")
    if store not in ("auto", "jsonl", "openclaw-sqlite"):
        raise typer.BadParameter("expected auto, jsonl or openclaw-sqlite", param_hint="--store")
    G.store, G.color = store, color if color != "auto" else color_from_env()
    G.create_agent = create_agent
    G.gateway = gateway
    G.output_format = output_format
    G.state_dir, G.config, G.agent, G.as_key, G.json = state_dir, config, agent, as_key, json_


def color_from_env() -> str:
    """`--color auto` under FORCE_COLOR (any value, force-color.org) or CLICOLOR_FORCE (not 0):
    `always`, as CI logs and `watch --color` ask for; NO_COLOR still turns it off otherwise."""
    import os

    if os.environ.get("FORCE_COLOR") or os.environ.get("CLICOLOR_FORCE", "0") not in ("", "0"):
        return "always"
    return "auto"


def install_store_guard() -> None:
    """Every sessions.json write of this process (and of the workers it forks) first asks the
    running gateway's facts (openclaw/gateway.py)."""
    from sessiontool.openclaw import install_store_guard as install

    install()


def get_ctx(*, reads: bool = False, check: bool = True, lenient: bool = False) -> Context:
    """The command's context. Every command refuses a state dir that is not a directory
    (exit 2). A command that only reads (`reads=True`) also refuses a state dir that does not
    exist when it was given with `--state-dir`, and an `--agent` that is
    neither configured nor on disk (exit 3): a typo must not look like an empty store.
    `check=False` is for `doctor` and `paths`, which report these instead. `lenient` (doctor):
    a config value that would be refused is kept for the report (`config.errors`), and the
    config's warnings are left to the report too (said once, not also on stderr)."""
    from sessiontool.context import build_context

    install_store_guard()
    if check:
        check_state_dir_is_dir()
    cfg = _lenient_config() if lenient else None
    ctx = build_context(G.state_dir, G.config, G.agent, G.as_key, cfg=cfg)
    ctx = remote_context(ctx, global_options(), G.as_key)
    if check and reads:
        check_readable_state(ctx)
    elif check and not G.create_agent:
        check_new_agent(ctx)
    perms.check_state_dir(ctx.paths.root)
    for w in ctx.config.warnings if not lenient else ():
        diag.warn(w)
    if check and not reads and G.state_dir:
        _watch_new_state_dir(ctx.paths.root)
    return ctx


def _lenient_config() -> Config:
    from sessiontool.state.config import load_config
    from sessiontool.state.paths import StatePaths, resolve_state_dir

    return load_config(StatePaths(resolve_state_dir(G.state_dir)), G.config, lenient=True)


# A state dir a write creates because `--state-dir` named it: said on stderr once it exists
# (`--state-dir ~/.openclw`, a typo, must not silently start a new state; a read of it is
# refused before it starts, check_readable_state). SESSIONTOOL_STATE_DIR is the user's default.
_NEW_STATE_DIRS: list[Path] = []


def _watch_new_state_dir(root: Path) -> None:
    from sessiontool.state.paths import resolve_state_dir

    if not root.exists() and root != resolve_state_dir(None):
        _NEW_STATE_DIRS.append(root)


def _created_state_dirs() -> list[str]:
    created = [r for r in _NEW_STATE_DIRS if r.is_dir()]
    _NEW_STATE_DIRS.clear()
    return [
        f"created state dir {r} (from --state-dir, not the default); check it if that is a typo"
        for r in created
    ]


def remote_context(ctx: Context, options: Options, as_key: str | None = None) -> Context:
    """`ctx` under `options`, and with a remote gateway (`--gateway`, SESSIONTOOL_GATEWAY_URL,
    OPENCLAW_GATEWAY_URL, OpenClaw's `gateway.remote.url`): the same context in the part of the
    local state dir kept for that gateway, whose sessions are the gateway's (openclaw/target.py).
    `as_key` is the key `ctx` was built for, as the user typed it (`--as`, or `mcp --as`): it
    is read again under the gateway's config (its main key and scope), never taken from the
    global options (`mcp --as K` then acted as the operator on a remote gateway)."""
    from sessiontool.context import Context
    from sessiontool.openclaw import target

    ctx = ctx.with_options(options)
    paths = target.select(ctx.paths, options.gateway)
    if paths is ctx.paths:
        return ctx
    from sessiontool.context import build_context
    from sessiontool.openclaw.gateway_reader import gateway_config
    from sessiontool.state.config import load_config

    # The gateway's OpenClaw config in place of a local one: its agents, main key, scope and
    # policies decide as they do on its host (unreachable or refused: the command says so).
    remote_cfg = gateway_config(paths)
    if remote_cfg is not None:
        cfg = load_config(ctx.paths, G.config, gateway=remote_cfg, lenient=ctx.config.lenient)
        ctx = build_context(G.state_dir, G.config, G.agent, as_key, cfg=cfg)
    return Context(paths, ctx.config, ctx.requester, options)


def check_state_dir_is_dir() -> None:
    from sessiontool.errors import UsageError
    from sessiontool.state.paths import resolve_state_dir

    root = resolve_state_dir(G.state_dir)
    if root.exists() and not root.is_dir():
        raise UsageError(
            f"state dir {root} is not a directory",
            hint="point --state-dir (or SESSIONTOOL_STATE_DIR) at a directory",
        )


def check_readable_state(ctx: Context) -> None:
    """A read of an `--agent` nobody knows is refused (a typo must not look like an empty
    store), unless --create-agent says the agent is new: then it has nothing yet to show."""
    from sessiontool.errors import NotFoundError
    from sessiontool.sessions.findings import state_findings

    agent = None if G.create_agent else G.agent
    for finding in state_findings(ctx, explicit_state=bool(G.state_dir), explicit_agent=agent):
        raise NotFoundError(finding["detail"], hint=finding.get("hint"))


def check_new_agent(ctx: Context) -> None:
    """A command that writes would create the `--agent` it is given; a typo (`--agent mian`)
    must not start a new agent: exit 3 with the nearest name, unless --create-agent says so."""
    from sessiontool.errors import NotFoundError
    from sessiontool.sessions.findings import new_agent_findings

    for finding in new_agent_findings(ctx, G.agent):
        raise NotFoundError(finding["detail"], hint=finding.get("hint"))


def check_writable(ctx: Context) -> None:
    """Before a command starts background work: refuse (exit 5) when a link planted in the state
    dir would redirect its writes, instead of failing later inside the worker."""
    from sessiontool.state import safefs

    dirs, files = ctx.paths.written_paths()
    safefs.preflight(ctx.paths.root, dirs, files)


def gated(ctx: Context, max_cost: float | None, force: bool) -> Context:
    """`ctx` with the spend gate its new runs pass (reports/budgets.py `BudgetGate`: the
    config's budgets unless `force`, and `--max-cost`). With neither, no gate, and the
    budgets' module is not imported at all: a `send` on a config without budgets pays nothing
    for them (issue 44; bench `send_budget`)."""
    if max_cost is None and (force or not ctx.config.budgets):
        return ctx
    from sessiontool.reports.budgets import BudgetGate

    return ctx.with_gate(BudgetGate(ctx, max_cost, force))


def read_stdin(what: str) -> str:
    """All of stdin as text. Bytes that are not UTF-8 are a usage error naming the position
    (whatever PYTHONIOENCODING or the locale say): transcripts are UTF-8."""
    from sessiontool.errors import UsageError

    buf = getattr(sys.stdin, "buffer", None)
    if buf is None:  # a replaced text stream (tests): already text
        return str(sys.stdin.read())
    data: bytes = buf.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"{what} from stdin is not valid UTF-8 (byte {exc.start + 1} of {len(data)})",
            hint="convert it first, e.g. iconv -f latin1 -t utf-8",
        ) from None


def want_json(local: bool) -> bool:
    return local or G.json


def _flush_warnings() -> None:
    for w in [*_created_state_dirs(), *diag.drain()]:
        render.warning_line(w)


def report_error(exc: SessiontoolError, as_json: bool) -> int:
    from sessiontool.errors import refused_by_os

    exc = refused_by_os(exc)
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
        except OSError as exc:  # the one funnel: a path, what went wrong, what to do
            raise typer.Exit(report_error(from_os_error(exc), as_json)) from None
        except KeyboardInterrupt:
            _flush_warnings()
            raise typer.Exit(int(ExitCode.INTERRUPTED)) from None
        except Terminated:
            _flush_warnings()
            raise typer.Exit(int(ExitCode.TERMINATED)) from None
        _flush_warnings()
        if isinstance(rv, int) and rv:
            raise typer.Exit(rv)
        return rv

    return wrapper  # type: ignore[return-value]


class Terminated(BaseException):
    """SIGTERM, turned into an exception so that `finally` blocks release locks; the process
    then exits 143 (128 + SIGTERM), as a shell reports a program killed by it."""
