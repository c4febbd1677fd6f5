"""A full or read-only disk: a clear one-line error (exit 1), and nothing half-written.

Tests run as root, and root ignores permission bits, so a chmod'ed state dir proves nothing.
Two ways in instead:
- fault injection, portable: a `sitecustomize.py` on PYTHONPATH (so the command *and* the
  workers it starts load it) makes the disk calls under the state dir fail with ENOSPC or
  EROFS: `os.write` for a full disk; every write-side call (open for writing, mkdir, rename,
  replace, unlink, link) for a read-only one. A file-name pattern aims the fault at one kind
  of file (store rewrites, transcripts) to reach the later steps of a write.
- a real, small tmpfs, filled up and then remounted read-only, where `mount` is allowed
  (root in this sandbox); skipped elsewhere."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import run_cli, run_json
from tests.reliability.util import check_transcripts, snapshot, stray_locks
from tests.runhelpers import quiet

SITECUSTOMIZE = r"""
import builtins, errno, fnmatch, io, os

_root = os.environ.get("FAULT_ROOT")
if _root and os.environ.get("FAULT_IN") == "worker" and os.environ.get("SESSIONTOOL_WORKER") != "1":
    _root = None  # the fault is aimed at the background worker only
if _root:
    _root = os.path.realpath(_root)
    _errno = getattr(errno, os.environ.get("FAULT_ERRNO", "ENOSPC"))
    _match = os.environ.get("FAULT_MATCH", "*")
    _arm = os.environ.get("FAULT_ARM")  # a file: no fault until it exists

    def _hit(path):
        if _arm and not os.path.lexists(_arm):
            return False
        try:
            p = os.path.realpath(os.fsdecode(path))
        except (TypeError, ValueError):
            return False
        inside = p == _root or p.startswith(_root + os.sep)
        return inside and fnmatch.fnmatch(os.path.basename(p), _match)

    def _fail(path):
        raise OSError(_errno, os.strerror(_errno), os.fsdecode(path))

    def _guard(real, nargs=1):
        def wrapper(*args, **kw):
            for a in args[:nargs]:
                if isinstance(a, (str, bytes, os.PathLike)) and _hit(a):
                    _fail(a)
            return real(*args, **kw)
        return wrapper

    _write = os.write

    def _fd_write(fd, data):
        try:
            target = os.readlink("/proc/self/fd/%d" % fd)
        except OSError:
            target = None
        if target and _hit(target):
            _fail(target)
        return _write(fd, data)

    os.write = _fd_write
    if _errno == errno.EROFS:
        _open = os.open

        def _os_open(path, flags, *a, **kw):
            if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND) and _hit(path):
                _fail(path)
            return _open(path, flags, *a, **kw)

        os.open = _os_open
        for name in ("mkdir", "unlink", "remove", "rmdir"):
            setattr(os, name, _guard(getattr(os, name)))
        for name in ("rename", "replace", "link"):
            setattr(os, name, _guard(getattr(os, name), 2))
        _bopen = builtins.open

        def _builtin_open(file, mode="r", *a, **kw):
            if isinstance(file, (str, bytes, os.PathLike)) and any(c in mode for c in "wax+") and _hit(file):
                _fail(file)
            return _bopen(file, mode, *a, **kw)

        builtins.open = io.open = _builtin_open
"""


@pytest.fixture
def faults(tmp_path: Path) -> Path:
    d = tmp_path / "faults"
    d.mkdir()
    (d / "sitecustomize.py").write_text(SITECUSTOMIZE)
    return d


def fault_env(
    faults: Path, root: Path, err: str, match: str = "*", worker_only: bool = False
) -> dict[str, str]:
    """The environment that makes disk calls under `root` (on files matching `match`) fail
    with `err`, in the command and the workers it starts (or, `worker_only`, in workers only)."""
    pythonpath = os.pathsep.join(p for p in (str(faults), os.environ.get("PYTHONPATH", "")) if p)
    env = {
        "PYTHONPATH": pythonpath,
        "FAULT_ROOT": str(root),
        "FAULT_ERRNO": err,
        "FAULT_MATCH": match,
    }
    if worker_only:
        env["FAULT_IN"] = "worker"
    return env


@pytest.fixture
def populated(state: Path) -> Path:
    """A state dir with sessions, transcripts, run records and a delivery, all written by
    sessiontool itself."""
    for args in (
        ("send", "main", "hello", "--timeout", "20"),
        ("send", "cron:nightly", "report", "--timeout", "20", "--deliver"),
        ("label", "cron:nightly", "nightly"),
    ):
        proc = run_cli(*args)
        assert proc.returncode == 0, proc.stderr
    return state


def assert_one_line_error(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.splitlines()
    assert "Traceback" not in proc.stderr
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("sessiontool: error: "), proc.stderr
    assert "internal error" not in lines[0], proc.stderr
    for needle in needles:
        assert needle in lines[0], proc.stderr


def no_tmp_files(state: Path) -> list[str]:
    return [str(p) for p in state.rglob("*") if p.name.endswith((".tmp", ".stale"))]


WRITERS = [
    ("label", "main", "a label"),
    ("policy", "main", "deny"),
    ("reset", "main"),
    ("delete", "cron:nightly"),
    ("send", "main", "more", "--timeout", "20"),
    ("send", "fresh-session", "first words", "--timeout", "0"),
    ("spawn", "a task"),
]


@pytest.mark.parametrize(
    "err, message", [("ENOSPC", "No space left on device"), ("EROFS", "Read-only file system")]
)
def test_a_refused_disk_fails_cleanly(
    populated: Path, faults: Path, err: str, message: str
) -> None:
    """Every writing command, one after the other on the same state (one test, not 14, for
    the time budget): exit 1, one line, and the state dir byte for byte as it was."""
    state = populated
    before = snapshot(state)
    for args in WRITERS:
        proc = run_cli(*args, env=fault_env(faults, state, err))
        assert_one_line_error(proc, message)
        assert snapshot(state) == before, args
        assert not no_tmp_files(state), args


@pytest.mark.parametrize("err", ["ENOSPC", "EROFS"])
def test_reads_work_on_a_full_or_read_only_disk(populated: Path, faults: Path, err: str) -> None:
    state = populated
    before = snapshot(state)
    env = fault_env(faults, state, err)
    for args in (("list",), ("history", "main"), ("runs",), ("deliveries",), ("paths",)):
        rc, out = run_json(*args, env=env)
        assert rc == 0, (args, out)
    assert snapshot(state) == before


def test_store_rewrite_fails_after_the_lock_is_taken(populated: Path, faults: Path) -> None:
    """Only the `<store>.<pid>.<rand>.tmp` write fails: the lock is released, the temp file
    removed, the store untouched."""
    state = populated
    before = snapshot(state)
    for args in (("label", "main", "x"), ("policy", "main", "allow")):
        proc = run_cli(*args, env=fault_env(faults, state, "ENOSPC", "sessions.json.*.tmp"))
        assert_one_line_error(proc, "sessions.json", "No space left on device")
    assert snapshot(state) == before
    assert not stray_locks(state) and not no_tmp_files(state)


def test_transcript_append_fails_in_the_worker(populated: Path, faults: Path) -> None:
    """The disk fills up under a running worker: the run ends `error` saying so, the
    transcript has no half line, no lock is left, and the session works again afterwards."""
    state = populated
    transcripts = {p: p.read_bytes() for p in (state / "agents").glob("*/sessions/*.jsonl")}
    store_before = json.loads((state / "agents/main/sessions/sessions.json").read_text())
    rc, out = run_json(
        "send",
        "main",
        "lost words",
        "--timeout",
        "20",
        env=fault_env(faults, state, "ENOSPC", "*.jsonl"),
    )
    assert rc == 1, out
    assert out["status"] == "error" and out["runStatus"] == "error"
    assert "No space left on device" in out["error"], out
    assert {p: p.read_bytes() for p in transcripts} == transcripts
    store = json.loads((state / "agents/main/sessions/sessions.json").read_text())
    assert store["agent:main:main"]["sessionId"] == store_before["agent:main:main"]["sessionId"]
    assert not stray_locks(state) and not no_tmp_files(state)
    check_transcripts(state)
    rc, out = run_json("send", "main", "space again", "--timeout", "20")
    assert rc == 0 and out["reply"] == "echo: space again"


@pytest.mark.slow  # the worker's 3 s pause, which the fault is armed in
def test_a_turn_whose_end_cannot_be_written_is_still_its_reply(
    populated: Path, faults: Path, tmp_path: Path
) -> None:
    """The disk fills up after the worker wrote the turn: its sessions.json update and its
    record's end both fail. The turn happened, so the waiting `send` reads the reply from the
    transcript as the reconciler later does: the reply, exit 0, and a warning that the record
    could not be written; not exit 1 "stopped", on which a cron job would send it twice
    (issue 42, item 9). Once there is space the run is recorded ok, never run again."""
    from tests.runhelpers import sessiontool as live

    state = populated
    arm = tmp_path / "disk-full-now"
    env = fault_env(faults, state, "ENOSPC", "*.json.*.tmp")
    env.update(FAULT_ARM=str(arm), SESSIONTOOL_TEST_PAUSE="index-write:3")
    proc = live("send", "main", "words once", "--timeout", "30", env={**os.environ, **env})
    logs = state / "sessiontool" / "runs"
    deadline = time.monotonic() + 60
    while not any("test pause: index-write" in p.read_text() for p in logs.glob("*.log")):
        assert time.monotonic() < deadline and proc.poll() is None, "the worker never paused"
        time.sleep(0.05)
    arm.touch()  # the disk is full from here on: the store write and the record's end fail
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, (out, err)
    assert out.strip() == "echo: words once"
    assert "could not be written" in err and "No space left on device" in err, err
    assert "internal error" not in err and "Traceback" not in err
    arm.unlink()
    quiet(state)
    rc, listing = run_json("runs")
    mine = [r for r in listing["runs"] if r.get("message") == "words once"]
    assert [(r["status"], r.get("reply")) for r in mine] == [("ok", "echo: words once")]
    transcript = json.dumps(run_json("history", "main")[1])
    assert transcript.count('"words once"') == 1


def test_worker_that_cannot_record_anything_withdraws_the_run(
    populated: Path, faults: Path
) -> None:
    """The disk fills up between the command and its worker, so the worker cannot even mark
    its run started. The run is withdrawn (its record removed: an unlink needs no space), so
    it never runs at some later time nobody asked for; the waiting `send` says so at once,
    exit 1, not "still running" (124) (issue 27, item 10)."""
    state = populated
    runs_dir = state / "sessiontool" / "runs"
    env = fault_env(faults, runs_dir, "ENOSPC", "*.json.*.tmp", worker_only=True)
    env["SESSIONTOOL_EXEC_WORKER"] = "1"  # a worker of its own process, with the fault
    rc, out = run_json("send", "main", "unrecorded", "--timeout", "30", env=env)
    assert rc == 1, out  # told: not 124, the whole --timeout waited out for a run nobody runs
    rid = out["error"].split()[1]
    assert "withdrawn" in out["error"] and "No space left on device" in out["error"], out
    assert not (runs_dir / f"{rid}.json").exists()
    rc, listing = run_json("runs")
    assert not [r for r in listing["runs"] if r["status"] in ("queued", "running")], listing
    assert "unrecorded" not in json.dumps(listing)
    assert not stray_locks(state) and not no_tmp_files(state)
    rc, out = run_json("send", "main", "recorded", "--timeout", "20")
    assert rc == 0 and out["reply"] == "echo: recorded"
    # The withdrawn run never ran, then or later.
    transcript = json.dumps(run_json("history", "main")[1])
    assert "unrecorded" not in transcript and "recorded" in transcript


def test_send_deliver_with_an_unreadable_outbox_still_gives_the_reply(
    state: Path, tmp_path: Path
) -> None:
    """The run succeeded; only the delivery's fate cannot be read: the reply and exit 0, a
    warning, not exit 1 with no reply (issue 27, item 10)."""
    from tests.runhelpers import py_command, reap, runner_config

    outbox = state / "sessiontool" / "deliveries.jsonl"
    # The agent turns the outbox into a link loop while it runs (after send's own checks).
    agent = (
        "import os, sys; m = sys.stdin.read(); p = os.environ['OUTBOX']\n"
        "if os.path.lexists(p): os.unlink(p)\n"
        "os.symlink(os.path.basename(p), p); sys.stdout.write('echo: ' + m)"
    )
    runner_config(state, py_command(agent, env=["OUTBOX"]))
    try:
        rc, out = run_json(
            "send",
            "agent:main:discord:group:7",
            "hi",
            "--deliver",
            "--timeout",
            "20",
            env={"OUTBOX": str(outbox)},
        )
    finally:
        reap(state)
    assert rc == 0, out
    assert out["status"] == "ok" and out["reply"] == "echo: hi", out
    assert out["delivery"]["status"] == "pending", out


@pytest.mark.parametrize(
    "match",
    ["*.log", "00*-*", "runs", "lanes"],
    ids=["worker log", "lane marker", "runs dir", "lanes dir"],
)
def test_send_whose_run_cannot_be_set_up_leaves_no_queued_run(
    state: Path, faults: Path, match: str
) -> None:
    """One piece of a run's set-up is refused (read-only): exit 1 with one line, and no run
    is left queued to block the session's lane for the 30 s grace."""
    rc, out = run_json("send", "main", "setup", "--timeout", "20")
    assert rc == 0
    if match in ("runs", "lanes"):  # a fresh state dir: the directory itself cannot be made
        import shutil

        quiet(state)  # the send's detached worker still writes there after the send returned
        shutil.rmtree(state / "sessiontool")
    proc = run_cli(
        "send", "main", "refused", "--timeout", "20", env=fault_env(faults, state, "EROFS", match)
    )
    assert_one_line_error(proc, "Read-only file system")
    rc, listing = run_json("runs")
    assert rc == 0
    assert not [r for r in listing["runs"] if r["status"] in ("queued", "running")], listing
    # Not blocked by a run left queued (the lane's 30 s grace would make this exit 124).
    rc, out = run_json("send", "main", "next", "--timeout", "20")
    assert rc == 0 and out["reply"] == "echo: next", out


# -- a real small filesystem -----------------------------------------------------------------


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", str(mnt)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def _fill(fs: Path) -> None:
    """Fill the filesystem to the last byte."""
    fd = os.open(fs / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (65536, 4096, 1):
            while True:
                try:
                    os.write(fd, b"\0" * size)
                except OSError:
                    break
    finally:
        os.close(fd)


def test_a_real_full_then_read_only_filesystem(small_fs: Path) -> None:
    state = small_fs / "state"
    env = {"SESSIONTOOL_STATE_DIR": str(state)}
    for args in (("send", "main", "hello", "--timeout", "20"), ("label", "main", "before")):
        proc = run_cli(*args, env=env)
        assert proc.returncode == 0, proc.stderr
    from tests.reliability.util import reap_state

    reap_state(state)
    _fill(small_fs)
    before = snapshot(state)
    for args in (
        ("label", "main", "after"),
        ("send", "main", "more", "--timeout", "20"),
        ("spawn", "t"),
    ):
        proc = run_cli(*args, env=env)
        assert_one_line_error(proc, "No space left on device")
        assert snapshot(state) == before, args
    rc, hist = run_json("history", "main", env=env)
    assert rc == 0 and len(hist["messages"]) == 2
    (small_fs / "filler").unlink()
    subprocess.run(["mount", "-o", "remount,ro", str(small_fs)], check=True)
    for args in (
        ("label", "main", "after"),
        ("send", "main", "more", "--timeout", "20"),
        ("spawn", "t"),
    ):
        proc = run_cli(*args, env=env)
        assert_one_line_error(proc, "Read-only file system")
    assert snapshot(state) == before
    for args in (("list",), ("history", "main"), ("runs",)):
        rc, out = run_json(*args, env=env)
        assert rc == 0, (args, out)
    assert not no_tmp_files(state)


def _leave_free(fs: Path, free: int) -> None:
    """Fill the filesystem until `free` bytes are left (whole pages on a tmpfs)."""
    st = os.statvfs(fs)
    fill = st.f_bavail * st.f_frsize - free
    (fs / "filler").write_bytes(b"\0" * max(0, fill))


@pytest.mark.parametrize("free_kb", [0, 4, 8, 12])
def test_a_nearly_full_disk_never_leaves_a_run_to_start_later(small_fs: Path, free_kb: int) -> None:
    """4 KB or 8 KB free on the state dir's filesystem (issue 37, item 7): the worker could not
    record its run, and even its line in the log raised, so the run stayed `queued` (or
    `running` with no process), `send` waited its whole --timeout and exited 124 "still
    running", and the next command once space was back ran it: a cron send executed hours
    later. Now `send` says at once that the run could not start (or, when the turn was done
    but its end cannot be written, that its worker is gone), exit 1 with the reason, and once
    space is back no command starts it: its words reach the transcript at most once."""
    from tests.reliability.util import reap_state

    state = small_fs / "state"
    env = {"SESSIONTOOL_STATE_DIR": str(state)}
    rc, out = run_json("send", "main", "hello", "--timeout", "20", env=env)
    assert rc == 0, out
    reap_state(state)
    words = f"nearly-full-{free_kb}"
    _leave_free(small_fs, free_kb * 1024)
    try:
        proc = run_cli("send", "main", words, "--timeout", "15", env=env)
        reap_state(state)
    finally:
        (small_fs / "filler").unlink()
    # Not 124: send did not wait its whole --timeout for a run nobody runs.
    assert proc.returncode in (0, 1), (free_kb, proc.returncode, proc.stdout, proc.stderr)
    if proc.returncode == 1:  # one error line (and its hint)
        first, *rest = proc.stderr.splitlines()
        assert first.startswith("sessiontool: error: ") and "No space left on device" in first
        assert "internal error" not in first and all(ln.startswith("hint: ") for ln in rest)
    # Space is back: whatever the next commands do, the run is never started (again).
    rc, listing = run_json("runs", env=env)
    assert rc == 0, listing
    rc, out = run_json("send", "main", "space again", "--timeout", "20", env=env)
    assert rc == 0 and out["reply"] == "echo: space again", out
    reap_state(state)
    rc, listing = run_json("runs", env=env)
    assert not [r for r in listing["runs"] if r["status"] in ("queued", "running")], listing
    rc, hist = run_json("history", "main", env=env)
    texts = [json.dumps(m) for m in hist["messages"]]
    said = sum(f'"{words}"' in t for t in texts)
    if "could not be started" in proc.stderr:
        assert said == 0, texts  # withdrawn: it never ran, then or later
    else:
        assert said <= 1, texts
        mine = [r for r in listing["runs"] if r.get("message") == words]
        assert [r["status"] for r in mine] in ([], ["ok"], ["lost"], ["error"]), mine
