"""`sessiontool top` in tmux, as a person runs it, on a copy of the OpenClaw 2026.9.6 fixture
with its real gateway running: the SQLite store's sessions are listed with the gateway up, a
message sent with `s` goes through the gateway and its reply is shown, the run appears as ended
without a key press, the transcript followed with Enter shows a message sent from elsewhere
meanwhile, and `q` leaves with 0; and from an empty state dir through the same gateway
as a remote target (`--gateway URL`), where a change is seen from the gateway's own
`sessions.changed` events."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ..runhelpers import reap
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
        p.keys("Enter")  # keep the filter; the table has the keys again a moment later
        time.sleep(1.0)  # (a person's pause: a key sent at once would still go to the filter)
        p.keys("s")
        p.wait_for("Message to")
        p.keys("hello from top")
        p.keys("Enter")
        screen = p.wait_for("Reply from", 300)
        assert "hello from top" in screen  # the fake model answers with the message
        p.keys("Escape")
        p.wait_gone("Reply from")  # an Enter sent while the reply still shows would close it
        p.wait_for(" ok ", 30)  # the run, ended, in the runs pane: no key pressed for it
        p.keys("Enter")  # the transcript, read from the database, followed
        p.wait_for("following (Esc: back)")
        p.wait_for("hello from top", 30)
        other = subprocess.run(
            [sys.executable, "-m", "sessiontool", "--state-dir", str(live.state)]
            + ["send", "discord:group:123", "and one from elsewhere", "--timeout", "300"],
            env=live.env,
            capture_output=True,
            text=True,
            timeout=400,
        )
        assert other.returncode == 0, other.stderr
        p.wait_for("and one from elsewhere", 30)  # it came in while top followed
        p.keys("Escape")
        p.wait_for("Sessions (")
        p.keys("q")
        p.wait_for("AFTER-TOP")
    assert rc_file.read_text().strip() == "top-exited=0"
    reap(live.state)  # the send's run worker


def test_top_through_a_remote_gateway(live: Live, tmp_path: Path) -> None:
    """From a machine with no state of its own (`--gateway URL`, an empty state dir): the
    gateway's sessions, and a label set on the gateway's host shows without a key press, told by
    the gateway's `sessions.changed` event (the listing without events comes every 60 s)."""
    pytest.importorskip("textual")
    empty = tmp_path / "laptop-state"
    empty.mkdir()
    env = dict(live.env)
    for name in ("OPENCLAW_STATE_DIR", "OPENCLAW_CONFIG_PATH"):
        env.pop(name, None)
    env["SESSIONTOOL_STATE_DIR"] = str(empty)
    rc_file = tmp_path / "rc"
    url = f"ws://127.0.0.1:{live.port}"
    argv = [sys.executable, "-m", "sessiontool", "--gateway", url, "top"]
    after = f"echo top-exited=$? > {shlex.quote(str(rc_file))}; echo AFTER-TOP"
    with pane(argv, env, after=after, size=(120, 36)) as p:
        screen = p.wait_for("store: gateway", 60)
        assert "discord:group:123" in screen
        p.wait_for("gateway: up, events", 30)  # subscribed to the gateway's sessions.changed
        label = subprocess.run(
            [sys.executable, "-m", "sessiontool", "--state-dir", str(live.state)]
            + ["label", "discord:group:123", "seen-by-top"],
            env=live.env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert label.returncode == 0, label.stderr
        labelled = time.monotonic()
        p.wait_for("seen-by-top", 30)
        # From the event, not the 60 s listing (a bound well below it, scaled for a busy machine).
        assert time.monotonic() - labelled < 30  # half the listing's 60 s
        p.keys("q")
        p.wait_for("AFTER-TOP")
    assert rc_file.read_text().strip() == "top-exited=0"
    for root in [empty, *empty.glob("gateways/*")]:
        reap(root)
