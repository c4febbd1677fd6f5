"""`doctor` sees what dead writers leave and what is quarantined; `doctor --fix` removes what is
safe (temp files of dead writers, locks of dead pids) and, with `--yes`, quarantined records and
planted links; it says what it did. Malformed outbox lines and config values are skipped with a
warning."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.helpers import run_cli, run_json
from tests.runhelpers import reap


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def populated(state: Path) -> Path:
    assert run_cli("send", "main", "hello").returncode == 0
    reap(state)
    return state / "agents" / "main" / "sessions"


def test_doctor_reports_and_fix_removes(state: Path, tmp_path: Path) -> None:
    sdir = populated(state)
    pid = dead_pid()
    tmp_dead = sdir / f"sessions.json.{pid}.0badc0de.tmp"
    tmp_dead.write_bytes(b"x" * 1000)
    tmp_live = sdir / f"sessions.json.{os.getpid()}.0badc0de.tmp"  # its writer is alive
    tmp_live.write_bytes(b"y")
    lock = sdir / "sessions.json.lock"
    lock.write_text(json.dumps({"pid": pid, "startedAt": 1}))
    outbox = state / "sessiontool" / "deliveries.jsonl"
    good = json.dumps({"ts": "2026-01-01T00:00:00.000Z", "runId": "r1", "text": "kept"})
    outbox.write_text(f"{good}\nnot json\n[1,2]\n{good}\n")
    broken_run = state / "sessiontool" / "runs" / "broken.json"
    broken_run.write_text("{not json")
    victim = tmp_path / "victim"
    victim.mkdir()
    link = state / "sessiontool" / "runs" / ".records.lock"
    link.unlink(missing_ok=True)
    link.symlink_to(victim / "records.lock")

    code, data = run_json("doctor")
    assert code == 1
    kinds = {(p["kind"], p["path"]) for p in data["problems"]}
    assert ("temp-file", str(tmp_dead)) in kinds
    assert not any(p == str(tmp_live) for _, p in kinds)
    assert ("stale-lock", str(lock)) in kinds
    assert ("bad-outbox-lines", str(outbox)) in kinds
    assert ("unreadable-run", str(broken_run)) in kinds
    assert ("planted-link", str(link)) in kinds

    proc = run_cli("doctor", "--fix")
    assert proc.returncode == 1, proc.stderr  # what needs --yes is still there
    out = proc.stdout
    assert f"removed temp file {tmp_dead}\n" in out
    assert f"removed stale lock {lock}\n" in out
    assert "3 more need confirmation: doctor --fix --yes" in out
    assert not tmp_dead.exists() and not lock.exists() and tmp_live.exists()
    assert outbox.read_text().count("not json") == 1 and broken_run.exists() and link.is_symlink()

    code, data = run_json("doctor", "--fix", "--yes")
    assert code == 0, data
    actions = {(d["action"], d["path"]) for d in data["fix"]["fixed"]}
    assert actions == {
        ("removed malformed outbox lines from", str(outbox)),
        ("removed unreadable run record", str(broken_run)),
        ("removed planted link", str(link)),
    }
    assert outbox.read_text() == f"{good}\n{good}\n"
    assert not broken_run.exists() and not link.is_symlink()
    assert list(victim.iterdir()) == []
    assert data["ok"] is True

    proc = run_cli("doctor", "--fix")
    assert proc.returncode == 0 and "nothing to fix" in proc.stdout


def test_yes_needs_fix(state: Path) -> None:
    proc = run_cli("doctor", "--yes")
    assert proc.returncode == 2 and "--yes only goes with --fix" in proc.stderr


def test_malformed_outbox_lines_are_skipped_with_a_warning(state: Path) -> None:
    outbox = state / "sessiontool" / "deliveries.jsonl"
    outbox.parent.mkdir(parents=True)
    good = json.dumps({"ts": "2026-01-01T00:00:00.000Z", "runId": "r1", "text": "hi"})
    outbox.write_text(f"garbage\n{good}\n{{torn")
    code, data = run_json("deliveries")
    assert code == 0 and [r["runId"] for r in data["deliveries"]] == ["r1"], data
    proc = run_cli("deliveries")
    assert proc.returncode == 0
    warnings = [ln for ln in proc.stderr.splitlines() if "warning" in ln]
    assert len(warnings) == 1 and "1 malformed line(s) skipped" in warnings[0], proc.stderr


def test_bad_value_in_openclaw_config_is_skipped(state: Path) -> None:
    state.mkdir(parents=True)
    (state / "openclaw.json").write_text(
        json.dumps({"session": {"agentToAgent": {"maxPingPongTurns": "five"}}})
    )
    proc = run_cli("list")
    assert proc.returncode == 0, proc.stderr
    assert (
        "maxPingPongTurns: expected a whole number from 0 to 20, got 'five' (skipped" in proc.stderr
    )
    doctor = run_cli("doctor", "--json")
    data = json.loads(doctor.stdout)
    assert any(
        p["kind"] == "config-warning" and "maxPingPongTurns" in p["detail"]
        for p in data["problems"]
    ), data
    assert "maxPingPongTurns" not in doctor.stderr  # said once: in the report
    # The same value in sessiontool's own file is the user's to fix: exit 2 as documented.
    (state / "sessiontool.json5").write_text('{session: {agentToAgent: {maxPingPongTurns: "x"}}}')
    proc = run_cli("list")
    assert proc.returncode == 2 and "sessiontool.json5" in proc.stderr
