"""`deliveries --follow` at a terminal starts as `tail -f` does (issue 33 item 14): the last ten
records first, so what a spawn just delivered is on the screen, then each new one. `--since D`
shows those since D instead; a script (--json or piped TSV) still gets only the new records, so
a bridge started again (the README's @reboot line) forwards nothing twice."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sessiontool.flow.delivery import deliver
from sessiontool.state.config import Config
from sessiontool.state.paths import StatePaths
from tests.helpers import run_cli
from tests.test_delivery import (
    DM_KEY,
    _first_line_while_appending,
    _start_follower,
    _stop,
    write_store,
)


@pytest.fixture(autouse=True)
def _dm_session(state: Path) -> None:
    """The session the records name, with a channel to deliver to."""
    write_store(
        state,
        "main",
        {DM_KEY: {"sessionId": "dm", "updatedAt": 1, "lastChannel": "telegram", "lastTo": "42"}},
    )


def _deliver(state: Path, run_id: str) -> None:
    deliver(
        StatePaths(state),
        Config(raw={}),
        run_id=run_id,
        session_key=DM_KEY,
        mode="deliver",
        text=f"reply {run_id}",
        mirror=False,
    )


class Terminal:
    """`deliveries --follow` with its stdout on a pseudo-terminal, as a person runs it."""

    def __init__(self, *args: str) -> None:
        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sessiontool", "deliveries", "--follow", *args],
            stdout=slave,
            stderr=subprocess.PIPE,
            env={**os.environ, "TERM": "xterm", "COLUMNS": "200"},
        )
        os.close(slave)
        self.buf = b""

    def lines(self, n: int, timeout: float = 30.0) -> list[str]:
        deadline = time.monotonic() + timeout
        while self.buf.count(b"\n") < n and time.monotonic() < deadline:
            ready, _, _ = select.select([self.master], [], [], 0.5)
            if ready:
                self.buf += os.read(self.master, 65536)
        *done, self.buf = self.buf.split(b"\n")
        return [ln.decode().rstrip("\r") for ln in done]

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)
        assert self.proc.stderr is not None
        self.proc.stderr.close()
        os.close(self.master)


def test_follow_at_a_terminal_shows_the_last_ten_then_new_ones(state: Path) -> None:
    for i in range(15):
        _deliver(state, f"old-{i:02d}")
    term = Terminal()
    try:
        first = term.lines(10)
        assert [ln.rsplit(": ", 1)[-1] for ln in first] == [
            f"reply old-{i:02d}" for i in range(5, 15)
        ], first
        _deliver(state, "new-0")
        (line,) = term.lines(1)
        assert line.endswith("→ telegram 42: reply new-0"), line
    finally:
        term.close()


def test_follow_since_shows_those_since_instead(state: Path) -> None:
    for i in range(12):
        _deliver(state, f"old-{i:02d}")
    term = Terminal("--since", "1h")
    try:
        lines = term.lines(12)
        assert len(lines) == 12 and lines[0].endswith(": reply old-00"), lines
    finally:
        term.close()


def test_a_script_following_gets_only_new_records(state: Path) -> None:
    for i in range(3):
        _deliver(state, f"old-{i:02d}")
    proc = _start_follower("--json")
    try:
        line = _first_line_while_appending(proc, lambda n: _deliver(state, f"new-{n}"))
    finally:
        _stop(proc)
    assert '"runId":"new-' in line.replace(" ", ""), line


def test_lines_chooses_how_many_come_first_piped_or_not(state: Path) -> None:
    """`-n N` as tail's: the last N records (listed, or first when following, even piped), `-n 0`
    only the new ones at a terminal too."""
    for i in range(6):
        _deliver(state, f"old-{i:02d}")
    listed = run_cli("deliveries", "-n", "2")
    assert listed.returncode == 0, listed.stderr
    assert [ln.split("\t")[-1] for ln in listed.stdout.splitlines()] == [
        "reply old-04",
        "reply old-05",
    ]
    proc = _start_follower("--json", "-n", "3")
    try:
        assert proc.stdout is not None
        got = [json.loads(proc.stdout.readline())["runId"] for _ in range(3)]
        assert got == ["old-03", "old-04", "old-05"]
        _deliver(state, "new-0")
        assert json.loads(proc.stdout.readline())["runId"] == "new-0"
    finally:
        _stop(proc)
    term = Terminal("-n", "0")
    try:
        # A record appended before the follower is ready is never shown (-n 0: none of those
        # before it), so new ones are appended until one is: the first line is a new one, never
        # a backlog, however slowly the process starts.
        deadline = time.monotonic() + 60
        got: list[str] = []
        for n in range(1, 1000):
            assert time.monotonic() < deadline, "no output from deliveries --follow -n 0"
            _deliver(state, f"at-term-{n}")
            got = term.lines(1, timeout=0.5)
            if got:
                break
        assert ": reply at-term-" in got[0], got  # not old-05 nor new-0, the backlog's last
    finally:
        term.close()
    bad = run_cli("deliveries", "-n", "-1")
    assert bad.returncode == 2 and "-1" in bad.stderr
    retry = run_cli("deliveries", "retry", "-n", "2")
    assert retry.returncode == 2 and "--lines" in retry.stderr
