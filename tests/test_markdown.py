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
    rng = random.Random(20261127)
    shortcut = 0
    for _ in range(40_000):
        text = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 16)))
        rendered = M.render(text)
        assert _norm(rendered) == _norm(M.parser().render(text)), repr(text)
        shortcut += M._MARKUP.search(text.replace("\r\n", "\n")) is None
    assert shortcut > 10_000  # the shortcut was taken, not only the parser compared to itself
