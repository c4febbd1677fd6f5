"""reports/markdown.py's shortcut: text without Markdown marks skips the parser, and must come
out as the parser would render it (up to spacing the browser collapses anyway)."""

from __future__ import annotations

import random
import re

from sessiontool.reports import markdown as M

ALPHABET = list("ab1.!?&<>\"' \t\n\n\n:;|=-+#%$@()/") + ["  ", "    ", "\r\n"]


def _norm(html: str) -> str:
    html = html.replace("&quot;", '"')
    html = re.sub(r"(<p>|<br>\n)[ \t]+", r"\1", html)
    return re.sub(r"[ \t]+(<br>|</p>)", r"\1", html)


def test_plain_text_shortcut_matches_the_parser() -> None:
    """Every text the shortcut takes renders as the parser would. A text with markup goes to
    the parser itself (render's other branch), so only the shortcut's are compared, against one
    parser built once (building it costs more than a render)."""
    rng = random.Random(20261127)
    md = M.parser()
    shortcut = 0
    for _ in range(40_000):
        text = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 16)))
        if M._MARKUP.search(text.replace("\r\n", "\n")) is not None:
            continue  # not the shortcut: M.render is the parser's own render
        shortcut += 1
        assert _norm(M.render(text)) == _norm(md.render(text)), repr(text)
    assert shortcut > 10_000  # the shortcut was taken, not only the parser compared to itself
