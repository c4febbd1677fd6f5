"""The lock files sessiontool shares with a live OpenClaw (spec section 2): a lock another live
process on this host holds is waited for, however old (exit 75 in the foreground),
a dead holder's lock is broken at once, a foreground command gives up with exit 75 naming the
lock while a background worker keeps waiting, and sessiontool never leaves a lock file behind,
whether it ends, is interrupted or is killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import generous, run_cli, run_json
from tests.reliability.util import (
    dead_pid,
    hold_lock,
    kill9,
    read_store,
    seed_store,
    sessions_dir,
    snapshot,
    stray_locks,
    texts,
    wait_until,
)
from tests.runhelpers import records


def store_lock(state: Path) -> Path:
    return sessions_dir(state) / "sessions.json.lock"


def _popen(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "sessiontool", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def _sleeping(proc: subprocess.Popen[str]) -> bool:
    """Whether the process sleeps in (clock_)nanosleep: the lock's poll, the only sleep on the
    way to it (a signal sent earlier would land in Python's start-up, not in the wait)."""
    try:
        with open(f"/proc/{proc.pid}/wchan") as fh:
            if "nanosleep" in fh.read():
                return True
        with open(f"/proc/{proc.pid}/syscall") as fh:
            return fh.read().split(" ", 1)[0] in ("35", "230")  # x86-64 nanosleep, clock_nanosleep
    except OSError:
        return proc.poll() is not None  # gone: stop waiting, the next line says why


@pytest.fixture
def seeded(state: Path) -> Path:
    seed_store(state, ["agent:main:main", "agent:main:other"])
    return state


def test_a_live_holders_store_lock_is_waited_for(seeded: Path) -> None:
    with hold_lock(store_lock(seeded)) as held:
        proc = _popen("label", "main", "after the wait")
        wait_until(lambda: _sleeping(proc), 30, "the label to wait for the lock")
        assert proc.poll() is None, "wrote while a live process held the store lock"
        assert store_lock(seeded).read_bytes() == held.content
        assert "label" not in read_store(seeded)["agent:main:main"]
        released = time.monotonic()
        held.release()
        _, err = proc.communicate(timeout=generous(10))
    assert proc.returncode == 0, err  # not 75: it waited for the holder, then wrote
    assert time.monotonic() - released < generous(1)  # it polls every 25 ms
    assert read_store(seeded)["agent:main:main"]["label"] == "after the wait"
    assert not stray_locks(seeded)


def test_foreground_gives_up_with_75_naming_the_lock(seeded: Path) -> None:
    before = snapshot(seeded)
    with hold_lock(store_lock(seeded)) as held:
        t0 = time.monotonic()
        proc = run_cli("label", "main", "never", env={"SESSIONTOOL_LOCK_TIMEOUT": "0.5"})
        took = time.monotonic() - t0
        assert proc.returncode == 75, proc.stderr
        first = proc.stderr.splitlines()[0]
        assert first.startswith("sessiontool: error: ") and str(store_lock(seeded)) in first
        assert 0.5 <= took < generous(0.5 + 1)  # the 0.5 s was waited out, then given up
        rc, out = run_json("label", "main", "never", env={"SESSIONTOOL_LOCK_TIMEOUT": "0.3"})
        assert rc == 75 and out["code"] == 75 and "sessions.json.lock" in out["error"]
        assert store_lock(seeded).read_bytes() == held.content  # fresh and alive: not broken
    assert snapshot(seeded) == before


def test_background_worker_outwaits_the_foreground_timeout(seeded: Path) -> None:
    """The worker's store lock policy is 60 s whatever SESSIONTOOL_LOCK_TIMEOUT says."""
    with hold_lock(store_lock(seeded)) as held:
        rc, out = run_json(
            "send", "main", "patient", "--timeout", "0", env={"SESSIONTOOL_LOCK_TIMEOUT": "0.3"}
        )
        assert rc == 0, out
        rid = out["runId"]
        wait_until(
            lambda: any(r["runId"] == rid and r["status"] == "running" for r in records(seeded)),
            10,
            "start",
        )
        time.sleep(1.5)  # well past the foreground's 0.3 s
        (rec,) = [r for r in records(seeded) if r["runId"] == rid]
        assert rec["status"] == "running"
        assert store_lock(seeded).read_bytes() == held.content
        held.release()
        rc, done = run_json("wait", rid, "--timeout", "20")
    assert rc == 0 and done["reply"] == "echo: patient", done
    assert not stray_locks(seeded)


def test_a_live_holders_transcript_lock_is_never_broken_even_when_old(state: Path) -> None:
    rc, out = run_json("send", "main", "first", "--timeout", "20")
    assert rc == 0
    sid = read_store(state)["agent:main:main"]["sessionId"]
    tpath = sessions_dir(state) / f"{sid}.jsonl"
    before = tpath.read_bytes()
    two_hours_ago = int(time.time() * 1000) - 2 * 3600_000
    with hold_lock(
        tpath.with_name(tpath.name + ".lock"), stamp_key="createdAt", stamp_ms=two_hours_ago
    ) as held:
        rc, out = run_json("send", "main", "second", "--timeout", "1.5")
        assert rc == 124, out  # the caller stopped waiting; the run waits for the lock
        assert tpath.with_name(tpath.name + ".lock").read_bytes() == held.content
        assert tpath.read_bytes() == before
        held.release()
        rc, done = run_json("wait", out["runId"], "--timeout", "20")
    assert rc == 0 and done["reply"] == "echo: second"
    assert texts(state, "agent:main:main") == ["first", "echo: first", "second", "echo: second"]
    assert not stray_locks(state)


@pytest.mark.parametrize("which", ["store", "transcript"])
def test_a_dead_holders_lock_is_broken_at_once(state: Path, which: str) -> None:
    rc, _ = run_json("send", "main", "first", "--timeout", "20")
    assert rc == 0
    sid = read_store(state)["agent:main:main"]["sessionId"]
    now = int(time.time() * 1000)
    if which == "store":
        lock, content = store_lock(state), {"pid": dead_pid(), "startedAt": now}
    else:
        lock = sessions_dir(state) / f"{sid}.jsonl.lock"
        content = {"pid": dead_pid(), "createdAt": now}
    lock.write_text(json.dumps(content))
    rc, out = run_json("send", "main", "second", "--timeout", "20")
    # Broken at once, not by OpenClaw's 30-second age rule: served within the 20 s (not 124),
    # and the foreground store lock gives up after 10 s (75).
    assert rc == 0 and out["reply"] == "echo: second", out
    assert not stray_locks(state)


def test_a_stopped_live_holder_is_never_broken_however_old(seeded: Path) -> None:
    """A holder stopped with Ctrl-Z for longer than 30 s: its lock is not broken (busy, 75),
    so when it resumes its write cannot overwrite a session created meanwhile."""
    old = int(time.time() * 1000) - 120_000
    with hold_lock(store_lock(seeded), stamp_ms=old) as held:
        os.kill(held.pid, signal.SIGSTOP)
        try:
            proc = run_cli("label", "main", "taken over", env={"SESSIONTOOL_LOCK_TIMEOUT": "1"})
            assert proc.returncode == 75, proc.stderr
            assert "busy" in proc.stderr
            rc, out = run_json("doctor")
            assert not [p for p in out["problems"] if p["kind"] == "stale-lock"], out
        finally:
            os.kill(held.pid, signal.SIGCONT)
    proc = run_cli("label", "main", "after")
    assert proc.returncode == 0, proc.stderr
    assert read_store(seeded)["agent:main:main"]["label"] == "after"
    assert not stray_locks(seeded)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupted_while_waiting_for_a_lock(seeded: Path, sig: signal.Signals) -> None:
    """Interrupted while it waits: exit 130 (SIGTERM: 143), the holder's lock untouched, nothing written."""
    before = snapshot(seeded)
    with hold_lock(store_lock(seeded)) as held:
        proc = _popen("label", "main", "interrupted")
        wait_until(lambda: _sleeping(proc), 30, "the label to wait for the lock")
        assert proc.poll() is None
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=10)
        assert proc.returncode == (130 if sig == signal.SIGINT else 143), err
        assert "Traceback" not in err
        assert store_lock(seeded).read_bytes() == held.content
    assert snapshot(seeded) == before


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupted_while_holding_the_lock(seeded: Path, sig: signal.Signals) -> None:
    """Interrupted between taking the store lock and writing (test hook `store-locked`): exit
    130, the lock file removed, the store unchanged."""
    before = snapshot(seeded)
    proc = _popen("label", "main", "interrupted", env={"SESSIONTOOL_TEST_PAUSE": "store-locked:30"})
    assert proc.stderr is not None
    line = proc.stderr.readline()
    assert line.startswith("sessiontool test pause: store-locked"), line
    assert store_lock(seeded).exists()
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=10)
    assert proc.returncode == (130 if sig == signal.SIGINT else 143), err
    assert "Traceback" not in err
    assert not stray_locks(seeded)
    assert snapshot(seeded) == before


def test_killed_while_holding_the_lock_then_the_next_writer_breaks_it(seeded: Path) -> None:
    proc = _popen("label", "main", "killed", env={"SESSIONTOOL_TEST_PAUSE": "store-locked:30"})
    assert proc.stderr is not None
    assert proc.stderr.readline().startswith("sessiontool test pause: store-locked")
    kill9(proc.pid)
    proc.communicate()
    assert json.loads(store_lock(seeded).read_text())["pid"] == proc.pid  # left behind...
    # ...and broken at once, its pid being dead: the next writer's own wait for the lock is
    # bounded (a live holder's lock is never broken: busy, exit 75), not the wall time of the
    # whole command, whose start-up alone took over 3 s on a loaded machine.
    rc, out = run_json("label", "other", "next writer", env={"SESSIONTOOL_LOCK_TIMEOUT": "2"})
    assert rc == 0, out
    store = read_store(seeded)
    assert store["agent:main:other"]["label"] == "next writer"
    assert "label" not in store["agent:main:main"]
    assert not stray_locks(seeded)
