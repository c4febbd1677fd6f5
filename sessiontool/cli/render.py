"""All output: JSON (one compact line, one write), TSV when piped, and rich tables and chat views
on a terminal. The only module that imports rich, and only inside functions."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import IO, TYPE_CHECKING, Any

from sessiontool.cli.jsonout import json_bytes as json_bytes  # re-exported
from sessiontool.cli.jsonout import json_line as json_line  # re-exported: render.json_line
from sessiontool.clock import iso, now_ms
from sessiontool.termtext import esc as esc
from sessiontool.termtext import esc_text as esc_text
from sessiontool.termtext import label_cell
from sessiontool.termtext import one_line as one_line

if TYPE_CHECKING:
    from sessiontool.state.transcript import Message


class Look:
    """How output looks: `--color` and the output format (cli/output.py), from the frozen
    `Options`, passed to what draws; never a module global (`mcp`'s contexts share none)."""

    __slots__ = ("color", "format")

    def __init__(self, color: str = "auto", format: str | None = None) -> None:
        self.color, self.format = color, format

    def colored(self, stream: IO[str] | None = None) -> bool:
        if self.color != "auto":
            return self.color == "always"
        dumb = os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb"
        return not dumb and _isatty(stream or sys.stdout)

    def terminal(self, stream: IO[str] | None = None) -> bool:
        """For a person: a terminal, or stdout under `--color always` (`list | less -R`)."""
        if self.color == "always" and (stream is None or stream is sys.stdout):
            return True
        return _isatty(stream or sys.stdout)


def _isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def write_out(text: str | bytes, fd: int = 1) -> None:
    """Write all of `text` with as few write(2) calls as the kernel allows (one, for a pipe
    under its buffer size), so lines from many processes sharing a pipe do not interleave."""
    if isinstance(text, bytes):
        data = text
    else:
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:
            # A lone surrogate (a "\\ud800" escape in a file, an undecodable byte in an
            # argument) has no UTF-8 form: write it as the escape `\\ud800`, which is also
            # what it must be inside a JSON string. Never invalid UTF-8 on stdout, never a crash.
            data = text.encode("utf-8", "backslashreplace")
    try:
        sys.stdout.flush()
    except (ValueError, OSError):
        pass
    view = memoryview(data)
    try:
        while view:
            n = os.write(fd, view)
            view = view[n:]
    except BrokenPipeError:
        # `sessiontool list | head`: the reader left; that is not an error of ours.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, fd)
        except OSError:
            pass


def emit_json(obj: Any) -> None:
    write_out(json_bytes(obj))


STREAM_ROWS = 1000  # rows per write when a listing is streamed


def emit_json_rows(head: Mapping[str, Any], key: str, rows: Sequence[Any]) -> None:
    """`head` with `key` set to `rows`, as emit_json writes it (the same bytes), but a long
    list is encoded and written STREAM_ROWS rows at a time: 100,000 sessions never become one
    44 MB string."""
    if len(rows) <= STREAM_ROWS:
        emit_json({**head, key: rows})
        return
    opening = json_bytes({**head, key: []})
    if not opening.endswith(b"[]}\n"):  # `key` must come last for the rows to go at the end
        emit_json({**head, key: rows})
        return
    write_out(opening[:-4] + b"[")
    for start in range(0, len(rows), STREAM_ROWS):
        chunk = json_bytes(rows[start : start + STREAM_ROWS])
        write_out((b"," if start else b"") + chunk[1:-2])
    write_out(b"]}\n")


def err(text: str) -> None:
    try:
        sys.stderr.write(text if text.endswith("\n") else text + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def empty(look: Look, text: str) -> None:
    """The one rule for an empty result: a line (on stderr) when stdout is a terminal, so a
    person sees that nothing matched; nothing at all when piped, so a script reads no rows."""
    if look.terminal():
        err(text)


# -- foreign text on a terminal ----------------------------------------------------------------
# The one rule for text sessiontool did not write (a key, a label, a transcript, a gateway's
# close reason or error message, a model name) is sessiontool/termtext.py's, which `top` shows
# its panes through too: `esc` (a field), `esc_text` (a body), `one_line` (a message line).


def error_line(message: str, hint: str | None = None) -> None:
    err(f"sessiontool: error: {one_line(message)}")
    if hint:
        err(f"hint: {one_line(hint)}")


def warning_line(message: str) -> None:
    err(f"sessiontool: warning: {one_line(message)}")


# -- time and numbers --------------------------------------------------------------------------


UNKNOWN_TIME = "?"


def _representable(ms: Any) -> bool:
    """A timestamp a calendar can show (years 1..9999); an out-of-range or non-finite one in a
    store or transcript renders as `?` in text output (--json passes it through)."""
    try:
        datetime.fromtimestamp(ms / 1000, tz=UTC)
    except (OverflowError, ValueError, OSError):
        return False
    return True


def ago(ms: Any, now: int | None = None) -> str:
    if not isinstance(ms, int | float) or isinstance(ms, bool):
        return "-"
    if not _representable(ms):
        return UNKNOWN_TIME
    delta = max(0, (now if now is not None else now_ms()) - int(ms)) // 1000
    if delta < 60:
        return "just now" if delta < 5 else f"{delta}s ago"
    if delta < 3600:
        return f"{delta // 60}m ago"
    if delta < 86400:
        return f"{delta // 3600}h ago"
    return f"{delta // 86400}d ago"


def iso_or_dash(ms: Any) -> str:
    if isinstance(ms, int | float) and not isinstance(ms, bool):
        return iso(ms) if _representable(ms) else UNKNOWN_TIME
    return ""


def compact_count(n: Any) -> str:
    if not isinstance(n, int | float) or isinstance(n, bool):
        return "-"
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}m"
    if n >= 1_000:
        return f"{n / 1_000:.1f}k"
    return str(int(n))


def local_time(ms: Any) -> str:
    if not isinstance(ms, int | float) or isinstance(ms, bool):
        return ""
    if not _representable(ms):
        return UNKNOWN_TIME
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _cell(v: Any) -> str:
    if isinstance(v, bool):  # as JSON spells it, not Python
        return "true" if v else "false"
    return esc(v)


def tsv(rows: Iterable[Sequence[Any]]) -> str:
    return "".join("\t".join(_cell(c) for c in row) + "\n" for row in rows)


# -- rich --------------------------------------------------------------------------------------


def console(look: Look, stream: IO[str] | None = None) -> Any:
    from rich.console import Console

    color = look.colored(stream)
    return Console(
        file=stream or sys.stdout,
        no_color=not color,
        color_system="auto" if color else None,
        force_terminal=True if look.color == "always" else None,
        highlight=False,
        soft_wrap=False,
    )


Fit = Mapping[str, str]  # a column → how it fits: "whole", "key" or "cut"; unnamed, it folds


def table(look: Look, columns: Sequence[str], rows: Iterable[Sequence[Any]], fit: Fit) -> None:
    """A table, each column as `fit` says: a "whole" column (ids, short words) is never folded
    over two lines; a "key" column (session keys) neither, a half key copied is no key, and
    where the table is wider than the terminal its keys are shortened in the middle ("…") with
    a line under the table that says where the whole values are; a "cut" column (a run's
    result) is cut at its end with "…" to what is left of the width (termtext.py's rule, which
    `top` follows too); any other column folds."""
    from rich.markup import escape
    from rich.table import Table

    cells = [[_cell(v) for v in r] for r in rows]
    c = console(look)
    shortened = _fit_cells(columns, cells, fit, c.width)
    t = Table(box=None, header_style="bold", pad_edge=False)
    for col in columns:
        how = fit.get(col)
        if how is None:
            t.add_column(col, overflow="fold")
        else:
            t.add_column(col, no_wrap=True, overflow="ellipsis" if how == "cut" else "ignore")
    for r in cells:
        t.add_row(*[escape(v) for v in r])
    c.print(t)
    if shortened:
        c.print("[dim](keys shortened with … to fit; --json or piped output has them whole)[/]")


def _fit_cells(columns: Sequence[str], cells: list[list[str]], fit: Fit, width: int) -> bool:
    """Shorten the "key" cells, then the "cut" ones, to fit `width`; whether a key was."""
    from sessiontool.cli.fit import cut_width, key_width
    from sessiontool.termtext import end_ellipsis, middle_ellipsis

    keys = [col for col in columns if fit.get(col) == "key"]
    cut = [col for col in columns if fit.get(col) == "cut"]
    shortened = False
    if keys:
        most = key_width(columns, cells, keys, width)
        at = [i for i, col in enumerate(columns) if col in keys]
        for r in cells:
            for i in at:
                if len(r[i]) > most:
                    r[i], shortened = middle_ellipsis(r[i], most), True
    if cut:
        most = cut_width(columns, cells, cut, width)
        at = [i for i, col in enumerate(columns) if col in cut]
        for r in cells:
            for i in at:
                r[i] = end_ellipsis(r[i], most)
    return shortened


# -- sessions ----------------------------------------------------------------------------------


def sessions_table(look: Look, result: Mapping[str, Any]) -> None:
    rows = result["sessions"]
    if not rows:
        empty(look, "No sessions.")
        return
    now = now_ms()
    table(
        look,
        ["KEY", "KIND", "CHANNEL", "LABEL", "UPDATED", "MODEL", "TOKENS"],
        (
            [
                r["key"],
                r["kind"],
                r.get("channel", ""),
                label_cell(r),
                ago(r.get("updatedAt"), now),
                r.get("model", ""),
                _tokens_cell(r),
            ]
            for r in rows
        ),
        {"KEY": "key"},
    )


def sessions_messages(result: Mapping[str, Any]) -> None:
    """`list --message-limit N` on a terminal: each session's last messages under the table."""
    out: list[str] = []
    for r in result["sessions"]:
        msgs = r.get("messages") or []
        if not msgs:
            continue
        out.append(f"\n{r['key']}:")
        for m in msgs:
            text = one_line(message_text(m).replace("\n", " "))
            if len(text) > 200:
                text = text[:199] + "…"
            out.append(f"  {_role_label(m)}: {text}")
    if out:
        write_out("\n".join(out) + "\n")


def _tokens_cell(r: Mapping[str, Any]) -> str:
    total = r.get("totalTokens")
    ctx = r.get("contextTokens")
    if total is None:
        return "-"
    if isinstance(ctx, int | float) and ctx:
        return f"{compact_count(total)}/{compact_count(ctx)} ({round(total * 100 / ctx)}%)"
    return compact_count(total)


# -- messages ----------------------------------------------------------------------------------


def message_text(msg: Message, *, summarise_tools: bool = True) -> str:
    """The readable text of a message: text blocks, tool calls summarised, images named."""
    content = msg.get("content")
    if isinstance(content, str):
        return content
    parts: list[str] = []
    if isinstance(content, list):
        for b in content:
            if not isinstance(b, dict):
                continue
            t = b.get("type")
            if t == "text" and isinstance(b.get("text"), str):
                parts.append(b["text"])
            elif t == "thinking" and isinstance(b.get("thinking"), str):
                parts.append(f"(thinking) {b['thinking']}")
            elif t == "toolCall" and summarise_tools:
                args = json.dumps(b.get("arguments", {}), ensure_ascii=False)
                if len(args) > 200:
                    args = args[:197] + "..."
                parts.append(f"→ {b.get('name', '?')}({args})")
            elif t == "image":
                parts.append(f"[image {b.get('mimeType', '')}]")
    elif isinstance(msg.get("text"), str):
        parts.append(msg["text"])
    failure = run_failure(msg)
    if failure:
        parts.append(failure)
    return "\n".join(parts)


def run_failure(msg: Message) -> str | None:
    """A failed or aborted run's assistant message carries no text, only `stopReason` and
    `errorMessage` (OpenClaw's shape): show those rather than an empty reply."""
    reason = msg.get("stopReason")
    if msg.get("role") != "assistant" or reason not in ("error", "aborted"):
        return None
    error = msg.get("errorMessage")
    detail = error.strip() if isinstance(error, str) and error.strip() else "(no message)"
    return f"[{'aborted' if reason == 'aborted' else 'error'}: {detail}]"


def _role_label(msg: Message) -> str:
    role = str(msg.get("role", "?"))
    if role == "toolResult":
        return f"tool {msg.get('toolName', '')}".strip() + (
            " (error)" if msg.get("isError") else ""
        )
    from sessiontool.sessions.origin import from_label

    sender = from_label(msg)  # another agent's message: named, as the HTML page names it
    return f"{role} ({sender})" if sender else role


def _mirror(session_key: str, messages: list[Message], i: int) -> tuple[str, bool] | None:
    """A delivery mirror's mark and whether it repeats the reply above (sessions/mirrors.py);
    None for any other message."""
    from sessiontool.sessions import mirrors

    if not mirrors.is_delivery_mirror(messages[i]):
        return None
    return "↳ " + esc(mirrors.mark(session_key, messages[i])), mirrors.repeats_reply(messages, i)


def history_markdown(session_key: str, messages: list[Message]) -> str:
    out = [f"# Session {esc(session_key)}\n"]
    for i, m in enumerate(messages):
        when = local_time(m.get("timestamp"))
        mirror = _mirror(session_key, messages, i)
        if mirror is not None:
            note, same = mirror
            text = "" if same else esc_text(message_text(m))
            out.append(f"_{note} — {when}{' (the reply above)' if same else ''}_\n")
            if text:
                out.append(text + "\n")
            continue
        out.append(f"## {esc(_role_label(m))} — {when}\n")
        text = esc_text(message_text(m))
        out.append((text or "_(empty)_") + "\n")
    return "\n".join(out)


def history_plain(session_key: str, messages: list[Message]) -> str:
    out = []
    for i, m in enumerate(messages):
        when = local_time(m.get("timestamp"))
        mirror = _mirror(session_key, messages, i)
        if mirror is not None and mirror[1]:
            out += [f"[{when}] {mirror[0]} (the reply above)", ""]
            continue
        label = mirror[0] if mirror is not None else esc(_role_label(m))
        out.append(f"[{when}] {label}:")
        out.append(esc_text(message_text(m)))
        out.append("")
    return "\n".join(out) + ("\n" if out else "")


def history_rich(look: Look, session_key: str, messages: list[Message]) -> None:
    from rich.markup import escape

    c = console(look)
    styles = {"user": "bold cyan", "assistant": "bold green", "toolResult": "bold yellow"}
    for i, m in enumerate(messages):
        role = str(m.get("role"))
        mirror = _mirror(session_key, messages, i)
        if mirror is not None:
            note, same = mirror
            when = local_time(m.get("timestamp"))
            c.print(f"[dim]{escape(note)} {when}{' (the reply above)' if same else ''}[/]")
            if not same:
                c.print(f"[dim]{escape(esc_text(message_text(m)))}[/]")
            c.print()
            continue
        c.print(
            f"[{styles.get(role, 'bold')}]{escape(esc(_role_label(m)))}[/] [dim]{local_time(m.get('timestamp'))}[/]"
        )
        content = m.get("content")
        if isinstance(content, list):
            for b in content:
                if not isinstance(b, dict):
                    continue
                if b.get("type") == "thinking":
                    c.print(f"[dim italic]{escape(esc_text(str(b.get('thinking', ''))))}[/]")
                else:
                    text = message_text({"content": [b]})
                    if text:
                        c.print(escape(esc_text(text)))
            failure = run_failure(m)
            if failure:
                c.print(f"[bold red]{escape(esc_text(failure))}[/]")
        else:
            c.print(escape(esc_text(message_text(m))))
        c.print()


# -- search and usage --------------------------------------------------------------------------


def _marked(snippet: str, spans: list[list[int]], left: str, right: str) -> str:
    out: list[str] = []
    pos = 0
    for s, e in spans:
        out += [snippet[pos:s], left, snippet[s:e], right]
        pos = e
    out.append(snippet[pos:])
    return "".join(out)


def marked_snippet(h: Mapping[str, Any]) -> str:
    """A hit's snippet with each match as `[match]`."""
    return _marked(h["snippet"], h["highlights"], "[", "]")


def search_rich(look: Look, result: Mapping[str, Any]) -> None:
    from rich.markup import escape

    c = console(look)
    for h in result["hits"]:
        who = h.get("key") or f"{h['sessionId']} (archived)"
        label = f" [dim]({escape(esc(h['label']))})[/]" if h.get("label") else ""
        c.print(
            f"[bold cyan]{escape(esc(who))}[/]{label} [dim]{local_time(h.get('timestamp'))}[/] "
            f"[green]{escape(esc(h['role']))}[/]"
        )
        snippet = h["snippet"]
        pieces: list[str] = []
        pos = 0
        for s, e in h["highlights"]:  # each piece escaped alone: the spans index the raw text
            pieces += [escape(esc_text(snippet[pos:s])), "[bold]", escape(esc_text(snippet[s:e]))]
            pieces.append("[/]")
            pos = e
        pieces.append(escape(esc_text(snippet[pos:])))
        c.print("  " + "".join(pieces))


USAGE_COLUMNS = ("input", "output", "cacheRead", "cacheWrite", "turns", "runs", "cost")


def _usd(v: Any) -> str:
    return f"{float(v):.4f}"


def usage_cells(result: Mapping[str, Any]) -> list[list[Any]]:
    """No header, as every TSV (cli/columns.py): the group, then USAGE_COLUMNS; TOTAL last."""
    by = result["by"]
    rows: list[list[Any]] = []
    for r in [*result["rows"], {by: "TOTAL", **result["total"]}]:
        rows.append([r[by], *(r[c] for c in USAGE_COLUMNS[:-1]), _usd(r["cost"])])
    return rows


_EIGHTHS = "▏▎▍▌▋▊▉"


def bar(value: float, top: float, width: int = 30) -> str:
    """`value` as a bar of block characters, `width` cells at `top` (eighths of a cell)."""
    if top <= 0 or value <= 0:
        return ""
    full, part = divmod(max(1, round(value / top * width * 8)), 8)
    return "█" * full + (_EIGHTHS[part - 1] if part else "")


def _tokens_of(r: Mapping[str, Any]) -> int:
    return int(r["input"] + r["output"] + r["cacheRead"] + r["cacheWrite"])


def usage_table(look: Look, result: Mapping[str, Any]) -> None:
    by = result["by"]
    rows = [
        [r[by], *(compact_count(r[c]) for c in USAGE_COLUMNS[:-1]), "$" + _usd(r["cost"])]
        for r in result["rows"]
    ]
    t = result["total"]
    columns = [by.upper(), "INPUT", "OUTPUT", "CACHE READ", "CACHE WRITE", "TURNS", "RUNS", "COST"]
    if by == "day":  # one bar per day: cost, or tokens where nothing was priced
        measure: Any = (lambda r: r["cost"]) if t["cost"] > 0 else _tokens_of
        top = max((measure(r) for r in result["rows"]), default=0)
        width = max(8, min(30, console(look).width - 80))  # the numbers keep their room
        columns.append("COST BAR" if t["cost"] > 0 else "TOKENS BAR")  # not a second COST
        for row, r in zip(rows, result["rows"], strict=True):
            row.append(bar(measure(r), top, width))
    rows.append(
        ["TOTAL", *(compact_count(t[c]) for c in USAGE_COLUMNS[:-1]), "$" + _usd(t["cost"])]
    )
    table(
        look,
        columns,
        rows,
        {columns[0]: "whole", columns[-1]: "whole"}
        if by == "day"
        else {columns[0]: "key"}
        if by == "session"
        else {},
    )
