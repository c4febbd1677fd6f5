"""`deliveries --follow --json` prints every outbox line exactly once, however often `prune` and
`doctor --fix --yes` replace the outbox meanwhile (issue 27, item 9): the README's own pair,
`--follow --json | my-bridge` beside a weekly `prune`, must not drop announces."""

from __future__ import annotations

import fcntl
import json
import os
import random
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

from tests.helpers import note_output, run_cli
from tests.reliability.util import wait_until

OLD_TS = "2020-01-01T00:00:00.000Z"


def _append(state: Path, line: bytes) -> None:
    """An appender on the outbox protocol (flow/delivery.append_outbox): the outbox flock, one
    O_APPEND write."""
    tool = state / "sessiontool"
    lock = os.open(tool / ".deliveries.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        fd = os.open(tool / "deliveries.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
    finally:
        os.close(lock)


@pytest.mark.slow
def test_follow_prints_every_line_once_across_prunes_and_doctor_fixes(state: Path) -> None:
    rng = random.Random(27)
    (state / "sessiontool").mkdir(parents=True)
    _append(state, json.dumps({"ts": OLD_TS, "runId": "before"}).encode() + b"\n")
    follower = subprocess.Popen(
        [sys.executable, "-m", "sessiontool", "deliveries", "--follow", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    got: list[str] = []

    def read() -> None:
        assert follower.stdout is not None
        for line in follower.stdout:
            got.append(json.loads(line)["runId"])

    reader = threading.Thread(target=read)
    reader.start()
    sent: list[str] = []
    replaced = 0
    try:
        # The follower is at the end once a line appended now comes out (those appended
        # before it started are not followed: it starts at the end).
        probes: list[str] = []

        def probe() -> bool:
            probes.append(f"probe{len(probes)}")
            _append(state, json.dumps({"ts": OLD_TS, "runId": probes[-1]}).encode() + b"\n")
            return bool(got)

        wait_until(probe, 60, "the follower to start", poll=0.3)
        wait_until(lambda: got and got[-1] == probes[-1], 10, "the last probe")
        sent += probes[probes.index(got[0]) :]
        for i in range(600):
            # Old lines (prune drops them, so it rewrites) and new ones, now and then a
            # malformed line (doctor --fix --yes drops it, rewriting too).
            ts = OLD_TS if i % 3 == 0 else "2099-01-01T00:00:00.000Z"
            _append(state, json.dumps({"ts": ts, "runId": f"r{i}"}).encode() + b"\n")
            sent.append(f"r{i}")
            if i % 50 == 25:
                _append(state, b"not json\n")
            if rng.random() < 0.03:
                proc = run_cli("prune", "--older-than", "1d", "-q")
                assert proc.returncode == 0, proc.stderr
                replaced += 1
            elif rng.random() < 0.02:
                proc = run_cli("doctor", "--fix", "--yes", "--json")
                assert proc.returncode in (0, 1, 2), proc.stderr
                replaced += 1
        wait_until(lambda: len(got) >= len(sent), 60, "every line to be printed")
    finally:
        follower.terminate()
        follower.wait(timeout=30)
        reader.join(timeout=30)
        assert follower.stderr is not None
        err = follower.stderr.read()
        follower.stderr.close()
        assert follower.stdout is not None
        follower.stdout.close()
        note_output(["sessiontool", "deliveries"], err)
    counts = Counter(got)
    assert replaced >= 8, replaced
    assert [r for r in sent if counts[r] == 0] == [], "lines never printed"
    assert [r for r, n in counts.items() if n > 1] == [], "lines printed twice"
    assert got == sent, "printed out of order"
