"""`send` to a key no session has: the run creates the session, and `created session K` on
stderr says so only when K exists after the command. The operation (runs/submit.py `send`)
says which key is new; the CLI no longer resolves the key itself."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import run_cli, run_json
from tests.reliability.test_disk_full import SITECUSTOMIZE, fault_env
from tests.runhelpers import quiet, read_store


def test_a_new_key_is_named_once_its_run_has_made_it(state: Path) -> None:
    proc = run_cli("send", "fresh", "hello", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["reply"] == "echo: hello"  # --json as before
    assert proc.stderr == "created session agent:main:fresh\n"
    assert "agent:main:fresh" in read_store(state)
    # Not waited for (--timeout 0): the run has not made it yet, so nothing is claimed.
    proc = run_cli("send", "later", "hi", "--timeout", "0")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    quiet(state)
    assert "agent:main:later" in read_store(state)
    assert run_cli("send", "later", "again").stderr == ""  # it exists now


def _withdrawn_send(state: Path, tmp_path: Path, under: Path, match: str) -> tuple[str, Path]:
    """`send brand-new …` whose worker finds the disk full (on the files matching `match`
    under `under`) before it can record anything: the run is withdrawn."""
    assert run_cli("send", "main", "first", "--timeout", "20").returncode == 0
    faults = tmp_path / "faults"
    faults.mkdir()
    (faults / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = fault_env(faults, under, "ENOSPC", match, worker_only=True)
    env["SESSIONTOOL_EXEC_WORKER"] = "1"  # a worker of its own process, with the fault
    proc = run_cli("send", "brand-new", "unrecorded", "--timeout", "30", env=env)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "could not be started and was withdrawn" in proc.stderr, proc.stderr
    quiet(state)
    return proc.stderr, state


def test_a_withdrawn_run_that_made_no_session_names_none(state: Path, tmp_path: Path) -> None:
    """Nothing could be written at all: no session, and no notice claiming one."""
    stderr, _ = _withdrawn_send(state, tmp_path, state, "*")
    assert "created session" not in stderr, stderr
    assert "agent:main:brand-new" not in read_store(state)
    rc, listing = run_json("list")
    assert rc == 0 and "brand-new" not in json.dumps(listing)


def test_a_run_withdrawn_before_the_foreground_looks_is_withdrawn_not_not_found(
    state: Path, tmp_path: Path
) -> None:
    """The worker may withdraw the run (and remove its record) before `send`'s foreground reads
    it even once: a busy machine, a slow foreground. Its own run gone is still the withdrawn
    run (exit 1, the reason), never "Run not found" (exit 3). The foreground is held at
    `send-wait` until the record is gone."""
    import os
    import subprocess
    import sys
    import time

    assert run_cli("send", "main", "first", "--timeout", "20").returncode == 0
    faults = tmp_path / "faults"
    faults.mkdir()
    (faults / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = {**os.environ, **fault_env(faults, state, "ENOSPC", "*", worker_only=True)}
    env.update(
        SESSIONTOOL_STATE_DIR=str(state),
        SESSIONTOOL_EXEC_WORKER="1",
        SESSIONTOOL_TEST_PAUSE="send-wait:3",
    )
    runs = state / "sessiontool" / "runs"
    before = {p.name for p in runs.glob("*.json")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "sessiontool", "send", "brand-new", "x", "--timeout", "30"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        assert "test pause: send-wait" in proc.stderr.readline()
        held_until = time.monotonic() + 2.5  # the pause is 3 s
        gone_while_held = False
        while proc.poll() is None and time.monotonic() < held_until:
            if not {p.name for p in runs.glob("*.json")} - before:  # the worker withdrew it
                gone_while_held = True
                break
            time.sleep(0.05)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    quiet(state)
    assert proc.returncode == 1, (out, err)
    assert "could not be started and was withdrawn" in err and "Run not found" not in err, err
    assert gone_while_held  # the race this test is about was arranged


def test_a_withdrawn_run_whose_session_was_made_names_it(state: Path, tmp_path: Path) -> None:
    """Only the run records could not be written: the store took the new entry before the
    worker withdrew the run, so the session does exist, and the notice says so beside the
    error."""
    runs = state / "sessiontool" / "runs"
    stderr, _ = _withdrawn_send(state, tmp_path, runs, "*.json.*.tmp")
    lines = stderr.splitlines()
    assert lines[0] == "created session agent:main:brand-new", stderr
    assert lines[1].startswith("sessiontool: error: run "), stderr
    assert "agent:main:brand-new" in read_store(state)
