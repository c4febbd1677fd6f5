"""The index and usage pages of `export --html`, and the inline SVG bar charts they draw (no
chart library, no script: a chart is rectangles with a `<title>` each, which a browser shows
on hover, beside a table holding the same numbers)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sessiontool.reports import htmlbase as H
from sessiontool.reports.htmlbase import Markup

NAV_TOP = Markup('<a href="index.html">All sessions</a><a href="usage.html">Usage</a>')
NO_DATA = Markup('<p class="meta">No data.</p>')


def _day(day_no: int) -> str:
    return "(no time)" if day_no < 0 else H.fmt_time(day_no * 86_400_000)[:10]


def _key(key: str) -> Markup:
    """A session key as HTML that a narrow screen breaks after a colon, not mid-word (a copied
    key stays whole: `<wbr>` adds no character)."""
    return Markup(":<wbr>").join(H.h(key).split(":"))


def _reset_note(r: dict[str, Any]) -> Markup:
    """Why a session reset in place shows few messages beside many tokens: its messages are
    counted from the reset, its tokens and cost from the start."""
    if not r.get("reset"):
        return Markup()
    n = int(r.get("beforeReset") or 0)
    before = (
        f"; tokens and cost include the {n:,} turn{'s' if n != 1 else ''} before it" if n else ""
    )
    return Markup('\n<br><small class="meta">reset {}: messages since{}</small>').format(
        H.fmt_time(r["reset"]), before
    )


def index_page(rows: Sequence[dict[str, Any]]) -> Markup:
    """Every session, one table row each; on a phone each row is a card (the style sheet's
    `table.sessions`): the key on its own line, then kind and label, then the figures, each
    named by its `data-label`."""
    rows = sorted(rows, key=lambda r: (-(r.get("updatedAt") or r.get("last") or 0), r["key"]))
    tokens = sum(r["tokens"] for r in rows)
    cost = sum(r["cost"] for r in rows)
    msgs = sum(r["messages"] for r in rows)
    hrefs = {r["key"]: r["href"] for r in rows}
    header = Markup(
        '<nav>{}</nav><h1>Sessions</h1><p class="meta">{:,} sessions · {:,} messages · '
        "{:,} tokens · {}</p>"
    ).format(NAV_TOP, len(rows), msgs, tokens, H.fmt_usd(cost))
    body = [
        Markup(
            '<table class="sessions"><thead><tr><th>Session</th><th>Kind</th><th>Label</th>'
            '<th class="n">Last activity (UTC)</th>'
            '<th class="n">Messages</th><th class="n">Tokens</th><th class="n">Cost</th></tr>'
            "</thead><tbody>\n"
        )
    ]
    for r in rows:
        when = H.fmt_time(r.get("updatedAt") or r.get("last"))
        parent = Markup()
        if r.get("parent"):
            p = _key(r["parent"])
            href = hrefs.get(r["parent"])
            parent = Markup('\n<br><small class="meta">spawned by {}</small>').format(
                Markup('<a href="{}">{}</a>').format(H.ha(href), p) if href else p
            )
        # Cells apart in the source too, so the page's plain text keeps them apart.
        body.append(
            _ROW.format(
                href=H.ha(r["href"]),
                key=_key(r["key"]),
                parent=parent,
                reset=_reset_note(r),
                kind=H.h(r["kind"]),
                label=H.h(r["label"] or ""),
                when=when,
                s="" if r["messages"] == 1 else "s",
                messages=r["messages"],
                tokens=r["tokens"],
                cost=H.fmt_usd(r["cost"]),
            )
        )
    body.append(Markup("</tbody></table>"))
    if not rows:
        body.append(Markup('<p class="meta">No sessions.</p>'))
    return H.page("Sessions", header, body, main_class="wide")


_ROW = Markup(
    '<tr><td class="key"><a href="{href}">{key}</a>{parent}{reset}</td>\n'
    '<td><span class="kind">{kind}</span></td>\n'
    "<td>{label}</td>\n"
    '<td class="n">{when}</td>\n'
    '<td class="n" data-label="message{s}">{messages:,}</td>\n'
    '<td class="n" data-label="tokens">{tokens:,}</td>\n'
    '<td class="n">{cost}</td></tr>\n'
)


# -- charts -----------------------------------------------------------------------------------


def bar_chart(
    labels: Sequence[str],
    series: Sequence[Sequence[float]],
    names: Sequence[str],
    fmt: Callable[[float], str],
) -> Markup:
    """Vertical bars, one per label, each stacking `series` (at most two, `b` then `b2`)."""
    n = len(labels)
    if n == 0:
        return NO_DATA
    totals = [sum(s[i] for s in series) for i in range(n)]
    top = max(totals) or 1.0
    left, bottom, plot_h = 64, 34, 170
    step = max(8.0, min(72.0, 760 / n))
    width = int(left + step * n + 10)
    height = plot_h + bottom + 10
    out = [
        Markup(
            '<svg viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" aria-label="{label}">'
        ).format(w=width, h=height, label=H.ha(" and ".join(names)))
    ]
    for frac in (0.0, 0.5, 1.0):
        y = 10 + plot_h * (1 - frac)
        out.append(
            Markup(
                '<line class="g" x1="{}" x2="{}" y1="{:.1f}" y2="{:.1f}"/>'
                '<text x="{}" y="{:.1f}" text-anchor="end">{}</text>'
            ).format(left, width - 4, y, y, left - 6, y + 4, H.ha(fmt(top * frac)))
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
                Markup(
                    '<rect class="{}" x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" rx="2">'
                    "<title>{}</title></rect>"
                ).format("b" if k == 0 else "b2", x, y0, bw, hgt, tip)
            )
        if i % every == 0:
            out.append(
                Markup('<text x="{:.1f}" y="{}" text-anchor="middle">{}</text>').format(
                    x + bw / 2, 10 + plot_h + 16, H.ha(label[5:] if len(label) == 10 else label)
                )
            )
    out.append(Markup("</svg>"))
    legend = Markup(" ").join(
        Markup('<span class="sw {}"></span> {}').format("b" if k == 0 else "b2", H.ha(nm))
        for k, nm in enumerate(names)
    )
    # In a box that scrolls sideways where the page is narrower than the chart (many days on a
    # phone): its text keeps its size instead of the whole chart shrinking to the width.
    return Markup('<div class="chart">{}</div>').format(Markup("").join(out)) + (
        Markup('<p class="legend">{}</p>').format(legend) if len(names) > 1 else ""
    )


def hbar_chart(
    labels: Sequence[str], values: Sequence[float], fmt: Callable[[float], str]
) -> Markup:
    """Horizontal bars, one row per label (models: long names read better across). The labels
    and values are the page's text, laid out by the stylesheet (`.hbars`: label, bar, value in
    a row; on a phone the label above its bar), so they keep their size at any width; each bar
    is a small SVG whose `width` is a percentage of its cell (no `style` attribute)."""
    if not labels:
        return NO_DATA
    top = max(values) or 1.0
    out = [Markup('<div class="hbars">')]
    for label, v in zip(labels, values, strict=True):
        out.append(
            Markup(
                '<div class="hb"><span class="hl">{}</span>'
                '<svg class="hbar" width="{:.2f}%" height="12" role="img" aria-label="{}">'
                '<rect class="b" width="100%" height="100%" rx="2"><title>{}</title></rect>'
                '</svg><span class="hv">{}</span></div>'
            ).format(
                H.h(label),
                max(100 * v / top, 0.5),
                H.ha(f"{label}: {fmt(v)}"),
                H.ha(f"{label}: {fmt(v)}"),
                H.h(fmt(v)),
            )
        )
    out.append(Markup("</div>"))
    return Markup("").join(out)


def _short_count(v: float) -> str:
    if v >= 1_000_000:
        return f"{v / 1_000_000:.1f}M"
    if v >= 1_000:
        return f"{v / 1_000:.1f}k"
    return f"{v:.0f}"


def _short_usd(v: float) -> str:
    return f"${v:.2f}" if v >= 0.1 or v == 0 else f"${v:.4f}"


def usage_page(rows: Sequence[dict[str, Any]]) -> Markup:
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
    header = Markup(
        '<nav>{}</nav><h1>Usage</h1><p class="meta">{:,} sessions · {:,} tokens · {}</p>'
    ).format(NAV_TOP, len(rows), total_tokens, H.fmt_usd(total_cost))
    no_cost = Markup(
        '<p class="meta">No cost: no price is configured for these models '
        "(models.providers.*.models[].cost) and the transcripts recorded none.</p>"
    )
    body = [
        Markup("<h2>Cost per day (USD)</h2>"),
        bar_chart(day_labels, [[days[d][2] for d in day_keys]], ["cost"], _short_usd)
        if total_cost > 0
        else no_cost,
        Markup("<h2>Tokens per day</h2>"),
        bar_chart(
            day_labels,
            [[days[d][0] for d in day_keys], [days[d][1] for d in day_keys]],
            ["input + output", "cache read + write"],
            _short_count,
        ),
        Markup("<h2>Cost per model (USD)</h2>"),
        hbar_chart(model_keys, [models[m][2] for m in model_keys], _short_usd)
        if total_cost > 0
        else no_cost,
        Markup("<h2>Tokens per model</h2>"),
        hbar_chart(model_keys, [models[m][0] + models[m][1] for m in model_keys], _short_count),
        Markup("<h2>Per day</h2>"),
        _table("Day (UTC)", [(lbl, days[d]) for lbl, d in zip(day_labels, day_keys, strict=True)]),
        Markup("<h2>Per model</h2>"),
        _table("Model", [(m, models[m]) for m in model_keys]),
        Markup("<h2>Most expensive turns</h2>"),
        costliest_turns(rows),
    ]
    return H.page("Usage", header, body, main_class="wide")


def costliest_turns(rows: Sequence[dict[str, Any]], n: int = 10) -> Markup:
    """The `n` costliest turns of every exported session (their `top`), each linked to its
    message on its session's page."""
    turns = [(t, r) for r in rows for t in r.get("top", [])]
    turns.sort(key=lambda x: -x[0][4])
    if not turns:
        return Markup('<p class="meta">No priced turns.</p>')
    out = [
        Markup(
            '<table class="top"><thead><tr><th class="n">Cost</th><th>Session</th><th>Time (UTC)'
            '</th><th>Model</th><th class="n">Tokens</th></tr></thead><tbody>'
        )
    ]
    for (i, ts, model, tokens, cost), r in turns[:n]:
        out.append(
            Markup(
                '<tr><td class="n">{}</td><td><a href="{}#m{}">{}</a></td><td>{}</td>'
                '<td>{}</td><td class="n">{:,}</td></tr>'
            ).format(
                H.fmt_usd(cost),
                H.ha(r["href"]),
                int(i),
                H.h(r["key"]),
                H.fmt_time(ts),
                H.h(str(model)),
                int(tokens),
            )
        )
    out.append(Markup("</tbody></table>"))
    return Markup("").join(out)


def _table(first: str, rows: Sequence[tuple[str, list[float]]]) -> Markup:
    out = [
        Markup(
            '<table class="usage"><thead><tr><th>{}</th><th class="n">Turns</th>'
            '<th class="n">Input + output</th><th class="n">Cache</th><th class="n">Cost</th></tr>'
            "</thead><tbody>"
        ).format(H.h(first))
    ]
    for name, (io, cache, cost, turns) in rows:
        out.append(
            Markup(
                '<tr><td>{}</td><td class="n">{:,}</td><td class="n">{:,}</td>'
                '<td class="n">{:,}</td><td class="n">{}</td></tr>'
            ).format(H.h(name), int(turns), int(io), int(cache), H.fmt_usd(cost))
        )
    out.append(Markup("</tbody></table>"))
    return Markup("").join(out)
