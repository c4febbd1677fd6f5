"""sessiontool and the real gateway write one sessions.json (and one transcript) at the same time,
and no update from either side is lost.

At once: sessiontool processes set send policies and labels (`policy`, `label`) and send echo turns;
the gateway applies `sessions.patch` (label, thinkingLevel, sendPolicy) to other keys and to keys
sessiontool is also writing (other fields), and runs real agent turns in the session sessiontool is
sending to. Both programs take `<store>.lock` (OpenClaw's protocol) for every read-modify-write and
`<transcript>.lock` for transcript writes. Afterwards every update of both sides is on disk, both
programs read the same result, no lock or temporary file is left, and the shared transcript has
one unbranched parentId chain.

Known limitation of the real program, kept out of this test's way: the gateway's `agent` method
builds its session entry from a copy read *before* it takes the store lock and then replaces the
entry with it (Clawdbot 2026.1.24, gateway/server-methods/agent.js). So an agent turn started on a
key nobody has created yet, while another writer creates it, replaces that writer's sessionId (two
concurrent gateway turns on a new key do this to each other: seen here as three transcripts), and a
`label`/`policy` change to the same session inside that window is reverted. sessions.patch re-reads
under the lock and loses nothing. Hence the turn session exists before the concurrent phase, and
sessiontool's `policy`/`label` writes go to sessions the gateway is not running turns in.
"""

from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .conftest import Harness
from .support import assert_linear_chain, full_key, text_of

N_ST = 10  # keys only sessiontool writes (policy, then label)
N_GW = 10  # keys only the gateway writes (sessions.patch)
N_BOTH = 6  # keys both write, different fields
N_ST_TURNS = 4
N_GW_TURNS = 3
TURNS = "agent:main:dm:interop-turns"


def test_concurrent_writers_lose_no_update(cb: Harness) -> None:
    st_keys = [f"agent:main:interop-st-{i}" for i in range(N_ST)]
    gw_keys = [f"agent:main:interop-gw-{i}" for i in range(N_GW)]
    both_keys = [f"agent:main:interop-both-{i}" for i in range(N_BOTH)]
    spans: dict[str, list[float]] = {"st": [], "gw": []}
    failures: list[str] = []
    lock = threading.Lock()

    def mark(side: str) -> None:
        with lock:
            spans[side].append(time.monotonic())

    def st(*args: str) -> None:
        mark("st")
        proc = cb.st(*args, "--json", timeout=180)
        mark("st")
        if proc.returncode != 0:
            with lock:
                failures.append(f"sessiontool {args}: rc={proc.returncode} {proc.stderr.strip()}")

    def st_key(i: int) -> None:
        st("policy", st_keys[i], "allow", "--create")
        st("label", st_keys[i], f"st-label-{i}")

    jobs: list[Any] = [lambda i=i: st_key(i) for i in range(N_ST)]
    jobs += [lambda k=k: st("policy", k, "deny", "--create") for k in both_keys]
    jobs += [
        lambda i=i: st("send", TURNS, f"st-turn-{i}", "--timeout", "150") for i in range(N_ST_TURNS)
    ]

    patches = []
    for i, k in enumerate(gw_keys):
        patches.append(
            {"key": k, "label": f"gw-label-{i}", "thinkingLevel": "low", "sendPolicy": "deny"}
        )
    for i, k in enumerate(both_keys):
        patches.append({"key": k, "label": f"both-label-{i}", "thinkingLevel": "high"})
    gw_results: dict[str, list[dict[str, Any]]] = {}

    def gw_patches() -> None:
        mark("gw")
        # one at a time, each on its own connection: spread over the sessiontool writes
        gw_results["patch"] = cb.gw([{"method": "sessions.patch", "params": p} for p in patches])
        mark("gw")

    def gw_turns() -> None:
        calls = [
            {
                "method": "agent",
                "expectFinal": True,
                "timeoutMs": 150_000,
                "params": {
                    "sessionKey": TURNS,
                    "message": f"gw-turn-{j}",
                    "idempotencyKey": f"interop-{uuid.uuid4()}",
                },
            }
            for j in range(N_GW_TURNS)
        ]
        mark("gw")
        gw_results["turns"] = cb.gw(calls, parallel=True, timeout=240)
        mark("gw")

    # the shared session exists before the race (see the limitation above)
    cb.st_json("send", TURNS, "st-turn-pre", "--timeout", "60")
    with ThreadPoolExecutor(max_workers=6) as pool:
        futures = [pool.submit(gw_patches), pool.submit(gw_turns)]
        futures += [pool.submit(job) for job in jobs]
        for f in futures:
            f.result(timeout=300)

    assert not failures, failures
    for name, results in gw_results.items():
        bad = [r for r in results if not r["ok"]]
        assert not bad, (name, bad)
    assert all(r["result"]["status"] == "ok" for r in gw_results["turns"])
    # the two sides really overlapped in time
    assert min(spans["gw"]) < max(spans["st"]) and min(spans["st"]) < max(spans["gw"]), spans

    # -- every update of both sides is on disk ---------------------------------------------
    store = cb.store()
    for i, k in enumerate(st_keys):
        assert store[k].get("sendPolicy") == "allow" and store[k].get("label") == f"st-label-{i}", (
            k,
            store.get(k),
        )
    for i, k in enumerate(gw_keys):
        e = store[k]
        assert (e.get("label"), e.get("thinkingLevel"), e.get("sendPolicy")) == (
            f"gw-label-{i}",
            "low",
            "deny",
        ), (k, e)
    for i, k in enumerate(both_keys):
        e = store[k]
        assert (e.get("label"), e.get("thinkingLevel"), e.get("sendPolicy")) == (
            f"both-label-{i}",
            "high",
            "deny",
        ), (k, e)

    # ... and both programs read the same thing
    theirs = {r["key"]: r for r in cb.call("sessions.list", {})["sessions"]}
    ours = {
        full_key(r["key"]): r
        for r in cb.st_json("list", "--all-agents", "--limit", "all")["sessions"]
    }
    assert set(theirs) == set(ours)
    for k in st_keys + gw_keys + both_keys + [TURNS]:
        for name in ("sessionId", "updatedAt", "label", "sendPolicy", "thinkingLevel"):
            assert ours[k].get(name) == theirs[k].get(name), (
                k,
                name,
                ours[k].get(name),
                theirs[k].get(name),
            )
    for k in gw_keys:  # the gateway's override counts for sessiontool's send policy
        assert cb.st_json("policy", k) == {
            "sessionKey": k,
            "effective": "deny",
            "decidedBy": "override",
        }

    # -- the shared transcript: every turn of both sides, once, one chain -------------------
    lines = cb.transcript_lines(TURNS)
    assert_linear_chain(lines)
    msgs = [ln["message"] for ln in lines if ln.get("type") == "message"]
    users = sorted(text_of(m) for m in msgs if m["role"] == "user")
    assert users == sorted(
        ["st-turn-pre"]
        + [f"st-turn-{i}" for i in range(N_ST_TURNS)]
        + [f"gw-turn-{j}" for j in range(N_GW_TURNS)]
    )
    replies = [text_of(m) for m in msgs if m["role"] == "assistant"]
    for i in range(N_ST_TURNS):
        assert replies.count(f"echo: st-turn-{i}") == 1, replies
    for j in range(N_GW_TURNS):
        assert (
            sum(1 for r in replies if r.startswith("REPLY-") and r.endswith(f"| gw-turn-{j}")) == 1
        ), replies
    assert (
        cb.history(TURNS)["messages"] == cb.st_json("history", TURNS, "--include-tools")["messages"]
    )

    leftovers = [p.name for p in cb.sessions_dir().iterdir() if p.name.endswith((".lock", ".tmp"))]
    assert not leftovers, leftovers
