"""`abort`: a run is stopped with its whole agent process group."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.helpers import run_json

from .runhelpers import (
    alive,
    py_command,
    runner_config,
)

pytestmark = pytest.mark.usefixtures("reap_workers")


def test_abort_kills_the_agent_process_group(state: Path, tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    code = (
        "import subprocess,sys,time; sys.stdin.read(); "
        f"p=subprocess.Popen(['sleep','60']); open({str(pidfile)!r},'w').write(str(p.pid)); time.sleep(60)"
    )
    runner_config(state, py_command(code))
    rc, out = run_json("send", "main", "long", "--timeout", "0")
    deadline = time.monotonic() + 15
    while not pidfile.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    grandchild = int(pidfile.read_text())
    rc, aborted = run_json("abort", out["runId"])
    assert rc == 0 and aborted == {"runId": out["runId"], "status": "aborted"}
    rc, waited = run_json("wait", out["runId"], "--timeout", "10")
    assert rc == 1 and waited["runStatus"] == "aborted"
    deadline = time.monotonic() + 5
    while alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(grandchild)
