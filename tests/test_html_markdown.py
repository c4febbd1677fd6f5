"""A model's Markdown on the HTML pages (`history --format html`, `export --html`): rendered
(emphasis, code in `<pre><code>`, lists, tables, links to http/https/mailto), and hostile
Markdown inert: no link to `javascript:`, `data:`, `vbscript:` or a relative path, however it
is spelled (inline, autolink, reference, entity- or case-disguised), no image loaded, raw HTML
shown as text. People's and tools' text stays plain. A long reply folds between two blocks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests import htmlcheck
from tests.helpers import FIXTURE_STATE, run_cli
from tests.test_cli_html import _append, _copy
from tests.test_startup import imported_modules

TS = 1795292600000

RICH = """Here is **the plan** and `inline()` code:

1. first
2. second

```python
print("<b>not bold</b>")
```

| col | val |
|-----|-----|
| a   | 1   |

See [the docs](https://example.com/docs?a=1&b=2) or <mailto:ops@example.com>."""

HOSTILE = [
    "[inline](javascript:alert(1))",
    "[cased](JaVaScRiPt:alert(2))",
    "[spaced](  javascript:alert(3))",
    "[angled](<javascript:alert(4)>)",
    "[entity](jav&#97;script:alert(5))",
    "[percent](%6Aavascript:alert(6))",
    "[vb](vbscript:msgbox(7))",
    "[data](data:text/html;base64,PHNjcmlwdD5hbGVydCg4KTwvc2NyaXB0Pg==)",
    "[relative](../../index.html)",
    "[file](file:///etc/passwd)",
    "<javascript:alert(9)>",
    "<data:text/html,hi>",
    "![tracker](https://evil.example/pixel.png)",
    "![inline image](data:image/png;base64,iVBORw0KGgo=)",
    '[t](https://ok.example/t "title\x1b with escape")',
    "[ref link][evil]",
    "[fine ref][good]",
    "<script>alert(10)</script>",
    '<img src="x" onerror="alert(11)">',
    '<a href="javascript:alert(12)">raw anchor</a>',
    "<!-- comment --> &lt;entity&gt; &amp;",
    '<iframe src="https://evil.example"></iframe>',
]
REFS = "[evil]: javascript:alert(13)\n\n[good]: https://example.com/good"


def _page(tmp_path: Path, *messages: dict[str, Any]) -> tuple[htmlcheck.Page, str]:
    state = _copy(FIXTURE_STATE, tmp_path / "state")
    _append(state, "agent:main:dm:alice", *messages)
    out = tmp_path / "alice.html"
    proc = run_cli(
        "--state-dir", str(state), "history", "agent:main:dm:alice", "--format", "html",
        "-o", str(out),
    )  # fmt: skip
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    raw = out.read_text(encoding="utf-8")
    return htmlcheck.Page(raw), raw


def _asst(text: str, ts: int = TS) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}], "timestamp": ts}


def _last_article(raw: str) -> str:
    return raw[raw.rindex('<article class="m') :]


def test_markdown_of_a_reply_is_rendered(tmp_path: Path) -> None:
    page, raw = _page(
        tmp_path,
        {"role": "user", "content": "**not** rendered: a person's `text`", "timestamp": TS},
        _asst(RICH, TS + 1),
    )
    n = len(page.messages)
    reply = _last_article(raw)
    assert "<strong>the plan</strong>" in reply and "<code>inline()</code>" in reply
    assert '<pre><code>print("&lt;b&gt;not bold&lt;/b&gt;")\n</code></pre>' in reply
    assert "<ol>" in reply and "<li>second</li>" in reply and "<td>a</td>" in reply
    assert 'href="https://example.com/docs?a=1&amp;b=2"' in reply
    assert 'href="mailto:ops@example.com"' in reply
    text = page.text_of(n - 1)
    assert "the plan" in text and "**" not in text and "```" not in text
    assert "<b>not bold</b>" in text  # markup inside code is shown, not made
    # The user's message is text as typed.
    assert "**not** rendered: a person's `text`" in page.text_of(n - 2)
    htmlcheck.assert_self_contained(page, "markdown")


def test_hostile_markdown_stays_inert(tmp_path: Path) -> None:
    text = "\n\n".join(HOSTILE) + "\n\n" + REFS
    page, raw = _page(tmp_path, _asst(text), _asst("- " + "\n- ".join(HOSTILE), TS + 1))
    htmlcheck.assert_self_contained(page, "hostile")
    assert not ({"script", "iframe", "img"} & set(page.tags))
    assert set(page.attrs_seen) <= {
        "lang", "charset", "name", "content", "http-equiv", "class", "id", "href", "rel",
    }, page.attrs_seen  # fmt: skip
    allowed = {
        "https://ok.example/t",
        "https://evil.example/pixel.png",  # the image, as a link only
        "https://example.com/good",
    }
    external = {h for h in page.hrefs if not h.startswith("#")}
    assert external == allowed, external
    for h in page.hrefs:
        assert not h.lower().lstrip().startswith(("javascript", "data", "vbscript", "file", "."))
    for i in (-2, -1):
        shown = page.text_of(len(page.messages) + i)
        # What was not a link reads as its Markdown source; raw HTML reads as text.
        for piece in (
            "[inline](javascript:alert(1))",
            "<javascript:alert(9)>",
            "[relative](../../index.html)",
            "<script>alert(10)</script>",
            '<img src="x" onerror="alert(11)">',
            '<a href="javascript:alert(12)">raw anchor</a>',
            "<!-- comment --> &lt;entity&gt; &amp;",
            "[image: tracker]",
            "![inline image](data:image/png;base64,iVBORw0KGgo=)",
        ):
            assert piece in shown, (piece, shown[:600])
    assert "\x1b" not in raw and 'title="' not in _last_article(raw)
    assert "[ref link][evil]" in page.text_of(len(page.messages) - 2)


def test_long_reply_folds_between_blocks(tmp_path: Path) -> None:
    """80 lines with a code block across line 20: the fold waits for the block's end, and says
    how many lines it hides."""
    lines = [f"intro line {i}" for i in range(15)] + [""]
    lines += ["```", *(f"code {i}" for i in range(10)), "```", ""]
    lines += [f"- item {i}" for i in range(80 - len(lines))]
    assert len(lines) == 80
    page, raw = _page(tmp_path, _asst("\n".join(lines)))
    reply = _last_article(raw)
    head, _, rest = reply.partition('<details class="more">')
    assert "code 9\n</code></pre>" in head and "item 0" not in head
    hidden = 80 - 29  # the fence closes on line 28, a blank line, then the list
    assert f"<summary>{hidden} more lines</summary>" in rest
    assert rest.count("<li>") == hidden
    text = page.text_of(len(page.messages) - 1)
    assert "item 50" in text and "more lines" not in text


def test_markdown_it_is_imported_only_for_html(tmp_path: Path) -> None:
    state = _copy(FIXTURE_STATE, tmp_path / "state")
    key = "agent:main:dm:alice"
    for args in (("history", key, "--json"), ("history", key, "--format", "markdown")):
        assert "markdown_it" not in imported_modules(*args, state=state, tmp=tmp_path), args
    html = imported_modules("history", key, "--format", "html", state=state, tmp=tmp_path)
    assert "markdown_it" in html  # the probe sees it where it is used


BIDI = ("\u202e", "\u202d", "\u2066", "\u2067", "\u2069", "\u200f", "\u061c")


def test_bidi_controls_are_shown_not_obeyed_in_a_link_text_and_elsewhere(tmp_path: Path) -> None:
    """A bidi override in a Markdown link's text (or anywhere in a message) would turn what
    follows around on the page (`[txt.exe\u202egnp.](https://…)`): shown as `\\u202e`, as the
    CLI shows it, never emitted raw (issue 42, item 13)."""
    link = "see [report\u202egnp.exe](https://example.com/f) now"
    plain = "plain " + "".join(BIDI) + " text"
    page, raw = _page(
        tmp_path,
        {"role": "user", "content": plain, "timestamp": TS},
        _asst(link + "\n\n*and* " + plain, TS + 1),
    )
    assert not any(c in raw for c in BIDI), [c for c in BIDI if c in raw]
    reply = _last_article(raw)
    assert '<span class="c">\\u202e</span>' in reply
    assert 'href="https://example.com/f"' in reply
    assert "report\\u202egnp.exe" in page.text_of(len(page.messages) - 1)
