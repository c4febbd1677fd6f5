"""`diff`: two sessions, or two runs, side by side, with their first divergence."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import typer

from sessiontool.cli import output
from sessiontool.cli.app import app, command, get_ctx, want_json
from sessiontool.cli.completers import complete_keys
from sessiontool.errors import UsageError

_SHOWN = 60  # a step's text in the terminal view


def _one_line(text: str | None, width: int = _SHOWN) -> str:
    t = " ".join((text or "").split())
    return t if len(t) <= width else t[: width - 1] + "…"


def cells(result: Mapping[str, Any]) -> list[list[Any]]:
    """No header: step, same (= or ≠; ! marks the first divergence), a kind, a text, b kind,
    b text (texts on one line)."""
    a, b = result["a"]["steps"], result["b"]["steps"]
    first = result["divergence"]["step"] if result["divergence"] else None
    out = []
    for i in range(max(len(a), len(b))):
        x = a[i] if i < len(a) else {"kind": "", "text": ""}
        y = b[i] if i < len(b) else {"kind": "", "text": ""}
        mark = "=" if (x["kind"], x["text"]) == (y["kind"], y["text"]) else "≠"
        if first == i + 1:
            mark = "!"
        out.append(
            [
                i + 1,
                mark,
                x["kind"],
                _one_line(x["text"], 10**6),
                y["kind"],
                _one_line(y["text"], 10**6),
            ]
        )
    return out


def _table(look: Any, result: Mapping[str, Any]) -> None:
    from sessiontool.cli.render import compact_count, table, write_out

    a, b = result["a"], result["b"]
    summary = [
        ["session", a["session"], b["session"]],
        ["messages", a["messages"], b["messages"]],
        ["turns", a["turns"], b["turns"]],
        ["tokens", compact_count(a["tokens"]["total"]), compact_count(b["tokens"]["total"])],
        ["cost", f"${a['cost']:.4f}", f"${b['cost']:.4f}"],
        ["duration", f"{a['durationMs'] / 1000:.1f}s", f"{b['durationMs'] / 1000:.1f}s"],
        [
            "tool calls",
            _one_line(" → ".join(a["tools"])) or "none",
            _one_line(" → ".join(b["tools"])) or "none",
        ],
    ]
    table(look, ["", "A", "B"], summary, {"": "whole"})
    first = result["divergence"]
    if first is None:
        write_out("The two are the same, step for step.\n")
        return
    at = first["step"]
    rows = cells(result)
    lo, hi = max(0, at - 4), min(len(rows), at + 10)
    write_out(
        f"First divergence at step {at} ({first['aKind'] or 'end'} / {first['bKind'] or 'end'}):\n"
    )
    shown = [
        [
            r[0],
            r[1],
            f"{r[2]}: {_one_line(r[3])}" if r[2] else "",
            f"{r[4]}: {_one_line(r[5])}" if r[4] else "",
        ]
        for r in rows[lo:hi]
    ]
    table(look, ["STEP", "", "A", "B"], shown, {"STEP": "whole"})
    if lo or hi < len(rows):
        write_out(f"(steps {lo + 1}-{hi} of {len(rows)}; --json or a pipe for all)\n")


@app.command("diff")
@command
def diff_cmd(
    a: str = typer.Argument(
        ..., help="The first session (or run id with --runs).", autocompletion=complete_keys
    ),
    b: str = typer.Argument(
        ..., help="The second session (or run id with --runs).", autocompletion=complete_keys
    ),
    runs: bool = typer.Option(
        False, "--runs", help="A and B are run ids: compare those runs' turns."
    ),
    format_: str | None = typer.Option(
        None, "--format", help="html: one page on stdout, the two columns aligned."
    ),
    json_: bool = typer.Option(False, "--json", help="JSON output."),
) -> None:
    """Two sessions (or two runs) side by side: turns, tokens, cost, duration, the tool calls,
    and the first step where they diverge (a user message, a tool call or a reply).

    Each side is read from its own store (an OpenClaw session against a sessiontool one).
    Piped: TSV without a header, one row per step: step, same (= or ≠; ! the first
    divergence), A's kind, A's text, B's kind, B's text. --json: both sides' figures and
    steps, and the divergence."""
    from sessiontool.reports.diff import diff_runs, diff_sessions

    if format_ not in (None, "html"):
        raise UsageError(f"--format must be html, got {format_!r}")
    ctx = get_ctx(reads=True)
    result = diff_runs(ctx, a, b) if runs else diff_sessions(ctx, a, b)
    if format_ == "html":
        from sessiontool.cli.render import write_out
        from sessiontool.reports.diff_html import diff_page

        write_out(diff_page(result))
        return
    view = output.View(result, cells=cells, table=_table)
    output.show(view, output.look(ctx.options), as_json=want_json(json_))
