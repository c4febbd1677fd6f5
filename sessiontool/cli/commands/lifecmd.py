"""`archive`, `restore`, `pin`, `unpin`, `session` (a session's own model and thinking level),
`fork`, `rewind` and `compact`: a session's life. Each parses, calls one function of
`sessiontool.operations` (life.py, branch.py) and renders what it returns; `-q` prints the
session's key alone (for `fork`, the new session's)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import typer

from sessiontool.cli import output, render
from sessiontool.cli.app import app, command, get_ctx, look, want_json
from sessiontool.cli.completers import complete_keys, complete_labels

KEY_HELP = "Session key, bare key, 'main' or sessionId."
LABEL_HELP = "Pick the session by its label instead of KEY."
EXPECT_HELP = (
    "Refuse (exit 4) unless the session is still this sessionId (OpenClaw's expectedSessionId)."
)
QUIET_HELP = "Print the session key alone."


def _key_arg() -> Any:
    return typer.Argument(None, help=KEY_HELP, metavar="KEY", autocompletion=complete_keys)


def _label_opt() -> Any:
    return typer.Option(
        None, "--label", help=LABEL_HELP, metavar="L", autocompletion=complete_labels
    )


def _expect_opt() -> Any:
    return typer.Option(None, "--expect-session-id", help=EXPECT_HELP, metavar="ID")


def emit(result: Mapping[str, Any], as_json: bool, quiet: bool, human: str) -> None:
    """The result: its JSON, the key alone (`-q`), or one line for a person."""
    key = str(result.get("forkKey") or result["sessionKey"])
    line = render.esc(key) if quiet else human
    output.show(output.View(result, text=lambda _: line + "\n"), look(), as_json=as_json)


def _state(result: Mapping[str, Any]) -> str:
    parts = ["archived" if result["archived"] else "active"]
    if result["pinned"]:
        parts.append("pinned")
    parts.append(f"model: {render.esc(result['model'] or 'default')}")
    parts.append(f"thinking: {render.esc(result['thinkingLevel'] or 'default')}")
    return f"{render.esc(result['sessionKey'])}\t" + ", ".join(parts)


@app.command("archive")
@command
def archive_cmd(
    key: str | None = _key_arg(),
    label: str | None = _label_opt(),
    expect: str | None = _expect_opt(),
    quiet: bool = typer.Option(False, "-q", "--quiet", help=QUIET_HELP),
    json_: bool = typer.Option(False, "--json", help="JSON output."),
) -> None:
    """Archive a session: it leaves `list`, keeps its transcript and refuses sends (operator).

    `list --archived yes` shows it, `restore` brings it back. OpenClaw's field (`archivedAt`)
    in sessions.json, or `sessions.patch` on an OpenClaw store. A main session, and one with a
    run queued or running, is refused (exit 4)."""
    from sessiontool.operations.life import set_archived

    result = set_archived(get_ctx(), key, True, label=label, expect=expect)
    emit(result, want_json(json_), quiet, f"archived {render.esc(result['sessionKey'])}")


@app.command("restore")
@command
def restore_cmd(
    key: str | None = _key_arg(),
    label: str | None = _label_opt(),
    expect: str | None = _expect_opt(),
    quiet: bool = typer.Option(False, "-q", "--quiet", help=QUIET_HELP),
    json_: bool = typer.Option(False, "--json", help="JSON output."),
) -> None:
    """Restore an archived session: back in `list`, a send target again (operator)."""
    from sessiontool.operations.life import set_archived

    result = set_archived(get_ctx(), key, False, label=label, expect=expect)
    emit(result, want_json(json_), quiet, f"restored {render.esc(result['sessionKey'])}")


@app.command("pin")
@command
def pin_cmd(
    key: str | None = _key_arg(),
    label: str | None = _label_opt(),
    quiet: bool = typer.Option(False, "-q", "--quiet", help=QUIET_HELP),
    json_: bool = typer.Option(False, "--json", help="JSON output."),
) -> None:
    """Pin a session: shown first in `list` and `top` (operator; root sessions only).

    A sub-agent or other child session is refused (exit 4), as OpenClaw rules; so is an
    archived one (restore it first)."""
    from sessiontool.operations.life import set_pinned

    result = set_pinned(get_ctx(), key, True, label=label)
    emit(result, want_json(json_), quiet, f"pinned {render.esc(result['sessionKey'])}")


@app.command("unpin")
@command
def unpin_cmd(
    key: str | None = _key_arg(),
    label: str | None = _label_opt(),
    quiet: bool = typer.Option(False, "-q", "--quiet", help=QUIET_HELP),
    json_: bool = typer.Option(False, "--json", help="JSON output."),
) -> None:
    """Unpin a session (operator)."""
    from sessiontool.operations.life import set_pinned

    result = set_pinned(get_ctx(), key, False, label=label)
    emit(result, want_json(json_), quiet, f"unpinned {render.esc(result['sessionKey'])}")


@app.command("session")
@command
def session_cmd(
    key: str | None = _key_arg(),
    model: str | None = typer.Option(
        None,
        "--model",
        help="The model of this session's next runs, or 'default' to clear it.",
        metavar="M",
    ),
    thinking: str | None = typer.Option(
        None,
        "--thinking",
        help="Its thinking level (off, minimal, low, medium, high, xhigh, adaptive, max, "
        "ultra), or 'default'.",
        metavar="LEVEL",
    ),
    label: str | None = _label_opt(),
    quiet: bool = typer.Option(False, "-q", "--quiet", help=QUIET_HELP),
    json_: bool = typer.Option(False, "--json", help="JSON output."),
) -> None:
    """Show or set a session's own model and thinking level (operator to set).

    Stored as OpenClaw stores the override (`providerOverride`/`modelOverride`,
    `thinkingLevel`) and used by the session's next runs on every runner; `list` and
    `history` show it. The model is checked as `spawn --model` checks it."""
    from sessiontool.operations.life import set_overrides

    result = set_overrides(get_ctx(), key, model=model, thinking=thinking, label=label)
    emit(result, want_json(json_), quiet, _state(result))
