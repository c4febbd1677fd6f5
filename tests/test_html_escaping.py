"""Escaping is a type in the HTML output (reports/htmlbase.py, docs/decisions.md): a session key,
label, model name and message texts made of `<script>`, both quotes and `&` come out as text in
every place `export --html` and `history --format html` put them: the index, page titles, link
texts, `href` and `title` attributes, the usage page's charts and tables, and a message's
parts (its text, a tool call's name and arguments, an error, where it came from)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from tests import htmlcheck
from tests.helpers import FIXTURE_STATE, run_cli

EVIL = '<script>alert("x")</script>&amp;\'q" onmouseover="alert(1)'
KEYISH = EVIL.replace("/", "").replace(" ", "_")  # a key given to `history` names no path
PARENT = "agent:main:dm:" + KEYISH
CHILD = "agent:main:subagent:" + KEYISH + "-child"
LABEL = "label " + EVIL
MODEL = "model" + EVIL.replace(" ", "_")
TS = 1795292600000
# Every attribute sessiontool's pages use: one injected by a quote (`onmouseover`) would be new.
ATTRS = {
    "lang", "charset", "name", "content", "http-equiv", "class", "id", "href", "viewbox",
    "width", "height", "role", "aria-label", "x", "y", "x1", "x2", "y1", "y2", "rx",
    "text-anchor", "data-label", "rel",
}  # fmt: skip


def _session(state: Path, key: str, entry: dict[str, Any], messages: list[dict[str, Any]]) -> None:
    sessions = state / "agents" / "main" / "sessions"
    store = json.loads((sessions / "sessions.json").read_text())
    store[key] = entry
    (sessions / "sessions.json").write_text(json.dumps(store, indent=2))
    with (sessions / f"{entry['sessionId']}.jsonl").open("w", encoding="utf-8") as fh:
        head = {"type": "session", "version": 3, "id": entry["sessionId"], "timestamp": "x"}
        fh.write(json.dumps(head) + "\n")
        for i, m in enumerate(messages):
            fh.write(json.dumps({"type": "message", "id": f"e{i}", "message": m}) + "\n")


def _hostile_state(tmp_path: Path) -> Path:
    state = tmp_path / "state"
    shutil.copytree(FIXTURE_STATE, state)
    usage = {"input": 10, "output": 5, "cost": {"total": 0.5}}
    _session(
        state,
        PARENT,
        {"sessionId": "evil-parent", "updatedAt": TS + 10, "label": LABEL, "model": MODEL},
        [
            {"role": "user", "content": EVIL, "timestamp": TS},
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "text",
                        "text": "**" + EVIL + "** [" + EVIL + "](https://x/?a=1&b='q')",
                    },
                    {
                        "type": "toolCall",
                        "id": "c1",
                        "name": EVIL,
                        "arguments": {"sessionKey": CHILD},
                    },
                ],
                "model": MODEL,
                "usage": usage,
                "stopReason": "error",
                "errorMessage": EVIL,
                "timestamp": TS + 1,
            },
            {
                "role": "toolResult",
                "toolCallId": "c1",
                "toolName": EVIL,
                "content": [{"type": "text", "text": EVIL}],
                "details": {"childSessionKey": CHILD},
                "timestamp": TS + 2,
            },
        ],
    )
    _session(
        state,
        CHILD,
        {"sessionId": "evil-child", "updatedAt": TS + 20, "spawnedBy": PARENT, "label": LABEL},
        [
            {
                "role": "user",
                "content": EVIL,
                "timestamp": TS + 3,
                "provenance": {
                    "kind": "inter_session",
                    "sourceSessionKey": PARENT,
                    "sourceTool": EVIL,
                },
            }
        ],
    )
    return state


def _check(source: str, where: str) -> htmlcheck.Page:
    """No element or attribute the hostile text could have made, and no raw `<script`."""
    assert "<script" not in source, where
    page = htmlcheck.Page(source)
    assert page.tags.get("script") is None, where
    assert page.attrs_seen <= ATTRS, (where, page.attrs_seen - ATTRS)
    htmlcheck.assert_self_contained(page, where)
    return page


def test_hostile_key_label_model_and_text_come_out_escaped_everywhere(tmp_path: Path) -> None:
    state = _hostile_state(tmp_path)
    site = tmp_path / "site"
    proc = run_cli("--state-dir", str(state), "export", "--html", str(site), "--json")
    assert proc.returncode == 0, proc.stderr
    index = _check((site / "index.html").read_text(), "index")
    for text in (PARENT, CHILD, LABEL):
        assert text in index.text, text
    assert f"spawned by {PARENT}" in index.text
    pages: dict[str, Path] = {}
    for href in index.hrefs:
        if href.startswith("s/"):
            page = htmlcheck.read(site / href)
            pages["".join(page.title)] = site / href
    assert {PARENT, CHILD} <= set(pages)  # each page's <title> is its key, as text
    parent = _check(pages[PARENT].read_text(), "parent page")
    # Linked from the spawn line above the conversation, the tool call and the result.
    assert parent.hrefs.count(pages[CHILD].name) == 3
    body = parent.text
    for text in (EVIL, LABEL, MODEL, f"[error: {EVIL}]", f"call {EVIL}", f"result {EVIL}"):
        assert htmlcheck.norm(text) in body, text
    # A Markdown link's address, its `&` escaped in the href and read back as written.
    assert any(h.startswith("https://x/?a=1&b=") for h in parent.hrefs), parent.hrefs
    child = _check(pages[CHILD].read_text(), "child page")
    assert htmlcheck.norm(f"from {PARENT} via {EVIL}") in child.text
    assert pages[PARENT].name in child.hrefs  # the source and the spawn parent, linked
    assert htmlcheck.norm(f"Spawned by {PARENT}") in child.text
    usage = _check((site / "usage.html").read_text(), "usage")
    assert MODEL in usage.text
    alone = run_cli("--state-dir", str(state), "history", PARENT, "--format", "html")
    assert alone.returncode == 0, alone.stderr
    page = _check(alone.stdout, "history --format html")
    assert "".join(page.title) == PARENT and htmlcheck.norm(EVIL) in page.text
