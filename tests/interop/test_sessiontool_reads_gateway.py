"""sessiontool reads back turns the real program appended to sessions sessiontool created, and the
two programs keep one transcript between them (one header, one unbranched parentId chain).

The gateway's `agent` method runs a real Clawdbot turn against the fake LLM (as cb_drive.sh
does). The fake replies `REPLY-<n> | <text>` with n = the user messages in the request, so
`REPLY-2` proves the real program took sessiontool's earlier turn as conversation context.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid

from .conftest import Harness
from .support import assert_linear_chain, full_key, text_of


def _row(cb: Harness, key: str) -> dict:
    rows = cb.st_json("list", "--all-agents", "--limit", "all")["sessions"]
    return next(r for r in rows if full_key(r["key"]) == key)


def test_sessiontool_reads_a_turn_the_gateway_appended(cb: Harness) -> None:
    key = "agent:main:dm:interop-carol"
    first = "carol: first, from sessiontool"
    cb.st_json("send", key, first, "--timeout", "60")
    sid = cb.store()[key]["sessionId"]
    path = cb.sessions_dir() / f"{sid}.jsonl"
    assert path.is_file()

    second = "carol: second, via the gateway"
    res = cb.agent_turn(key, second, f"interop-{uuid.uuid4()}")
    assert res["result"]["payloads"][0]["text"] == f"REPLY-2 | {second}"
    assert res["result"]["meta"]["agentMeta"]["sessionId"] == sid  # our session, not a new one

    # the model request the real program built contained sessiontool's turn
    req = next(r for r in reversed(cb.llm_requests()) if second in json.dumps(r["messages"]))
    context = json.dumps(req["messages"], ensure_ascii=False)
    assert first in context and f"echo: {first}" in context

    # sessiontool reads the real program's turn
    hist = cb.st_json("history", key, "--include-tools")
    assert hist["sessionId"] == sid
    msgs = hist["messages"]
    assert [(m["role"], text_of(m)) for m in msgs] == [
        ("user", first),
        ("assistant", f"echo: {first}"),
        ("user", second),
        ("assistant", f"REPLY-2 | {second}"),
    ]
    assert (msgs[3]["provider"], msgs[3]["model"], msgs[3]["api"]) == (
        "fake",
        "fake-model",
        "openai-completions",
    )
    entry = cb.store()[key]
    row = _row(cb, key)
    assert row["sessionId"] == sid and row["model"] == "fake-model"
    assert row["totalTokens"] == entry["totalTokens"] and row["updatedAt"] == entry["updatedAt"]
    lines = cb.transcript_lines(key)
    assert_linear_chain(lines)
    gateway_last = lines[-1]["id"]

    # sessiontool continues the same transcript after the real program's entries
    third = "carol: third, from sessiontool"
    cb.st_json("send", key, third, "--timeout", "60")
    lines = cb.transcript_lines(key)
    assert_linear_chain(lines)
    ours = [ln for ln in lines if ln.get("type") == "message" and text_of(ln["message"]) == third]
    assert ours and ours[0]["parentId"] == gateway_last
    assert cb.store()[key]["sessionId"] == sid
    st = cb.st_json("history", key, "--include-tools")["messages"]
    gw = cb.history(key)["messages"]
    assert gw == st and len(st) == 6

    # and the real program takes all of it as context for its next turn
    res = cb.agent_turn(key, "carol: fourth, via the gateway", f"interop-{uuid.uuid4()}")
    assert res["result"]["payloads"][0]["text"].startswith("REPLY-4 | ")


def test_gateway_turn_in_an_entry_sessiontool_created(cb: Harness) -> None:
    """A store entry made by sessiontool with no transcript yet (as `policy` leaves it): the real
    program keeps its sessionId and fields, starts the transcript, and sessiontool reads it."""
    key = "agent:main:dm:interop-dave"
    out = cb.st_json("policy", key, "allow", "--create")
    assert out["effective"] == "allow"
    entry = cb.store()[key]
    sid = entry["sessionId"]
    assert not (cb.sessions_dir() / f"{sid}.jsonl").exists()

    res = cb.agent_turn(key, "dave: hello gateway", f"interop-{uuid.uuid4()}")
    assert res["result"]["meta"]["agentMeta"]["sessionId"] == sid
    after = cb.store()[key]
    assert after["sessionId"] == sid and after["sendPolicy"] == "allow"
    hist = cb.st_json("history", key)
    assert [(m["role"], text_of(m)) for m in hist["messages"]] == [
        ("user", "dave: hello gateway"),
        ("assistant", "REPLY-1 | dave: hello gateway"),
    ]
    assert_linear_chain(cb.transcript_lines(key))
    assert cb.st_json("policy", key)["decidedBy"] == "override"


HOLDER = r"""
import json, os, sys, time
from pathlib import Path
from sessiontool.clock import now_ms
from sessiontool.state.locks import transcript_lock
path, hold = Path(sys.argv[1]), float(sys.argv[2])
lock = path.with_name(path.name + ".lock")
with transcript_lock(path, timeout=10):
    print("held", flush=True)
    time.sleep(hold)
    try:
        info = json.loads(lock.read_text())
    except (OSError, ValueError):
        info = None
    intact = bool(info) and info.get("pid") == os.getpid()
    print(json.dumps({"intact": intact, "lock": info, "releasedAt": now_ms()}), flush=True)
"""


def test_gateway_waits_for_a_sessiontool_transcript_lock(cb: Harness) -> None:
    """While sessiontool holds `<transcript>.lock`, the real program's turn waits for it rather
    than breaking it (Clawdbot 2026.1 only honours a lock whose `createdAt` is an ISO string)."""
    key = "agent:main:dm:interop-lock"
    cb.st_json("send", key, "before the lock", "--timeout", "60")
    path = cb.sessions_dir() / f"{cb.store()[key]['sessionId']}.jsonl"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path), "4"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cb.st_env,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held", (
            holder.stderr.read() if holder.stderr else ""
        )
        started = time.monotonic()
        cb.agent_turn(key, "during the lock", f"interop-{uuid.uuid4()}", timeout_ms=60_000)
        waited = time.monotonic() - started
        out, err = holder.communicate(timeout=30)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    report = json.loads(out.strip().splitlines()[-1])
    assert report["intact"], f"the real program broke sessiontool's transcript lock: {report} {err}"
    reply = [ln["message"] for ln in cb.transcript_lines(key) if ln.get("type") == "message"][-1]
    assert reply["role"] == "assistant" and reply["timestamp"] >= report["releasedAt"]
    assert waited > 2.0
    assert_linear_chain(cb.transcript_lines(key))
