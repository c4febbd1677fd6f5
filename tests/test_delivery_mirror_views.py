"""Delivery mirrors in the views (issue 33 item 9): after posting a reply to a channel OpenClaw
appends the same text to the transcript as an assistant turn `openclaw/delivery-mirror`, 0 in,
0 out. `history` (text, Markdown, the HTML page) shows it as a small "delivered to …" mark under
the reply, not as the reply said twice; `--json` keeps it as written; `usage` counts no turn
for it, and no `delivery-mirror` model row."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sessiontool.flow.delivery import mirror_message
from tests import htmlcheck
from tests.helpers import FIXTURE_STATE, run_cli, run_json
from tests.test_cli_html import _append, _copy

KEY = "agent:main:telegram:group:-100777"
TS = 1795292600000
REPLY = "Booked: Thursday 19:00, room **Orion**. Bring the book."
ANNOUNCED = "Sub-agent result: 3 venues compared, Orion is cheapest."


def _reply(text: str, ts: int) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "provider": "fake",
        "model": "fake-model",
        "usage": {"input": 1200, "output": 30, "cacheRead": 0, "cacheWrite": 0},
        "stopReason": "stop",
        "timestamp": ts,
    }


def _state(tmp_path: Path) -> Path:
    """A group session whose last reply was posted (and mirrored), then an announce that was
    posted without a reply of the session's own before it (mirrored too)."""
    state = _copy(FIXTURE_STATE, tmp_path / "state")
    _append(
        state,
        KEY,
        {"role": "user", "content": "Book us a room for Thursday", "timestamp": TS},
        _reply(REPLY, TS + 1),
        mirror_message(REPLY, TS + 2),
        {"role": "user", "content": "Any cheaper venue?", "timestamp": TS + 3},
        mirror_message(ANNOUNCED, TS + 4),
    )
    return state


def test_history_text_and_markdown_show_a_mark_not_the_reply_twice(tmp_path: Path) -> None:
    state = _state(tmp_path)
    plain = run_cli("--state-dir", str(state), "history", KEY)
    assert plain.returncode == 0 and plain.stderr == "", plain.stderr
    assert plain.stdout.count("Booked: Thursday") == 1, plain.stdout
    lines = plain.stdout.splitlines()
    assert any(ln.endswith("] ↳ delivered to telegram (the reply above)") for ln in lines), lines
    # A mirror of a text not said above in the session shows that text under the mark.
    at = next(i for i, ln in enumerate(lines) if ln.endswith("] ↳ delivered to telegram:"))
    assert lines[at + 1] == ANNOUNCED
    assert sum(ln.endswith("] assistant:") for ln in lines[-12:]) == 1
    md = run_cli("--state-dir", str(state), "history", KEY, "--format", "markdown")
    assert md.returncode == 0
    assert md.stdout.count("Booked: Thursday") == 1 and md.stdout.count(ANNOUNCED) == 1
    assert "(the reply above)_" in md.stdout and "## assistant" in md.stdout
    # The JSON is the transcript as written: the mirror is there, marks and all.
    rc, h = run_json("--state-dir", str(state), "history", KEY)
    assert rc == 0
    mirrors = [m for m in h["messages"] if m.get("model") == "delivery-mirror"]
    assert [m["content"][0]["text"] for m in mirrors] == [REPLY, ANNOUNCED]


def test_html_page_shows_a_delivered_mark(tmp_path: Path) -> None:
    state = _state(tmp_path)
    out = tmp_path / "page.html"
    proc = run_cli("--state-dir", str(state), "history", KEY, "--format", "html", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    page = htmlcheck.read(out)
    rc, h = run_json("--state-dir", str(state), "history", KEY, "--include-tools")
    assert rc == 0
    htmlcheck.assert_all_messages(page, h["messages"], "mirrors")
    n = len(h["messages"])
    assert page.text.count("Booked: Thursday") == 1
    assert page.kinds[f"m{n - 3}"] == "dlv"
    assert page.text_of(n - 3).startswith("↳ delivered to telegram · ")
    assert page.text_of(n - 3).endswith("the reply above")
    assert page.kinds[f"m{n - 1}"] == "dlv" and ANNOUNCED in page.text_of(n - 1)
    # No "openclaw/delivery-mirror · 0 in · 0 out" turn line.
    assert "delivery-mirror" not in out.read_text()


def test_usage_counts_no_turn_for_a_mirror(tmp_path: Path) -> None:
    before = _copy(FIXTURE_STATE, tmp_path / "before")
    rc, base = run_json("--state-dir", str(before), "usage", "--by", "model")
    assert rc == 0
    state = _state(tmp_path)
    rc, usage = run_json("--state-dir", str(state), "usage", "--by", "model")
    assert rc == 0
    models = {r["model"] for r in usage["rows"]}
    assert not any("delivery-mirror" in m for m in models), models
    assert usage["total"]["turns"] == base["total"]["turns"] + 1  # the reply, not its mirror
    site = tmp_path / "site"
    rc, _res = run_json("--state-dir", str(state), "export", "--html", str(site), "--all-agents")
    assert rc == 0
    assert "delivery-mirror" not in (site / "usage.html").read_text()
    assert json.dumps(usage["total"]) != "{}"
