"""`sessiontool top` in tmux, as a person runs it, on a copy of the OpenClaw 2026.9.6 fixture
with its real gateway running: the SQLite store's sessions are listed with the gateway up, a
message sent with `s` goes through the gateway and its reply is shown, the run appears as ended
without a key press, and `q` leaves with 0."""

from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path

import pytest

from ..tmuxpane import pane
from .conftest import Live

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


def test_top_over_the_real_gateway(live: Live, tmp_path: Path) -> None:
    pytest.importorskip("textual")
    rc_file = tmp_path / "rc"
    argv = [sys.executable, "-m", "sessiontool", "--state-dir", str(live.state), "top"]
    after = f"echo top-exited=$? > {shlex.quote(str(rc_file))}; echo AFTER-TOP"
    with pane(argv, dict(live.env), after=after, size=(120, 36)) as p:
        screen = p.wait_for("store: openclaw-sqlite", 60)
        screen = p.wait_for("gateway: up", 30)
        assert "discord:group:123" in screen
        p.keys("/")
        p.wait_for("filter sessions")
        p.keys("discord:group:123")
        p.wait_for("matching /discord:group:123")
        p.keys("Enter")
        p.keys("s")
        p.wait_for("Message to")
        p.keys("hello from top")
        p.keys("Enter")
        screen = p.wait_for("Reply from", 300)
        assert "hello from top" in screen  # the fake model answers with the message
        p.keys("Escape")
        p.wait_for(" ok ", 30)  # the run, ended, in the runs pane: no key pressed for it
        p.keys("q")
        p.wait_for("AFTER-TOP")
    assert rc_file.read_text().strip() == "top-exited=0"
