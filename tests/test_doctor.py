"""`sessiontool doctor`: each kind of problem it reports, a clean state, the real Clawdbot state,
and that it never writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import run_cli, run_json

from .runhelpers import NOW, PINNED, sessions_dir, write_store, write_transcript
from .test_fixtures import copy_state, tree_digest

SID_A = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa"
SID_B = "bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb"


def doctor(*extra: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    rc, data = run_json("doctor", *extra, env=env)
    assert isinstance(data, dict), data
    assert data["ok"] is (rc == 0)
    assert data["ok"] is (not data["problems"])
    for p in data["problems"]:
        assert (
            {"kind", "path", "detail", "severity"}
            <= set(p)
            <= {
                "kind",
                "path",
                "detail",
                "severity",
                "hint",
            }
        )
        assert p["severity"] in ("problem", "warning")
    # The documented exit status: 0 clean, 1 problems, 2 warnings only.
    severities = {p["severity"] for p in data["problems"]}
    assert rc == (1 if "problem" in severities else 2 if severities else 0)
    return rc, data


def kinds(data: dict[str, Any]) -> list[tuple[str, str]]:
    return sorted((p["kind"], Path(p["path"]).name) for p in data["problems"])


@pytest.fixture
def clean(state: Path) -> Path:
    write_store(
        state,
        {
            "agent:main:main": {"sessionId": SID_A, "updatedAt": NOW, "totalTokens": 10},
            # Reset (tokens 0, no transcript yet) and policy-created entries have no transcript
            # by design: not a problem.
            "agent:main:cron:reset": {
                "sessionId": SID_B,
                "updatedAt": NOW,
                "totalTokens": 0,
                "inputTokens": 0,
                "outputTokens": 0,
            },
            "agent:main:dm:policy-only": {
                "sessionId": "cccccccc-cccc-4ccc-8ccc-cccccccccccc",
                "updatedAt": NOW,
                "sendPolicy": "deny",
            },
        },
    )
    write_transcript(state, SID_A, [("user", "hi", NOW), ("assistant", "hello", NOW)])
    # Archives are not live transcripts: never orphans, never scanned.
    (sessions_dir(state) / f"{SID_B}.jsonl.deleted.2026-01-01T00-00-00.000Z").write_text("{torn")
    return state


def test_clean_state_is_ok(clean: Path) -> None:
    rc, data = doctor()
    assert rc == 0
    assert data["ok"] is True and data["problems"] == []
    assert data["errors"] == 0 and data["warnings"] == 0
    assert {s["format"] for s in data["stores"]} == {"jsonl"}
    proc = run_cli("doctor")
    assert proc.returncode == 0
    assert proc.stdout == "no problems found\n"


def test_empty_state_dir_is_ok(state: Path) -> None:
    state.mkdir()
    rc, data = doctor()
    assert rc == 0 and data["ok"] is True


def test_missing_state_dir_and_unknown_agent_are_warnings(state: Path, tmp_path: Path) -> None:
    rc, data = doctor()
    assert rc == 2
    assert [(p["kind"], p["severity"]) for p in data["problems"]] == [
        ("missing-state-dir", "warning")
    ]
    state.mkdir()
    rc, data = doctor("--agent", "nosuch")
    assert rc == 2
    assert [p["kind"] for p in data["problems"]] == ["unknown-agent"]
    assert "nosuch" in data["problems"][0]["detail"]
    proc = run_cli("--agent", "nosuch", "doctor")
    assert proc.returncode == 2
    assert "warning: unknown-agent" in proc.stdout and "1 warning found" in proc.stdout


def test_state_dir_that_is_a_file_is_a_problem(tmp_path: Path) -> None:
    f = tmp_path / "afile"
    f.write_text("x")
    rc, data = doctor("--state-dir", str(f))
    assert rc == 1
    assert [p["kind"] for p in data["problems"]] == ["state-dir-not-a-directory"]


def test_torn_transcript_line_and_lost_run(clean: Path) -> None:
    transcript = sessions_dir(clean) / f"{SID_A}.jsonl"
    with open(transcript, "ab") as fh:
        fh.write(b'{"type":"message","id":"dead","message":{"role":"user","con')
    runs = clean / "sessiontool" / "runs"
    runs.mkdir(parents=True)
    run_id = "5f0e6c1e-0000-4000-8000-000000000001"
    (runs / f"{run_id}.json").write_text(
        json.dumps(
            {
                "runId": run_id,
                "kind": "send",
                "status": "running",
                "sessionKey": "agent:main:main",
                "agentId": "main",
                "createdAt": NOW - 60_000,
                "workerStartedAt": NOW - 59_000,
                "pid": 999_999_999,
            }
        )
    )
    rc, data = doctor(env=PINNED)
    assert rc == 1
    assert kinds(data) == [("lost-run", f"{run_id}.json"), ("torn-line", f"{SID_A}.jsonl")]
    lost = next(p for p in data["problems"] if p["kind"] == "lost-run")
    assert lost["path"] == str(runs / f"{run_id}.json")
    assert run_id in lost["detail"]
    # Human output names both, and the exit status is the same.
    proc = run_cli("doctor", env=PINNED)
    assert proc.returncode == 1
    assert f"torn-line: {transcript}" in proc.stdout
    assert "lost-run:" in proc.stdout
    assert proc.stdout.endswith("2 problems found\n")
    # doctor only reports: the run is still "running" on disk (wait/runs reconcile it).
    assert json.loads((runs / f"{run_id}.json").read_text())["status"] == "running"


def test_running_run_with_live_worker_is_not_lost(clean: Path) -> None:
    """A run whose worker holds its flock is alive, whatever its age."""
    import fcntl

    runs = clean / "sessiontool" / "runs"
    runs.mkdir(parents=True)
    run_id = "5f0e6c1e-0000-4000-8000-000000000002"
    (runs / f"{run_id}.json").write_text(
        json.dumps(
            {
                "runId": run_id,
                "kind": "send",
                "status": "running",
                "sessionKey": "agent:main:main",
                "createdAt": NOW - 3_600_000,
                "workerStartedAt": NOW - 3_600_000,
            }
        )
    )
    fd = os.open(runs / f"{run_id}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        rc, data = doctor(env=PINNED)
        assert rc == 0, data
    finally:
        os.close(fd)
    rc, data = doctor(env=PINNED)
    assert ("lost-run", f"{run_id}.json") in kinds(data)


def test_bad_lines_in_the_middle(clean: Path) -> None:
    transcript = sessions_dir(clean) / f"{SID_A}.jsonl"
    lines = transcript.read_text().splitlines()
    lines.insert(1, "garbage {")
    lines.insert(3, "")  # blank lines are fine
    lines.insert(4, "{also bad")
    transcript.write_text("\n".join(lines) + "\n")
    rc, data = doctor()
    assert rc == 1
    assert kinds(data) == [("bad-lines", f"{SID_A}.jsonl")]
    assert "2 unparsable line(s), first at line 2" in data["problems"][0]["detail"]


def test_missing_transcript_only_when_the_session_had_messages(state: Path) -> None:
    write_store(
        state,
        {
            "agent:main:main": {"sessionId": SID_A, "updatedAt": NOW, "totalTokens": 1500},
            "agent:main:dm:bob": {
                "sessionId": SID_B,
                "updatedAt": NOW,
                "inputTokens": 3,
                "outputTokens": 4,
            },
            "agent:main:dm:carol": {
                "sessionId": "carol-1",
                "updatedAt": NOW,
                "sessionFile": "carol-1.jsonl",
            },
            "agent:main:dm:dave": {"sessionId": "dave-1", "updatedAt": NOW},
            "agent:main:dm:erin": {"sessionId": "erin-1", "updatedAt": NOW, "totalTokens": 0},
        },
    )
    rc, data = doctor()
    assert rc == 1
    assert kinds(data) == [
        ("missing-transcript", f"{SID_A}.jsonl"),
        ("missing-transcript", f"{SID_B}.jsonl"),
        ("missing-transcript", "carol-1.jsonl"),
    ]
    assert any("agent:main:dm:bob" in p["detail"] for p in data["problems"])


def test_orphan_transcript(clean: Path) -> None:
    write_transcript(clean, "dev-orphan-7", [("user", "nobody points here", NOW)])
    rc, data = doctor()
    assert rc == 2  # a warning: a reset leaves one by design
    assert kinds(data) == [("orphan-transcript", "dev-orphan-7.jsonl")]
    hint = data["problems"][0]["hint"]
    assert hint.startswith("archive it to clear this: mv ")
    # Doing what the hint says clears it.
    import shlex

    subprocess.run(shlex.split(hint.split(": ", 1)[1]), check=True)
    rc, data = doctor()
    assert rc == 0, data


def test_openclaws_own_files_beside_the_transcripts_are_no_orphans(clean: Path) -> None:
    """OpenClaw 2026.7.35 writes each run's trajectory beside its transcript
    (`<sessionId>.trajectory.jsonl`, with a `.trajectory-path.json` pointer) and keeps
    compaction checkpoints (`<sessionId>.checkpoint.<uuid>.jsonl`): doctor told the user to
    `mv` them as orphan transcripts (issue 42 item 11). The release table knows them
    (`openclaw_releases.SESSION_DIR_FILES`); a real orphan is still one, and search does not
    list them as archived sessions either."""
    sdir = sessions_dir(clean)
    own = [
        f"{SID_A}.trajectory.jsonl",
        f"{SID_A}.trajectory-path.json",
        f"{SID_A}.checkpoint.0f1e2d3c-4b5a-4978-8a6b-5c4d3e2f1a0b.jsonl",
    ]
    for name in own:
        (sdir / name).write_text('{"type":"trace","traceId":"secretword"}\n')
    write_transcript(clean, "dev-orphan-7", [("user", "secretword", NOW)])
    rc, data = doctor()
    assert rc == 2, data
    assert kinds(data) == [("orphan-transcript", "dev-orphan-7.jsonl")]
    assert not any(name in json.dumps(data) for name in own)
    rc, found = run_json("search", "secretword", "--include-archived")
    assert rc == 0, found
    assert not any(name in json.dumps(found) for name in own), found


def test_unreadable_store_is_reported_not_fatal(clean: Path, tmp_path: Path) -> None:
    store = sessions_dir(clean) / "sessions.json"
    store.write_text('{"agent:main:main": {"sessionId": ')
    other = sessions_dir(clean, "ops")
    write_store(
        clean,
        {"agent:ops:main": {"sessionId": "ops-1", "updatedAt": NOW, "totalTokens": 5}},
        agent="ops",
    )
    rc, data = doctor()
    assert rc == 1
    found = kinds(data)
    assert ("unreadable-store", "sessions.json") in found
    # The other agent is still checked; orphans are not guessed for the unreadable store.
    assert ("missing-transcript", "ops-1.jsonl") in found
    assert not any(k == "orphan-transcript" for k, _ in found)
    bad = next(p for p in data["problems"] if p["kind"] == "unreadable-store")
    assert bad["path"] == str(store) and "line 1" in bad["detail"]
    assert store.read_text() == '{"agent:main:main": {"sessionId": '
    assert other.is_dir()


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_stale_locks(clean: Path) -> None:
    sdir = sessions_dir(clean)
    dead = _dead_pid()
    # A store lock of a dead process, and one held by a live process for far too long.
    (sdir / "sessions.json.lock").write_text(json.dumps({"pid": dead, "startedAt": NOW - 1000}))
    # A transcript lock of a live process is never stale, however old (a whole agent run).
    (sdir / f"{SID_A}.jsonl.lock").write_text(
        json.dumps({"pid": os.getpid(), "createdAt": NOW - 86_400_000})
    )
    # A transcript lock of a dead process is.
    (sdir / f"{SID_B}.jsonl.lock").write_text(
        json.dumps({"pid": dead, "createdAt": "2027-01-15T07:59:00.000Z"})
    )
    rc, data = doctor(env=PINNED)
    assert rc == 2
    assert kinds(data) == [
        ("stale-lock", f"{SID_B}.jsonl.lock"),
        ("stale-lock", "sessions.json.lock"),
    ]
    assert all(str(dead) in p["detail"] for p in data["problems"])
    # A live holder on this host is never stale, however old (it may be stopped); one that
    # names another host goes by OpenClaw's 30 s rule.
    (sdir / "sessions.json.lock").write_text(
        json.dumps({"pid": os.getpid(), "startedAt": NOW - 45_000})
    )
    rc, data = doctor(env=PINNED)
    assert ("stale-lock", "sessions.json.lock") not in kinds(data)
    (sdir / "sessions.json.lock").write_text(
        json.dumps({"pid": os.getpid(), "startedAt": NOW - 45_000, "hostname": "elsewhere"})
    )
    rc, data = doctor(env=PINNED)
    assert ("stale-lock", "sessions.json.lock") in kinds(data)
    (sdir / "sessions.json.lock").write_text(
        json.dumps({"pid": os.getpid(), "startedAt": NOW - 1_000})
    )
    rc, data = doctor(env=PINNED)
    assert ("stale-lock", "sessions.json.lock") not in kinds(data)
    # doctor breaks nothing: every lock file is still there.
    assert len(list(sdir.glob("*.lock"))) == 3


def test_unreadable_run_record(clean: Path) -> None:
    runs = clean / "sessiontool" / "runs"
    runs.mkdir(parents=True)
    (runs / "broken.json").write_text("{not json")
    rc, data = doctor()
    assert rc == 1
    assert kinds(data) == [("unreadable-run", "broken.json")]


def test_real_clawdbot_state_and_doctor_never_writes(tmp_path: Path) -> None:
    """The fixture has exactly two transcripts no entry points to: `dev-orphan-42.jsonl`
    (a `--session-id` run with no store entry) and the transcript `sessions.reset` left behind
    for agent:research:wipe-me. The `.deleted.` archive is not one."""
    state = copy_state(tmp_path / "fx")
    before = tree_digest(state)
    rc, data = run_json("--state-dir", str(state), "doctor")
    assert rc == 2
    assert kinds(data) == [
        ("orphan-transcript", "78617bfd-7559-4ab1-a058-0dc6b09eb470.jsonl"),
        ("orphan-transcript", "dev-orphan-42.jsonl"),
    ]
    assert tree_digest(state) == before


def test_a_planted_link_is_one_finding(state: Path, tmp_path: Path) -> None:
    """A lock and the outbox planted as links to an old, malformed file outside the state dir:
    each is reported once, as a planted link (not also as a stale lock or malformed lines of
    the file it leads to), and nothing is repeated on stderr."""
    assert run_cli("send", "main", "hello").returncode == 0
    outside = tmp_path / "outside.txt"
    outside.write_text("not json\n")
    old = 1_600_000_000
    os.utime(outside, (old, old))
    lock = state / "agents" / "main" / "sessions" / "sessions.json.lock"
    outbox = state / "sessiontool" / "deliveries.jsonl"
    for link in (lock, outbox):
        link.symlink_to(outside)
        os.utime(link, (old, old), follow_symlinks=False)
    proc = run_cli("doctor", "--json")
    data = json.loads(proc.stdout)
    by_path: dict[str, list[str]] = {}
    for p in data["problems"]:
        by_path.setdefault(p["path"], []).append(p["kind"])
    assert by_path[str(lock)] == ["planted-link"]
    assert by_path[str(outbox)] == ["planted-link"]
    assert proc.stderr == ""
