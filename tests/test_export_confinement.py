"""`export --to` never writes inside the state dir it exports, however DIR is spelled (a link,
`..`), and never replaces a transcript it did not write."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import FIXTURE_STATE, run_cli
from tests.test_openclaw_sqlite import copy_oc, tree_digest

MAIN_SID = "792f111c-3bb9-4b35-afcd-c0f4605431d4"


@pytest.mark.parametrize("spelling", ["link", "dotdot", "agents-link"])
def test_export_into_openclaws_state_dir_is_refused_however_spelled(
    tmp_path: Path, spelling: str
) -> None:
    state = copy_oc(tmp_path / "state")
    before = tree_digest(state)
    if spelling == "link":
        (tmp_path / "elsewhere").symlink_to(state)
        to = str(tmp_path / "elsewhere")
    elif spelling == "dotdot":
        (tmp_path / "x").mkdir()
        to = str(tmp_path / "x" / ".." / "state" / "agents" / "..")
    else:  # DIR outside, but its agents/ is a link into the state dir's
        (tmp_path / "out").mkdir()
        (tmp_path / "out" / "agents").symlink_to(state / "agents")
        to = str(tmp_path / "out")
    proc = run_cli("--state-dir", str(state), "export", "--to", to, "--all-agents")
    assert proc.returncode == 2, proc.stderr
    assert "outside the state dir" in proc.stderr
    assert tree_digest(state) == before
    assert not list(state.glob("agents/*/sessions/*.jsonl"))


def test_a_jsonl_state_dir_exported_onto_itself_through_a_link_is_untouched(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    shutil.copytree(FIXTURE_STATE, state)
    before = tree_digest(state)
    (tmp_path / "moved").symlink_to(state)
    for to in (tmp_path / "moved", tmp_path / "moved" / "agents" / ".." / "."):
        proc = run_cli("--state-dir", str(state), "export", "--to", str(to), "--all-agents")
        assert proc.returncode == 2, proc.stderr
    assert tree_digest(state) == before


def test_a_transcript_export_did_not_write_is_never_replaced(tmp_path: Path) -> None:
    state = copy_oc(tmp_path / "state")
    dest = tmp_path / "dest"
    sessions = dest / "agents" / "main" / "sessions"
    sessions.mkdir(parents=True)
    live = sessions / f"{MAIN_SID}.jsonl"
    head = {"type": "session", "version": 3, "id": MAIN_SID, "timestamp": "2026-01-01", "cwd": "/w"}
    change = {"type": "model_change", "provider": "p", "modelId": "m", "id": "a1b2c3d4-0"}
    live.write_text(json.dumps(head) + "\n" + json.dumps(change) + "\n")
    before = tree_digest(dest)
    proc = run_cli("--state-dir", str(state), "export", "--to", str(dest))
    assert proc.returncode == 2, proc.stderr
    assert str(live) in proc.stderr
    assert tree_digest(dest) == before  # nothing written, not even the other sessions
    # Its own earlier output is updated as before.
    live.unlink()
    assert run_cli("--state-dir", str(state), "export", "--to", str(dest)).returncode == 0
    first = live.read_bytes()
    os.utime(live, (0, 0))
    proc = run_cli("--state-dir", str(state), "export", "--to", str(dest))
    assert proc.returncode == 0, proc.stderr
    assert live.read_bytes() == first


def test_export_html_into_the_state_dir_through_a_link_is_refused(tmp_path: Path) -> None:
    state = copy_oc(tmp_path / "state")
    before = tree_digest(state)
    (tmp_path / "site").symlink_to(state / "agents")
    for to in (tmp_path / "site", tmp_path / "x" / ".." / "state" / "agents"):
        proc = run_cli("--state-dir", str(state), "export", "--html", str(to), "--all-agents")
        assert proc.returncode == 2, proc.stderr
        assert "outside the state dir" in proc.stderr
    assert tree_digest(state) == before
