"""The red team's concurrency harness (issue 27, "Must hold"), three seeds, in the slow suite.

8 senders x 50 sends (0-3 wait for each reply, 4-6 fire and forget, 7 sends agent-to-agent as a
session, so each of its sends also runs an announce step) to ten steady sessions and four that
a loop keeps resetting and deleting, while `list`, `history`, `runs` and `label` run in loops,
`spawn` starts sub-agents, and an external writer takes the store and transcript locks the way
OpenClaw does. Afterwards, in every transcript file (live or archived):
- 0 split pairs: every user line is followed by its own reply, in the same file;
- 0 lost or duplicated lines: each accepted send's message and reply exactly once; each of the
  external writer's updates and lines exactly once;
- 0 internal errors (conftest fails any), every run finished `ok`, every announce once.

Senders call `sessiontool.runs.submit.send()` in-process (what the `send` command calls), as
test_concurrency.py does: 400 interpreter starts fewer on two cores; every run still gets a
real detached worker. Everything else is the real CLI."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import run_cli, write_config
from tests.reliability.util import (
    FINISHED,
    parse_transcript,
    read_store,
    seed_store,
    sessions_dir,
    wait_until,
)
from tests.runhelpers import records, text_of

SENDERS = 8
PER_SENDER = 50
STEADY = [f"agent:main:s{i}" for i in range(10)]
CHURN = [f"agent:main:c{i}" for i in range(4)]
A2A_FROM = "agent:main:a2a"
EXTERNAL = "agent:main:external"
EXTERNAL_SID = "e0e0e0e0-0000-4000-8000-000000000027"
EXTERNAL_UPDATES = 60
A2A_ANNOUNCE = "Agent-to-agent announce step."
SPAWN_ANNOUNCE = "Sub-agent announce step."

SENDER = r"""
import json, random, sys
from sessiontool.context import build_context
from sessiontool.errors import SessiontoolError
from sessiontool.runs.submit import send

sender, timeout, count, seed = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
keys = json.loads(sys.argv[5])
rng = random.Random(seed * 100 + sender)
ctx = build_context()
out = []
for i in range(count):
    key = rng.choice(keys)
    msg = "p%d-%03d" % (sender, i)
    try:
        result, code = send(ctx, key, msg, timeout=timeout)
    except SessiontoolError as exc:
        result, code = {"error": exc.message}, int(exc.code)
    out.append({"key": key, "msg": msg, "code": code, "result": result})
sys.stdout.write(json.dumps(out))
"""

# OpenClaw's side of the lock protocol: the store lock (exclusive create, {"pid","startedAt"}),
# read, change its own entry, write a temp file and rename it over; then one transcript line
# under the transcript lock ({"pid","createdAt": ISO}). A live holder is waited for, never broken.
EXTERNAL_WRITER = r"""
import json, os, sys, time
sdir, key, sid, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
store = os.path.join(sdir, "sessions.json")
transcript = os.path.join(sdir, sid + ".jsonl")

def take(path, stamp):
    while True:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            time.sleep(0.005)
            continue
        os.write(fd, json.dumps({"pid": os.getpid(), **stamp}).encode())
        os.close(fd)
        return

for i in range(1, n + 1):
    take(store + ".lock", {"startedAt": int(time.time() * 1000)})
    try:
        with open(store, "rb") as fh:
            data = json.loads(fh.read())
        entry = dict(data.get(key) or {})
        entry.update(sessionId=sid, updatedAt=int(time.time() * 1000), externalCount=i)
        data[key] = entry
        tmp = "%s.%d.ext.tmp" % (store, os.getpid())
        with open(tmp, "w") as fh:
            fh.write(json.dumps(data, indent=2))
        os.replace(tmp, store)
    finally:
        os.unlink(store + ".lock")
    take(transcript + ".lock", {"createdAt": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())})
    try:
        fd = os.open(transcript, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.write(fd, (json.dumps({"type": "custom", "customType": "external", "n": i}) + "\n").encode())
        os.close(fd)
    finally:
        os.unlink(transcript + ".lock")
    time.sleep(0.05)
"""


class Loops:
    """CLI commands run in loops on threads until stopped; every failure is kept."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.failures: list[str] = []
        self.counts: Counter[str] = Counter()
        self.threads: list[threading.Thread] = []

    def add(self, name: str, step: Any, pause: float) -> None:
        def loop() -> None:
            i = 0
            while not self.stop.wait(pause):
                try:
                    step(i)
                except AssertionError as exc:
                    self.failures.append(f"{name}: {exc}")
                i += 1
                self.counts[name] += 1

        t = threading.Thread(target=loop, name=name)
        self.threads.append(t)
        t.start()

    def join(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join()


def _ok(args: tuple[str, ...], codes: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[str]:
    proc = run_cli(*args)
    assert proc.returncode in codes, f"{args}: rc={proc.returncode} {proc.stderr.strip()[:300]}"
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def _is_mirror(m: dict[str, Any]) -> bool:
    """A delivery mirror or a spawn's injected announce: a line of its own, not a turn."""
    return m.get("model") == "delivery-mirror" or m.get("stopReason") == "injected"


def _check_pairs(path: Path, msgs: list[dict[str, Any]]) -> list[str]:
    """Every user line is followed by its own reply; no reply without its user line."""
    out = []
    turn = [m for m in msgs if not _is_mirror(m) and m.get("role") in ("user", "assistant")]
    for i, m in enumerate(turn):
        nxt = turn[i + 1] if i + 1 < len(turn) else None
        prev = turn[i - 1] if i > 0 else None
        if m["role"] == "user":
            if nxt is None or nxt["role"] != "assistant":
                out.append(f"{path.name}: user {text_of(m)!r} has no reply after it")
            elif text_of(m).startswith("p") and text_of(nxt) != f"echo: {text_of(m)}":
                out.append(f"{path.name}: {text_of(m)!r} answered by {text_of(nxt)!r}")
        elif prev is None or prev["role"] != "user":
            out.append(f"{path.name}: reply {text_of(m)!r} has no user line before it")
    return out


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_red_team_harness(state: Path, seed: int) -> None:
    rng = random.Random(seed)
    seed_store(state, [*STEADY, *CHURN])
    write_config(
        state,
        {
            "agents": {"defaults": {"runner": {"type": "echo"}}},
            "session": {"agentToAgent": {"maxPingPongTurns": 0}},
        },
    )
    loops = Loops()
    labels: dict[str, str] = {}

    def read_list(i: int) -> None:
        data = json.loads(_ok(("list", "--json")).stdout)
        assert isinstance(data["sessions"], list)

    def read_history(i: int) -> None:
        key = STEADY[i % len(STEADY)]
        data = json.loads(_ok(("history", key, "--limit", "1000", "--json")).stdout)
        assert isinstance(data["messages"], list)

    def read_runs(i: int) -> None:
        data = json.loads(_ok(("runs", "--json")).stdout)
        assert isinstance(data["runs"], list)

    def label(i: int) -> None:
        key = STEADY[i % len(STEADY)]
        _ok(("label", key, f"l{i}"))
        labels[key] = f"l{i}"

    def churn(i: int) -> None:
        key = CHURN[rng.randrange(len(CHURN))]
        # A session just deleted, or not yet made by a send, is not found (3).
        _ok(("delete" if i % 2 else "reset", key), (0, 3))

    spawned: list[str] = []

    def spawn(i: int) -> None:
        if len(spawned) < 6:
            out = json.loads(_ok(("spawn", f"task {i}", "--json")).stdout)
            spawned.append(out["runId"])

    ext = subprocess.Popen(
        [
            sys.executable,
            "-c",
            EXTERNAL_WRITER,
            str(sessions_dir(state)),
            EXTERNAL,
            EXTERNAL_SID,
            str(EXTERNAL_UPDATES),
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    loops.add("list", read_list, 0.3)
    loops.add("history", read_history, 0.3)
    loops.add("runs", read_runs, 0.5)
    loops.add("label", label, 0.2)
    loops.add("churn", churn, 0.4)
    loops.add("spawn", spawn, 1.0)
    t0 = time.monotonic()
    try:
        targets = json.dumps([*STEADY, *CHURN])
        procs = []
        for n in range(SENDERS):
            env = dict(os.environ)
            keys = targets
            if n == SENDERS - 1:  # agent-to-agent: a session sends, its target announces
                env["SESSIONTOOL_SESSION_KEY"] = A2A_FROM
                keys = json.dumps(STEADY)
            procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-c",
                        SENDER,
                        str(n),
                        "30" if n < 4 or n == SENDERS - 1 else "0",
                        str(PER_SENDER),
                        str(seed),
                        keys,
                    ],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    env=env,
                )
            )
        results: list[list[dict[str, Any]]] = []
        for proc in procs:
            out, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, err
            assert "internal error" not in err and "Traceback" not in err, err
            results.append(json.loads(out))
        _, ext_err = ext.communicate(timeout=120)
        assert ext.returncode == 0, ext_err
        sent_at = time.monotonic() - t0
        loops.join()  # nothing new starts from here on

        def settled() -> bool:
            recs = records(state)
            return all(r.get("status") in FINISHED for r in recs) and all(
                r.get("announcedAt") for r in recs if r.get("kind") == "spawn"
            )

        wait_until(settled, 120, "every run and announce to finish", poll=0.3)
    finally:
        loops.join()
        if ext.poll() is None:
            ext.kill()
            ext.wait()
    elapsed = time.monotonic() - t0
    assert not loops.failures, loops.failures[:5]
    assert all(loops.counts[n] >= 3 for n in ("list", "history", "runs", "label", "churn"))
    assert len(spawned) >= 3, spawned

    sends = [s for per in results for s in per]
    assert len(sends) == SENDERS * PER_SENDER
    assert [s for s in sends if s["code"] != 0] == []
    for s in sends:
        if s["result"]["status"] != "accepted":
            assert s["result"]["status"] == "ok", s
            assert s["result"]["reply"] == f"echo: {s['msg']}", s
    recs = records(state)
    assert Counter(r["status"] for r in recs) == Counter({"ok": len(recs)})
    # One announce step per agent-to-agent send and per spawn, each announced once.
    steps = Counter((r.get("parentRunId"), r.get("step")) for r in recs if r["kind"] == "step")
    assert all(n == 1 for n in steps.values()), steps
    assert sum(1 for (_, step) in steps if step == "announce") == PER_SENDER + len(spawned)

    # Every transcript file, live or archived: no split pair; every line exactly once.
    sdir = sessions_dir(state)
    problems: list[str] = []
    users: Counter[str] = Counter()
    external: list[int] = []
    for path in sorted(sdir.iterdir()):
        if ".jsonl" not in path.name or path.name.endswith(".lock"):
            continue
        lines = parse_transcript(path)
        external += [o["n"] for o in lines if o.get("customType") == "external"]
        msgs = [o["message"] for o in lines if o.get("type") == "message"]
        problems += _check_pairs(path, msgs)
        users.update(text_of(m) for m in msgs if m.get("role") == "user")
    assert problems == [], problems[:10]
    sent = Counter(s["msg"] for s in sends)
    got = Counter({t: n for t, n in users.items() if t in sent})
    assert got == sent, (
        [t for t in sent if got[t] == 0][:10],
        [t for t, n in got.items() if n > 1][:10],
    )
    assert users[A2A_ANNOUNCE] == PER_SENDER
    assert users[SPAWN_ANNOUNCE] == len(spawned)
    assert sorted(external) == list(range(1, EXTERNAL_UPDATES + 1))
    store = read_store(state)
    assert store[EXTERNAL]["externalCount"] == EXTERNAL_UPDATES, "an external update was lost"
    for key, text in labels.items():
        assert store[key].get("label") == text, (key, store[key])
    print(
        f"seed {seed}: sends done in {sent_at:.1f}s, all settled in {elapsed:.1f}s; "
        f"{len(recs)} runs; loops {dict(loops.counts)}"
    )
