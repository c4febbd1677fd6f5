"""`wait`: a run that outlived `send --timeout` is waited for and returns its reply; several
runs at once, a session's open runs, and the delivery outcome of a `send --deliver` run."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import run_cli, run_json

from .runhelpers import (
    py_command,
    runner_config,
    text_of,
    transcript_messages,
    write_store,
)

pytestmark = pytest.mark.usefixtures("reap_workers")

GROUP_KEY = "agent:main:discord:group:42"


def _sleepy(seconds: float) -> dict[str, object]:
    return py_command(
        f"import sys,time; m=sys.stdin.read(); time.sleep({seconds}); "
        "sys.exit(3) if 'fail' in m else print('done: '+m)"
    )


def test_wait_on_several_runs_exit_is_the_worst_and_json_one_line_each(state: Path) -> None:
    runner_config(state, _sleepy(0.5))
    ok = run_cli("send", "cron:a", "fine", "--timeout", "0").stdout.strip()
    bad = run_cli("send", "cron:b", "fail now", "--timeout", "0").stdout.strip()
    proc = run_cli("wait", ok, bad, "--timeout", "60", "--json")
    assert proc.returncode == 1, proc.stderr  # a failed run is the worst of them
    lines = [json.loads(x) for x in proc.stdout.splitlines()]
    assert [(r["runId"], r["status"]) for r in lines] == [(ok, "ok"), (bad, "error")]
    assert lines[0]["reply"] == "done: fine"
    # Without --json: one TSV line per run, in the order given.
    proc = run_cli("wait", bad[:12], ok)
    assert proc.returncode == 1
    rows = [line.split("\t") for line in proc.stdout.splitlines()]
    assert [(r[0], r[1]) for r in rows] == [(bad, "error"), (ok, "ok")]


def test_wait_session_waits_for_its_open_runs(state: Path, tmp_path: Path) -> None:
    gate = tmp_path / "gate"  # the runs end only once `wait` is waiting on them
    runner_config(
        state,
        py_command(
            "import os,sys,time; m=sys.stdin.read()\n"
            f"while not os.path.exists({str(gate)!r}): time.sleep(0.05)\n"
            "print('done: '+m)"
        ),
    )
    first = run_cli("send", "cron:lane", "one", "--timeout", "0").stdout.strip()
    second = run_cli("send", "cron:lane", "two", "--timeout", "0").stdout.strip()
    other = run_cli("send", "cron:other", "elsewhere", "--timeout", "0").stdout.strip()
    waiter = subprocess.Popen(
        [sys.executable, "-m", "sessiontool", "wait", "--session", "cron:lane", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        fifo = state / "sessiontool" / "runs" / f"{first}.fifo"
        deadline = time.monotonic() + 30
        while not fifo.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        gate.touch()
        out, err = waiter.communicate(timeout=60)
    finally:
        waiter.kill() if waiter.poll() is None else None
    assert waiter.returncode == 0, err
    got = [json.loads(x) for x in out.splitlines()]
    assert [(r["runId"], r["reply"]) for r in got] == [
        (first, "done: one"),
        (second, "done: two"),
    ]
    assert other not in out
    # Nothing open any more: nothing to wait for, nothing printed (piped).
    proc = run_cli("wait", "--session", "cron:lane")
    assert proc.returncode == 0 and proc.stdout == "" and proc.stderr == ""


def test_wait_reports_the_delivery_that_succeeded(state: Path) -> None:
    write_store(
        state,
        {
            GROUP_KEY: {
                "sessionId": "group-sess",
                "updatedAt": 1,
                "deliveryContext": {"channel": "discord", "to": "group:42"},
            }
        },
    )
    rc, sent = run_json("send", GROUP_KEY, "hello", "--deliver", "--timeout", "30")
    assert rc == 0 and sent["delivery"]["status"] == "outbox", sent
    rc, waited = run_json("wait", sent["runId"])
    assert rc == 0
    assert waited["delivery"]["status"] == "outbox"
    assert waited["delivery"]["id"] == sent["delivery"]["id"]


def test_wait_needs_a_run(state: Path) -> None:
    proc = run_cli("wait")
    assert proc.returncode == 2 and "--session" in proc.stderr


def test_timeout_then_wait_returns_reply(state: Path) -> None:
    runner_config(
        state, py_command("import sys,time; m=sys.stdin.read(); time.sleep(4); print('late: '+m)")
    )
    rc, out = run_json("send", "main", "slow", "--timeout", "1")
    assert rc == 124, out
    assert out["status"] == "timeout"  # 124 and timeout: it returned before the run ended
    proc = run_cli("send", "main", "slow", "--timeout", "1")
    assert proc.returncode == 124
    assert f"still running: sessiontool wait {proc.stdout.strip()}" in proc.stderr
    rc, done = run_json("wait", out["runId"], "--timeout", "30")
    assert rc == 0 and done["status"] == "ok" and done["reply"] == "late: slow"
    msgs = transcript_messages(state)["agent:main:main"]
    assert [text_of(m) for m in msgs][:2] == ["slow", "late: slow"]


def test_wait_tsv_carries_whole_values_and_the_json_status(state: Path, tmp_path: Path) -> None:
    """`wait A B` piped (issue 33, item 2): each reply was cut to 60 characters plus "…", a
    timed-out wait's hint cut the run id to two characters, and its status column said
    `running` where --json says `timeout`. Now whole values (a newline as `\\n`, as
    `deliveries` escapes it) and the status --json gives; `runs` (and `--fields result`)
    piped carry the whole reply too."""
    gate = tmp_path / "gate"
    runner_config(
        state,
        py_command(
            "import os,sys,time; m=sys.stdin.read()\n"
            f"while 'slow' in m and not os.path.exists({str(gate)!r}): time.sleep(0.05)\n"
            "sys.stdout.write('reply: ' + m)"
        ),
    )
    long = "first line of a long answer " + "x" * 120 + "\nsecond line"
    done = run_cli("send", "cron:a", long, "--timeout", "30")
    assert done.returncode == 0, done.stderr
    done_id = run_json("runs")[1]["runs"][0]["runId"]
    slow = run_cli("send", "cron:b", "slow one", "--timeout", "0").stdout.strip()
    try:
        proc = run_cli("wait", done_id, slow, "--timeout", "1")
        as_json = run_cli("wait", done_id, slow, "--timeout", "1", "--json")
    finally:
        gate.touch()
    assert proc.returncode == as_json.returncode == 124, proc.stderr
    rows = [line.split("\t") for line in proc.stdout.splitlines()]
    whole = "reply: " + long.replace("\n", "\\n")
    hint = f"still running after the wait timed out: sessiontool wait {slow}"
    assert rows == [[done_id, "ok", whole], [slow, "timeout", hint]]
    objects = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert [r[1] for r in rows] == [o["status"] for o in objects]
    assert objects[0]["reply"] == "reply: " + long and objects[1]["error"] == hint
    # runs: piped and with --fields, the whole result; only the terminal table cuts it.
    assert f"{done_id}\t{whole}" in run_cli("runs", "--fields", "runId,result").stdout
    piped = [line.split("\t") for line in run_cli("runs").stdout.splitlines()]
    assert [r[6] for r in piped if r[0] == done_id] == [whole]
