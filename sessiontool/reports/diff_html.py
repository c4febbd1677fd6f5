"""`diff --format html`: one self-contained page, the two sides in two columns, their steps
aligned and the first divergence marked (htmlbase: every text escaped, nothing fetched)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sessiontool.reports.htmlbase import Markup, fill, fmt_usd, h, join, page

_STYLE = Markup(
    "<style>table.diff{width:100%;border-collapse:collapse;table-layout:fixed}"
    "table.diff td,table.diff th{border:1px solid var(--line);padding:4px 6px;"
    "vertical-align:top;white-space:pre-wrap;word-break:break-word}"
    "tr.first td{border-top:3px solid var(--err)}tr.differ td.s{background:var(--tool)}"
    "td.n{width:3.5em;color:var(--mute)}</style>"
)


def _summary(a: Mapping[str, Any], b: Mapping[str, Any]) -> Markup:
    def row(name: str, f: Any) -> Markup:
        return fill(Markup("<tr><th>{}</th><td>{}</td><td>{}</td></tr>"), name, f(a), f(b))

    rows = [
        row("session", lambda s: s["session"]),
        row("messages", lambda s: f"{s['messages']:,}"),
        row("turns", lambda s: f"{s['turns']:,}"),
        row("tokens", lambda s: f"{s['tokens']['total']:,}"),
        row("cost", lambda s: fmt_usd(s["cost"])),
        row("duration", lambda s: f"{s['durationMs'] / 1000:.1f} s"),
        row("tool calls", lambda s: " → ".join(s["tools"]) or "none"),
    ]
    head = Markup('<table class="diff"><tr><th></th><th>A</th><th>B</th></tr>')
    return join(Markup(""), [head, *rows, Markup("</table>")])


def _step(s: Mapping[str, Any] | None) -> Markup:
    if s is None:
        return Markup("")
    return fill(Markup("<b>{}</b> {}"), s["kind"], h(s["text"]))


def diff_page(result: Mapping[str, Any]) -> str:
    a, b = result["a"], result["b"]
    first = result["divergence"]
    at = first["step"] if first else None
    lines = []
    for i in range(max(len(a["steps"]), len(b["steps"]))):
        x = a["steps"][i] if i < len(a["steps"]) else None
        y = b["steps"][i] if i < len(b["steps"]) else None
        same = x is not None and y is not None and (x["kind"], x["text"]) == (y["kind"], y["text"])
        cls = ("first " if at == i + 1 else "") + ("" if same else "differ")
        lines.append(
            fill(
                Markup(
                    '<tr class="{}"><td class="n">{}</td><td class="s">{}</td><td class="s">{}</td></tr>'
                ),
                cls.strip(),
                i + 1,
                _step(x),
                _step(y),
            )
        )
    said = (
        fill(
            Markup("<p>First divergence at step {} ({} / {}).</p>"),
            at,
            first["aKind"] or "end",
            first["bKind"] or "end",
        )
        if first
        else Markup("<p>The two are the same, step for step.</p>")
    )
    body = [
        _STYLE,
        _summary(a, b),
        said,
        Markup('<table class="diff"><tr><th class="n">#</th><th>A</th><th>B</th></tr>'),
        *lines,
        Markup("</table>"),
    ]
    title = f"diff {a['session']} {b['session']}"
    return str(page(title, fill(Markup("<h1>{}</h1>"), title), body))
