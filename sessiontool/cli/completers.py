"""Shell completion of session keys and run ids, straight from the state dir: this runs on every
Tab, so it reads the stores with the standard json module and never loads rich. Also the
completion scripts themselves (`completion_script`), which the `completion` command prints and
`docs.py` writes to completions/. Below the app and the commands, which both use it."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator


def _state_root(ctx: Any = None) -> Path:
    """The state dir the command line being completed names: its `--state-dir`, read from the
    parsed line (completion parses it without running the global callback, so the app's
    globals never hold it: this module sits below the app and does not ask it), else the env."""
    from sessiontool.state.paths import resolve_state_dir

    explicit = None
    if ctx is not None:
        try:
            explicit = ctx.find_root().params.get("state_dir")
        except AttributeError:
            pass
    return resolve_state_dir(explicit)


def _stores(ctx: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each agent's sessions.json as read, skipping what is missing or damaged: completion
    reads the files directly (no engine import) and must never fail."""
    root = _state_root(ctx) / "agents"
    try:
        agents = os.listdir(root)
    except OSError:
        return
    for agent in agents:
        try:
            with open(root / agent / "sessions" / "sessions.json", "rb") as fh:
                store = json.loads(fh.read())
        except (OSError, ValueError):
            continue
        if isinstance(store, dict):
            yield agent, store


def complete_keys(incomplete: str, ctx: Any = None) -> list[str]:
    out: list[str] = []
    for agent, store in _stores(ctx):
        for key in store:
            legacy = not key.startswith("agent:") and key not in ("global", "unknown")
            full = f"agent:{agent}:{key}" if legacy else key
            if full in ("global", "unknown"):
                continue
            if full.startswith(incomplete) and full not in out:
                out.append(full)
    if "main".startswith(incomplete):
        # `main` and `agent:main:main` are one session: offer it once, as list shows it.
        out = [k for k in out if k != "agent:main:main"]
        out.insert(0, "main")
    return sorted(out)


def choices(*values: str) -> Any:
    """A completer for an option that takes one of a few words."""

    def complete(incomplete: str) -> list[str]:
        return [v for v in values if v.startswith(incomplete)]

    return complete


def complete_agent_ids(incomplete: str, ctx: Any = None) -> list[str]:
    try:
        names = os.listdir(_state_root(ctx) / "agents")
    except OSError:
        names = []
    return sorted({n for n in [*names, "main"] if n.startswith(incomplete)})


def complete_labels(incomplete: str, ctx: Any = None) -> list[str]:
    out: set[str] = set()
    for _agent, store in _stores(ctx):
        for entry in store.values():
            label = entry.get("label") if isinstance(entry, dict) else None
            if isinstance(label, str) and label.startswith(incomplete):
                out.add(label)
    return sorted(out)


def complete_run_ids(incomplete: str, ctx: Any = None) -> list[str]:
    runs = _state_root(ctx) / "sessiontool" / "runs"
    try:
        names = os.listdir(runs)
    except OSError:
        return []
    return sorted(n[:-5] for n in names if n.endswith(".json") and n.startswith(incomplete))


# -- shell scripts -----------------------------------------------------------------------------

PROG = "sessiontool"
COMPLETE_VAR = "_SESSIONTOOL_COMPLETE"
SHELLS = ("bash", "zsh", "fish")


def completion_script(shell: str, root: Any) -> str:
    """Exactly what `_SESSIONTOOL_COMPLETE=source_<shell> sessiontool` prints: Typer's completion
    protocol, with the scripts below. `root` is the program's Click command; the script names
    only the program and its variable (each Tab asks the program), so any part of the command
    tree gives the same script."""
    from typer._click.shell_completion import get_completion_class

    from sessiontool.errors import UsageError

    if shell not in SHELLS:
        raise UsageError(f"unknown shell {shell!r} (valid: {', '.join(SHELLS)})")
    register_shell_classes()
    cls = get_completion_class(shell)
    if cls is None:  # pragma: no cover - registered just above
        raise UsageError(f"no completion support for {shell}")
    return str(cls(root, {}, PROG, COMPLETE_VAR).source()).strip() + "\n"


# The protocol is Typer's (`_SESSIONTOOL_COMPLETE=source_<shell>` prints a script,
# `complete_<shell>` answers one Tab); these templates replace two of its scripts:
# - bash splits words at ':' (COMP_WORDBREAKS), and session keys are made of colons: the line is
#   re-split on whitespace only, and completions are trimmed back to what bash will replace;
# - zsh: Typer's script only registers itself, so autoloaded from $fpath as `_sessiontool` the
#   first Tab completes nothing; this one completes at once either way.
# Help texts are passed through as plain text (Typer renders them with rich on every Tab).

BASH_SOURCE = """\
# bash completion for %(prog_name)s
%(complete_func)s() {
    local IFS=$'\\n'
    local line="${COMP_LINE:0:COMP_POINT}"
    local -a words
    IFS=$' \\t\\n' read -r -a words <<< "$line"
    local cword=${#words[@]}
    if [[ -n "$line" && "$line" != *[[:space:]] ]]; then
        cword=$((cword - 1))
    fi
    local cur="${words[cword]}"
    COMPREPLY=( $( env COMP_WORDS="$line" \\
                   COMP_CWORD=$cword \\
                   %(autocomplete_var)s=complete_bash "$1" 2>/dev/null ) )
    if [[ "$cur" == *:* && "$COMP_WORDBREAKS" == *:* ]]; then
        local prefix="${cur%%"${cur##*:}"}"
        local i
        for i in "${!COMPREPLY[@]}"; do
            COMPREPLY[i]="${COMPREPLY[i]#"$prefix"}"
        done
    fi
    return 0
}

complete -o default -F %(complete_func)s %(prog_name)s"""

ZSH_SOURCE = """\
#compdef %(prog_name)s

%(complete_func)s() {
  eval $(env _TYPER_COMPLETE_ARGS="${words[1,$CURRENT]}" \\
             %(autocomplete_var)s=complete_zsh %(prog_name)s)
}

if [[ "${funcstack[1]}" == "_%(prog_name)s" ]]; then
  %(complete_func)s "$@"
else
  compdef %(complete_func)s %(prog_name)s
fi"""


_BASH_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:@%+=,-")


def _bash_escape(value: str) -> str:
    """Backslash-escape what bash would split or expand (as `printf %q` does for plain text);
    ':' stays as it is, so the script can trim a key back to what bash replaces."""
    return "".join(c if c in _BASH_SAFE else "\\" + c for c in value)


_PATH_TYPES = ("path", "file", "filename", "directory")


def wants_files(comp: Any, args: list[str], incomplete: str) -> bool:
    """Whether the word being completed is a file or directory: a value of an option or an
    argument whose type is a path or whose metavar says FILE, DIR or PATH."""
    import re

    from typer._click import core, types
    from typer._click.shell_completion import _resolve_context, _resolve_incomplete

    try:
        ctx = _resolve_context(comp.cli, comp.ctx_args, comp.prog_name, list(args))
        obj, _ = _resolve_incomplete(ctx, list(args), incomplete)
    except Exception:  # a line the parser cannot place: the shell's default (files)
        return True
    if not isinstance(obj, core.Parameter):
        return False  # an option name or a subcommand comes next: no file
    if isinstance(obj.type, types.File) or getattr(obj.type, "name", "") in _PATH_TYPES:
        return True
    return bool(re.search(r"FILE|DIR|PATH", str(getattr(obj, "metavar", None) or "")))


def zsh_answer(comp: Any) -> str:
    """What zsh evals: Typer's answer, except that no completion means files only where a
    file is wanted (`-o FILE`, `--state-dir DIR`): after `list --kinds main` Tab lists
    nothing, not the directory."""
    args, incomplete = comp.get_completion_args()
    items = comp.get_completions(args, incomplete)
    if items:
        listed = "\n".join(map(comp.format_completion, items))
        return f"_arguments '*: :(({listed}))'"
    return "_files" if wants_files(comp, args, incomplete) else ""


def fish_answer(comp: Any) -> str:
    """fish's `is-args` question answered with an exit code: 1 lets fish complete files
    itself, which only a word that is a file may; elsewhere (0) our (maybe empty) list of
    values stands. Its other questions are Typer's."""
    if os.getenv("_TYPER_COMPLETE_FISH_ACTION", "") != "is-args":
        from typer._completion_classes import FishComplete

        return str(FishComplete.complete(comp))
    args, incomplete = comp.get_completion_args()
    if comp.get_completions(args, incomplete):
        sys.exit(0)
    sys.exit(1 if wants_files(comp, args, incomplete) else 0)


def register_shell_classes() -> None:
    """Register the completion classes `_SESSIONTOOL_COMPLETE` is answered with (Typer's, with
    the scripts above). Called only when completing or generating the scripts."""
    import re

    from typer._click.shell_completion import CompletionItem, add_completion_class
    from typer._completion_classes import BashComplete, FishComplete, ZshComplete, completion_init

    completion_init()

    class Bash(BashComplete):
        source_template = BASH_SOURCE

        def source(self) -> str:  # no bash version probe (a subprocess) just to print text
            return self.source_template % self.source_vars()

        def get_completion_args(self) -> tuple[list[str], str]:
            """The words as the shell will parse them (`tg\\ s` is one word): the script
            splits the line on blanks only, so its word count is not trusted here."""
            from typer._click.shell_completion import split_arg_string

            line = os.environ["COMP_WORDS"]
            words = split_arg_string(line)
            if line and not line[-1].isspace() and len(words) > 1:
                return words[1:-1], words[-1]
            return words[1:], ""

        def format_completion(self, item: CompletionItem) -> str:
            """bash inserts a completion as it is: a label with a space must come back
            escaped (`tg\\ seven`), or it becomes two words on the command line."""
            return _bash_escape(str(item.value))

    class Zsh(ZshComplete):
        source_template = ZSH_SOURCE

        complete = zsh_answer

        def format_completion(self, item: CompletionItem) -> str:
            def esc(s: str) -> str:
                return (
                    s.replace('"', '""')
                    .replace("'", "''")
                    .replace("$", "\\$")
                    .replace("`", "\\`")
                    .replace(":", r"\\:")
                )

            if item.help:
                return f'"{esc(item.value)}":"{esc(item.help)}"'
            return f'"{esc(item.value)}"'

    class Fish(FishComplete):
        complete = fish_answer

        def format_completion(self, item: CompletionItem) -> str:
            if item.help:
                return f"{item.value}\t" + re.sub(r"\s", " ", item.help)
            return str(item.value)

    add_completion_class(Bash, "bash")
    add_completion_class(Zsh, "zsh")
    add_completion_class(Fish, "fish")
