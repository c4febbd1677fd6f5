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
    key = str(result["sessionKey"])
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
    from sessiontool.runs.sessionlife import set_archived

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
    from sessiontool.runs.sessionlife import set_archived

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
    from sessiontool.runs.sessionlife import set_pinned

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
    from sessiontool.runs.sessionlife import set_pinned

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
    """Show or set a session's own model and thinking level (operator).

    Stored as OpenClaw stores the override (`providerOverride`/`modelOverride`,
    `thinkingLevel`) and used by the session's next runs on every runner; `list` and
    `history` show it. The model is checked as `spawn --model` checks it."""
    from sessiontool.runs.sessionlife import set_overrides

    result = set_overrides(get_ctx(), key, model=model, thinking=thinking, label=label)
    emit(result, want_json(json_), quiet, _state(result))


@app.command("fork")
@command
def fork_cmd(
    key: str | None = _key_arg(),
    at: str | None = typer.Option(
        None,
        "--at",
        help="Fork from just before this user message (its id: history --json, messageIds).",
        metavar="MESSAGE_ID",
    ),
    label: str | None = typer.Option(None, "--label", help="The new session's label.", metavar="L"),
    of: str | None = typer.Option(
        None,
        "--of",
        help="Pick the session to fork by its label.",
        metavar="L",
        autocompletion=complete_labels,
    ),
    quiet: bool = typer.Option(False, "-q", "--quiet", help="Print the new session's key alone."),
    json_: bool = typer.Option(False, "--json", help="JSON output."),
) -> None:
    """Fork a session: a new one whose transcript is KEY's (operator).

    With --at, up to just before that user message (OpenClaw's sessions.fork): its text comes
    back as `editorText`, to send to the fork. The new session records its lineage
    (`forkSource`), is listed and takes sends; it keeps KEY's own model and thinking level."""
    from sessiontool.operations.branch import fork

    result = fork(get_ctx(), key, at=at, label=label, by_label=of)
    human = f"forked {render.esc(result['forkedFrom'])} into {render.esc(result['sessionKey'])}"
    if result.get("editorText") is not None:
        human += f"\nthe message it stopped before: {render.esc(result['editorText'])}"
    emit(result, want_json(json_), quiet, human)


@app.command("rewind")
@command
def rewind_cmd(
    key: str | None = _key_arg(),
    message_id: str = typer.Argument(
        ...,
        help="The user message to go back before (history --json, messageIds).",
        metavar="MESSAGE_ID",
    ),
    label: str | None = _label_opt(),
    expect: str | None = _expect_opt(),
    quiet: bool = typer.Option(False, "-q", "--quiet", help=QUIET_HELP),
    json_: bool = typer.Option(False, "--json", help="JSON output."),
) -> None:
    """Rewind a session to just before one of its user messages (operator).

    The next run continues from there (OpenClaw's sessions.rewind); the message's text comes
    back as `editorText`. What followed is kept: on sessiontool's store the transcript as it was
    in <transcript>.rewound.<time>, on OpenClaw's as a branch of its transcript. A run queued or
    running in the session is refused (exit 4, naming it)."""
    from sessiontool.operations.branch import rewind

    result = rewind(get_ctx(), key, message_id, label=label, expect=expect)
    human = f"rewound {render.esc(result['sessionKey'])} to before {render.esc(message_id)}"
    if result.get("archived"):
        human += f" (the transcript before it: {render.esc(result['archived'])})"
    emit(result, want_json(json_), quiet, human)


@app.command("compact")
@command
def compact_cmd(
    key: str | None = _key_arg(),
    keep: int | None = typer.Option(
        None, "--keep", help="The last N turns kept as they are (default 2).", metavar="N"
    ),
    timeout: float = typer.Option(
        300.0,
        "--timeout",
        help="Seconds to wait for the compaction (0: do not wait).",
        metavar="S",
    ),
    label: str | None = _label_opt(),
    quiet: bool = typer.Option(False, "-q", "--quiet", help=QUIET_HELP),
    json_: bool = typer.Option(False, "--json", help="JSON output."),
) -> int:
    """Compact a session: its older turns summarized into one entry (operator).

    OpenClaw's compaction: a `compaction` entry (`summary`, `firstKeptEntryId`) in its
    transcript format, so the next run sees the summary and the last N turns. On sessiontool's
    store the session's own runner writes the summary, as one run of kind `compact` queued in
    the session's lane (behind any run there; `wait` and `abort` take its id), and the
    transcript before it is kept in <transcript>.compacted.<time>. On OpenClaw's store:
    `sessions.compact` (a session with work queued or running: exit 4). Exit 1 when the
    compaction failed, 124 when it was still running at --timeout."""
    from sessiontool.operations.branch import compact

    result, code = compact(get_ctx(), key, keep=keep, timeout=timeout, label=label)
    emit(result, want_json(json_), quiet, _compact_text(result))
    return code


def _compact_text(result: Mapping[str, Any]) -> str:
    key = render.esc(result["sessionKey"])
    info = result.get("compaction") or {}
    if result["status"] == "accepted":
        return f"compaction queued: {render.esc(result['runId'])} (sessiontool wait it)"
    if result["status"] != "ok":
        return f"{key}: compaction {result['status']}: {render.esc(result.get('error'))}"
    if not info.get("compacted"):
        return f"{key}: nothing compacted ({render.esc(info.get('reason') or 'nothing to do')})"
    where = f"; before it: {render.esc(info['archived'])}" if info.get("archived") else ""
    return f"{key}: compacted {info.get('summarized', '?')} messages{where}"
