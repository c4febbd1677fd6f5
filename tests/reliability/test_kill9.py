"""kill -9 of a worker at chosen and at random points of a run. Afterwards every transcript
parses, sessions.json parses, no other writer's index update is lost, and the run is `lost` or
finished (never stuck `running`) once `runs`/`wait` have reconciled it.

Chosen points use the test hook SESSIONTOOL_TEST_PAUSE (sessiontool/testhooks.py): the worker
says in its run log that it reached the point, then sleeps there until killed. The point between
the user line and the assistant line is the agent itself running (a slow `command` agent)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import run_cli, run_json
from tests.reliability.util import (
    FINISHED,
    check_transcripts,
    kill9,
    read_store,
    reconcile,
    seed_store,
    stray_locks,
    texts,
    wait_pause,
    wait_until,
    worker_pids,
)
from tests.runhelpers import py_command, records, runner_config

# Sleeps on "stall" messages only, so the same config answers every other send at once.
SLOW_ON_STALL = (
    "import sys,time; m=sys.stdin.read(); time.sleep(30 if m.startswith('stall') else 0); "
    "sys.stdout.write('echo: '+m)"
)


def _label(key: str, text: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "sessiontool", "label", key, text, "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _record(state: Path, run_id: str) -> dict[str, object]:
    return next(r for r in records(state) if r["runId"] == run_id)


@pytest.mark.parametrize("point", ["before-user", "agent-running", "index-write"])
def test_kill_9_at_a_chosen_point(state: Path, point: str) -> None:
    seed_store(state, ["agent:main:main", "agent:main:other"])
    runner_config(state, py_command(SLOW_ON_STALL))
    env = None if point == "agent-running" else {"SESSIONTOOL_TEST_PAUSE": f"{point}:30"}
    message = "stall" if point == "agent-running" else "doomed"
    rc, out = run_json("send", "main", message, "--timeout", "0", env=env)
    assert rc == 0, out
    rid = out["runId"]
    agent_pid = None
    if point == "agent-running":
        rec = wait_until(
            lambda: _record(state, rid).get("agentPid") and _record(state, rid), 15, "the agent"
        )
        wait_until(lambda: "stall" in texts(state, "agent:main:main"), 10, "the user line")
        pid, agent_pid = int(rec["pid"]), int(rec["agentPid"])  # type: ignore[call-overload]
    else:
        pid = wait_pause(state, rid, point)

    # Another writer updates the index while the worker hangs there (at `index-write` it holds
    # the store lock: the writer waits, and breaks the lock as soon as its holder is dead).
    writer = _label("other", "written meanwhile")
    if point == "index-write":
        time.sleep(0.4)
        assert writer.poll() is None, "a live holder's store lock was not respected"
    kill9(pid)
    killed_at = time.monotonic()
    if agent_pid is not None:  # the orphaned agent would sleep on; not part of the scenario
        os.killpg(agent_pid, signal.SIGKILL)
    _, err = writer.communicate(timeout=15)
    assert writer.returncode == 0, err
    # Not OpenClaw's 30-second rule (the writer's own start-up may take seconds under load).
    assert time.monotonic() - killed_at < 15, "a dead holder's lock was not broken at once"

    check_transcripts(state)
    store = read_store(state)
    assert store["agent:main:other"]["label"] == "written meanwhile"
    expected = {
        "before-user": [],
        "agent-running": ["stall"],
        "index-write": ["doomed", "echo: doomed"],
    }
    assert texts(state, "agent:main:main") == expected[point]

    statuses = [r["status"] for r in reconcile() if r["runId"] == rid]
    rc, waited = run_json("wait", rid, "--timeout", "5")
    store = read_store(state)
    if point == "index-write":
        # Killed after its reply was written: ended with that reply, not lost (issue 27, 8).
        assert statuses == ["ok"]
        assert rc == 0 and waited["status"] == "ok" and waited["reply"] == "echo: doomed"
        assert store["agent:main:main"]["abortedLastRun"] is False
        assert store["agent:main:main"]["systemSent"] is True
    else:
        assert statuses == ["lost"]
        assert rc == 1 and waited["runStatus"] == "lost" and waited["error"] == "worker died"
        assert store["agent:main:main"]["abortedLastRun"] is True
    assert store["agent:main:other"]["label"] == "written meanwhile"
    assert not stray_locks(state)
    assert not (state / "sessiontool" / "runs" / f"{rid}.lock").exists()

    # The session is not blocked by the dead run: the next send is served at once.
    t0 = time.monotonic()
    rc, again = run_json("send", "main", "after", "--timeout", "20")
    assert rc == 0 and again["reply"] == "echo: after", again
    assert time.monotonic() - t0 < 15  # not the 20 s timeout (start-up takes seconds under load)
    assert texts(state, "agent:main:main") == [*expected[point], "after", "echo: after"]
    assert read_store(state)["agent:main:main"]["abortedLastRun"] is False
    check_transcripts(state)


def test_random_kills_leave_a_consistent_state(state: Path) -> None:
    """Sixteen runs in parallel, each worker killed after a random delay (some while starting,
    some in the lane, in the agent, in a lock, some after they finished), while another
    process keeps rewriting a bystander session's label."""
    seed = int(os.environ.get("RELIABILITY_SEED", "20260121"))
    rng = random.Random(seed)
    n = 16
    keys = [f"agent:main:k{i}" for i in range(n)]
    seed_store(state, [*keys, "agent:main:bystander"])
    runner_config(
        state,
        py_command(
            "import sys,time; m=sys.stdin.read(); time.sleep(0.3); sys.stdout.write('echo: '+m)"
        ),
    )

    stop = threading.Event()
    labels: list[str] = []
    label_errors: list[str] = []

    def relabel() -> None:
        i = 0
        while not stop.is_set():
            text = f"v{i}"
            proc = run_cli("label", "bystander", text)
            if proc.returncode != 0:
                label_errors.append(proc.stderr)
            else:
                labels.append(text)
            i += 1

    labeller = threading.Thread(target=relabel)
    labeller.start()
    try:
        run_ids: dict[str, str] = {}
        killed: list[str] = []

        def send_then_kill(key: str, delay: float) -> None:
            # The delay counts from the moment the run record exists (just before the send
            # starts its worker), so the kills spread over the worker's whole life.
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "sessiontool",
                    "send",
                    key,
                    f"msg-{key}",
                    "--timeout",
                    "0",
                    "--json",
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
            rec = wait_until(
                lambda: next((r for r in records(state) if r.get("sessionKey") == key), None),
                30,
                "record",
            )
            time.sleep(delay)
            for pid in worker_pids(state, rec["runId"]):
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(key)
                except ProcessLookupError:
                    pass
            out, _ = proc.communicate(timeout=30)
            assert proc.returncode == 0, out
            run_ids[key] = json.loads(out)["runId"]
            assert run_ids[key] == rec["runId"]

        threads = [
            threading.Thread(target=send_then_kill, args=(k, rng.uniform(0.0, 0.6))) for k in keys
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(run_ids) == n
        wait_until(lambda: not worker_pids(state), 20, "every worker to be killed or to finish")
    finally:
        stop.set()
        labeller.join()
    assert not label_errors, label_errors
    assert labels

    # Reconcile with the clock 31 s ahead, so a worker killed before it even registered
    # (no workerStartedAt) is past its grace period and counts as lost too.
    ahead = {"SESSIONTOOL_NOW_MS": str(int(time.time() * 1000) + 31_000)}
    after = {r["runId"]: r for r in reconcile(env=ahead)}
    # A run whose lane worker was killed before it took the run is still owed: the reconcile
    # started a new lane worker for it, which runs it now.
    for rid in run_ids.values():
        if after[rid]["status"] not in FINISHED:
            rc, waited = run_json("wait", rid, "--timeout", "30")
            assert waited.get("runStatus", waited.get("status")) in FINISHED, (rc, waited)
    after = {r["runId"]: r for r in reconcile()}
    assert {after[rid]["status"] for rid in run_ids.values()} <= FINISHED
    outcomes = {after[rid]["status"] for rid in run_ids.values()}

    check_transcripts(state)
    store = read_store(state)
    assert store["agent:main:bystander"]["label"] == labels[-1]
    for k in keys:
        got = texts(state, k)
        full = [f"msg-{k}", f"echo: msg-{k}"]
        assert got == full[: len(got)], (k, got)
        status = after[run_ids[k]]["status"]
        if status == "ok":
            assert got == full and store[k]["systemSent"] is True
        else:
            assert status == "lost", after[run_ids[k]]
            assert store[k]["abortedLastRun"] is True
    left = {p.name: p.read_text() for p in stray_locks(state)}
    assert not left, (left, outcomes)
    assert not [
        p for p in (state / "sessiontool" / "runs").glob("*.lock") if not p.name.startswith(".")
    ]

    # Every session takes the next run at once: no dead run blocks a lane, no lock is stuck.
    runner_config(state, {"type": "echo"})
    again = [
        subprocess.Popen(
            [sys.executable, "-m", "sessiontool", "send", k, "again", "--timeout", "20", "--json"],
            stdout=subprocess.PIPE,
            text=True,
        )
        for k in keys
    ]
    for proc in again:
        out, _ = proc.communicate(timeout=40)
        assert proc.returncode == 0, out
    for k in keys:
        assert texts(state, k)[-2:] == ["again", "echo: again"]
    check_transcripts(state)
    print(f"seed {seed}: {len(killed)} killed, outcomes {sorted(outcomes)}")
