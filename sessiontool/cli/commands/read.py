"""`list` and `history`: the read side."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from sessiontool.cli import output, render
from sessiontool.cli.app import app, command, get_ctx, look, want_json
from sessiontool.cli.completers import choices, complete_keys, complete_labels
from sessiontool.errors import UsageError

if TYPE_CHECKING:
    from sessiontool.cli.historyformats import HistoryFormat, Writing
    from sessiontool.context import Context
    from sessiontool.sessions.history import History, HistorySpec
    from sessiontool.sessions.listing import SessionsResult
    from sessiontool.state.transcript import Message


def _without_cyclic_gc() -> None:
    """A read command parses a store (real ones reach 100 MB) and exits. JSON data has no
    reference cycles, so the cyclic collector would only re-scan those objects over and over
    (a fifth of the run on a big store); reference counting still frees everything. Nor is
    what it read freed piece by piece before the exit (see reader.keep_until_exit)."""
    import gc

    from sessiontool.state import reader

    gc.disable()
    reader.keep_until_exit()


_KEEP: list[object] = []  # results outlive the command: the process exit frees them at once


def _picked(fields: str | None, as_json: bool) -> list[str] | None:
    """`--fields`, checked against list's columns (with `--json`: any key of a row).
    cli/columns.py is loaded only when a column is asked for: cron's `list --json` every
    minute does without it."""
    if not fields:
        return None
    from sessiontool.cli import columns

    keys = columns.session_json_keys() if as_json else ()
    return columns.pick(columns.SESSIONS, fields, columns.SESSIONS, keys)


def parse_limit(value: str) -> int | None:
    """`--limit N` or `--limit all` (None)."""
    if value.strip().lower() == "all":
        return None
    try:
        n = int(value)
    except ValueError:
        raise UsageError(f"--limit expects a whole number or 'all', got {value!r}") from None
    if n < 1:
        raise UsageError("--limit must be at least 1 (or 'all')")
    return n


@app.command("list")
@command
def list_cmd(
    kinds: list[str] = typer.Option(
        [],
        "--kinds",
        help="main, group, cron, hook, node, other (repeat or comma-separate).",
        autocompletion=choices("main", "group", "cron", "hook", "node", "other"),
    ),
    limit: str = typer.Option("200", "--limit", help="At most N rows, or 'all'."),
    offset: int = typer.Option(
        0, "--offset", help="Skip the newest N rows (a page's nextOffset).", min=0
    ),
    label: str | None = typer.Option(
        None, "--label", help="Only the sessions with exactly this label."
    ),
    search: str | None = typer.Option(
        None,
        "--search",
        help="Only sessions whose key, label, displayName, sessionId, kind or model holds TEXT "
        "(any case; not the transcripts: that is `search`).",
        metavar="TEXT",
    ),
    active_only: bool = typer.Option(
        False, "--active-only", help="Only sessions with a run queued or running."
    ),
    exclude_subagents: bool = typer.Option(
        False, "--exclude-subagents", help="Leave out sub-agent and other spawned sessions."
    ),
    active_minutes: int | None = typer.Option(
        None, "--active-minutes", help="Only sessions updated in the last N minutes."
    ),
    message_limit: int = typer.Option(
        0, "--message-limit", help="Include each session's last N messages (max 20)."
    ),
    since: str | None = typer.Option(
        None, "--since", help="Only sessions updated since (30m, 2h, 1d or an ISO date)."
    ),
    all_agents: bool = typer.Option(
        False, "--all-agents", help="Every agent's sessions (operator)."
    ),
    archived: str = typer.Option(
        "no",
        "--archived",
        help="Archived sessions: no (left out), yes (only them) or all.",
        autocompletion=choices("no", "yes", "all"),
        metavar="no|yes|all",
    ),
    quiet: bool = typer.Option(False, "-q", "--quiet", help="Keys only."),
    fields: str | None = typer.Option(
        None,
        "--fields",
        help="Only these columns, in this order, as TSV (on a terminal too); with --json, only "
        "these keys (any key a row has, e.g. contextTokens).",
        metavar="F,..",
    ),
    json_: bool = typer.Option(False, "--json", help="JSON output."),
) -> None:
    """List sessions, pinned first, then the newest.

    Archived sessions are left out (--archived yes|all shows them, each row with
    `archived: true`). Piped: TSV without a header, one session per line: key, kind, channel, label, updatedAt,
    model, totalTokens, sessionId (the table's columns, then the sessionId); --fields picks
    and orders them."""
    from sessiontool.durations import parse_since
    from sessiontool.sessions.listing import list_page, list_spec

    as_json = want_json(json_)
    names = _picked(fields, as_json)
    if message_limit and not as_json and not quiet and not look().terminal():
        raise UsageError(
            "--message-limit needs --json when the output is piped (TSV is one line per session)",
            hint="sessiontool list --message-limit N --json",
        )
    _without_cyclic_gc()
    ctx = get_ctx(reads=True)
    spec = list_spec(
        archived=archived.strip().lower(),
        kinds=kinds,
        limit=parse_limit(limit),
        offset=offset,
        active_minutes=active_minutes,
        message_limit=message_limit,
        since_ms=parse_since(since) if since else None,
        all_agents=all_agents,
        label=label,
        search=search,
        active_keys=_active_keys(ctx) if active_only else None,
        exclude_subagents=exclude_subagents,
    )
    result = list_page(ctx, spec)
    _KEEP.append(result)
    output.show(
        _sessions_view(result, message_limit),
        output.look(ctx.options),
        as_json=as_json,
        quiet=quiet,
        fields=names,
    )


def _active_keys(ctx: Context) -> frozenset[str]:
    from sessiontool.runs.listing import active_session_keys

    return active_session_keys(ctx)


def _sessions_view(result: SessionsResult, message_limit: int) -> output.View[SessionsResult]:
    """`list`'s result for every format; the TSV columns are cli/columns.py's (loaded only
    when a TSV is written: cron's `list --json` every minute does without them)."""

    def table(look: render.Look, data: SessionsResult) -> None:
        from sessiontool.cli.lifecells import for_table

        render.sessions_table(look, for_table(data))
        if message_limit:
            render.sessions_messages(data)

    return output.View(
        result, lambda r: r["sessions"], columns=_session_columns, table=table, ids="key"
    )


def _session_columns() -> output.Columns:
    from sessiontool.cli import columns

    return columns.SESSIONS, list(columns.SESSIONS)


def _complete_format(incomplete: str) -> list[str]:
    from sessiontool.cli import historyformats

    return historyformats.complete(incomplete)


@app.command("history")
@command
def history_cmd(
    key: str | None = typer.Argument(
        None, help="Session key, bare key, 'main' or sessionId.", autocompletion=complete_keys
    ),
    label: str | None = typer.Option(
        None, "--label", help="Pick the session by its label.", autocompletion=complete_labels
    ),
    limit: str | None = typer.Option(
        None,
        "--limit",
        help="The last N messages (max 1000), or 'all'. Default 200; with -o: all.",
    ),
    offset: int | None = typer.Option(
        None, "--offset", help="Page back: N records from the newest (then nextOffset).", min=0
    ),
    message_id: str | None = typer.Option(
        None, "--message-id", help="The --limit messages around this one (search's messageId)."
    ),
    include_tools: bool = typer.Option(False, "--include-tools", help="Include tool results."),
    raw: bool = typer.Option(False, "--raw", help="Keep the channel envelope in user messages."),
    since: str | None = typer.Option(
        None, "--since", help="Only messages since (30m, 2h, 1d or an ISO date)."
    ),
    fmt: str | None = typer.Option(
        None,
        "--format",
        help="text, markdown, json, jsonl or html (one page, tool results included).",
        autocompletion=_complete_format,
    ),
    output_arg: str | None = typer.Option(
        None,
        "-o",
        "--output",
        help="Write to FILE instead of stdout ('-' is stdout).",
        metavar="FILE",
    ),
    follow: bool = typer.Option(False, "-f", "--follow", help="Keep printing new messages."),
    fields: str | None = typer.Option(
        None,
        "--fields",
        help="Only these keys of each message, in this order: with --json (or --format jsonl) "
        "the message objects, else TSV, one message a line (e.g. role,timestamp,content).",
    ),
    json_: bool = typer.Option(False, "--json", help="JSON output (same as --format json)."),
) -> None:
    """Show a session's transcript."""
    from sessiontool.cli import historyformats
    from sessiontool.durations import parse_since
    from sessiontool.sessions.history import HistorySpec

    dest = _output_path(output_arg)
    if follow and (offset is not None or message_id is not None):
        raise UsageError("--follow starts at the newest message: not with --offset, --message-id")
    names, row = _history_format(fmt, follow, dest is not None, fields)
    # An export (-o) is the whole transcript unless --limit says otherwise.
    default_n = None if dest is not None else 200
    n = parse_limit(limit) if limit is not None else default_n
    _without_cyclic_gc()
    ctx = get_ctx(reads=True)
    spec = HistorySpec(label=label, limit=n, include_tools=include_tools or row.tools, raw=raw)
    spec.offset, spec.message_id = offset, message_id
    spec.since_ms = parse_since(since) if since else None
    # the sessions spawned from it: under --follow they come later
    h = _read_history(ctx, key, spec, row.whole is None and not follow)
    _KEEP.append(h)
    start = _follow_start(ctx, h) if follow else None
    how = historyformats.Writing(
        row=row, fmt=fmt, as_json=want_json(json_), names=names, dest=dest, follow=follow
    )
    _write_history(ctx, h, how)
    if start is not None:
        _follow(ctx, h, how, spec=spec, start=start)


def _write_history(ctx: Context, h: History, how: Writing) -> None:
    """The transcript, once, where it goes: `-o FILE`, or stdout in its format."""
    from sessiontool.cli import historyformats

    look = output.look(ctx.options)
    if how.row.whole is not None:  # a document of history's own (--format markdown, ...)
        doc = how.row.whole(ctx, h)
        if how.dest is not None:
            _export(how.dest, doc)
        else:
            render.write_out(doc)
        return
    view = historyformats.transcript_view(h, how.names, empty=not how.follow)
    out = historyformats.output_format(how.fmt, how.as_json, look, how.names)
    if how.dest is None and how.follow and out == "json":
        # A JSON document cannot grow: its lines can (JSON Lines, as the messages that follow).
        historyformats.stream(h.messages, h.session_key, look, how)
    elif how.dest is None:
        output.emit(view, look, out, how.names)
    else:  # a file is no terminal: the JSON, or the text (TSV of --fields)
        _export(how.dest, historyformats.file_body(h, view, out, how.names))


def _follow_start(ctx: Context, h: History) -> int | None:
    """Where `--follow` starts: the transcript file's end as it was read (0 through the
    gateway, whose events follow a store with no file, checked up before anything is
    written); None when there is nothing to follow."""
    from sessiontool.state.transcript import file_size

    if h.resolved.gateway_written:
        from sessiontool.openclaw.gateway_reader import require_up

        require_up(ctx.paths)
        return 0
    return file_size(h.path) if h.path is not None else None


def _read_history(ctx: Context, key: str | None, spec: HistorySpec, children: bool) -> History:
    """The transcript and, with `children`, the sessions spawned from it: one read of the
    store for both."""
    from sessiontool.sessions.history import history_page, spawned_from
    from sessiontool.sessions.reading import read_scope

    with read_scope():
        h = history_page(ctx, key, spec)
        if children:
            h.children = spawned_from(ctx, h.resolved.key)
    return h


def _history_format(
    fmt: str | None, follow: bool, to_file: bool, fields: str | None
) -> tuple[list[str] | None, HistoryFormat]:
    """`--fields`' names and the `--format` asked for, its row in the table of history's
    formats (`cli/historyformats.py`), loaded here: `list` does without it; with `--fields`, a
    document row writing only those keys."""
    from sessiontool.cli import messagefields
    from sessiontool.cli.historyformats import FORMATS

    if fmt is not None and fmt not in FORMATS:
        raise UsageError(f"unknown format {fmt!r} (valid: {', '.join(FORMATS)})")
    row = FORMATS[fmt or "text"]
    if follow and to_file:
        raise UsageError("--follow writes to stdout; it cannot be combined with -o")
    if follow and row.whole is not None and row.message is None:
        raise UsageError(f"--follow cannot write {fmt} (a page is written once, whole)")
    names = messagefields.parse(fields) if fields is not None else None
    if names and row.whole is not None:
        from sessiontool.cli.historyformats import picking

        row = picking(fmt or "text", row, names)
    return names, row


def _output_path(arg: str | None) -> Path | None:
    """`-o FILE` as a path. An empty one (a cron line's unset `$OUT`) is a usage error, as an
    empty export DIR is: Path('') would be '.', the current directory."""
    if arg is None:
        return None
    if not arg.strip():
        from sessiontool.errors import UsageError

        raise UsageError("-o needs a file name ('-' for stdout); it was given an empty one")
    return Path(arg)


def _export(output: Path, body: str | bytes) -> None:
    """`-o FILE`: written owner-only and whole, or not at all; `-o -` is stdout, as for
    `send KEY -`."""
    if str(output) == "-":
        render.write_out(body)
        return
    from sessiontool.errors import from_os_error
    from sessiontool.state.safefs import write_private_file

    try:
        write_private_file(
            output, body if isinstance(body, bytes) else body.encode("utf-8", "surrogateescape")
        )
    except OSError as exc:
        raise from_os_error(exc, "write") from exc


def _follow(ctx: Context, h: History, how: Writing, spec: HistorySpec, start: int) -> None:
    """`history --follow`: each message that arrives after the first view, in the same format:
    appended to the transcript file, or (no file: OpenClaw's SQLite store, a remote gateway)
    reported by the gateway's events (openclaw/gateway_follow.py)."""
    import gc

    from sessiontool import diag
    from sessiontool.cli import historyformats
    from sessiontool.state.envelopes import strip_envelope

    gc.enable()  # --follow runs for as long as the user likes
    r = h.resolved
    if r.gateway_written:
        # No transcript file: the gateway's session.message events (openclaw/gateway_follow.py).
        from sessiontool.openclaw.gateway_follow import follow as follow_gateway

        new = follow_gateway(ctx.paths, r.agent_id, r.key, r.session_id)
    else:
        from sessiontool.state.transcript import follow as follow_messages

        assert h.path is not None
        new = follow_messages(h.path, start)

    def arriving() -> Iterator[Message]:
        for msg in new:
            if spec.include_tools or msg.get("role") != "toolResult":
                yield msg if spec.raw else strip_envelope(msg)
            for w in diag.drain():  # said as it happens (events dropped), not at the end
                render.warning_line(w)

    look = output.look(ctx.options)
    if how.row.message is not None:  # a document's messages (markdown, jsonl)
        for m in arriving():
            render.write_out(how.row.message(h.session_key, m))
            sys.stdout.flush()
        return
    historyformats.stream(arriving(), h.session_key, look, how)
