"""kill -9 of a worker at chosen and at random points of a run. Afterwards every transcript
parses, sessions.json parses, no other writer's store update is lost, and the run is `lost` or
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
from collections import Counter
from pathlib import Path

import pytest

from sessiontool.protocol import is_delivery_mirror
from tests.helpers import generous, run_cli, run_json
from tests.reliability.util import (
    FINISHED,
    check_transcripts,
    kill9,
    messages,
    parse_transcript,
    read_store,
    reconcile,
    seed_store,
    stray_locks,
    texts,
    wait_pause,
    wait_until,
    worker_pids,
)
from tests.runhelpers import py_command, records, runner_config, text_of

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
    if agent_pid is not None:  # the orphaned agent would sleep on; not part of the scenario
        os.killpg(agent_pid, signal.SIGKILL)
    _, err = writer.communicate(timeout=generous(15))
    # Broken at once, not by OpenClaw's 30-second age rule: the writer gives up on a lock after
    # its foreground 10 s (exit 75), so its exit 0 says it was broken before that.
    assert writer.returncode == 0, err

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

    # The session is not blocked by the dead run: the next send is served within its timeout,
    # not left waiting for the dead run (exit 124 once its --timeout passes).
    rc, again = run_json("send", "main", "after", "--timeout", "20")
    assert rc == 0 and again["reply"] == "echo: after", again
    assert texts(state, "agent:main:main") == [*expected[point], "after", "echo: after"]
    assert read_store(state)["agent:main:main"]["abortedLastRun"] is False
    check_transcripts(state)


def test_a_dead_runs_delivery_comes_before_the_sessions_next_run(state: Path) -> None:
    """A worker killed after its reply was written, before its delivery: the run ends with that
    reply, and its delivery (mirrored into the transcript) still comes before the session's next
    run, as it would have had the worker lived. (CI's burst once found a late mirror between the
    next run's message and its reply: the reconciler started a follow-up worker beside the lane's
    worker; a pause at `deliver` makes that follow-up slow here, so the race always shows.)"""
    key = "agent:main:discord:group:2"
    seed_store(state, [key])
    runner_config(state, {"type": "echo"})
    rc, first = run_json(
        "send", key, "m-1", "--deliver", "--timeout", "0",
        env={"SESSIONTOOL_TEST_PAUSE": "index-write:30"},
    )  # fmt: skip
    assert rc == 0, first
    pid = wait_pause(state, first["runId"], "index-write")
    rc, second = run_json("send", key, "m-2", "--timeout", "0")  # queued behind it
    assert rc == 0 and second["status"] == "accepted", second
    kill9(pid)

    # The reconciler (with its workers) is slow to deliver: 2 s at the `deliver` point.
    reconcile(env={"SESSIONTOOL_TEST_PAUSE": "deliver:2"})
    # Ended with its reply. Not asserted on that `runs`'s own answer: the lane worker it starts
    # for the queued run may already hold the dead run's lock (worker.run_one, ending it), and a
    # run whose lock a live process holds is reported as it is on disk, `running`, until that
    # process has written its end (on a busy machine the worker wins the race).
    ended = wait_until(
        lambda: (r := _record(state, first["runId"]))["status"] in FINISHED and r,
        generous(3),
        "the dead run to be ended",
    )
    assert ended["status"] == "ok", ended

    def settled() -> bool:
        recs = {r["runId"]: r for r in reconcile()}
        runs = [recs[first["runId"]], recs[second["runId"]]]
        return all(r["status"] in FINISHED and not _pending_follow_up(r) for r in runs) and (
            not worker_pids(state)
        )

    wait_until(settled, 30, "both runs and the delivery to finish", poll=0.3)
    msgs = messages(state, key)
    assert [(text_of(m), is_delivery_mirror(m)) for m in msgs] == [
        ("m-1", False),
        ("echo: m-1", False),
        ("echo: m-1", True),
        ("m-2", False),
        ("echo: m-2", False),
    ]
    check_transcripts(state)


def test_a_mirror_written_into_a_dead_runs_turn_is_not_its_reply(state: Path) -> None:
    """A worker killed between deciding its outcome and writing its reply leaves no reply: a
    delivery mirror another run's follow-up wrote after its message is not taken for one."""
    from sessiontool.flow.delivery import mirror_message
    from sessiontool.runs import recover
    from sessiontool.state import transcript
    from sessiontool.state.paths import StatePaths

    paths = StatePaths(state)
    sid = "3f1c1d9e-1111-4222-8333-944455556666"
    path = paths.sessions_dir("main") / f"{sid}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    started = int(time.time() * 1000) - 1000
    for msg in (
        {"role": "user", "content": [{"type": "text", "text": "m-2"}], "timestamp": started + 1},
        mirror_message("echo: m-1", started + 2),
    ):
        transcript.append_message(path, sid, msg)
    rec = {
        "runId": "r-dead",
        "kind": "send",
        "sessionKey": "agent:main:discord:group:2",
        "agentId": "main",
        "sessionId": sid,
        "message": "m-2",
        "startedAt": started,
        "outcome": "ok",
    }
    assert recover.reply_on_disk(paths, rec) is None  # type: ignore[arg-type]
    reply = {"role": "assistant", "content": [{"type": "text", "text": "echo: m-2"}]}
    transcript.append_message(path, sid, {**reply, "timestamp": started + 3})
    found = recover.reply_on_disk(paths, rec)  # type: ignore[arg-type]
    assert found is not None and found["content"] == reply["content"]


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


# -- bursts with kill -9 of random workers (issue 27, "Must hold") ----------------------------

BURST = r"""
import json, sys
from sessiontool.context import build_context
from sessiontool.errors import BusyError, SessiontoolError
from sessiontool.runs.submit import send, spawn

n = int(sys.argv[1])
ctx = build_context()
out = []
for i in range(n):
    for attempt in range(3):  # busy (75) says "try again": a burst contends for the store
        try:
            if i % 5 == 4:
                res = spawn(ctx, "task-%03d" % i)
            else:
                res, _ = send(ctx, "discord:group:%d" % (i % 12), "m-%03d" % i, timeout=0, deliver=True)
            out.append({"i": i, "runId": res.get("runId"), "status": res.get("status")})
            break
        except BusyError as exc:
            if attempt == 2:
                out.append({"i": i, "error": exc.message})
        except SessiontoolError as exc:
            out.append({"i": i, "error": exc.message})
            break
sys.stdout.write(json.dumps(out))
"""


def _pending_follow_up(r: dict[str, object]) -> bool:
    fu = r.get("followUp")
    return isinstance(fu, dict) and fu.get("next") not in (None, "done")


@pytest.mark.slow
@pytest.mark.parametrize("seed", [11, 12])
def test_a_burst_of_200_with_random_kills(state: Path, seed: int) -> None:
    """200 submissions (sends with --deliver, and spawns) while random workers are killed with
    -9: afterwards every run is finished exactly once, none is `lost` with its reply on disk,
    and every delivery and announce is in the outbox (and the transcripts) exactly once."""
    rng = random.Random(seed)
    runner_config(
        state,
        {"type": "echo", "delaySeconds": 0.05},
        session={"agentToAgent": {"maxPingPongTurns": 0}},
    )
    killed: list[int] = []
    done = threading.Event()

    def killer() -> None:
        while not done.is_set() and len(killed) < 60:
            time.sleep(rng.uniform(0.02, 0.3))
            pids = worker_pids(state)
            if pids:
                pid = rng.choice(pids)
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                except ProcessLookupError:
                    pass

    k = threading.Thread(target=killer)
    k.start()
    try:
        proc = subprocess.run(
            [sys.executable, "-c", BURST, "200"], capture_output=True, text=True, timeout=300
        )
        assert proc.returncode == 0, proc.stderr
        submitted = json.loads(proc.stdout)
        time.sleep(2)  # keep killing a while after the last submission
    finally:
        done.set()
        k.join()
    assert [s for s in submitted if "error" in s] == []
    assert len(killed) >= 10, killed

    # Whoever looks next reconciles: lost at once, queued runs get a worker, stalled
    # follow-ups resume (not sooner than 5 s after their last attempt).
    left: list[object] = []

    def settled() -> bool:
        proc = run_cli("runs", "--json")
        assert proc.returncode == 0, proc.stderr
        recs = json.loads(proc.stdout)["runs"]
        left[:] = [
            (r["runId"], r["kind"], r.get("step"), r["status"], r.get("followUp"))
            for r in recs
            if r["status"] not in FINISHED or _pending_follow_up(r)
        ]
        return len(recs) >= 200 and not left and not worker_pids(state)

    try:
        wait_until(settled, 150, "every run and follow-up to finish", poll=1.0)
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {left[:5]}") from None
    recs = {r["runId"]: r for r in records(state)}
    check_transcripts(state)

    # Every transcript: each message and reply at most once, a reply only after its message.
    sdir = state / "agents" / "main" / "sessions"
    users: Counter[str] = Counter()
    replies: Counter[str] = Counter()
    injected: Counter[str] = Counter()
    for path in sdir.glob("*.jsonl*"):
        if path.name.endswith(".lock"):
            continue
        msgs = [o["message"] for o in parse_transcript(path) if o.get("type") == "message"]
        for i, m in enumerate(msgs):
            t = text_of(m)
            if m["role"] == "user":
                users[t] += 1
            elif m.get("stopReason") == "injected":
                injected[t.split("Result: ", 1)[-1].split("\n", 1)[0]] += 1
            elif m.get("model") != "delivery-mirror" and t.startswith("echo: m-"):
                replies[t] += 1
                assert i > 0 and text_of(msgs[i - 1]) == t[len("echo: ") :], (path, t)
    assert [t for t, n in users.items() if n > 1 and t.startswith(("m-", "task-"))] == []
    assert all(n == 1 for n in replies.values()), [t for t, n in replies.items() if n > 1]

    # No run is lost with its reply on disk; every ok send's reply is there once.
    for s in submitted:
        r = recs[s["runId"]]
        if r["kind"] != "send":
            continue
        msg = r["message"]
        if r["status"] == "lost":
            assert replies[f"echo: {msg}"] == 0, ("lost with its reply on disk", r)
        elif r["status"] == "ok":
            assert replies[f"echo: {msg}"] == 1, r

    # The outbox: never two lines with one id; every ok send delivered once, every spawn
    # announced once (its announce injected into the requester's transcript once).
    lines = [
        json.loads(ln)
        for ln in (state / "sessiontool" / "deliveries.jsonl").read_text().splitlines()
        if ln.strip()
    ]
    ids = Counter(ln.get("id") for ln in lines)
    assert [i for i, n in ids.items() if n > 1] == []
    for s in submitted:
        r = recs[s["runId"]]
        if r["kind"] == "send" and r["status"] == "ok":
            assert ids[f"{r['runId']}:deliver"] == 1, r
        if r["kind"] == "spawn":
            assert r.get("announcedAt"), r
    spawns = [recs[s["runId"]] for s in submitted if recs[s["runId"]]["kind"] == "spawn"]
    assert sum(injected.values()) == len(spawns), injected
    statuses = Counter(r["status"] for r in recs.values())
    print(f"seed {seed}: {len(killed)} kills; {dict(statuses)}")
