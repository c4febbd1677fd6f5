"""Generated documentation: the shell completion scripts and the man page, both derived from the
Typer command tree so they can never drift from the real options. The committed copies under
`completions/` and `man/` (and the config's JSON Schema, `docs/sessiontool.schema.json`) are
checked against a fresh generation by the test suite.

    python -m sessiontool.cli.docs write          # regenerate completions/ and man/
    python -m sessiontool.cli.docs check          # exit 1 when the committed copies are stale
    python -m sessiontool.cli.docs man            # the man page on stdout
    python -m sessiontool.cli.docs completion SH  # one completion script on stdout
"""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sessiontool.cli.completers import PROG, completion_script
from sessiontool.errors import ExitCode

REGEN_COMMAND = "scripts/regen-docs"

# Shell → file name under completions/ (the names each shell's loader looks for).
COMPLETION_FILES = {"bash": "sessiontool.bash", "zsh": "_sessiontool", "fish": "sessiontool.fish"}
MAN_FILE = Path("man") / "sessiontool.1"


def _root_command() -> Any:
    """The whole command tree: this module sits above the commands (nothing in the program
    imports it), so it may register them all."""
    import typer

    from sessiontool.cli.app import app
    from sessiontool.cli.commands import register_all

    register_all()

    return typer.main.get_command(app)


# -- man page ----------------------------------------------------------------------------------

_CHAR_MAP = {
    "\u2014": r"\(em",
    "\u2013": r"\(en",
    "\u2192": r"\(->",
    "\u2022": r"\(bu",
    "\u2018": "'",
    "\u2019": "'",
    "\u201c": r"\(lq",
    "\u201d": r"\(rq",
}


def roff(text: str, *, hyphens: bool = False) -> str:
    """Escape text for roff: backslashes, control characters at a line start, and non-ASCII
    (as named glyphs or \\[uXXXX], so the page renders the same with or without preconv).
    `hyphens` makes every '-' a real minus, as option names need (copy-paste safe)."""
    out = text.replace("\\", r"\e")
    if hyphens:
        out = out.replace("-", r"\-")
    chars = []
    for c in out:
        if ord(c) < 128:
            chars.append(c)
        else:
            chars.append(_CHAR_MAP.get(c, f"\\[u{ord(c):04X}]"))
    out = "".join(chars)
    return "\n".join(("\\&" + ln) if ln.startswith((".", "'")) else ln for ln in out.split("\n"))


def _paragraphs(text: str | None) -> list[str]:
    """A help text's paragraphs, each reflowed onto one line (roff fills them)."""
    if not text:
        return []
    text = inspect.cleandoc(text).split("\f")[0]
    return [" ".join(p.split()) for p in re.split(r"\n\s*\n", text) if p.strip()]


def _metavar(param: Any) -> str:
    """The operand name shown after an option: its metavar, else one derived from its type
    (N, FILE, a|b|c), else from its longest option name (`--format` → FORMAT)."""
    from enum import Enum
    from pathlib import PurePath

    if getattr(param, "metavar", None):
        return str(param.metavar)
    ann = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    if ann in (int, float):
        return "N"
    if isinstance(ann, type) and issubclass(ann, PurePath):
        return "FILE"
    if isinstance(ann, type) and issubclass(ann, Enum):
        return "|".join(str(m.value) for m in ann)
    if param.param_type_name == "option" and param.opts:
        return str(max(param.opts, key=len).lstrip("-")).upper().replace("-", "_")
    return str(param.name).upper()


def _is_flag(param: Any) -> bool:
    return bool(getattr(param, "is_flag", False)) or bool(getattr(param, "count", False))


def _default_note(param: Any) -> str | None:
    default = param.default
    if _is_flag(param) or default is None or default is False or default == [] or default == ():
        return None
    if callable(default):
        return None
    return (
        f"default: {', '.join(map(str, default)) if isinstance(default, list | tuple) else default}"
    )


def _visible_params(cmd: Any) -> Iterator[Any]:
    for p in cmd.params:
        if getattr(p, "hidden", False) or p.name == "help":
            continue
        yield p


def _usage(cmd: Any, path: list[str]) -> str:
    """`sessiontool history [OPTIONS] [KEY]`, in roff (bold program, italic operands)."""
    parts = [r"\fB" + roff(" ".join(path), hyphens=True) + r"\fR"]
    params = list(_visible_params(cmd))
    if any(p.param_type_name == "option" for p in params):
        parts.append(r"[\fIOPTIONS\fR]")
    for p in params:
        if p.param_type_name != "argument":
            continue
        name = r"\fI" + roff(_metavar(p)) + r"\fR" + ("..." if p.nargs == -1 else "")
        parts.append(name if p.required else f"[{name}]")
    if hasattr(cmd, "list_commands"):
        parts.append(r"\fICOMMAND\fR [\fIARGS\fR]...")
    return " ".join(parts)


def _param_item(p: Any) -> list[str]:
    if p.param_type_name == "argument":
        head = r"\fI" + roff(_metavar(p)) + r"\fR"
    else:
        names = [*p.opts, *p.secondary_opts]
        head = ", ".join(r"\fB" + roff(n, hyphens=True) + r"\fR" for n in names)
        if not _is_flag(p):
            head += r" \fI" + roff(_metavar(p)) + r"\fR"
    notes = []
    if p.required and p.param_type_name == "option":
        notes.append("required")
    dn = _default_note(p)
    if dn:
        notes.append(dn)
    help_text = " ".join(_paragraphs(p.help)) or ""
    if notes:
        help_text = (help_text + " " if help_text else "") + "[" + "; ".join(notes) + "]"
    return [".TP", head, roff(help_text) if help_text else r"\&"]


def _commands(group: Any, ctx: Any, path: list[str]) -> Iterator[tuple[list[str], Any, Any]]:
    """Every command of the tree, depth first, in the order help lists them."""
    import typer

    for name in group.list_commands(ctx):
        sub = group.get_command(ctx, name)
        if sub is None or getattr(sub, "hidden", False):
            continue
        sub_ctx = typer.Context(sub, info_name=name, parent=ctx)
        yield [*path, name], sub, sub_ctx
        if hasattr(sub, "list_commands"):
            yield from _commands(sub, sub_ctx, [*path, name])


DESCRIPTION = [
    "sessiontool re-creates OpenClaw's agent session tools (sessions_list, sessions_history, "
    "sessions_send, sessions_spawn, agents_list) as one command-line program over a local state "
    "directory in OpenClaw's own layout, so it also works on a real OpenClaw (or Clawdbot) state "
    "dir: \\fB\\-\\-state\\-dir ~/.openclaw\\fR.",
    "Every call has a requester. With \\fB\\-\\-as\\fR \\fIKEY\\fR or SESSIONTOOL_SESSION_KEY "
    "the requester is that session, which is how agents use the tools: the worker sets the "
    "variable for every agent process it starts. Without either, the requester is the operator "
    "(a person or cron job), acting for the agent given by \\fB\\-\\-agent\\fR; operator-only "
    "commands (policy, label, reset, delete, deliveries, sweep, prune) refuse every session "
    "requester.",
    "Session keys may be given in full (agent:main:cron:nightly), bare (cron:nightly, meaning the "
    "requester agent's), as \\fBmain\\fR, as a sessionId, or with \\fB\\-\\-label\\fR. Output "
    "shows the requester agent's main session as \\fBmain\\fR and every other key in full.",
    "Output: \\fB\\-\\-json\\fR prints one compact JSON object per line. Without it, a terminal "
    "gets tables and a readable chat view, and a pipe gets tab-separated rows without colour.",
]

ENVIRONMENT = [
    (
        "SESSIONTOOL_STATE_DIR",
        "The state directory, when \\fB\\-\\-state\\-dir\\fR is not given "
        "(default: the platform's user state dir, e.g. ~/.local/state/sessiontool).",
    ),
    (
        "SESSIONTOOL_CONFIG",
        "sessiontool's config file, when \\fB\\-\\-config\\fR is not given "
        "(default: \\fI<state>\\fR/sessiontool.json5).",
    ),
    (
        "SESSIONTOOL_SESSION_KEY",
        "Act as this session (like \\fB\\-\\-as\\fR). Set by the worker "
        "for every agent process, together with SESSIONTOOL_STATE_DIR, SESSIONTOOL_RUN_ID and "
        "SESSIONTOOL_AGENT_ID.",
    ),
    (
        "SESSIONTOOL_SANDBOXED",
        "1 makes the session requester sandboxed: it sees only the sessions it spawned.",
    ),
    (
        "SESSIONTOOL_NOW_MS",
        "Pin the clock (epoch milliseconds) for tests and reproducible "
        "output: updatedAt, \\(lq5m ago\\(rq, \\fB\\-\\-active\\-minutes\\fR, archive and "
        "prune ages.",
    ),
    (
        "SESSIONTOOL_OUTPUT_FORMAT",
        "One output format for every command's result: json, tsv (also on a terminal), table "
        "(also piped), ids, text or html (a table); auto (the default) is each command's rule. "
        "\\fB\\-\\-json\\fR still means JSON.",
    ),
    ("SESSIONTOOL_DEBUG", "1 shows a traceback for internal errors."),
    ("NO_COLOR", "Any value turns colour off (as does TERM=dumb or \\fB\\-\\-color never\\fR)."),
    (
        "FORCE_COLOR",
        "Any value means \\fB\\-\\-color always\\fR (so does CLICOLOR_FORCE other than 0); "
        "an explicit \\fB\\-\\-color\\fR wins.",
    ),
]

FILES = [
    (
        "\\fI<state>\\fR/agents/\\fI<agentId>\\fR/sessions/sessions.json",
        "An agent's session store (OpenClaw's format; written under "
        "sessions.json.lock, replaced atomically).",
    ),
    (
        "\\fI<state>\\fR/agents/\\fI<agentId>\\fR/sessions/\\fI<sessionId>\\fR.jsonl",
        "One transcript per session. Deleted sessions' transcripts are renamed to "
        "\\fI<file>\\fR.deleted.\\fI<time>\\fR, never removed.",
    ),
    (
        "\\fI<state>\\fR/sessiontool/runs/\\fI<runId>\\fR.json",
        "One record per run (send, spawn and their steps).",
    ),
    ("\\fI<state>\\fR/sessiontool/runs/\\fI<runId>\\fR.log", "The run worker's stderr."),
    ("\\fI<state>\\fR/sessiontool/deliveries.jsonl", "Every announce delivery (the outbox)."),
    (
        "\\fI<state>\\fR/openclaw.json, \\fI<state>\\fR/clawdbot.json",
        "OpenClaw's config, read for the keys both programs share; never written.",
    ),
    (
        "\\fI<state>\\fR/sessiontool.json5",
        "sessiontool's own config (JSON5), layered over OpenClaw's.",
    ),
]

EXIT_MEANINGS = {
    ExitCode.OK: "ok, or accepted",
    ExitCode.FAILURE: "the run ended badly, or another runtime failure; doctor found problems",
    ExitCode.USAGE: "usage or config error (bad flag or value, unknown kind, unknown model, a "
    "label in use); doctor found only warnings",
    ExitCode.NOT_FOUND: "not found (session, run, label)",
    ExitCode.FORBIDDEN: "refused (send policy, sandbox visibility, agent-to-agent, allowlist, "
    "sub-agent, self-send, deleting a main session)",
    ExitCode.CORRUPT: "corrupt state (unreadable sessions.json or run record); nothing was changed",
    ExitCode.OVER_BUDGET: "over budget: usage --budget, or a run refused or stopped by a budget",
    ExitCode.BUSY: "busy: a lock could not be taken in time; try again",
    ExitCode.TIMEOUT: "the caller stopped waiting; the run goes on",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C); a send or wait names the run, which goes on",
    ExitCode.TERMINATED: "terminated (SIGTERM)",
}

EXAMPLES = [
    (
        "List the sessions updated in the last hour, as JSON:",
        "sessiontool list --active-minutes 60 --json",
    ),
    ("One key per line, for scripts:", "sessiontool list | cut -f1"),
    ("Export a transcript as Markdown:", "sessiontool history main --format markdown -o main.md"),
    (
        "Ask the main session something from cron and deliver the reply to its channel:",
        'sessiontool send main "summarise today\'s alerts" --deliver',
    ),
    (
        "Start a sub-agent and wait for its run:",
        'run=$(sessiontool spawn "research X" --label research | cut -f1)\nsessiontool wait "$run"',
    ),
    (
        "Label, reset and delete sessions:",
        "sessiontool label agent:main:dm:alice book-club\n"
        "sessiontool reset --label book-club\n"
        "sessiontool delete agent:main:scratch-pad",
    ),
    (
        "Check the state dir, then clean up runs and deliveries older than a week:",
        "sessiontool doctor\nsessiontool prune --older-than 7d --dry-run\n"
        "sessiontool prune --older-than 7d",
    ),
    ("Enable completion in bash:", "source <(sessiontool completion bash)"),
]


def _tp(head: str, body: str) -> list[str]:
    return [".TP", head, body]


def _example(lines: str) -> list[str]:
    return [
        ".PP",
        ".RS 4",
        ".nf",
        *(roff(ln, hyphens=True) for ln in lines.split("\n")),
        ".fi",
        ".RE",
    ]


def man_page() -> str:
    """The whole man page, in roff (man macros; the exit-status table needs tbl, which man runs
    because of the first line)."""
    from sessiontool import __version__
    from sessiontool.cli.app import GLOBAL_OPTIONS_NOTE

    root = _root_command()
    import typer

    root_ctx = typer.Context(root, info_name=PROG)
    summary = (_paragraphs(root.help) or [f"{PROG}"])[0].rstrip(".")
    out: list[str] = [
        "'\\\" t",
        f'.\\" Generated from the command tree by `{REGEN_COMMAND}` (python -m sessiontool.cli.docs '
        "write). Do not edit.",
        f'.TH SESSIONTOOL 1 "" "{PROG} {__version__}" "User Commands"',
        ".SH NAME",
        f"{PROG} \\- {roff(summary)}",
        ".SH SYNOPSIS",
        r"\fBsessiontool\fR [\fIGLOBAL OPTIONS\fR] \fICOMMAND\fR [\fIARGS\fR]... "
        r"[\fIGLOBAL OPTIONS\fR]",
        ".br",
        r"\fBsessiontool\fR \fB\-\-help\fR | \fB\-\-version\fR",
        ".SH DESCRIPTION",
    ]
    for para in DESCRIPTION:
        out += [".PP", para]
    out.append(".SH GLOBAL OPTIONS")
    out += [".PP", roff(GLOBAL_OPTIONS_NOTE, hyphens=True)]
    for p in _visible_params(root):
        out += _param_item(p)
    out.append(".SH COMMANDS")
    for path, cmd, _ctx in _commands(root, root_ctx, [PROG]):
        out += [".SS " + '"' + " ".join(path[1:]) + '"', _usage(cmd, path), ".PP"]
        paras = _paragraphs(cmd.help) or ["(no description)"]
        out.append(roff(paras[0]))
        for para in paras[1:]:
            out += [".PP", roff(para)]
        params = list(_visible_params(cmd))
        if params:
            out += [".PP", ".RS 4"]
            for p in params:
                out += _param_item(p)
            out.append(".RE")
    out.append(".SH ENVIRONMENT")
    for name, text in ENVIRONMENT:
        out += _tp(r"\fB" + name + r"\fR", text)
    out.append(".SH FILES")
    for name, text in FILES:
        out += _tp(name, text)
    out += [
        ".SH EXIT STATUS",
        ".TS",
        "tab(@);",
        "lb lb",
        "n lx.",
        "CODE@MEANING",
    ]
    for code in ExitCode:
        out.append(f"{int(code)}@T{{\n{roff(EXIT_MEANINGS[code])}\nT}}")
    out += [
        ".TE",
        ".PP",
        "Errors are one line on standard error (\\fBsessiontool: error:\\fR ...), plus a "
        "\\fBhint:\\fR line where useful; with \\fB\\-\\-json\\fR also "
        '{"status":"error"|"forbidden","error":...,"code":\\fIN\\fR} on standard output.',
        ".SH EXAMPLES",
    ]
    for text, cmd_lines in EXAMPLES:
        out += [".PP", roff(text), *_example(cmd_lines)]
    out += [
        ".SH SEE ALSO",
        "The OpenClaw documentation of the session tools; the sessiontool README.",
    ]
    return "\n".join(out) + "\n"


# -- writing and checking the committed copies -------------------------------------------------


def generated_files() -> dict[Path, str]:
    """Relative path → content of every generated file."""
    root = _root_command()
    files = {
        Path("completions") / name: completion_script(shell, root)
        for shell, name in COMPLETION_FILES.items()
    }
    files[MAN_FILE] = man_page()
    from sessiontool.state.config_schema import schema_text

    files[SCHEMA_FILE] = schema_text()  # the published copy of what `config schema` prints
    return files


SCHEMA_FILE = Path("docs") / "sessiontool.schema.json"


def repo_root() -> Path:
    """The checkout this module is in (sessiontool/cli/docs.py: three levels up), where
    completions/ and man/ are committed; `--root` names another."""
    return Path(__file__).resolve().parents[2]


def stale_files(root: Path) -> list[Path]:
    """Committed copies under `root` that differ from a fresh generation (or are missing)."""
    out = []
    for rel, content in generated_files().items():
        try:
            if (root / rel).read_text(encoding="utf-8") == content:
                continue
        except OSError:
            pass
        out.append(rel)
    return out


def write_files(root: Path) -> list[Path]:
    written = []
    for rel, content in generated_files().items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            if target.read_text(encoding="utf-8") == content:
                continue
        except OSError:
            pass
        target.write_text(content, encoding="utf-8")
        written.append(rel)
    return written


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    root, given = repo_root(), "--root" in args
    if given:
        i = args.index("--root")
        root = Path(args[i + 1])
        del args[i : i + 2]
    what = args[0] if args else "write"
    if what in ("write", "check") and not given and not (root / "pyproject.toml").is_file():
        # An installed (non-editable) package has no checkout beside it: say so, not "stale".
        print(
            f"{root} is not a sessiontool checkout (installed package?): pass --root DIR",
            file=sys.stderr,
        )
        return 2
    if what == "man":
        sys.stdout.write(man_page())
    elif what == "completion" and len(args) == 2:
        sys.stdout.write(completion_script(args[1], _root_command()))
    elif what == "write":
        for rel in write_files(root):
            print(f"wrote {rel}", file=sys.stderr)
    elif what == "check":
        stale = stale_files(root)
        for rel in stale:
            print(f"stale: {rel}", file=sys.stderr)
        if stale:
            print(f"regenerate with: {REGEN_COMMAND}", file=sys.stderr)
            return 1
    else:
        print(
            "usage: python -m sessiontool.cli.docs [write|check|man|completion SHELL] [--root DIR]",
            file=sys.stderr,
        )
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
