"""`delete` during a run never splits a turn (issue 27, item 7): whether the transcript is still
there is decided under the transcript lock `delete` renames it under, so the reply joins the user
line in the archive instead of starting a transcript no entry points to."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import note_output, run_json
from tests.reliability.util import read_store, sessions_dir, wait_until
from tests.runhelpers import py_command, reap, records, runner_config

KEY = "agent:main:telegram:group:7"

# Replies once the test creates the go file: the run is in its agent while `delete` starts.
AGENT = r"""
import os, sys, time
m = sys.stdin.read()
go = os.environ["SPLIT_GO"]
while not os.path.exists(go):
    time.sleep(0.02)
sys.stdout.write("reply to " + m)
"""


@pytest.mark.slow
def test_delete_holding_the_transcript_lock_while_the_reply_is_appended(
    state: Path, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    runner_config(state, py_command(AGENT, env=["SPLIT_GO"]))
    env = {"SPLIT_GO": str(go)}
    rc, out = run_json("send", KEY, "hello", "--timeout", "0", env=env)
    assert rc == 0, out
    run_id = out["runId"]
    sdir = sessions_dir(state)
    try:
        store = sdir / "sessions.json"
        wait_until(lambda: store.exists() and KEY in read_store(state), 20, "the entry")
        sid = read_store(state)[KEY]["sessionId"]
        live = sdir / f"{sid}.jsonl"
        wait_until(lambda: live.exists() and b'"user"' in live.read_bytes(), 20, "the user line")
        # `delete` takes the transcript lock, then pauses holding the store lock inside it:
        # the reply arrives while the transcript is about to be renamed aside.
        err = tmp_path / "delete.err"
        with open(err, "wb") as fh:
            deleter = subprocess.Popen(
                [sys.executable, "-m", "sessiontool", "delete", KEY],
                stdout=subprocess.DEVNULL,
                stderr=fh,
                env={**os.environ, "SESSIONTOOL_TEST_PAUSE": "store-locked:3"},
            )
        try:
            wait_until(lambda: b"test pause: store-locked" in err.read_bytes(), 20, "the pause")
            go.write_text("")
            assert deleter.wait(timeout=30) == 0, err.read_text()
        finally:
            if deleter.poll() is None:
                deleter.kill()
                deleter.wait()
        note_output(["sessiontool", "delete"], err.read_bytes())
        wait_until(
            lambda: any(r["runId"] == run_id and r["status"] == "ok" for r in records(state)),
            30,
            "the run to end",
        )
    finally:
        go.write_text("")
        reap(state)
    assert KEY not in read_store(state), "the deleted entry came back"
    assert not live.exists(), "the reply started a transcript no entry points to"
    (archived,) = sdir.glob(f"{sid}.jsonl.deleted.*")
    roles = [
        json.loads(line)["message"]["role"]
        for line in archived.read_text().splitlines()
        if '"message"' in line
    ]
    assert roles == ["user", "assistant"], archived.read_text()
