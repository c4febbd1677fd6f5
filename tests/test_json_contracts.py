"""The JSON that scripts read is a contract: the key sets of every `--json` output, pinned against
the fixture states (the real Clawdbot state dir, the real OpenClaw SQLite one) and a run of each
kind on a copy of them. A key added, renamed or dropped fails here, so an internal field never
leaks out by accident: change a contract on purpose, with the README, never as a side effect.

Rows are pinned twice: the union of their keys (nothing extra appears) and the keys every row has
(nothing is dropped)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import FIXTURE_STATE, run_json

from .runhelpers import py_command, runner_config, settle
from .test_openclaw_sqlite import OC_STATE

# -- the read commands, on the Clawdbot fixture ---------------------------------------------------

LIST_TOP = {"count", "sessions", "hasMore", "limitApplied"}  # one page (nextOffset: more pages)
LIST_ROW_ALWAYS = {
    "abortedLastRun",
    "channel",
    "contextTokens",
    "key",
    "kind",
    "model",
    "sessionId",
    "totalTokens",
    "transcriptPath",
    "updatedAt",
}
LIST_ROW_ALL = LIST_ROW_ALWAYS | {
    "deliveryContext",
    "label",
    "lastChannel",
    "systemSent",
    "thinkingLevel",
}
# `messageIds`: each message's transcript entry id, what `fork --at` and `rewind` take.
HISTORY_TOP = {"messageIds", "messages", "sessionId", "sessionKey"}
HISTORY_WITH_CHILDREN = HISTORY_TOP | {"children"}  # a session others were spawned from
MESSAGE_ALWAYS = {"content", "role", "timestamp"}
SEARCH_TOP = {"count", "engine", "hits", "query"}
SEARCH_HIT = {
    "agentId",
    "highlights",
    "key",
    "messageId",  # sessions_history --message-id reopens the hit
    "role",
    "score",
    "sessionId",
    "snippet",
    "timestamp",
    "transcriptPath",
}
USAGE_TOP = {"by", "currency", "rows", "since", "total", "until"}
USAGE_TOTAL = {"cacheRead", "cacheWrite", "cost", "input", "output", "runs", "turns"}
AGENTS_TOP = {"agents", "allowAny", "requester"}
AGENTS_ROW = {"configured", "id"}
PATHS_TOP = {
    "agents",
    "configDefault",
    "configFiles",
    "gateways",
    "index",
    "outbox",
    "runsDir",
    "stateDir",
}
PATHS_AGENT = {"exists", "format", "id", "sessionsDir", "store", "why"}
DOCTOR_TOP = {"errors", "gateway", "ok", "problems", "stores", "warnings"}
DOCTOR_PROBLEM = {"detail", "hint", "kind", "path", "severity"}
DOCTOR_STORE = {"agent", "format", "location", "reason"}
DOCTOR_GATEWAY = {
    "auth",
    "cli",
    "config",
    "handshake",
    "lockForm",
    "mode",
    "reachable",
    "spawn",
    "transport",
    "url",
    "version",
}

# -- runs and their results -------------------------------------------------------------------------

SEND_OK = {"reply", "runId", "sessionKey", "status"}  # `wait`'s
# `send` answers in OpenClaw 2026.9.6's words (issue 41): `delivery` always (`skipped` when
# nothing is announced), `targetDisposition` when accepted.
SEND_REPLIED = SEND_OK | {"delivery"}
SEND_ACCEPTED = {"runId", "sessionKey", "status", "targetDisposition", "delivery"}
SEND_NO_REPLY = {"runId", "sessionKey", "status", "message"}
SEND_NOTIFIED = {"status", "sessionKey", "notificationId", "durability", "runStarted"}
SEND_DELIVERED = SEND_OK | {"delivery"}
DELIVERY_RESULT = {"id", "mode", "status"}
SPAWN_RESULT = {"childSessionKey", "runId", "status"}
ERROR_RESULT = {"code", "error", "status"}
ABORT_RESULT = {"runId", "status"}
RUNS_TOP = {"count", "runs"}
# README "Runs: what is guaranteed": `runs --json` shows these fields of a run record, no others.
RUN_ALWAYS = {
    "agentId",
    "createdAt",
    "endedAt",
    "kind",
    "message",
    "model",
    "modelProvider",
    "provenance",
    "reply",
    "runId",
    "sessionId",
    "sessionKey",
    "startedAt",
    "status",
    "usage",
}
RUN_ALL = RUN_ALWAYS | {
    "announce",
    "announcedAt",
    "cleanup",
    "deliver",
    "followUp",
    "parentRunId",
    "requesterSessionKey",
    "startedBy",
    "step",
    "system",
    "timeoutSeconds",
    # a spawn's depth (issue 41: OpenClaw's nested spawns)
    "spawnDepth",
    "maxSpawnDepth",
}
RUN_INTERNAL = {"seq", "pid", "agentPid", "workerStartedAt", "outcome", "skipIndex"}
DELIVERIES_TOP = {"count", "deliveries"}
DELIVERY_ROW_ALWAYS = {
    "accountId",
    "channel",
    "id",
    "mode",
    "runId",
    "sessionKey",
    "status",
    "text",
    "to",
    "ts",
}
GROUP = "agent:main:discord:group:42"


def rows(data: dict[str, Any], field: str) -> tuple[set[str], set[str]]:
    """(keys some row has, keys every row has) of a non-empty list of rows."""
    items = data[field]
    assert items, f"no {field} to pin"
    keys = [set(r) for r in items]
    return set().union(*keys), set.intersection(*keys)


def ok(*args: str, state: Path, code: int = 0) -> Any:
    rc, data = run_json("--state-dir", str(state), *args)
    assert rc == code, (args, data)
    assert isinstance(data, dict), (args, data)
    return data


@pytest.fixture(scope="module")
def cb_state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One copy of the Clawdbot fixture for the read commands (search adds its index to it)."""
    dest = tmp_path_factory.mktemp("contracts") / "state"
    shutil.copytree(FIXTURE_STATE, dest)
    return dest


@pytest.fixture(scope="module")
def oc_state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("contracts-oc") / "state"
    shutil.copytree(OC_STATE, dest)
    return dest


def test_list(cb_state: Path) -> None:
    data = ok("list", "--all-agents", state=cb_state)
    assert set(data) == LIST_TOP
    assert rows(data, "sessions") == (LIST_ROW_ALL, LIST_ROW_ALWAYS)


def test_list_on_the_sqlite_store(oc_state: Path) -> None:
    data = ok("list", "--all-agents", state=oc_state)
    assert set(data) == LIST_TOP
    every = {
        "agentId",
        "channel",
        "inputTokens",
        "key",
        "kind",
        "outputTokens",
        "sessionId",
        "totalTokens",
        "updatedAt",
    }
    some = every | {
        "abortedLastRun",
        "contextTokens",
        "displayName",
        "label",
        "model",
        "modelOverride",  # the session's own model (`session --model`), as OpenClaw stores it
        "modelProvider",
        "parentSessionKey",
        "providerOverride",
        "spawnDepth",
        "spawnedBy",
        "status",
        "systemSent",
        "thinkingLevel",
    }
    assert rows(data, "sessions") == (some, every)


def test_history(cb_state: Path, oc_state: Path) -> None:
    for state in (cb_state, oc_state):
        data = ok("history", "main", state=state)
        # The OpenClaw fixture's main spawned a sub-agent; the Clawdbot one's spawned none.
        assert set(data) == (HISTORY_WITH_CHILDREN if state == oc_state else HISTORY_TOP)
        assert rows(data, "messages")[1] == MESSAGE_ALWAYS | (
            {"__openclaw"} if state == oc_state else set()
        )


def test_search(cb_state: Path, oc_state: Path) -> None:
    data = ok("search", "the", state=cb_state)
    assert set(data) == SEARCH_TOP
    assert rows(data, "hits") == (SEARCH_HIT, SEARCH_HIT)
    data = ok("search", "the", state=oc_state)
    # OpenClaw's SQLite store: no JSONL line to name, so no messageId (history reads the tail)
    in_db = SEARCH_HIT - {"messageId"}
    assert rows(data, "hits") == (in_db | {"label"}, in_db)


def test_usage(cb_state: Path) -> None:
    data = ok("usage", state=cb_state)
    assert set(data) == USAGE_TOP
    assert set(data["total"]) == USAGE_TOTAL
    assert rows(data, "rows") == (USAGE_TOTAL | {"session"},) * 2
    data = ok("usage", "--by", "model", state=cb_state)
    assert rows(data, "rows") == (USAGE_TOTAL | {"model"},) * 2


def test_agents_and_paths(cb_state: Path) -> None:
    data = ok("agents", state=cb_state)
    assert set(data) == AGENTS_TOP
    assert rows(data, "agents") == (AGENTS_ROW, AGENTS_ROW)
    data = ok("paths", state=cb_state)
    assert set(data) == PATHS_TOP
    assert rows(data, "agents") == (PATHS_AGENT, PATHS_AGENT)


def test_doctor(cb_state: Path, oc_state: Path) -> None:
    data = ok("doctor", state=cb_state, code=2)  # the fixture has warnings
    assert set(data) == DOCTOR_TOP
    assert rows(data, "problems") == (DOCTOR_PROBLEM, DOCTOR_PROBLEM)
    assert rows(data, "stores") == (DOCTOR_STORE, DOCTOR_STORE)
    assert set(data["gateway"]) == DOCTOR_GATEWAY
    data = ok("doctor", state=oc_state, code=2)  # no gateway runs to write its store
    assert set(data) == DOCTOR_TOP and set(data["gateway"]) == DOCTOR_GATEWAY


def test_runs_results_and_deliveries(tmp_path: Path, reap_workers: None) -> None:
    state = tmp_path / "state"  # the state every test's environment points at
    shutil.copytree(FIXTURE_STATE, state)
    runner_config(state, {"type": "echo"})  # a real install's state dir: no demo agent unasked
    sent = ok("send", "main", "hello", state=state)
    assert set(sent) == SEND_REPLIED and sent["status"] == "ok"
    notified = ok("send", "main", "context", "--mode", "notify", state=state)
    assert set(notified) == SEND_NOTIFIED and notified["status"] == "queued"
    accepted = ok("send", "main", "later", "--timeout", "0", state=state)
    assert set(accepted) == SEND_ACCEPTED and accepted["status"] == "accepted"
    waited = ok("wait", accepted["runId"], state=state)
    assert set(waited) == SEND_OK and waited["status"] == "ok"
    delivered = ok("send", GROUP, "news", "--deliver", state=state)
    assert set(delivered) == SEND_DELIVERED and set(delivered["delivery"]) == DELIVERY_RESULT
    spawned = ok("spawn", "a task", state=state)
    assert set(spawned) == SPAWN_RESULT
    missing = ok("send", "0b3f1e57-8a43-4c1e-9f00-1234567890ab", "x", state=state, code=3)
    assert set(missing) == ERROR_RESULT
    settle(state, timeout=60)  # the spawn's announce and the delivery are done

    listing = ok("runs", state=state)
    assert set(listing) == RUNS_TOP
    some, every = rows(listing, "runs")
    # Which optional fields a run has depends on its flow (steps, announce): pinned as a set
    # they may come from, with the ones every run has.
    assert every >= RUN_ALWAYS and some <= RUN_ALL, (some - RUN_ALL, RUN_ALWAYS - every)
    assert not some & RUN_INTERNAL
    one = ok("runs", accepted["runId"], state=state)
    assert RUN_ALWAYS <= set(one) <= RUN_ALL
    assert not set(one) & RUN_INTERNAL
    with_log = ok("runs", accepted["runId"], "--log", state=state)
    assert set(with_log) == set(one) | {"log"}

    outbox = ok("deliveries", state=state)
    assert set(outbox) == DELIVERIES_TOP
    assert rows(outbox, "deliveries")[1] == DELIVERY_ROW_ALWAYS
    assert rows(outbox, "deliveries")[0] <= DELIVERY_ROW_ALWAYS | {"error"}


def test_abort_result(state: Path, reap_workers: None) -> None:
    runner_config(state, py_command("import sys,time; sys.stdin.read(); time.sleep(30)"))
    accepted = ok("send", "main", "long", "--timeout", "0", state=state)
    aborted = ok("abort", accepted["runId"], state=state)
    assert set(aborted) == ABORT_RESULT and aborted["status"] == "aborted"
    run = ok("runs", accepted["runId"], state=state)
    assert run["status"] == "aborted" and not set(run) & RUN_INTERNAL
