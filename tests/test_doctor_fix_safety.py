"""`doctor --fix` removes only what it can prove is sessiontool's and dead, never the only path
to a transcript; every lock and slot file is checked for planted links (issue 27, items 12, 18)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import run_cli, run_json
from tests.reliability.util import dead_pid, read_store
from tests.runhelpers import reap, runner_config


def _send(state: Path, text: str) -> dict[str, object]:
    rc, out = run_json("send", "main", text, "--timeout", "20")
    reap(state)
    assert rc == 0, out
    assert isinstance(out, dict)
    return out


def test_a_link_at_a_run_slot_is_refused_reported_and_removed(state: Path, tmp_path: Path) -> None:
    runner_config(state, {"type": "echo"})
    _send(state, "first")
    slot = state / "sessiontool" / "runs" / ".slots" / "0"
    victim = tmp_path / "victim"
    victim.write_text("")
    slot.unlink()
    slot.symlink_to(victim)
    # send checks before starting anything: exit 5 naming the link, no run left queued.
    proc = run_cli("send", "main", "second", "--timeout", "20")
    assert proc.returncode == 5, proc.stderr
    assert str(slot) in proc.stderr
    rc, doc = run_json("doctor")
    assert ("planted-link", str(slot)) in {(p["kind"], p["path"]) for p in doc["problems"]}, doc
    rc, fixed = run_json("doctor", "--fix", "--yes")
    assert not slot.is_symlink(), fixed
    assert victim.read_text() == ""
    assert _send(state, "third")["reply"] == "echo: third"


def test_fix_never_removes_the_only_path_to_a_transcript(state: Path) -> None:
    runner_config(state, {"type": "echo"})
    _send(state, "keep me")
    sdir = state / "agents" / "main" / "sessions"
    entry = read_store(state)["agent:main:main"]
    transcript = sdir / f"{entry['sessionId']}.jsonl"
    moved = sdir / "moved-by-user.jsonl"
    transcript.rename(moved)
    transcript.symlink_to(moved)
    rc, doc = run_json("doctor")
    kinds = {p["path"]: p["kind"] for p in doc["problems"]}
    assert kinds.get(str(transcript)) != "planted-link", doc
    rc, fixed = run_json("doctor", "--fix", "--yes")
    assert transcript.is_symlink(), fixed
    rc, hist = run_json("history", "main")
    assert rc == 0
    assert "keep me" in json.dumps(hist), hist


def test_fix_removes_only_temp_files_it_can_prove_are_its_own(state: Path) -> None:
    runner_config(state, {"type": "echo"})
    _send(state, "hello")
    sdir = state / "agents" / "main" / "sessions"
    pid = dead_pid()
    users = [
        sdir / f"notes.{pid}.abcdef12.tmp",
        state / f"report.{pid}.0badc0de.tmp",
        state / "sessiontool" / f"mine.{pid}.0badc0de.tmp",
    ]
    for p in users:
        p.write_text("the user's own file")
    ours = sdir / f"sessions.json.{pid}.0badc0de.tmp"
    ours.write_text("{}")
    rc, fixed = run_json("doctor", "--fix", "--yes")
    assert not ours.exists(), fixed
    assert [p.read_text() for p in users] == ["the user's own file"] * 3


def test_a_store_writer_removes_the_temp_file_of_a_writer_killed_holding_the_lock(
    state: Path,
) -> None:
    runner_config(state, {"type": "echo"})
    _send(state, "hello")
    sdir = state / "agents" / "main" / "sessions"
    # What a writer killed with -9 in the middle of its write leaves: its lock and its temp.
    pid = dead_pid()
    (sdir / "sessions.json.lock").write_text(json.dumps({"pid": pid, "startedAt": 1}))
    tmp = sdir / f"sessions.json.{pid}.0badc0de.tmp"
    tmp.write_bytes(b"x" * 100_000)
    other = sdir / f"sessions.json.{dead_pid()}.0badc0de.tmp"  # its lock was broken before
    other.write_bytes(b"y")
    proc = run_cli("label", "main", "renamed")
    assert proc.returncode == 0, proc.stderr
    assert read_store(state)["agent:main:main"]["label"] == "renamed"
    assert not tmp.exists()
    assert not (sdir / "sessions.json.lock").exists()
    assert other.exists()  # not proven abandoned by this writer: doctor --fix's to remove
