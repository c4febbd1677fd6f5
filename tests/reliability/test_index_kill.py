"""kill -9 during a first index build: of the command that writes the index, and of one of the
worker processes that parse transcripts for it. The index is disposable, but a killed build
must not leave it wrong, locked or with workers running on."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.helpers import run_cli
from tests.reliability.util import children
from tests.runhelpers import alive

SESSIONS = 12
LINES = 1500  # per session: a build that takes a while on two cores, in the default suite
WORKERS = {"SESSIONTOOL_INDEX_PARALLEL_MIN": "1", "SESSIONTOOL_INDEX_WORKERS": "2"}


def _make_state(state: Path) -> int:
    """Transcripts with `zebra` in every 37th message; returns how many messages say it."""
    d = state / "agents" / "main" / "sessions"
    d.mkdir(parents=True)
    store: dict[str, Any] = {}
    found = 0
    filler = " ".join(f"word{k}" for k in range(40))
    for i in range(SESSIONS):
        sid = f"5e55{i:04d}-0000-4000-8000-000000000000"
        lines = [json.dumps({"type": "session", "version": 3, "id": sid})]
        for n in range(LINES):
            zebra = (i * LINES + n) % 37 == 0
            found += zebra
            text = f"{'zebra ' if zebra else ''}line {n} {filler}"
            role = "user" if n % 2 == 0 else "assistant"
            msg = {"role": role, "content": [{"type": "text", "text": text}], "timestamp": n}
            lines.append(json.dumps({"type": "message", "id": f"{n:08x}", "message": msg}))
        (d / f"{sid}.jsonl").write_text("\n".join(lines) + "\n")
        store[f"agent:main:dm:s{i}"] = {"sessionId": sid, "updatedAt": i}
    (d / "sessions.json").write_text(json.dumps(store, indent=2))
    return found


def _start_build(state: Path) -> tuple[subprocess.Popen[str], list[int]]:
    """A first build with two workers, returned once both are running."""
    env = {**os.environ, **WORKERS, "SESSIONTOOL_STATE_DIR": str(state)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "sessiontool", "search", "zebra", "--limit", "1000", "--json"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    workers: list[int] = []
    while time.monotonic() < deadline and proc.poll() is None:
        workers = children(proc.pid)
        if len(workers) == 2:
            return proc, workers
        time.sleep(0.005)
    proc.kill()
    proc.communicate()
    raise AssertionError(f"the build's workers never showed (exit {proc.returncode})")


def _count(state: Path) -> int:
    proc = run_cli(
        "search", "zebra", "--limit", "1000", "--json", env={"SESSIONTOOL_STATE_DIR": str(state)}
    )
    assert proc.returncode == 0, proc.stderr
    assert "internal error" not in proc.stderr
    return int(json.loads(proc.stdout)["count"])


def _integrity(state: Path) -> str:
    with sqlite3.connect(state / "sessiontool" / "index.sqlite") as db:
        return str(db.execute("PRAGMA integrity_check").fetchone()[0])


def test_killing_the_building_command_leaves_no_workers_and_a_good_index(state: Path) -> None:
    expected = _make_state(state)
    proc, workers = _start_build(state)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    deadline = time.monotonic() + 20
    while any(alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [w for w in workers if alive(w)], "orphaned index workers kept running"
    with sqlite3.connect(state / "sessiontool" / "index.sqlite") as db:
        assert db.execute("SELECT count(*) FROM files").fetchone() == (0,)  # killed mid-build
    # The next search finishes the build: every match, once; the index is sound.
    assert _count(state) == expected
    assert _integrity(state) == "ok"
    assert _count(state) == expected  # and warm


def test_a_killed_worker_costs_nothing_but_time(state: Path) -> None:
    expected = _make_state(state)
    proc, workers = _start_build(state)
    os.kill(workers[0], signal.SIGKILL)
    assert proc.poll() is None  # the build was still going
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "internal error" not in err
    assert json.loads(out)["count"] == expected
    assert _integrity(state) == "ok"
    assert _count(state) == expected
