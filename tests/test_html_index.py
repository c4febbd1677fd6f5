"""The index of `export --html` (reports/charts.py) says what its figures count (issue 33 item
18): a session reset in place lists the messages since the reset beside tokens and cost from
its start (OpenClaw's SQLite store keeps the turns before a reset, its chat view does not)."""

from __future__ import annotations

import re
from pathlib import Path

from tests import htmlcheck
from tests.helpers import run_json
from tests.test_cli_html import OC_STATE, _copy

KEY = "agent:main:reset-me"


def test_index_says_why_a_reset_session_has_few_messages(tmp_path: Path) -> None:
    state = _copy(OC_STATE, tmp_path / "state")
    site = tmp_path / "site"
    rc, _res = run_json("--state-dir", str(state), "export", "--html", str(site), "--all-agents")
    assert rc == 0
    rc, h = run_json("--state-dir", str(state), "history", KEY, "--include-tools")
    assert rc == 0 and [m["role"] for m in h["messages"]] == ["system"]  # only the reset shows
    index = htmlcheck.read(site / "index.html").text
    row = index[index.index(KEY + " ") :].split("$")[0]
    note = re.search(
        r"reset 2026-11-22 18:43:39: messages since; tokens and cost include the (\d+) turns? "
        r"before it other 2026-11-22 18:43:39 1 ([\d,]+) ",
        row,
    )
    assert note is not None, row
    assert int(note.group(1)) >= 1 and int(note.group(2).replace(",", "")) > 0, row
    # A session never reset has no such note.
    main = index[index.index("agent:main:main ") :].split("$")[0]
    assert "reset" not in main
