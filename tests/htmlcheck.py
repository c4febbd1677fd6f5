"""Reading sessiontool's HTML pages the way a browser's parser does (html.parser), for the tests of
`history --format html` and `export --html`: what each message element holds as text, every
link and id, and every element that could load or run something."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

VOID = {"meta", "br", "hr", "img", "input", "link", "source", "wbr", "area", "base", "col"}
# The only destinations a link in a message's Markdown may have (reports/markdown.py).
EXTERNAL = ("http://", "https://", "mailto:")
# Elements that fetch or run something: a self-contained page has none of them.
ACTIVE = {"script", "iframe", "object", "embed", "img", "link", "audio", "video", "frame", "base"}


class Page(HTMLParser):
    """One parsed page: `messages[i]` is the text of the element with id `m<i>` (an article or
    a reset divider), `text` the whole body's text."""

    def __init__(self, source: str) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, str | None, str]] = []  # (tag, message id it opens, class)
        self.skip = 0  # inside a fold's "N more lines" label: not the message's text
        self.current: list[str] = []  # ids of open message elements
        self.messages: dict[str, list[str]] = {}
        self.kinds: dict[str, str] = {}  # message id -> its class attribute
        self.hrefs: list[str] = []
        self.ids: set[str] = set()
        self.tags: dict[str, int] = {}
        self.attrs_seen: set[str] = set()
        self.body: list[str] = []
        self.title: list[str] = []
        self.in_title = False
        self.feed(source)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.tags[tag] = self.tags.get(tag, 0) + 1
        self.attrs_seen.update(a)
        if a.get("id"):
            self.ids.add(str(a["id"]))
        if tag == "a" and a.get("href") is not None:
            self.hrefs.append(str(a["href"]))
        if tag == "title":
            self.in_title = True
        if tag in VOID:
            return
        mid = a.get("id")
        opens = mid if mid and mid[0] == "m" and mid[1:].isdigit() else None
        if opens:
            self.current.append(opens)
            self.messages[opens] = []
            self.kinds[opens] = str(a.get("class", ""))
        if tag == "summary" and self.stack and "more" in self.stack[-1][2].split():
            self.skip += 1
            self.stack.append((tag, opens, "fold-label"))
            return
        self.stack.append((tag, opens, str(a.get("class") or "")))

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self.in_title = False
        if tag in VOID:
            return
        while self.stack:
            t, opens, cls = self.stack.pop()
            if cls == "fold-label":
                self.skip -= 1
            if opens:
                self.current.remove(opens)
            if t == tag:
                break

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.title.append(data)
            return
        if self.skip:
            return
        self.body.append(data)
        for mid in self.current:
            self.messages[mid].append(data)

    def text_of(self, i: int) -> str:
        return norm("".join(self.messages.get(f"m{i}", [])))

    @property
    def text(self) -> str:
        return norm("".join(self.body))


def norm(text: str) -> str:
    return " ".join(text.split())


def read(path: Path) -> Page:
    return Page(path.read_text(encoding="utf-8"))


def expected_pieces(msg: dict[str, Any]) -> list[str]:
    """What of a message (as `history --json` gives it) must be readable on its page."""
    out: list[str] = []
    content = msg.get("content")
    if isinstance(content, str):
        out.append(content)
    elif isinstance(content, list):
        for b in content:
            if not isinstance(b, dict):
                continue
            if b.get("type") == "text":
                out.append(b.get("text", ""))
            elif b.get("type") == "thinking":
                out.append(b.get("thinking", ""))
            elif b.get("type") == "toolCall":
                out.append(str(b.get("name")))
                out += _leaves(b.get("arguments"))
    if msg.get("role") == "toolResult" and msg.get("toolName"):
        out.append(str(msg["toolName"]))
    details = msg.get("details")
    if msg.get("role") == "custom" and isinstance(details, dict):
        out.append(str(details.get("toolName", "")))
        res = details.get("result")
        if isinstance(res, dict):
            for b in res.get("content") or []:
                if isinstance(b, dict) and b.get("type") == "text":
                    out.append(b.get("text", ""))
    if msg.get("errorMessage"):
        out.append(str(msg["errorMessage"]))
    return [norm(p) for p in out if norm(p)]


def _leaves(v: Any) -> list[str]:
    if isinstance(v, dict):
        return [x for item in v.values() for x in _leaves(item)]
    if isinstance(v, list):
        return [x for item in v for x in _leaves(item)]
    if isinstance(v, str):
        return [json.dumps(v, ensure_ascii=False)[1:-1]]  # as the JSON of the arguments shows it
    return []


def markdown_text(text: str) -> str:
    """The text a reader sees of Markdown as the pages render it (emphasis marks gone, links
    their labels)."""
    from sessiontool.reports.markdown import render

    return Page(f'<div id="m0">{render(text)}</div>').text_of(0)


def assert_all_messages(page: Page, messages: list[dict[str, Any]], where: str) -> None:
    assert len(page.messages) == len(messages), (where, len(page.messages), len(messages))
    for i, msg in enumerate(messages):
        text = page.text_of(i)
        role = msg.get("role")
        if msg.get("provider") == "openclaw" and msg.get("model") == "delivery-mirror":
            # A small mark under the reply it posted; its text only when it is not that reply's.
            assert page.kinds[f"m{i}"] == "dlv" and text.startswith("↳ delivered"), (where, i)
            continue
        for piece in expected_pieces(msg):
            if role == "assistant" and piece not in text:
                piece = markdown_text(piece)  # a model's Markdown is rendered
            assert piece in text, (where, i, piece[:200], text[:400])
        if role == "system" and expected_pieces(msg) == ["Reset"]:
            assert "reset" in page.kinds[f"m{i}"], (where, i)
        elif role in ("user", "assistant"):
            assert text.lower().startswith(role), (where, i, text[:80])


def assert_self_contained(page: Page, where: str) -> None:
    """Nothing to fetch, nothing to run."""
    assert not (ACTIVE & set(page.tags)), (where, ACTIVE & set(page.tags))
    assert "src" not in page.attrs_seen and "srcset" not in page.attrs_seen, where
    assert not any(a.startswith("on") for a in page.attrs_seen), where
    for href in page.hrefs:
        if href.startswith(EXTERNAL):
            continue  # a link in a model's Markdown: followed only when clicked
        assert "://" not in href and not href.startswith(("//", "javascript:", "data:")), href
