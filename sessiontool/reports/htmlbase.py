"""What every page of sessiontool's HTML output shares: escaping, the style sheet and the document
around a page's body (reports/html.py renders transcripts, reports/charts.py the site's index and
usage pages).

Self-contained: the style is inline, there is no script, font or image to fetch, and a
Content-Security-Policy meta tag forbids loading anything, so a page reads the same offline,
attached to a ticket or opened years later. A transcript can hold any text (a pasted web page, a
tool's raw output, terminal escapes): every piece of it goes through `h`, which escapes markup and
shows control characters as visible escapes, so nothing in it runs or breaks the page.

Escaping is a type (docs/decisions.md): `h` and `ha` return markupsafe's `Markup`, fragments are
built as `Markup` (`Markup(template).format(...)`, `Markup("").join(...)`), and those escape any
plain `str` handed to them, so a text that skipped `h` comes out escaped, never as markup.
markupsafe is imported here, and this module only on the HTML path (site.py and html.py are
imported inside the functions that write HTML; tests/test_startup.py checks `list`)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from typing import Any

# The other HTML modules take Markup from here (only this module imports markupsafe).
from markupsafe import Markup as Markup
from markupsafe import escape

from sessiontool.termtext import UNSAFE as _TERMINAL_UNSAFE

# The characters the terminal rule escapes (termtext.UNSAFE: C0 and C1 controls, DEL, the line
# separators, the bidi controls, which turn a line, a link's text included, around) but the tab
# and newline, with lone surrogates and non-characters: shown as symbols, never emitted raw (a
# NUL or an ESC in a page is at best invisible and at worst read as something else).
UNSAFE = re.compile(f"(?![\t\n])[{_TERMINAL_UNSAFE}\ud800-\udfff\ufffe\uffff]")


def visible(m: re.Match[str]) -> str:
    """A control character as the escape people know from terminals and JSON (`\\e`, `\\x00`),
    set apart by style; every font has these glyphs, unlike U+2400's control pictures."""
    o = ord(m.group())
    if 0xD800 <= o <= 0xDFFF:
        return "\ufffd"
    shown = "\\e" if o == 0x1B else (f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}")
    return f'<span class="c">{shown}</span>'


# The hot path of a transcript page (some ten fragments per message, bench/cases_html.py) makes
# its Markup without Markup.__new__'s checks (`_mk(Markup, s)`): only for a str just escaped or
# just built from Markup and escaped pieces.
_mk = str.__new__
_format = str.format
_join = str.join
_SAFE = (Markup, int, float)


def _esc(a: Any) -> str:
    """markupsafe.escape's text, without making it a Markup (it is formatted in at once)."""
    if type(a) is str:
        t: str = a.replace("&", "&amp;").replace(">", "&gt;").replace("<", "&lt;")
        return t.replace("'", "&#39;").replace('"', "&#34;")
    return str(escape(a))


def fill(template: Markup, *args: Any) -> Markup:
    """`template.format(*args)` as Markup.format does it (a plain str escaped, Markup kept; a
    number as it is, so `{:,}` works), at a third of its cost."""
    return _mk(Markup, _format(template, *[a if isinstance(a, _SAFE) else _esc(a) for a in args]))


def join(sep: Markup, items: Iterable[Any]) -> Markup:
    """`sep.join(items)` as Markup.join does it (a plain str escaped), without copying the
    Markup items."""
    return _mk(Markup, _join(sep, [a if isinstance(a, Markup) else _esc(a) for a in items]))


def ha(text: str) -> Markup:
    """Text for a double-quoted attribute (no markup: control characters as U+FFFD)."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _mk(Markup, UNSAFE.sub("\ufffd", text.replace('"', "&quot;")))


def h(text: str) -> Markup:
    """Text for an element's content (`ha` for an attribute: `h` leaves quotes as they are, so
    its result belongs between tags only)."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    if "\r\n" in text:
        text = text.replace("\r\n", "\n")
    if UNSAFE.search(text):
        text = UNSAFE.sub(visible, text)
    return _mk(Markup, text)


def fmt_time(ms: Any) -> str:
    if not isinstance(ms, int | float) or isinstance(ms, bool):
        return ""
    try:
        t = time.gmtime(ms / 1000)
    except (OverflowError, ValueError, OSError):
        return "?"
    return time.strftime("%Y-%m-%d %H:%M:%S", t)


def fmt_usd(v: float) -> str:
    return f"${v:.4f}" if v < 100 else f"${v:,.2f}"


CSS = """
:root{color-scheme:light dark;--bg:#fbfbfa;--fg:#1d1d1f;--mute:#6b6b73;--line:#e2e2e6;
--card:#fff;--user:#eef4ff;--asst:#fff;--tool:#f6f6f8;--acc:#2d6cdf;--err:#c62828;--bar:#2d6cdf;
--bar2:#8fb3f0;--code:#f3f3f5}
@media (prefers-color-scheme:dark){:root{--bg:#141416;--fg:#e8e8ea;--mute:#9a9aa3;
--line:#2e2e33;--card:#1c1c1f;--user:#1a2436;--asst:#1c1c1f;--tool:#19191c;--acc:#7aa7ff;
--err:#ff6b6b;--bar:#7aa7ff;--bar2:#3b5c99;--code:#26262b}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:16px/1.55 system-ui,-apple-system,
"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
a{color:var(--acc)}
code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace;
font-size:.86em}
header.top{position:sticky;top:0;z-index:2;background:var(--bg);border-bottom:1px solid var(--line);
padding:.6rem 1rem .5rem}
header.top>*{max-width:58rem;margin-left:auto;margin-right:auto}
main.wide,header.top.wide>*{max-width:80rem}
header.top nav{font-size:.85rem;color:var(--mute)}
header.top nav a{margin-right:.9rem}
h1{font-size:1.15rem;margin:.15rem 0;overflow-wrap:anywhere}
.meta{margin:0;color:var(--mute);font-size:.85rem}
main{max-width:58rem;margin:0 auto;padding:1rem}
.m{background:var(--card);border:1px solid var(--line);border-radius:10px;margin:.7rem 0;
padding:.55rem .8rem;scroll-margin-top:6rem}
.m.user{background:var(--user)}
.m.tool,.m.other{background:var(--tool);padding:.35rem .8rem}
.m.inter{border-left:4px solid var(--acc)}
.m h3{display:flex;flex-wrap:wrap;gap:.2rem .7rem;align-items:baseline;margin:0;
font-size:.9rem;font-weight:650;text-transform:capitalize}
.m h3 time,.m h3 small{font-size:.82rem;font-weight:400;color:var(--mute);text-transform:none}
.m h3 small{margin-left:auto}
.from{font-size:.85rem;color:var(--mute);margin:.15rem 0}
.m p{white-space:pre-wrap;overflow-wrap:anywhere;margin:.3rem 0}
.m p.fail{color:var(--err)}
.m p.empty{color:var(--mute);font-style:italic}
.m p.from{white-space:normal}
.md p{white-space:normal}
.md h1,.md h2,.md h3,.md h4,.md h5,.md h6{display:block;font-size:1rem;font-weight:650;
text-transform:none;margin:.7rem 0 .3rem}
.md ul,.md ol{margin:.3rem 0;padding-left:1.5rem}
.md blockquote{margin:.3rem 0;padding-left:.8rem;border-left:3px solid var(--line);
color:var(--mute)}
.md :not(pre)>code{background:var(--code);border-radius:4px;padding:.05rem .25rem;
overflow-wrap:anywhere}
.md table{display:block;width:auto;max-width:100%;overflow-x:auto;margin:.4rem 0}
.md hr{border:0;border-top:1px solid var(--line)}
.md a.img{font-size:.9em}
.dlv{margin:-.45rem 0 .7rem 1.2rem;font-size:.82rem;color:var(--mute)}
.dlv>p{margin:.2rem 0}
.dlv .md{border-left:2px solid var(--line);padding-left:.6rem}
.c{color:var(--err);background:var(--code);border-radius:3px;font:.8em ui-monospace,monospace}
details{margin:.3rem 0}
summary{cursor:pointer;color:var(--mute);font-size:.88rem;overflow-wrap:anywhere}
summary code{color:var(--fg)}
summary b{font-weight:600}
.err>summary b{color:var(--err)}
pre{background:var(--code);border-radius:6px;padding:.5rem .7rem;margin:.3rem 0;
white-space:pre-wrap;overflow-wrap:anywhere;max-height:40rem;overflow:auto}
details.more>summary{font-size:.85rem}
.reset{display:flex;align-items:center;gap:.8rem;color:var(--err);font-size:.85rem;margin:1.2rem 0}
.reset:before,.reset:after{content:"";flex:1;border-top:2px dashed var(--err)}
table{border-collapse:collapse;width:100%;font-size:.88rem;background:var(--card)}
th,td{padding:.35rem .55rem;border-bottom:1px solid var(--line);text-align:left;
vertical-align:top}
th{font-weight:600;color:var(--mute);font-size:.8rem;text-transform:uppercase;letter-spacing:.03em}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.key{overflow-wrap:anywhere}
table.sessions td.key{min-width:12rem}
@media (max-width:56rem){
main{padding:.6rem}
header.top{padding:.5rem .6rem .4rem}
table.sessions thead{display:none}
table.sessions,table.sessions tbody{display:block}
table.sessions tr{display:flex;flex-wrap:wrap;align-items:baseline;gap:.15rem .9rem;
padding:.55rem .6rem;border-bottom:1px solid var(--line)}
table.sessions td{display:block;padding:0;border:0;text-align:left}
table.sessions td.key{flex:1 1 100%;min-width:0}
table.sessions td:empty{display:none}
table.sessions td.n{font-size:.82rem;color:var(--mute)}
table.sessions td[data-label]:after{content:" " attr(data-label)}
}
.kind{font-size:.78rem;border:1px solid var(--line);border-radius:4px;padding:0 .3rem}
h2{font-size:1rem;margin:1.6rem 0 .5rem}
svg{display:block;max-width:100%;height:auto}
svg text{fill:var(--mute);font:11px system-ui,sans-serif}
svg .b{fill:var(--bar)}
svg.cbar{vertical-align:middle}
svg .b2{fill:var(--bar2)}
svg .g{stroke:var(--line)}
.chart{overflow-x:auto;max-width:100%}
.chart>svg{max-width:none}
.hbars{display:grid;grid-template-columns:minmax(6rem,16rem) minmax(0,1fr) auto;
gap:.3rem .6rem;align-items:center;font-size:.82rem;margin:.4rem 0}
.hb{display:contents}
.hl{text-align:right;color:var(--mute);overflow-wrap:anywhere}
svg.hbar{height:.75rem}
.hv{font-variant-numeric:tabular-nums;white-space:nowrap;color:var(--mute)}
@media (max-width:40rem){
.hbars{grid-template-columns:minmax(0,1fr) auto;gap:0 .6rem}
.hl{grid-column:1/-1;text-align:left;margin-top:.25rem}
table.usage,table.top{font-size:.8rem}
table.usage th,table.usage td,table.top th,table.top td{padding:.3rem .3rem}
table.usage th.n,table.top th.n{white-space:normal}
table.usage td,table.top td{overflow-wrap:anywhere}
}
.legend{font-size:.8rem;color:var(--mute)}
.sw{display:inline-block;width:.8em;height:.8em;border-radius:2px;vertical-align:-.05em}
.sw.b{background:var(--bar)}.sw.b2{background:var(--bar2)}
"""

_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


_HEAD = Markup(
    '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
    '<meta name="viewport" content="width=device-width,initial-scale=1">'
    f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
    '<meta name="referrer" content="no-referrer">'
)


def page(title: str, header: Markup, body: Iterable[Markup], *, main_class: str = "") -> Markup:
    """A whole document; `header` and `body` are HTML (a plain str among them is escaped),
    `title` is text."""
    top = Markup(
        "{head}<title>{title}</title><style>{css}</style></head>\n<body>"
        '<header class="top{wide}">{header}</header>\n<main{cls}>\n'
    ).format(
        head=_HEAD,
        title=ha(title),
        css=Markup(CSS),
        wide=" wide" if main_class == "wide" else "",
        header=header,
        cls=Markup(' class="{}"').format(main_class) if main_class else "",
    )
    return join(Markup(""), [top, *body, Markup("</main></body></html>\n")])
