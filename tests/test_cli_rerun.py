"""`rerun RUN_ID`: a new run like a failed one; the old record stays and the new one names it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import run_cli, run_json
from tests.runhelpers import py_command, records, runner_config

pytestmark = pytest.mark.usefixtures("reap_workers")


def fails_once(state: Path, tmp_path: Path, then: str) -> None:
    """A runner that fails its first run ('flaky backend') and runs `then` (Python, with the
    message in `m`) on every run after it: what a rerun is for."""
    first_time = tmp_path / "failed-once"
    runner_config(
        state,
        py_command(
            "import os,sys; m=sys.stdin.read()\n"
            f"p={str(first_time)!r}\n"
            "if not os.path.exists(p): open(p,'w').close(); sys.exit('flaky backend')\n" + then
        ),
    )


def test_rerun_a_failed_send_with_the_same_target_message_and_options(
    state: Path, tmp_path: Path
) -> None:
    fails_once(state, tmp_path, "print('got: '+m)")
    rc, failed = run_json("send", "cron:job", "do the thing", "--deliver", "--timeout", "30")
    assert rc == 1 and failed["runStatus"] == "error", failed
    old = failed["runId"]
    proc = run_cli("rerun", old[:10])
    assert proc.returncode == 0, proc.stderr
    new = proc.stdout.strip()
    assert new and new != old
    rc, done = run_json("wait", new, "--timeout", "60")
    assert rc == 0 and done["reply"] == "got: do the thing"
    by_id = {r["runId"]: r for r in records(state)}
    assert by_id[old]["status"] == "error"  # the old record stays as it was
    assert by_id[new]["rerunOf"] == old
    assert by_id[new]["sessionKey"] == by_id[old]["sessionKey"]
    assert by_id[new]["deliver"] is True  # the options too
    # A run that ended well is not rerun.
    proc = run_cli("rerun", new)
    assert proc.returncode == 2 and "only a run that failed" in proc.stderr


def test_rerun_a_failed_spawn_keeps_its_task_and_names_the_old_run(
    state: Path, tmp_path: Path
) -> None:
    fails_once(state, tmp_path, "print('done')")
    rc, out = run_json("spawn", "research X", "--label", "research", "--run-timeout", "120")
    assert rc == 0, out
    rc, failed = run_json("wait", out["runId"], "--timeout", "60")
    assert rc == 1 and failed["runStatus"] == "error", failed
    rc, again = run_json("rerun", out["runId"])
    assert rc == 0 and again["status"] == "accepted" and again["rerunOf"] == out["runId"]
    rc, done = run_json("wait", again["runId"], "--timeout", "60")
    assert rc == 0 and done["status"] == "ok", done
    by_id = {r["runId"]: r for r in records(state)}
    new, old = by_id[again["runId"]], by_id[out["runId"]]
    assert new["kind"] == "spawn" and new["message"] == old["message"] == "research X"
    assert new["runTimeoutSeconds"] == old["runTimeoutSeconds"] == 120
    assert new["sessionKey"] != old["sessionKey"]  # a new child session
    assert new.get("label") is None  # the old child still holds the label
