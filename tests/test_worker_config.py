"""A lane's worker reads the config again for each run it carries out: a run queued behind
another in the same session gets the config as it is when its own turn begins. (Found in CI: a
worker still draining the lane after `send` returned ran the next send with the runner the
config had named before it was rewritten.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import run_json

from .runhelpers import poll, py_command, records, runner_config

pytestmark = pytest.mark.usefixtures("reap_workers")

# Holds its turn until the test creates the file named on its command line.
HOLD = (
    "import os, sys, time\n"
    "sys.stdin.read()\n"
    "while not os.path.exists(sys.argv[1]): time.sleep(0.02)\n"
    "print('from the first runner')\n"
)


def test_a_queued_run_meets_the_config_rewritten_while_it_waited(state: Path) -> None:
    go = state.parent / "go"
    first = py_command(HOLD)
    first["command"].append(str(go))
    runner_config(state, first)
    rc, a = run_json("send", "main", "one", "--timeout", "0")
    assert rc == 0, a
    poll(
        lambda: any(r["runId"] == a["runId"] and r["status"] == "running" for r in records(state)),
        message="the first run running",
    )
    rc, b = run_json("send", "main", "two", "--timeout", "0")
    assert rc == 0, b
    assert next(r for r in records(state) if r["runId"] == b["runId"])["status"] == "queued"
    runner_config(state, py_command("import sys; sys.stdin.read(); print('from the second')"))
    go.touch()
    rc, out = run_json("wait", b["runId"], "--timeout", "60")
    assert rc == 0, out
    by_id = {r["runId"]: r for r in records(state)}
    assert by_id[a["runId"]]["reply"] == "from the first runner"
    assert by_id[b["runId"]]["reply"] == "from the second"
