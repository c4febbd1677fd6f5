"""`wait`: a run that outlived `send --timeout` is waited for and returns its reply."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import run_cli, run_json
from .runhelpers import (
    py_command,
    runner_config,
    text_of,
    transcript_messages,
)

pytestmark = pytest.mark.usefixtures("reap_workers")


def test_timeout_then_wait_returns_reply(state: Path) -> None:
    runner_config(
        state, py_command("import sys,time; m=sys.stdin.read(); time.sleep(4); print('late: '+m)")
    )
    rc, out = run_json("send", "main", "slow", "--timeout", "1")
    assert rc == 124, out
    assert out["status"] == "timeout"  # 124 and timeout: it returned before the run ended
    proc = run_cli("send", "main", "slow", "--timeout", "1")
    assert proc.returncode == 124 and proc.stdout == ""
    assert "still running: sessiontool wait" in proc.stderr
    rc, done = run_json("wait", out["runId"], "--timeout", "30")
    assert rc == 0 and done["status"] == "ok" and done["reply"] == "late: slow"
    msgs = transcript_messages(state)["agent:main:main"]
    assert [text_of(m) for m in msgs][:2] == ["slow", "late: slow"]
