"""Every OS failure is one line naming the path and what to do, with its documented exit code:
a state dir owned by another user (the test runs the CLI as `nobody` when it can), unreadable
transcripts, a directory where a file should be, stdin that is not UTF-8."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import run_cli, run_json
from tests.runhelpers import reap

NOBODY = 65534


def _can_drop() -> bool:
    """Root with setpriv, and `nobody` can import this installation (a checkout inside a
    private directory, such as a fresh clone under `mktemp -d`, is out of its reach)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return False
    probe = subprocess.run(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
        + [sys.executable, "-c", "import sessiontool"],
        capture_output=True,
        cwd="/",
        timeout=60,
    )
    return probe.returncode == 0


CAN_DROP = _can_drop()

COMMANDS = [
    ["list"],
    ["list", "--message-limit", "2", "--json"],
    ["history", "main"],
    ["send", "main", "hi", "--timeout", "0"],
    ["spawn", "task"],
    ["runs"],
    ["doctor"],
    ["paths"],
    ["agents"],
    ["label", "main", "x"],
    ["deliveries"],
    ["sweep"],
    ["prune", "--older-than", "1d"],
    ["policy", "main"],
]


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory another user can reach (pytest's tmp dirs are 0700 and root's)."""
    d = Path(tempfile.mkdtemp(prefix="sessiontool-perm-", dir="/tmp"))
    d.chmod(0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def populated(state: Path) -> None:
    proc = run_cli("send", "main", "hello", env={"SESSIONTOOL_STATE_DIR": str(state)})
    assert proc.returncode == 0, proc.stderr
    reap(state)


def run_as_nobody(state: Path, *args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, SESSIONTOOL_STATE_DIR=str(state), HOME=str(home))
    # Under CI's coverage run, the child would write its data file as `nobody` where root's go.
    env.pop("COVERAGE_PROCESS_CONFIG", None)
    return subprocess.run(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
        + [sys.executable, "-m", "sessiontool", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(home),
        timeout=60,
    )


def assert_one_line(proc: subprocess.CompletedProcess[str], code: int, names: str) -> None:
    lines = proc.stderr.splitlines()
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert lines and lines[0].startswith("sessiontool: error: "), proc.stderr
    assert names in lines[0], lines[0]
    assert all(ln.startswith(("sessiontool: ", "hint: ")) for ln in lines), proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr


@pytest.mark.skipif(
    not CAN_DROP, reason="needs root, setpriv, and an installation `nobody` can import"
)
def test_state_dir_of_another_user(shared_dir: Path) -> None:
    state = shared_dir / "state"
    populated(state)
    state.chmod(0o700)  # root's, private: nobody may not enter it
    for args in COMMANDS:
        proc = run_as_nobody(state, *args, home=shared_dir)
        assert_one_line(proc, 4, f"permission denied: {state}")
        assert "chmod" in proc.stderr or "owner" in proc.stderr
    proc = run_as_nobody(state, "list", "--json", home=shared_dir)
    data = json.loads(proc.stdout)
    assert data["code"] == 4 and data["path"] == str(state)


@pytest.mark.skipif(
    not CAN_DROP, reason="needs root, setpriv, and an installation `nobody` can import"
)
def test_unreadable_transcript(shared_dir: Path) -> None:
    state = shared_dir / "state"
    populated(state)
    subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", str(state)], check=True)
    transcript = next((state / "agents/main/sessions").glob("*.jsonl"))
    os.chown(transcript, 0, 0)  # one transcript nobody may not read
    transcript.chmod(0o600)

    proc = run_as_nobody(state, "history", "main", home=shared_dir)
    assert_one_line(proc, 4, f"permission denied: {transcript}")

    proc = run_as_nobody(state, "list", "--message-limit", "2", "--json", home=shared_dir)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)["sessions"]
    assert len(rows) == 1 and rows[0]["messages"] == []
    assert f"cannot read {transcript}" in proc.stderr


def test_unreadable_state_dir_simulated(tmp_path: Path) -> None:
    """Without another user to act as: a state dir that is a file, and one under a file."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a dir\n")
    proc = run_cli("list", env={"SESSIONTOOL_STATE_DIR": str(blocker / "state")})
    assert proc.returncode in (0, 5), proc.stderr
    proc = run_cli("send", "main", "hi", env={"SESSIONTOOL_STATE_DIR": str(blocker / "state")})
    assert_one_line(proc, 5, str(blocker))


def test_directory_where_a_file_should_be(state: Path, tmp_path: Path) -> None:
    populated(state)
    store = state / "agents" / "main" / "sessions" / "sessions.json"
    saved = store.read_bytes()
    store.unlink()
    store.mkdir()
    for args in (["list"], ["label", "main", "x"], ["history", "main"]):
        assert_one_line(run_cli(*args), 5, str(store))
    store.rmdir()
    store.write_bytes(saved)
    out = tmp_path / "a-dir"
    out.mkdir()
    proc = run_cli("history", "main", "-o", str(out))
    assert_one_line(proc, 5, str(out))


def test_stdin_not_utf8(state: Path) -> None:
    env = {"PYTHONIOENCODING": "utf-8", "LC_ALL": "C.UTF-8"}
    proc = subprocess.run(
        [sys.executable, "-m", "sessiontool", "send", "main", "-"],
        input=b"caf\xe9 \xff\n",
        capture_output=True,
        env=dict(os.environ, **env),
        timeout=60,
    )
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert err.splitlines()[0] == (
        "sessiontool: error: the message from stdin is not valid UTF-8 (byte 4 of 7)"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "sessiontool", "spawn", "-", "--json"],
        input=b"\x80task",
        capture_output=True,
        env=dict(os.environ, **env),
        timeout=60,
    )
    assert proc.returncode == 2
    data = json.loads(proc.stdout)
    assert data["code"] == 2 and "not valid UTF-8" in data["error"]
    assert not (state / "sessiontool" / "runs").exists(), "nothing was started"
    code, out = run_json("send", "main", "-", input="fine, UTF-8 ✓", env=env)
    reap(state)
    assert code == 0 and out["reply"] == "echo: fine, UTF-8 ✓"


@pytest.mark.skipif(
    not CAN_DROP, reason="needs root, setpriv, and an installation `nobody` can import"
)
def test_a_write_refused_on_a_sub_directory_is_exit_4_and_runs_record_it_worded(
    shared_dir: Path,
) -> None:
    """Issue 27, item 15: `label` with the sessions dir read-only to the caller, `prune` with
    `runs/` read-only: exit 4 as documented, not 1; a run records the worded error."""
    state = shared_dir / "state"
    populated(state)
    subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", str(state)], check=True)
    sessions = state / "agents/main/sessions"
    runs = state / "sessiontool/runs"
    os.chown(sessions, 0, 0)
    sessions.chmod(0o755)  # readable, not writable, by nobody

    proc = run_as_nobody(state, "label", "main", "x", home=shared_dir)
    assert_one_line(proc, 4, "permission denied: ")
    # The run starts (its record is in runs/) and fails in the worker, worded once.
    proc = run_as_nobody(state, "send", "main", "again", "--timeout", "20", home=shared_dir)
    assert proc.returncode == 1, proc.stderr
    (rec,) = [
        r
        for r in (json.loads(p.read_text()) for p in runs.glob("*.json"))
        if r.get("message") == "again"
    ]
    assert rec["status"] == "error", rec
    assert rec["error"].startswith("permission denied: "), rec["error"]
    assert "Errno" not in rec["error"] and "PermissionError" not in rec["error"]

    os.chown(runs, 0, 0)
    runs.chmod(0o755)
    proc = run_as_nobody(state, "prune", "--older-than", "0s", home=shared_dir)
    assert_one_line(proc, 4, "permission denied: ")


def test_a_delay_too_large_for_the_clock_is_a_worded_config_error(
    state: Path, reap_workers: None
) -> None:
    from tests.runhelpers import runner_config

    runner_config(state, {"type": "echo", "delaySeconds": 1e308})
    code, out = run_json("send", "main", "hi", "--timeout", "20")
    assert code == 2, out  # refused before the run starts (issue 42 item 3)
    assert "delaySeconds" in out["error"] and "OverflowError" not in out["error"], out
    assert not list(state.glob("sessiontool/runs/*.json"))
