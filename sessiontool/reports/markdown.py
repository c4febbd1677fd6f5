"""A model's reply as the HTML of a transcript page shows it: its Markdown rendered (markdown-it-py,
which rich already brings; imported only here, so only when a page is written), and nothing in it
able to load or run anything.

- Raw HTML in a message is text (`html` off): `<script>` reads as `<script>`.
- Entities are not decoded: `&amp;` reads as written, as in the terminal and the Markdown view.
- A link is a link only to `http:`, `https:` or `mailto:`; any other destination (`javascript:`,
  `data:`, `vbscript:`, a relative path into the exported site) is not parsed as a link at all, so
  the reader sees the Markdown source. Autolinks and reference links go through the same check.
- An image is never loaded: it is a link to its address, labelled with its alt text.
- Code spans and blocks are `<code>` and `<pre><code>` (the fence's language is not emitted).
- Control characters are shown as the escapes `htmlbase.h` shows, and no attribute holds one.

`fold` splits a long reply between two top-level blocks, so a fold never cuts a code block or a
list in two; the page shows the first part and folds the rest."""

from __future__ import annotations

import re
from functools import cache
from typing import TYPE_CHECKING, Any

from sessiontool.reports.htmlbase import UNSAFE, h, ha, visible

if TYPE_CHECKING:
    from collections.abc import Sequence

    from markdown_it import MarkdownIt
    from markdown_it.token import Token

SAFE_SCHEMES = ("http:", "https:", "mailto:")
_NEWLINES = re.compile(r"\r\n?")

# Text with none of these renders as its paragraphs and line breaks: the parser is skipped (most
# turns of a long session are short plain text, and a page of 10,000 of them must stay about as
# fast as the Markdown view). Some marks matter only at a line's start: lists, headings, quotes,
# tables' delimiter rows, setext underlines, indented code.
_MARKUP = re.compile(
    r"[\\`*_\[\]~]|<[^\s<>]|^[ \t]*(?:[-+=#>|:]|\d{1,9}[.)])|^(?: {4}| {0,3}\t)", re.MULTILINE
)
_PARAS = re.compile(r"\n(?:[ \t]*\n)+")


def _safe_link(url: str) -> bool:
    return url.strip().lower().startswith(SAFE_SCHEMES)


def _normalize(state: Any) -> None:
    """Line endings only: a NUL stays a NUL, shown as `\\x00` like every control character
    (markdown-it's own rule would turn it into U+FFFD)."""
    state.src = _NEWLINES.sub("\n", state.src)


def _link_open(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    href = str(tokens[idx].attrGet("href") or "")
    return f'<a href="{ha(href)}" rel="nofollow noopener noreferrer">'


def _image(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    t = tokens[idx]
    alt = self.renderInlineAsText(t.children or [], options, env) or "image"
    src = str(t.attrGet("src") or "")
    return (
        f'<a class="img" href="{ha(src)}" rel="nofollow noopener noreferrer">[image: {h(alt)}]</a>'
    )


def _fence(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    return f"<pre><code>{h(tokens[idx].content)}</code></pre>\n"


@cache
def parser() -> MarkdownIt:
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False, "breaks": True, "xhtmlOut": False})
    md.enable(["table", "strikethrough"])
    md.disable(["html_block", "html_inline", "entity"])
    md.core.ruler.at("normalize", _normalize)
    md.validateLink = _safe_link  # type: ignore[method-assign]
    md.add_render_rule("link_open", _link_open)
    md.add_render_rule("image", _image)
    md.add_render_rule("fence", _fence)
    md.add_render_rule("code_block", _fence)
    return md


def _plain(text: str) -> str:
    """What the parser makes of text without markup: paragraphs at blank lines, `<br>` at the
    line breaks inside one."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return "".join(
        "<p>" + "<br>\n".join(ln.strip() for ln in p.split("\n")) + "</p>\n"
        for p in _PARAS.split(text.strip())
        if p.strip()
    )


def _finish(html: str) -> str:
    """HTML safe to put in a page as it is: markdown-it escapes the text it renders (raw HTML
    is off), the rules above escape theirs with `h` and `ha`, and `_plain` escapes before it
    adds tags. A plain str (a Markup's own str methods escape their arguments); html.py marks
    it `Markup` where it takes it."""
    return UNSAFE.sub(visible, html) if UNSAFE.search(html) else html


def render(text: str) -> str:
    """One text as HTML block elements (no wrapper)."""
    text = _NEWLINES.sub("\n", text)
    if not _MARKUP.search(text):
        return _finish(_plain(text))
    return _finish(parser().render(text))


def fold(text: str, keep_lines: int) -> tuple[str, str, int] | None:
    """A long text as (head HTML, rest HTML, hidden lines): cut at line `keep_lines` inside a
    paragraph, else after the block holding that line, so a fold never cuts a code block, a
    list or a table in two. None when nothing would be hidden (the caller shows it whole, or
    folds one huge line as plain text)."""
    text = _NEWLINES.sub("\n", text)
    md = parser()
    env: dict[str, Any] = {}
    tokens = md.parse(text, env)
    cut, i = None, 0
    while i < len(tokens):
        t = tokens[i]
        end = _block_end(tokens, i)
        if t.map is not None and t.map[1] > keep_lines:
            inside = t.type == "paragraph_open" and t.map[0] < keep_lines
            cut = keep_lines if inside else max(t.map[1], keep_lines)
            break
        i = end
    if cut is None:
        return None
    lines = text.split("\n")
    rest = lines[cut:]
    while rest and not rest[0].strip():
        rest.pop(0)
    while rest and not rest[-1].strip():
        rest.pop()
    if not rest:
        return None
    head = md.render("\n".join(lines[:cut]), dict(env))
    tail = md.render("\n".join(rest), dict(env))
    return _finish(head), _finish(tail), len(rest)


def _block_end(tokens: Sequence[Token], i: int) -> int:
    """The index just past the top-level block opened (or held whole) by tokens[i]."""
    depth = 0
    for j in range(i, len(tokens)):
        depth += tokens[j].nesting
        if depth <= 0:
            return j + 1
    return len(tokens)
