"""Spawn and agent-to-agent on the real OpenClaw 2026.9.6, each action done once by sessiontool
and once by OpenClaw's own tool (`openclaw gateway call tools.invoke`), their child rows
(`sessions.list`) and transcripts (`chat.history`) compared field by field.

- With `gateway.tools.allow: ["sessions_spawn", "sessions_send"]` sessiontool runs those very
  tools (openclaw/own_tools.py): no difference but ids, times and the label asked for.
- Without it (`tools.invoke` answers `not_found`) sessiontool emulates them with the public
  methods: its child differs from one OpenClaw's own tool made only in the fields
  docs/openclaw.md lists ("What the emulation cannot write")."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest

from .conftest import Live, running
from .test_openclaw_gateway import _gw, st

TASK = "Summarize the weather report (fixture)"  # the fixture's own child was given this task
FIXTURE_CHILD = "agent:main:subagent:96e0c7a6-e46b-424e-a8eb-556208f4ca46"  # by OpenClaw's tool
# What differs between any two sessions made the same way: ids, times, the label asked for.
VOLATILE = {
    "key",
    "sessionId",
    "label",
    "displayName",
    "lastRunId",
    "runtimeMs",
    "createdAt",
    "updatedAt",
    "startedAt",
    "endedAt",
    "lastActivityAt",
    "lastInteractionAt",
    "createdAtMs",
    "updatedAtMs",
    "stateChangedAtMs",
}
# The emulation's child (public methods only) against OpenClaw's own: docs/openclaw.md.
EMULATION_DIFFERS = {
    "spawnedBy",
    "createdVia",
    "createdActor",
    "owner",
    "controlOwnerSessionKey",
    "spawnedWorkspaceDir",
    "workspaceDir",
    "subagentRole",
    "subagentControlScope",
    "subagentRunState",
    "hasActiveSubagentRun",
    "abortedLastRun",
    "parentSessionId",
    "fastMode",
    "effectiveFastModeSource",
    "modelOverrideSource",
    "thinkingLevel",
    "inputTokens",  # the first message differs: the bare task, not OpenClaw's wrapper
    "totalTokens",
    "contextBudgetStatus",  # its prompt estimate, from that same message
}


@pytest.fixture(scope="module")
def allowed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    with running(tmp_path_factory.mktemp("oc-tools"), allow_own_tools=True) as it:
        yield it


def norm(value: Any) -> Any:
    """A row or message without what differs between two made the same way."""
    if isinstance(value, dict):
        return {k: norm(v) for k, v in value.items() if k not in VOLATILE and k != "__openclaw"}
    if isinstance(value, list):
        return [norm(v) for v in value]
    if isinstance(value, str):
        return re.sub(r"ECHO#\d+", "ECHO#n", value)
    return value


def rows(live: Live) -> dict[str, dict[str, Any]]:
    return {r["key"]: r for r in _gw(live, "sessions.list", {"limit": 500})["sessions"]}


def messages(live: Live, key: str, n: int = 40) -> list[dict[str, Any]]:
    """A transcript as chat.history gives it, without ids, times and usage."""
    out = []
    for m in _gw(live, "chat.history", {"sessionKey": key, "limit": n})["messages"]:
        kept = {k: v for k, v in m.items() if k not in ("timestamp", "responseId", "usage")}
        kept.pop("idempotencyKey", None)
        out.append(norm(kept))
    return out


def until_done(live: Live, run_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 300
    while True:
        rec: dict[str, Any] = json.loads(st(live.env, live.state, "--json", "runs", run_id).stdout)
        if (rec.get("followUp") or {}).get("next") == "done" or time.monotonic() > deadline:
            return rec
        time.sleep(1)


def settled(live: Live, key: str) -> list[dict[str, Any]]:
    """The session's transcript once OpenClaw's own follow-up turns are over (unchanged for 5 s)."""
    deadline = time.monotonic() + 300
    last = messages(live, key)
    while time.monotonic() < deadline:
        time.sleep(5)
        now = messages(live, key)
        if now == last:
            return now
        last = now
    return last


def test_spawn_is_openclaws_own_sessions_spawn(allowed: Live) -> None:
    proc = st(allowed.env, allowed.state, "--json", "doctor")
    assert json.loads(proc.stdout)["gateway"]["spawn"] == "OpenClaw's own sessions_spawn"
    proc = st(allowed.env, allowed.state, "--json", "spawn", TASK, "--label", "child-a")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["tool"] == "sessions_spawn"
    rec = until_done(allowed, out["runId"])
    assert rec["status"] == "ok" and rec["tool"] == "sessions_spawn", rec
    args = {"task": TASK, "label": "child-b", "cleanup": "keep"}
    answer = _gw(
        allowed, "tools.invoke", {"name": "sessions_spawn", "sessionKey": "main", "args": args}
    )
    theirs = answer["output"]["details"]
    assert _gw(allowed, "agent.wait", {"runId": theirs["runId"], "timeoutMs": 120000})["status"]
    ours_key, their_key = rec["sessionKey"], theirs["childSessionKey"]
    if not ours_key.startswith("agent:"):
        ours_key = "agent:main:" + ours_key
    table = rows(allowed)
    a, b = table[ours_key], table[their_key]
    assert (a["spawnedBy"], a["createdVia"], a["label"]) == ("agent:main:main", "spawn", "child-a")
    assert a["lastRunId"] == rec["gatewayRunId"]
    assert norm(a) == norm(b)
    assert ours_key in table["agent:main:main"]["childSessions"]
    # The child's transcript: OpenClaw's "[Subagent Context] … [Subagent Task]" message, then
    # the reply; the same, but for ids and times.
    ours_msgs, their_msgs = messages(allowed, ours_key), messages(allowed, their_key)
    assert ours_msgs == their_msgs
    assert ours_msgs[0]["role"] == "user" and "[Subagent Task]" in ours_msgs[0]["content"]
    # The announce in the requester is OpenClaw's form: its run `announce:v1:<child>:<run>`
    # left only the requester's reply, no user message.
    announce = rec["followUp"]["announceRunId"]
    assert announce == f"announce:v1:{ours_key}:{rec['gatewayRunId']}"
    deadline = time.monotonic() + 300
    while True:
        hist = _gw(allowed, "chat.history", {"sessionKey": "agent:main:main", "limit": 40})
        mine = [m for m in hist["messages"] if (m.get("__openclaw") or {}).get("runId") == announce]
        if mine or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert mine and {m["role"] for m in mine} == {"assistant"}, hist["messages"][-6:]
    assert "Status: ok" not in json.dumps(hist["messages"])


def _full(key: str) -> str:
    return key if key.startswith("agent:") else "agent:main:" + key


def test_a_run_timeout_is_recorded_as_openclaw_records_it(allowed: Live) -> None:
    """`--run-timeout` is the tool's runTimeoutSeconds: sessiontool's record says `timeout` when
    the run was cut, whatever agent.wait says (2026.9.6: `ok`, the row `timeout`; under load
    `error`, the row `failed`); a run whose exec returned early is `done`/`ok` in both."""
    proc = st(
        allowed.env,
        allowed.state,
        "--json",
        "spawn",
        'TOOL[exec]{"command":"sleep 30","yieldMs":60000}',
        "--run-timeout",
        "3",
        "--label",
        "slow",
    )
    assert proc.returncode == 0, proc.stderr
    run_id = json.loads(proc.stdout)["runId"]
    st(allowed.env, allowed.state, "--json", "wait", run_id, "--timeout", "300")
    rec = until_done(allowed, run_id)
    row = rows(allowed)[_full(rec["sessionKey"])]
    # Under load 2026.9.6 ends the cut run `error` and its row says `failed`: still a timeout.
    pairs = (("timeout", "timeout"), ("timeout", "failed"), ("ok", "done"))
    assert (rec["status"], row["status"]) in pairs, (rec, row)
    if rec["status"] == "timeout":
        assert "--run-timeout" in rec["error"]


def test_cleanup_delete_is_openclaws(allowed: Live) -> None:
    proc = st(allowed.env, allowed.state, "--json", "spawn", "brief job", "--cleanup", "delete")
    assert proc.returncode == 0, proc.stderr
    rec = until_done(allowed, json.loads(proc.stdout)["runId"])
    assert rec["status"] == "ok", rec
    key = _full(rec["sessionKey"])
    deadline = time.monotonic() + 120
    while key in rows(allowed) and time.monotonic() < deadline:  # OpenClaw archives it
        time.sleep(2)
    assert key not in rows(allowed)
    # The archive is OpenClaw's (its cleanup argument): test_gateway_own_tools.py checks that
    # sessiontool sends no sessions.delete of its own.


def test_send_as_is_openclaws_own_sessions_send(allowed: Live) -> None:
    ours_target, their_target = (
        "agent:main:telegram:group:-100555",
        "agent:main:slack:channel:c0123",
    )
    before_ours, before_theirs = (
        len(messages(allowed, ours_target)),
        len(messages(allowed, their_target)),
    )
    proc = st(
        allowed.env,
        allowed.state,
        "--as",
        "main",
        "--json",
        "send",
        ours_target,
        "a2a same words",
        "--timeout",
        "300",
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == "ok" and "a2a same words" in out["reply"]
    rec = json.loads(st(allowed.env, allowed.state, "--json", "runs", out["runId"]).stdout)
    assert rec["tool"] == "sessions_send"
    args = {"sessionKey": their_target, "message": "a2a same words", "timeoutSeconds": 120}
    answer = _gw(
        allowed, "tools.invoke", {"name": "sessions_send", "sessionKey": "main", "args": args}
    )
    assert answer["output"]["details"]["status"] == "ok"
    ours = settled(allowed, ours_target)[before_ours:]
    theirs = settled(allowed, their_target)[before_theirs:]
    # The target's new messages: the inter-session message (shown as the requester's), the
    # reply; the announce step left nothing visible. The same, but for ids and times.
    assert ours == theirs and ours, (ours, theirs)
    first = ours[0]
    assert first["content"] == "a2a same words"
    prov = first.get("provenance") or first.get("inputProvenance")
    assert prov["sourceTool"] == "sessions_send", first


def test_without_the_allow_entry_the_emulation_differs_only_as_documented(live: Live) -> None:
    proc = st(live.env, live.state, "--json", "doctor")
    assert json.loads(proc.stdout)["gateway"]["spawn"].startswith("emulated; add sessions_spawn")
    denied = _gw(live, "tools.invoke", {"name": "sessions_spawn", "sessionKey": "main", "args": {}})
    assert (denied["ok"], denied["error"]["code"]) == (False, "not_found")
    proc = st(live.env, live.state, "--json", "spawn", TASK, "--label", "emulated-child")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert "tool" not in out
    rec = until_done(live, out["runId"])
    key = (
        rec["sessionKey"]
        if rec["sessionKey"].startswith("agent:")
        else "agent:main:" + rec["sessionKey"]
    )
    table = rows(live)
    a, b = norm(table[key]), norm(table[FIXTURE_CHILD])
    differ = {k for k in set(a) | set(b) if a.get(k) != b.get(k)}
    assert differ <= EMULATION_DIFFERS, differ - EMULATION_DIFFERS
    assert a["parentSessionKey"] == b["parentSessionKey"] == "agent:main:main"
    assert a["spawnDepth"] == b["spawnDepth"] == 1
    # The announce is OpenClaw's form here too: no visible Status/Result message.
    hist = _gw(live, "chat.history", {"sessionKey": "agent:main:main", "limit": 40})
    assert "Status: ok" not in json.dumps(hist["messages"])
