"""`export --html` of many sessions shows progress on a terminal and nothing piped or with
--json (issue 45 item 11), as `usage` and `search` do: run on a pseudo-terminal, each page
slowed by the `export-page` test pause so the export lasts past the line's one-second delay."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.helpers import FIXTURE_STATE, run_cli

from .test_index_build import _on_a_terminal

SLOW = {"SESSIONTOOL_TEST_PAUSE": "export-page:0.4"}


def _state(tmp_path: Path) -> Path:
    dest = tmp_path / "state"
    shutil.copytree(FIXTURE_STATE, dest)
    return dest


def test_export_html_shows_pages_done_on_a_terminal(tmp_path: Path) -> None:
    state = _state(tmp_path)
    shown = _on_a_terminal(state, ["export", "--html", str(tmp_path / "site")], SLOW)
    assert "writing pages" in shown, shown
    assert "exported " in shown  # then the result line, as before
    assert "internal error" not in shown


def test_export_html_piped_or_json_shows_no_progress(tmp_path: Path) -> None:
    state = _state(tmp_path)
    p = run_cli(
        "export", "--html", str(tmp_path / "a"), env={"SESSIONTOOL_STATE_DIR": str(state), **SLOW}
    )
    assert p.returncode == 0, p.stderr
    # stderr holds only the test pause's own lines
    assert "writing pages" not in p.stderr and p.stdout.startswith("exported ")
    assert all(x.startswith("sessiontool test pause:") for x in p.stderr.splitlines())
    shown = _on_a_terminal(state, ["export", "--html", str(tmp_path / "b"), "--json"], SLOW)
    assert "writing pages" not in shown
    assert json.loads(shown[shown.index("{") :])["pages"] > 2
