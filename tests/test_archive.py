"""The sub-agent archive: which children are due, `sweep` (dry run and real), the reusable
archive helper and the at-most-once-a-minute opportunistic sweep."""

from __future__ import annotations

import json
import os
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

from sessiontool.context import build_context
from sessiontool.runs import archive
from tests.helpers import run_cli, run_json, write_config

NOW = 1_800_000_000_000
MINUTE = 60_000


def _child_key(agent: str = "main") -> str:
    return f"agent:{agent}:subagent:{uuid.uuid4()}"


def add_session(state: Path, key: str, *, updated_at: int, agent: str = "main") -> Path:
    """A store entry with a one-message transcript; returns the transcript path."""
    sessions = state / "agents" / agent / "sessions"
    sessions.mkdir(parents=True, exist_ok=True)
    store_path = sessions / "sessions.json"
    store: dict[str, Any] = json.loads(store_path.read_text()) if store_path.exists() else {}
    sid = str(uuid.uuid4())
    store[key] = {"sessionId": sid, "updatedAt": updated_at, "spawnedBy": f"agent:{agent}:main"}
    store_path.write_text(json.dumps(store, indent=2))
    transcript = sessions / f"{sid}.jsonl"
    header = {"type": "session", "version": 3, "id": sid, "timestamp": "2027-01-15T08:00:00.000Z"}
    line = {
        "type": "message",
        "id": "a1b2c3d4",
        "parentId": None,
        "message": {"role": "user", "content": "hi"},
    }
    transcript.write_text(json.dumps(header) + "\n" + json.dumps(line) + "\n")
    return transcript


def add_run(state: Path, key: str, *, kind: str = "spawn", status: str = "ok") -> str:
    runs = state / "sessiontool" / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    run_id = str(uuid.uuid4())
    rec = {
        "runId": run_id,
        "kind": kind,
        "sessionKey": key,
        "status": status,
        "createdAt": NOW - 10 * MINUTE,
    }
    (runs / f"{run_id}.json").write_text(json.dumps(rec))
    return run_id


def files_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def store_keys(state: Path, agent: str = "main") -> set[str]:
    return set(json.loads((state / "agents" / agent / "sessions" / "sessions.json").read_text()))


@pytest.fixture
def env(state: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    write_config(state, {"agents": {"defaults": {"subagents": {"archiveAfterMinutes": 1}}}})
    monkeypatch.setenv("SESSIONTOOL_NOW_MS", str(NOW))
    return {"SESSIONTOOL_NOW_MS": str(NOW)}


def test_dry_run_names_it_and_changes_nothing(state: Path, env: dict[str, str]) -> None:
    child = _child_key()
    transcript = add_session(state, child, updated_at=NOW - 2 * MINUTE)
    add_run(state, child)
    store = state / "agents" / "main" / "sessions" / "sessions.json"
    before_bytes = store.read_bytes()
    before_files = files_under(state)

    code, data = run_json("sweep", "--dry-run")
    assert code == 0
    assert data == {"archived": [child]}
    assert store.read_bytes() == before_bytes
    assert transcript.exists()
    assert files_under(state) == before_files


def test_sweep_archives_without_unlinking(state: Path, env: dict[str, str]) -> None:
    child = _child_key()
    transcript = add_session(state, child, updated_at=NOW - 2 * MINUTE)
    keep = add_session(state, "agent:main:main", updated_at=NOW - 100 * MINUTE)
    add_run(state, child)
    before = files_under(state)

    code, data = run_json("sweep")
    assert code == 0
    assert data == {"archived": [child]}

    code, listed = run_json("list")
    assert code == 0
    assert [r["key"] for r in listed["sessions"]] == ["main"]
    assert not transcript.exists()
    archived = list(transcript.parent.glob(transcript.name + ".deleted.*"))
    assert len(archived) == 1
    assert archived[0].read_text().count("\n") == 2
    assert keep.exists()
    # Every file that was there is still there, or renamed aside; no lock files are left.
    after = files_under(state)
    gone = before - after
    assert gone == {str(transcript.relative_to(state))}
    assert not [f for f in after if f.endswith(".lock")]

    # A second sweep finds nothing more to do.
    assert run_json("sweep") == (0, {"archived": []})


def test_human_output_names_each_key_and_says_dry_run(state: Path, env: dict[str, str]) -> None:
    child = _child_key()
    add_session(state, child, updated_at=NOW - 2 * MINUTE)
    add_run(state, child)
    proc = run_cli("sweep", "--dry-run")
    assert proc.returncode == 0
    assert proc.stdout == (
        f"would archive\t{child}\nwould archive 1 sub-agent session (dry run: nothing changed)\n"
    )
    assert child in store_keys(state)
    assert run_cli("sweep", "-q").stdout == ""
    assert child not in store_keys(state)
    proc = run_cli("sweep")
    assert (proc.returncode, proc.stdout) == (0, "nothing to archive\n")


@pytest.mark.parametrize("status", ["running", "queued"])
def test_child_with_an_unfinished_run_stays(state: Path, env: dict[str, str], status: str) -> None:
    child = _child_key()
    add_session(state, child, updated_at=NOW - 30 * MINUTE)
    add_run(state, child, status="ok")
    add_run(state, child, kind="step", status=status)  # e.g. its announce step
    assert run_json("sweep") == (0, {"archived": []})
    assert child in store_keys(state)


def test_running_spawn_itself_keeps_the_child(state: Path, env: dict[str, str]) -> None:
    child = _child_key()
    add_session(state, child, updated_at=NOW - 30 * MINUTE)
    add_run(state, child, status="running")
    assert run_json("sweep") == (0, {"archived": []})


def test_openclaw_subagent_without_a_spawn_record_stays(state: Path, env: dict[str, str]) -> None:
    theirs = _child_key()
    add_session(state, theirs, updated_at=NOW - 300 * MINUTE)
    add_run(state, theirs, kind="send")  # a send to it is not a spawn by us
    assert run_json("sweep") == (0, {"archived": []})
    assert theirs in store_keys(state)


def test_recent_child_stays(state: Path, env: dict[str, str]) -> None:
    child = _child_key()
    add_session(state, child, updated_at=NOW - 30_000)
    add_run(state, child)
    assert run_json("sweep") == (0, {"archived": []})


def test_zero_disables(state: Path, env: dict[str, str]) -> None:
    write_config(state, {"agents": {"defaults": {"subagents": {"archiveAfterMinutes": 0}}}})
    child = _child_key()
    add_session(state, child, updated_at=NOW - 10_000 * MINUTE)
    add_run(state, child)
    assert run_json("sweep") == (0, {"archived": []})
    assert child in store_keys(state)


def test_default_is_sixty_minutes(state: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SESSIONTOOL_NOW_MS", str(NOW))
    young, old = _child_key(), _child_key()
    add_session(state, young, updated_at=NOW - 59 * MINUTE)
    add_session(state, old, updated_at=NOW - 61 * MINUTE)
    add_run(state, young)
    add_run(state, old)
    assert run_json("sweep", "--dry-run") == (0, {"archived": [old]})


def test_children_of_other_agents_are_swept(state: Path, env: dict[str, str]) -> None:
    child = _child_key("research")
    add_session(state, child, agent="research", updated_at=NOW - 5 * MINUTE)
    add_run(state, child)
    assert run_json("sweep") == (0, {"archived": [child]})
    assert store_keys(state, "research") == set()


def test_sweep_is_operator_only(state: Path, env: dict[str, str]) -> None:
    code, data = run_json("--as", "agent:main:main", "sweep")
    assert code == 4
    assert data["status"] == "forbidden"


def test_unreadable_store_of_one_agent_does_not_stop_the_rest(
    state: Path, env: dict[str, str]
) -> None:
    good = _child_key("main")
    add_session(state, good, updated_at=NOW - 5 * MINUTE)
    add_run(state, good)
    bad = _child_key("broken")
    add_session(state, bad, agent="broken", updated_at=NOW - 5 * MINUTE)
    add_run(state, bad)
    broken_store = state / "agents" / "broken" / "sessions" / "sessions.json"
    broken_store.write_text("{not json")
    proc = run_cli("sweep", "--json")
    assert proc.returncode == 0
    assert json.loads(proc.stdout) == {"archived": [good]}
    assert "broken" in proc.stderr
    assert broken_store.read_text() == "{not json"


# -- the helpers, in process --------------------------------------------------------------------


def test_archive_session_returns_the_new_path(state: Path, env: dict[str, str]) -> None:
    child = _child_key()
    transcript = add_session(state, child, updated_at=NOW)
    ctx = build_context()
    new = archive.archive_session(ctx.paths, "main", child)
    assert new is not None
    assert new.name.startswith(transcript.name + ".deleted.")
    assert "2027-01-15T08-00-00.000Z" in new.name  # the pinned clock, ':' made '-'
    assert new.exists() and not transcript.exists()
    assert child not in store_keys(state)
    # Gone already: nothing to do.
    assert archive.archive_session(ctx.paths, "main", child) is None


def test_archive_session_without_transcript_still_removes_the_entry(
    state: Path, env: dict[str, str]
) -> None:
    child = _child_key()
    add_session(state, child, updated_at=NOW).unlink()
    ctx = build_context()
    assert archive.archive_session(ctx.paths, "main", child) is None
    assert child not in store_keys(state)


def test_archive_never_replaces_an_earlier_archive(state: Path, env: dict[str, str]) -> None:
    child = _child_key()
    transcript = add_session(state, child, updated_at=NOW)
    taken = transcript.with_name(transcript.name + ".deleted.2027-01-15T08-00-00.000Z")
    taken.write_text("older archive\n")
    new = archive.archive_session(build_context().paths, "main", child)
    assert new is not None and new != taken
    assert taken.read_text() == "older archive\n"


def test_legacy_bare_key_is_archived_with_its_full_form(state: Path, env: dict[str, str]) -> None:
    child = _child_key()
    add_session(state, child, updated_at=NOW - 5 * MINUTE)
    store = state / "agents" / "main" / "sessions" / "sessions.json"
    data = json.loads(store.read_text())
    data[child.split(":", 2)[2]] = dict(data[child], updatedAt=NOW - 9 * MINUTE)
    store.write_text(json.dumps(data))
    add_run(state, child)
    ctx = build_context()
    assert archive.sweep(ctx, dry_run=False) == {"archived": [child]}
    assert store_keys(state) == set()


def test_expired_subagents_lists_agent_and_full_key(state: Path, env: dict[str, str]) -> None:
    child = _child_key("research")
    add_session(state, child, agent="research", updated_at=NOW - 5 * MINUTE)
    add_run(state, child)
    assert archive.expired_subagents(build_context(), NOW) == [("research", child)]
    assert archive.expired_subagents(build_context(), NOW - 4 * MINUTE - 1) == []


def test_maybe_sweep_runs_at_most_once_a_minute(
    state: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _child_key()
    add_session(state, first, updated_at=NOW - 5 * MINUTE)
    add_run(state, first)
    archive.maybe_sweep(build_context())
    assert first not in store_keys(state)
    stamp = state / "sessiontool" / "last-sweep"
    assert stamp.read_text().strip() == str(NOW)

    second = _child_key()
    add_session(state, second, updated_at=NOW - 5 * MINUTE)
    add_run(state, second)
    monkeypatch.setenv("SESSIONTOOL_NOW_MS", str(NOW + 59_000))
    archive.maybe_sweep(build_context())
    assert second in store_keys(state)

    monkeypatch.setenv("SESSIONTOOL_NOW_MS", str(NOW + 61_000))
    archive.maybe_sweep(build_context())
    assert second not in store_keys(state)


def test_maybe_sweep_ignores_a_stamp_from_the_future(state: Path, env: dict[str, str]) -> None:
    child = _child_key()
    add_session(state, child, updated_at=NOW - 5 * MINUTE)
    add_run(state, child)
    stamp = state / "sessiontool" / "last-sweep"
    stamp.write_text(str(NOW + 3_600_000))
    archive.maybe_sweep(build_context())
    assert child not in store_keys(state)


def test_maybe_sweep_does_nothing_when_disabled(state: Path, env: dict[str, str]) -> None:
    write_config(state, {"agents": {"defaults": {"subagents": {"archiveAfterMinutes": 0}}}})
    archive.maybe_sweep(build_context())
    assert not (state / "sessiontool" / "last-sweep").exists()


def test_maybe_sweep_swallows_errors(state: Path, env: dict[str, str]) -> None:
    child = _child_key()
    add_session(state, child, updated_at=NOW - 5 * MINUTE)
    add_run(state, child)
    store = state / "agents" / "main" / "sessions" / "sessions.json"
    store.write_text("[1, 2")  # corrupt: exit 5 for a real command, silence here
    archive.maybe_sweep(build_context())
    assert store.read_text() == "[1, 2"


def test_concurrent_maybe_sweeps_do_not_crash(state: Path, env: dict[str, str]) -> None:
    children = [_child_key() for _ in range(5)]
    for c in children:
        add_session(state, c, updated_at=NOW - 5 * MINUTE)
        add_run(state, c)
    transcripts = list((state / "agents" / "main" / "sessions").glob("*.jsonl"))
    errors: list[BaseException] = []

    def go() -> None:
        try:
            archive.maybe_sweep(build_context())
        except BaseException as exc:  # noqa: BLE001 - the test reports it
            errors.append(exc)

    threads = [threading.Thread(target=go) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert store_keys(state) == set()
    # Each transcript renamed aside exactly once.
    for t in transcripts:
        assert len(list(t.parent.glob(t.name + ".deleted.*"))) == 1
    assert not list(state.rglob("*.lock"))
    assert not list(state.rglob("*.tmp"))


def test_reads_never_sweep(state: Path, env: dict[str, str]) -> None:
    child = _child_key()
    add_session(state, child, updated_at=NOW - 5 * MINUTE)
    add_run(state, child)
    assert run_cli("list", "--json").returncode == 0
    assert run_cli("history", child, "--json").returncode == 0
    assert child in store_keys(state)
    assert not (state / "sessiontool" / "last-sweep").exists()


def test_concurrent_sweeps_in_separate_processes(state: Path, env: dict[str, str]) -> None:
    import subprocess
    import sys

    children = [_child_key() for _ in range(8)]
    for c in children:
        add_session(state, c, updated_at=NOW - 5 * MINUTE)
        add_run(state, c)
    transcripts = list((state / "agents" / "main" / "sessions").glob("*.jsonl"))
    code = "from sessiontool import context; from sessiontool.runs import archive; archive.maybe_sweep(context.build_context())"
    procs = [
        subprocess.Popen([sys.executable, "-c", code], env={**os.environ, **env}) for _ in range(4)
    ]
    procs += [
        subprocess.Popen(
            [sys.executable, "-m", "sessiontool", "sweep", "--json"],
            env={**os.environ, **env},
            stdout=subprocess.DEVNULL,
        )
        for _ in range(2)
    ]
    assert [p.wait(timeout=60) for p in procs] == [0] * len(procs)
    assert store_keys(state) == set()
    for t in transcripts:
        assert len(list(t.parent.glob(t.name + ".deleted.*"))) == 1
    assert not list(state.rglob("*.lock"))
