"""The index and usage pages of `export --html`, and the inline SVG bar charts they draw (no
chart library, no script: a chart is rectangles with a `<title>` each, which a browser shows
on hover, beside a table holding the same numbers)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sessiontool.reports import htmlbase as H

NAV_TOP = '<a href="index.html">All sessions</a><a href="usage.html">Usage</a>'


def _day(day_no: int) -> str:
    return "(no time)" if day_no < 0 else H.fmt_time(day_no * 86_400_000)[:10]


def _key(key: str) -> str:
    """A session key as HTML that a narrow screen breaks after a colon, not mid-word (a copied
    key stays whole: `<wbr>` adds no character)."""
    return H.h(key).replace(":", ":<wbr>")


def _reset_note(r: dict[str, Any]) -> str:
    """Why a session reset in place shows few messages beside many tokens: its messages are
    counted from the reset, its tokens and cost from the start."""
    if not r.get("reset"):
        return ""
    n = int(r.get("beforeReset") or 0)
    before = (
        f"; tokens and cost include the {n:,} turn{'s' if n != 1 else ''} before it" if n else ""
    )
    return (
        f'\n<br><small class="meta">reset {H.fmt_time(r["reset"])}: messages since{before}</small>'
    )


def index_page(rows: Sequence[dict[str, Any]]) -> str:
    """Every session, one table row each; on a phone each row is a card (the style sheet's
    `table.sessions`): the key on its own line, then kind and label, then the figures, each
    named by its `data-label`."""
    rows = sorted(rows, key=lambda r: (-(r.get("updatedAt") or r.get("last") or 0), r["key"]))
    tokens = sum(r["tokens"] for r in rows)
    cost = sum(r["cost"] for r in rows)
    msgs = sum(r["messages"] for r in rows)
    hrefs = {r["key"]: r["href"] for r in rows}
    header = (
        f"<nav>{NAV_TOP}</nav><h1>Sessions</h1>"
        f'<p class="meta">{len(rows):,} sessions · {msgs:,} messages · {tokens:,} tokens · '
        f"{H.fmt_usd(cost)}</p>"
    )
    body = [
        '<table class="sessions"><thead><tr><th>Session</th><th>Kind</th><th>Label</th>'
        '<th class="n">Last activity (UTC)</th>'
        '<th class="n">Messages</th><th class="n">Tokens</th><th class="n">Cost</th></tr>'
        "</thead><tbody>\n"
    ]
    for r in rows:
        when = H.fmt_time(r.get("updatedAt") or r.get("last"))
        parent = ""
        if r.get("parent"):
            p = _key(r["parent"])
            href = hrefs.get(r["parent"])
            parent = '\n<br><small class="meta">spawned by ' + (
                f'<a href="{H.ha(href)}">{p}</a></small>' if href else f"{p}</small>"
            )
        cells = [
            f'<td class="key"><a href="{H.ha(r["href"])}">{_key(r["key"])}</a>{parent}'
            f"{_reset_note(r)}</td>",
            f'<td><span class="kind">{H.h(r["kind"])}</span></td>',
            f"<td>{H.h(r['label'] or '')}</td>",
            f'<td class="n">{when}</td>',
            f'<td class="n" data-label="message{"" if r["messages"] == 1 else "s"}">'
            f"{r['messages']:,}</td>",
            f'<td class="n" data-label="tokens">{r["tokens"]:,}</td>',
            f'<td class="n">{H.fmt_usd(r["cost"])}</td>',
        ]
        # Cells apart in the source too, so the page's plain text keeps them apart.
        body.append("<tr>" + "\n".join(cells) + "</tr>\n")
    body.append("</tbody></table>")
    if not rows:
        body.append('<p class="meta">No sessions.</p>')
    return H.page("Sessions", header, body, main_class="wide")


# -- charts -----------------------------------------------------------------------------------


def bar_chart(
    labels: Sequence[str],
    series: Sequence[Sequence[float]],
    names: Sequence[str],
    fmt: Callable[[float], str],
) -> str:
    """Vertical bars, one per label, each stacking `series` (at most two, `b` then `b2`)."""
    n = len(labels)
    if n == 0:
        return '<p class="meta">No data.</p>'
    totals = [sum(s[i] for s in series) for i in range(n)]
    top = max(totals) or 1.0
    left, bottom, plot_h = 64, 34, 170
    step = max(8.0, min(72.0, 760 / n))
    width = int(left + step * n + 10)
    height = plot_h + bottom + 10
    out = [
        f'<svg viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'aria-label="{H.ha(" and ".join(names))}">'
    ]
    for frac in (0.0, 0.5, 1.0):
        y = 10 + plot_h * (1 - frac)
        out.append(
            f'<line class="g" x1="{left}" x2="{width - 4}" y1="{y:.1f}" y2="{y:.1f}"/>'
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{H.ha(fmt(top * frac))}</text>'
        )
    every = max(1, round(n / 12))
    bw = step * 0.72
    for i, label in enumerate(labels):
        x = left + step * i + (step - bw) / 2
        y0 = 10.0 + plot_h
        tip = H.ha(
            f"{label}: "
            + ", ".join(f"{nm} {fmt(s[i])}" for nm, s in zip(names, series, strict=True))
        )
        for k, s in enumerate(series):
            hgt = plot_h * s[i] / top
            if hgt <= 0:
                continue
            y0 -= hgt
            out.append(
                f'<rect class="{"b" if k == 0 else "b2"}" x="{x:.1f}" y="{y0:.1f}" width="{bw:.1f}" '
                f'height="{hgt:.1f}" rx="2"><title>{tip}</title></rect>'
            )
        if i % every == 0:
            out.append(
                f'<text x="{x + bw / 2:.1f}" y="{10 + plot_h + 16}" text-anchor="middle">'
                f"{H.ha(label[5:] if len(label) == 10 else label)}</text>"
            )
    out.append("</svg>")
    legend = " ".join(
        f'<span class="sw {"b" if k == 0 else "b2"}"></span> {H.ha(nm)}'
        for k, nm in enumerate(names)
    )
    return "".join(out) + (f'<p class="legend">{legend}</p>' if len(names) > 1 else "")


def hbar_chart(labels: Sequence[str], values: Sequence[float], fmt: Callable[[float], str]) -> str:
    """Horizontal bars, one row per label (models: long names read better across)."""
    if not labels:
        return '<p class="meta">No data.</p>'
    top = max(values) or 1.0
    label_w, bar_w, row = 230, 420, 24
    width = label_w + bar_w + 110
    height = row * len(labels) + 6
    out = [f'<svg viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img">']
    for i, (label, v) in enumerate(zip(labels, values, strict=True)):
        y = 3 + row * i
        w = bar_w * v / top
        shown = label if len(label) <= 34 else label[:33] + "…"
        out.append(
            f'<text x="{label_w - 8}" y="{y + 15}" text-anchor="end">{H.ha(shown)}</text>'
            f'<rect class="b" x="{label_w}" y="{y + 3}" width="{max(w, 1):.1f}" height="{row - 8}" '
            f'rx="2"><title>{H.ha(f"{label}: {fmt(v)}")}</title></rect>'
            f'<text x="{label_w + max(w, 1) + 6:.1f}" y="{y + 15}">{H.ha(fmt(v))}</text>'
        )
    out.append("</svg>")
    return "".join(out)


def _short_count(v: float) -> str:
    if v >= 1_000_000:
        return f"{v / 1_000_000:.1f}M"
    if v >= 1_000:
        return f"{v / 1_000:.1f}k"
    return f"{v:.0f}"


def _short_usd(v: float) -> str:
    return f"${v:.2f}" if v >= 0.1 or v == 0 else f"${v:.4f}"


def usage_page(rows: Sequence[dict[str, Any]]) -> str:
    days: dict[int, list[float]] = {}
    models: dict[str, list[float]] = {}
    for r in rows:
        for day, model, i, o, cr, cw, cost, turns in r.get("usage", []):
            d = days.setdefault(day, [0, 0, 0.0, 0])
            m = models.setdefault(model, [0, 0, 0.0, 0])
            for acc in (d, m):
                acc[0] += i + o
                acc[1] += cr + cw
                acc[2] += cost
                acc[3] += turns
    day_keys = sorted(days)
    day_labels = [_day(d) for d in day_keys]
    model_keys = sorted(models, key=lambda k: (-models[k][2], -(models[k][0] + models[k][1]), k))
    total_tokens = sum(v[0] + v[1] for v in days.values())
    total_cost = sum(v[2] for v in days.values())
    header = (
        f"<nav>{NAV_TOP}</nav><h1>Usage</h1>"
        f'<p class="meta">{len(rows):,} sessions · {total_tokens:,} tokens · '
        f"{H.fmt_usd(total_cost)}</p>"
    )
    no_cost = (
        '<p class="meta">No cost: no price is configured for these models '
        "(models.providers.*.models[].cost) and the transcripts recorded none.</p>"
    )
    body = [
        "<h2>Cost per day (USD)</h2>",
        bar_chart(day_labels, [[days[d][2] for d in day_keys]], ["cost"], _short_usd)
        if total_cost > 0
        else no_cost,
        "<h2>Tokens per day</h2>",
        bar_chart(
            day_labels,
            [[days[d][0] for d in day_keys], [days[d][1] for d in day_keys]],
            ["input + output", "cache read + write"],
            _short_count,
        ),
        "<h2>Cost per model (USD)</h2>",
        hbar_chart(model_keys, [models[m][2] for m in model_keys], _short_usd)
        if total_cost > 0
        else no_cost,
        "<h2>Tokens per model</h2>",
        hbar_chart(model_keys, [models[m][0] + models[m][1] for m in model_keys], _short_count),
        "<h2>Per day</h2>",
        _table("Day (UTC)", [(lbl, days[d]) for lbl, d in zip(day_labels, day_keys, strict=True)]),
        "<h2>Per model</h2>",
        _table("Model", [(m, models[m]) for m in model_keys]),
    ]
    return H.page("Usage", header, body, main_class="wide")


def _table(first: str, rows: Sequence[tuple[str, list[float]]]) -> str:
    out = [
        f'<table><thead><tr><th>{H.h(first)}</th><th class="n">Turns</th>'
        '<th class="n">Input + output</th><th class="n">Cache</th><th class="n">Cost</th></tr>'
        "</thead><tbody>"
    ]
    for name, (io, cache, cost, turns) in rows:
        out.append(
            f'<tr><td>{H.h(name)}</td><td class="n">{int(turns):,}</td><td class="n">{int(io):,}</td>'
            f'<td class="n">{int(cache):,}</td><td class="n">{H.fmt_usd(cost)}</td></tr>'
        )
    out.append("</tbody></table>")
    return "".join(out)
