"""Many writers and readers at once: 8 processes x 50 sends to a mix of 10 sessions while `list`
and `history` run in loops. No reader ever fails, every user/assistant pair is there, and each
sender's messages to a session keep their order.

How the senders send (the time budget): 400 `sessiontool send` processes plus their 400 workers
would be ~800 interpreter starts on two cores. Each sender is instead one Python process that
calls `sessiontool.runs.submit.send()` (exactly what the `send` command calls: resolve, policy, run
record, detached worker, wait) 50 times. Every run still gets its own real detached worker
process, which is where the concurrency is; the readers are real CLI processes. Senders 0-3
wait for each reply (their order in a session is then trivially theirs); senders 4-7 fire and
forget, so their order rests on the lane's creation order."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import run_cli
from tests.reliability.util import (
    FINISHED,
    check_transcripts,
    messages,
    read_store,
    seed_store,
    wait_until,
)
from tests.runhelpers import records, text_of

SENDERS = 8
PER_SENDER = 50
SESSIONS = [f"agent:main:s{i}" for i in range(10)]

SENDER = r"""
import json, random, sys
from sessiontool.context import build_context
from sessiontool.errors import SessiontoolError
from sessiontool.runs.submit import send

sender, timeout, count = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
rng = random.Random(1000 + sender)
ctx = build_context()
out = []
for i in range(count):
    key = "s%d" % rng.randrange(10)
    msg = "p%d-%03d" % (sender, i)
    try:
        result, code = send(ctx, key, msg, timeout=timeout)
    except SessiontoolError as exc:
        result, code = {"error": exc.message}, int(exc.code)
    out.append({"key": "agent:main:" + key, "msg": msg, "code": code, "result": result})
sys.stdout.write(json.dumps(out))
"""


def _reader_loop(
    args_for: Any, stop: threading.Event, failures: list[str], count: list[int]
) -> None:
    """Run a read command again and again until stopped (with a short breath between runs:
    two busy loops of interpreter starts would take a whole core from the writers)."""
    i = 0
    while not stop.wait(0.1):
        args = args_for(i)
        proc = run_cli(*args, "--json")
        i += 1
        count[0] += 1
        if proc.returncode != 0:
            failures.append(f"{args}: rc={proc.returncode} {proc.stderr.strip()}")
            continue
        try:
            data = json.loads(proc.stdout)
        except ValueError:
            failures.append(f"{args}: not JSON: {proc.stdout[:200]!r}")
            continue
        if "Traceback" in proc.stderr or proc.stderr.strip():
            failures.append(f"{args}: stderr {proc.stderr.strip()[:200]}")
        if args[0] == "history":
            msgs = data.get("messages")
            if not isinstance(msgs, list):
                failures.append(f"{args}: no messages list")
        elif not isinstance(data.get("sessions"), list):
            failures.append(f"{args}: no sessions list")


@pytest.mark.slow  # a load test, ~6 s on 2 cores
def test_eight_senders_fifty_sends_ten_sessions_with_readers(state: Path) -> None:
    seed_store(state, SESSIONS)  # readers may ask for any of them from the first moment
    stop = threading.Event()
    failures: list[str] = []
    counts = ([0], [0])
    readers = [
        threading.Thread(
            target=_reader_loop, args=(lambda i: ("list",), stop, failures, counts[0])
        ),
        threading.Thread(
            target=_reader_loop,
            args=(
                lambda i: ("history", SESSIONS[i % len(SESSIONS)], "--limit", "1000"),
                stop,
                failures,
                counts[1],
            ),
        ),
    ]
    for t in readers:
        t.start()
    t0 = time.monotonic()
    try:
        # Senders 0-3 wait for each reply (timeout 30 s); senders 4-7 fire and forget.
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", SENDER, str(n), "30" if n < 4 else "0", str(PER_SENDER)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for n in range(SENDERS)
        ]
        results: list[list[dict[str, Any]]] = []
        for proc in procs:
            out, err = proc.communicate(timeout=100)
            assert proc.returncode == 0, err
            results.append(json.loads(out))
        sent_at = time.monotonic() - t0
        want = SENDERS * PER_SENDER
        wait_until(
            lambda: sum(1 for r in records(state) if r.get("status") in FINISHED) >= want,
            60,
            "every run to finish",
            poll=0.2,
        )
    finally:
        stop.set()
        for t in readers:
            t.join()
    elapsed = time.monotonic() - t0
    assert not failures, failures[:5]
    assert counts[0][0] > 5 and counts[1][0] > 5, counts

    sends = [s for per in results for s in per]
    assert len(sends) == SENDERS * PER_SENDER
    for s in sends:
        assert s["code"] == 0, s
        if s["result"]["status"] != "accepted":
            assert s["result"]["status"] == "ok" and s["result"]["reply"] == f"echo: {s['msg']}", s
    recs = records(state)
    assert len(recs) == SENDERS * PER_SENDER
    assert {r["status"] for r in recs} == {"ok"}

    check_transcripts(state)
    store = read_store(state)
    assert set(store) == set(SESSIONS)
    seen: list[str] = []
    for key in SESSIONS:
        msgs = messages(state, key)
        got = [(m["role"], text_of(m)) for m in msgs]
        # Pairs never interleave: every user line is followed by its own reply.
        users = got[::2]
        assert all(role == "user" for role, _ in users), key
        assert got[1::2] == [("assistant", f"echo: {t}") for _, t in users], key
        assert len(got) % 2 == 0
        texts = [t for _, t in users]
        seen += texts
        # Per sender, its messages to this session appear in the order it sent them.
        for n in range(SENDERS):
            mine = [t for t in texts if t.startswith(f"p{n}-")]
            assert mine == sorted(mine), (key, n, mine)
            assert mine == [s["msg"] for s in results[n] if s["key"] == key]
    assert sorted(seen) == sorted(s["msg"] for s in sends)
    print(
        f"senders done in {sent_at:.1f}s, all runs in {elapsed:.1f}s; reads: list {counts[0][0]}, history {counts[1][0]}"
    )


SAME_MS = r"""
import json, sys
from sessiontool.context import build_context
from sessiontool.runs.submit import send
ctx = build_context()
ids = [send(ctx, "main", "m%02d" % i, timeout=0)[0]["runId"] for i in range(int(sys.argv[1]))]
sys.stdout.write(json.dumps(ids))
"""


def test_fire_and_forget_sends_within_one_millisecond_keep_creation_order(state: Path) -> None:
    """Sends from one process run in the order it made them even when they share a clock
    millisecond (pinned here, so every one does): the lane orders by createdAt, then runId,
    and a random runId must not decide."""
    n = 12
    proc = subprocess.run(
        [sys.executable, "-c", SAME_MS, str(n)],
        capture_output=True,
        text=True,
        env={**os.environ, "SESSIONTOOL_NOW_MS": "1769000000000"},
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    ids = json.loads(proc.stdout)
    wait_until(
        lambda: sum(1 for r in records(state) if r.get("status") in FINISHED) >= n,
        30,
        "runs",
        poll=0.1,
    )
    got = [text_of(m) for m in messages(state, "agent:main:main") if m["role"] == "user"]
    assert got == [f"m{i:02d}" for i in range(n)]
    assert len(set(ids)) == n
