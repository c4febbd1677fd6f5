"""OpenClaw's lock-file protocol: exclusive create, `{pid, startedAt|createdAt}` content,
staleness by dead pid or age (never age alone for a live transcript lock), clean release."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import types
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from sessiontool.clock import parse_iso_ms
from sessiontool.errors import BusyError
from sessiontool.state import locks
from tests.helpers import generous


@pytest.fixture
def live_pid() -> Iterator[int]:
    """A process that is alive for the test and reaped after it."""
    proc = subprocess.Popen(["sleep", "60"])  # no interpreter to start for a pid
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


@pytest.fixture
def polls(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The sleeps a lock's waiter makes between looks (`locks.time.sleep`, counted, not timed):
    a lock broken at once is taken with no wait, whatever the machine's speed."""
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        time.sleep(seconds)

    clock = types.SimpleNamespace(monotonic=time.monotonic, time=time.time, sleep=sleep)
    monkeypatch.setattr(locks, "time", clock)
    return slept


def now_ms() -> int:
    return int(time.time() * 1000)


def store_path(tmp_path: Path) -> Path:
    d = tmp_path / "sessions"
    d.mkdir(exist_ok=True)
    return d / "sessions.json"


def put_lock(path: Path, content: dict[str, object] | bytes) -> None:
    path.write_bytes(content if isinstance(content, bytes) else json.dumps(content).encode())


def test_lock_content_and_release(tmp_path: Path) -> None:
    sp = store_path(tmp_path)
    lock_file = sp.with_name("sessions.json.lock")
    with locks.store_lock(sp, timeout=1):
        info = json.loads(lock_file.read_text())
        assert info["pid"] == os.getpid()
        assert abs(info["startedAt"] - now_ms()) < 5_000
        assert oct(lock_file.stat().st_mode & 0o777) == oct(0o600)
    assert not lock_file.exists()
    tp = tmp_path / "sessions" / "t.jsonl"
    with locks.transcript_lock(tp, timeout=1):
        info = json.loads(tp.with_name("t.jsonl.lock").read_text())
        # an ISO string, as OpenClaw writes and (Clawdbot 2026.1) requires: tests/interop
        assert info["pid"] == os.getpid() and isinstance(info["createdAt"], str)
        assert abs(parse_iso_ms(info["createdAt"]) - now_ms()) < 5_000  # type: ignore[operator]
    assert sorted(os.listdir(tmp_path / "sessions")) == []


@pytest.mark.parametrize("pinned", ["1000000", "4102444800000"], ids=["past", "future"])
def test_locks_use_the_real_clock_even_when_it_is_pinned(
    tmp_path: Path, live_pid: int, monkeypatch: pytest.MonkeyPatch, pinned: str
) -> None:
    """SESSIONTOOL_NOW_MS pins displayed times, never lock ages: a fresh lock of a live
    process (OpenClaw's, on the real clock) must not look 30 s old, and ours must carry the
    real time so that OpenClaw does not find it stale either."""
    monkeypatch.setenv("SESSIONTOOL_NOW_MS", pinned)
    sp = store_path(tmp_path)
    lock_file = sp.with_name("sessions.json.lock")
    put_lock(lock_file, {"pid": live_pid, "startedAt": now_ms()})
    with pytest.raises(BusyError), locks.store_lock(sp, timeout=0.2):
        pass
    lock_file.unlink()
    with locks.store_lock(sp, timeout=1):
        assert abs(json.loads(lock_file.read_text())["startedAt"] - now_ms()) < 5_000


def test_released_after_an_exception(tmp_path: Path) -> None:
    sp = store_path(tmp_path)
    with pytest.raises(ZeroDivisionError), locks.store_lock(sp, timeout=1):
        1 / 0  # noqa: B018
    assert os.listdir(sp.parent) == []


def test_dead_pid_lock_is_broken_at_once(tmp_path: Path, dead_pid: int, polls: list[float]) -> None:
    sp = store_path(tmp_path)
    put_lock(sp.with_name("sessions.json.lock"), {"pid": dead_pid, "startedAt": now_ms()})
    with locks.store_lock(sp, timeout=5):
        assert json.loads(sp.with_name("sessions.json.lock").read_text())["pid"] == os.getpid()
    # Broken on the first look, taken on the second: not the 30 s stale rule, not the timeout.
    assert polls == [locks.POLL_SECONDS]
    assert os.listdir(sp.parent) == []  # nothing moved aside is left behind


def test_dead_pid_transcript_lock_is_broken_at_once(
    tmp_path: Path, dead_pid: int, polls: list[float]
) -> None:
    tp = tmp_path / "t.jsonl"
    put_lock(tp.with_name("t.jsonl.lock"), {"pid": dead_pid, "createdAt": now_ms()})
    with locks.transcript_lock(tp, timeout=5):
        assert json.loads(tp.with_name("t.jsonl.lock").read_text())["pid"] == os.getpid()
    assert polls == [locks.POLL_SECONDS]  # broken on the first look, not the 30 min rule


def test_live_fresh_lock_waits_then_busy(tmp_path: Path, live_pid: int) -> None:
    sp = store_path(tmp_path)
    lock_file = sp.with_name("sessions.json.lock")
    content = {"pid": live_pid, "startedAt": now_ms()}
    put_lock(lock_file, content)
    start = time.monotonic()
    with pytest.raises(BusyError) as info, locks.store_lock(sp, timeout=0.3):
        pass
    waited = time.monotonic() - start
    assert 0.25 <= waited < generous(0.3 + 0.2)  # the timeout waited out, then given up
    assert int(info.value.code) == 75
    assert str(lock_file) in info.value.message
    assert json.loads(lock_file.read_text()) == content  # someone else's: untouched


def test_waiter_gets_the_lock_when_it_is_released(tmp_path: Path, live_pid: int) -> None:
    sp = store_path(tmp_path)
    lock_file = sp.with_name("sessions.json.lock")
    put_lock(lock_file, {"pid": live_pid, "startedAt": now_ms()})
    remover = subprocess.Popen(
        [sys.executable, "-c", f"import time, os; time.sleep(0.3); os.unlink({str(lock_file)!r})"]
    )
    try:
        start = time.monotonic()
        with locks.store_lock(sp, timeout=generous(3)):
            assert json.loads(lock_file.read_text())["pid"] == os.getpid()
        assert time.monotonic() - start > 0.2  # waited for the release, taken before the timeout
    finally:
        remover.wait()


def test_old_store_lock_of_a_live_pid_here_is_never_broken(tmp_path: Path, live_pid: int) -> None:
    """A live holder on this host may be stopped (Ctrl-Z): breaking its lock would let its
    write overwrite ours, so however old, it is waited for (busy)."""
    sp = store_path(tmp_path)
    lock = {"pid": live_pid, "startedAt": now_ms() - 3_600_000}
    put_lock(sp.with_name("sessions.json.lock"), lock)
    with pytest.raises(BusyError), locks.store_lock(sp, timeout=0.2):
        pass
    assert json.loads(sp.with_name("sessions.json.lock").read_text()) == lock


def test_old_store_lock_of_another_host_is_broken(
    tmp_path: Path, live_pid: int, polls: list[float]
) -> None:
    """OpenClaw's 30 s rule still holds where the pid cannot be checked: another host."""
    sp = store_path(tmp_path)
    put_lock(
        sp.with_name("sessions.json.lock"),
        {"pid": live_pid, "startedAt": now_ms() - 31_000, "hostname": "elsewhere.invalid"},
    )
    with locks.store_lock(sp, timeout=5):
        assert json.loads(sp.with_name("sessions.json.lock").read_text())["pid"] == os.getpid()
    assert polls == [locks.POLL_SECONDS]  # broken on the first look: past the 30 s rule


def test_store_lock_under_30s_with_live_pid_is_respected(tmp_path: Path, live_pid: int) -> None:
    sp = store_path(tmp_path)
    put_lock(sp.with_name("sessions.json.lock"), {"pid": live_pid, "startedAt": now_ms() - 25_000})
    with pytest.raises(BusyError), locks.store_lock(sp, timeout=0.2):
        pass


@pytest.mark.parametrize(
    "created",
    [lambda: now_ms() - 3 * 3600_000, lambda: "2020-01-01T00:00:00.000Z"],
    ids=["ms", "iso"],
)
def test_transcript_lock_with_live_pid_is_never_broken(
    tmp_path: Path, live_pid: int, created: object
) -> None:
    tp = tmp_path / "t.jsonl"
    lock_file = tp.with_name("t.jsonl.lock")
    content = {"pid": live_pid, "createdAt": created()}  # type: ignore[operator]
    put_lock(lock_file, content)
    with pytest.raises(BusyError), locks.transcript_lock(tp, timeout=0.2):
        pass
    assert json.loads(lock_file.read_text()) == content


def test_transcript_lock_iso_created_at_dead_pid(tmp_path: Path, dead_pid: int) -> None:
    tp = tmp_path / "t.jsonl"
    put_lock(
        tp.with_name("t.jsonl.lock"), {"pid": dead_pid, "createdAt": "2026-01-01T00:00:00.000Z"}
    )
    with locks.transcript_lock(tp, timeout=2):
        pass


def _age(path: Path, seconds: float) -> None:
    t = time.time() - seconds
    os.utime(path, (t, t))


def test_lock_without_pid_goes_by_age(tmp_path: Path) -> None:
    sp = store_path(tmp_path)
    lock_file = sp.with_name("sessions.json.lock")
    put_lock(lock_file, b"")  # its creator has not written it yet
    with pytest.raises(BusyError), locks.store_lock(sp, timeout=0.2):
        pass
    assert lock_file.exists()
    _age(lock_file, 31)
    with locks.store_lock(sp, timeout=2):
        pass
    assert not lock_file.exists()


def test_transcript_lock_without_pid_waits_30_minutes(tmp_path: Path) -> None:
    tp = tmp_path / "t.jsonl"
    lock_file = tp.with_name("t.jsonl.lock")
    put_lock(lock_file, b"{garbage")
    _age(lock_file, 10 * 60)
    with pytest.raises(BusyError), locks.transcript_lock(tp, timeout=0.2):
        pass
    _age(lock_file, 31 * 60)
    with locks.transcript_lock(tp, timeout=2):
        pass


def test_release_does_not_remove_a_lock_someone_else_took(tmp_path: Path, live_pid: int) -> None:
    sp = store_path(tmp_path)
    lock_file = sp.with_name("sessions.json.lock")
    lk = locks.store_lock(sp, timeout=1).acquire()
    # Ours was broken and re-taken by another process meanwhile.
    theirs = {"pid": live_pid, "startedAt": now_ms()}
    put_lock(lock_file, theirs)
    lk.release()
    assert json.loads(lock_file.read_text()) == theirs


def test_lock_timeout_env(monkeypatch: pytest.MonkeyPatch) -> None:
    assert locks.lock_timeout() == locks.FOREGROUND_TIMEOUT == 10.0
    monkeypatch.setenv("SESSIONTOOL_LOCK_TIMEOUT", "0.5")
    assert locks.lock_timeout() == 0.5
    monkeypatch.setenv("SESSIONTOOL_WORKER", "1")
    assert locks.lock_timeout() == locks.BACKGROUND_TIMEOUT == 60.0


def test_pid_alive() -> None:
    assert locks.pid_alive(os.getpid())
    assert not locks.pid_alive(0)
    assert not locks.pid_alive(-1)
    assert not locks.pid_alive(2**40)


def test_zombie_counts_as_dead(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                state = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except FileNotFoundError:  # reaped already: gone, which the assert checks too
                break
            if state == "Z":
                break
            time.sleep(0.02)
        assert not locks.pid_alive(proc.pid)
        sp = store_path(tmp_path)
        put_lock(sp.with_name("sessions.json.lock"), {"pid": proc.pid, "startedAt": now_ms()})
        with locks.store_lock(sp, timeout=1):
            pass
    finally:
        proc.wait()


def test_many_processes_take_turns(tmp_path: Path) -> None:
    """Mutual exclusion across processes: a shared counter file incremented under the lock."""
    sp = store_path(tmp_path)
    counter = tmp_path / "counter"
    counter.write_text("0")
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from sessiontool.state.locks import store_lock\n"
        "sp, c = Path(sys.argv[1]), Path(sys.argv[2])\n"
        "for _ in range(20):\n"
        "    with store_lock(sp, 30):\n"
        "        v = int(c.read_text()); time.sleep(0.001); c.write_text(str(v + 1))\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", script, str(sp), str(counter)]) for _ in range(5)
    ]
    for p in procs:
        assert p.wait(timeout=120) == 0
    assert counter.read_text() == "100"
    assert os.listdir(sp.parent) == []


def test_created_at_form_is_what_openclaw_2026_2_to_4_writes(tmp_path: Path) -> None:
    """OpenClaw 2026.2–2026.4.29's store lock is its session write lock: `{pid, createdAt (ISO),
    starttime (clock ticks, /proc/<pid>/stat field 22)}`. Its reader takes a lock without a
    string createdAt as invalid, so sessiontool writes this form beside such a gateway."""
    sp = store_path(tmp_path)
    lock_file = sp.with_name("sessions.json.lock")
    with locks.store_lock(sp, timeout=1, form="createdAt"):
        info = json.loads(lock_file.read_text())
        assert set(info) == {"pid", "createdAt", "starttime"}
        assert info["pid"] == os.getpid()
        assert abs(parse_iso_ms(info["createdAt"]) - now_ms()) < 5_000  # type: ignore[operator]
        with open(f"/proc/{os.getpid()}/stat", "rb") as fh:
            stat = fh.read()
        assert info["starttime"] == int(stat[stat.rindex(b")") + 2 :].split()[19])
    assert not lock_file.exists()


def test_a_recycled_pid_lock_is_broken_and_a_live_one_is_kept(
    tmp_path: Path, live_pid: int
) -> None:
    """A lock naming a live pid whose start time is not the recorded `starttime` belongs to a
    process that is gone (its pid was reused): stale at once, as OpenClaw 2026.2+ judges it."""
    sp = store_path(tmp_path)
    lock_file = sp.with_name("sessions.json.lock")
    started = locks.process_starttime(live_pid)
    assert started is not None
    fresh = datetime.now(UTC).isoformat()
    put_lock(lock_file, {"pid": live_pid, "createdAt": fresh, "starttime": started})
    with pytest.raises(BusyError), locks.store_lock(sp, timeout=0.2, form="createdAt"):
        pass
    put_lock(lock_file, {"pid": live_pid, "createdAt": fresh, "starttime": started + 1})
    with locks.store_lock(sp, timeout=5, form="createdAt"):
        assert json.loads(lock_file.read_text())["pid"] == os.getpid()
