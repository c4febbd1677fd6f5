"""Who may see, read and message what (spec §1 requester, §8 policies), through the real CLI:
send policy, sandbox visibility, sub-agent tool access, agent-to-agent access, and agents that
call the tools themselves with the environment their worker gave them."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import AGENTS_DIR, run_cli, run_json, write_config
from tests.runhelpers import alive, records, store_path, text_of, transcript_messages

FINISHED = ("ok", "error", "timeout", "aborted", "lost")
WORK = "agent:main:work"
C1 = "agent:main:subagent:c1"
C2 = "agent:main:subagent:c2"
DISCORD = "agent:main:discord:group:1"
TELEGRAM = "agent:main:telegram:group:9"


pytestmark = pytest.mark.usefixtures("reap_workers")


def seed(state: Path, entries: dict[str, dict[str, Any]], agent: str = "main") -> None:
    """An index, and for every entry a transcript holding one user message naming its key."""
    sdir = store_path(state, agent).parent
    sdir.mkdir(parents=True, exist_ok=True)
    store = {}
    for i, (key, extra) in enumerate(entries.items()):
        sid = extra.pop("sessionId", f"{agent}-s{i}")
        store[key] = {"sessionId": sid, "updatedAt": 1_700_000_000_000 + i, **extra}
        header = {
            "type": "session",
            "version": 3,
            "id": sid,
            "timestamp": "2026-01-01T00:00:00.000Z",
            "cwd": "/",
        }
        line = {
            "type": "message",
            "id": "0000000a",
            "parentId": None,
            "timestamp": "2026-01-01T00:00:00.000Z",
            "message": {"role": "user", "content": f"hello {key}", "timestamp": 1},
        }
        (sdir / f"{sid}.jsonl").write_text(json.dumps(header) + "\n" + json.dumps(line) + "\n")
    store_path(state, agent).write_text(json.dumps(store))


@pytest.fixture
def family(state: Path) -> None:
    """main, a worker session `work`, a child `work` spawned and a child someone else did."""
    seed(
        state,
        {
            "agent:main:main": {},
            WORK: {},
            C1: {"spawnedBy": WORK, "label": "mine"},
            C2: {"spawnedBy": "agent:main:other", "label": "theirs"},
        },
    )


def keys_of(listing: dict[str, Any]) -> list[str]:
    return sorted(row["key"] for row in listing["sessions"])


def settle(state: Path, timeout: float = 20.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        recs = records(state)
        live = [r for r in recs if isinstance(r.get("pid"), int) and alive(r["pid"])]
        locks = [
            p for p in (state / "sessiontool" / "runs").glob("*.lock") if not p.name.startswith(".")
        ]
        if all(r.get("status") in FINISHED for r in recs) and not live and not locks:
            return recs
        time.sleep(0.05)
    raise AssertionError("runs did not finish")


SANDBOXED = {"SESSIONTOOL_SANDBOXED": "1"}


# -- sandbox visibility ---------------------------------------------------------------------


def test_sandboxed_requester_lists_only_sessions_it_spawned(state: Path, family: None) -> None:
    rc, out = run_json("--as", WORK, "list", env=SANDBOXED)
    assert rc == 0 and keys_of(out) == [C1]
    # The same session without the sandbox sees its whole agent.
    rc, out = run_json("--as", WORK, "list")
    assert rc == 0 and keys_of(out) == sorted(["main", WORK, C1, C2])
    # sandbox.mode "all" sandboxes every session without the env var ...
    write_config(state, {"agents": {"defaults": {"sandbox": {"mode": "all"}}}})
    rc, out = run_json("list", env={"SESSIONTOOL_SESSION_KEY": WORK})
    assert rc == 0 and keys_of(out) == [C1]
    # ... and sessionToolsVisibility "all" lifts the restriction.
    write_config(
        state,
        {"agents": {"defaults": {"sandbox": {"mode": "all", "sessionToolsVisibility": "all"}}}},
    )
    rc, out = run_json("--as", WORK, "list")
    assert rc == 0 and keys_of(out) == sorted(["main", WORK, C1, C2])


def test_sandbox_non_main_mode_spares_the_main_session(state: Path, family: None) -> None:
    write_config(state, {"agents": {"defaults": {"sandbox": {"mode": "non-main"}}}})
    rc, out = run_json("--as", "main", "list")
    assert rc == 0 and len(out["sessions"]) == 4
    rc, out = run_json("--as", WORK, "list")
    assert rc == 0 and keys_of(out) == [C1]


def test_sandboxed_requester_cannot_read_or_message_others(state: Path, family: None) -> None:
    before = store_path(state).read_bytes()
    for key in (C2, "main"):
        rc, out = run_json("--as", WORK, "history", key, env=SANDBOXED)
        assert rc == 4, out
        assert out["status"] == "forbidden"
        assert out["error"] == f"Session not visible from this sandboxed agent session: {key}"
    for key in (C2, "main", "agent:main:brand-new"):
        rc, out = run_json("--as", WORK, "send", key, "psst", "--timeout", "0", env=SANDBOXED)
        assert rc == 4, out
        assert out["error"] == f"Session not visible from this sandboxed agent session: {key}"
        assert out["sessionKey"] == key
    assert records(state) == []
    assert store_path(state).read_bytes() == before
    # Its own child is readable.
    rc, out = run_json("--as", WORK, "history", C1, env=SANDBOXED)
    assert rc == 0 and [text_of(m) for m in out["messages"]] == [f"hello {C1}"]


def test_sandboxed_requester_may_message_its_child(state: Path, family: None) -> None:
    rc, out = run_json(
        "--as", WORK, "send", C1, "how is it going", "--timeout", "20", env=SANDBOXED
    )
    assert rc == 0, out
    assert out["reply"] == "echo: how is it going"
    recs = settle(state)
    (send,) = [r for r in recs if r["kind"] == "send"]
    assert send["requesterSessionKey"] == WORK and send["sessionKey"] == C1


# -- sub-agent requesters -------------------------------------------------------------------


SUBAGENT = "agent:main:subagent:x"


def test_subagent_has_no_session_tools_by_default(state: Path, family: None) -> None:
    for args, tool in (
        (("list",), "sessions_list"),
        (("history", "main"), "sessions_history"),
        (("send", "main", "hi"), "sessions_send"),
        (("agents",), "agents_list"),
    ):
        rc, out = run_json("--as", SUBAGENT, *args)
        assert rc == 4, (args, out)
        assert out["status"] == "forbidden"
        assert out["error"] == f"{tool} is not available to sub-agent sessions"
    proc = run_cli("list", env={"SESSIONTOOL_SESSION_KEY": SUBAGENT})
    assert proc.returncode == 4 and proc.stdout == ""
    assert proc.stderr.startswith(
        "sessiontool: error: sessions_list is not available to sub-agent sessions"
    )
    assert records(state) == []


def test_subagent_tools_allow_grants_exactly_those_tools(state: Path, family: None) -> None:
    write_config(
        state, {"tools": {"subagents": {"tools": {"allow": ["sessions_list", "sessions_history"]}}}}
    )
    rc, out = run_json("--as", SUBAGENT, "list")
    assert rc == 0 and keys_of(out) == sorted(["main", WORK, C1, C2])
    rc, out = run_json("--as", SUBAGENT, "history", "main")
    assert rc == 0 and [text_of(m) for m in out["messages"]] == ["hello agent:main:main"]
    rc, out = run_json("--as", SUBAGENT, "send", "main", "hi")
    assert rc == 4 and out["error"] == "sessions_send is not available to sub-agent sessions"
    assert records(state) == []


# -- agent-to-agent across agents -----------------------------------------------------------


@pytest.fixture
def two_agents(state: Path) -> None:
    seed(state, {"agent:main:main": {}})
    seed(state, {"agent:research:main": {}, "agent:research:discord:group:5": {}}, agent="research")


HISTORY_DISABLED = "Agent-to-agent history is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent access."
SEND_DISABLED = "Agent-to-agent messaging is disabled. Set tools.agentToAgent.enabled=true to allow cross-agent sends."


def test_cross_agent_access_is_off_by_default(state: Path, two_agents: None) -> None:
    rc, out = run_json("--as", "agent:main:main", "history", "agent:research:main")
    assert rc == 4 and out["error"] == HISTORY_DISABLED
    rc, out = run_json("--as", "agent:main:main", "send", "agent:research:main", "hi")
    assert rc == 4 and out["error"] == SEND_DISABLED and out["status"] == "forbidden"
    rc, out = run_json("--as", "agent:main:main", "list")
    assert rc == 0 and keys_of(out) == ["main"]
    assert records(state) == []
    # The operator is not an agent: no agent-to-agent limits.
    rc, out = run_json("history", "agent:research:main")
    assert rc == 0 and [text_of(m) for m in out["messages"]] == ["hello agent:research:main"]


def test_cross_agent_allow_list_must_name_both_agents(state: Path, two_agents: None) -> None:
    write_config(state, {"tools": {"agentToAgent": {"enabled": True, "allow": ["main"]}}})
    rc, out = run_json("--as", "agent:main:main", "history", "agent:research:main")
    assert rc == 4 and out["error"] == "Agent-to-agent history denied by tools.agentToAgent.allow."
    rc, out = run_json("--as", "agent:main:main", "send", "agent:research:main", "hi")
    assert (
        rc == 4 and out["error"] == "Agent-to-agent messaging denied by tools.agentToAgent.allow."
    )
    rc, out = run_json("--as", "agent:main:main", "list")
    assert keys_of(out) == ["main"]
    assert records(state) == []

    write_config(state, {"tools": {"agentToAgent": {"enabled": True, "allow": ["main", "res*"]}}})
    rc, out = run_json("--as", "agent:main:main", "history", "agent:research:main")
    assert rc == 0 and out["sessionKey"] == "agent:research:main"
    rc, out = run_json("--as", "agent:main:main", "list")
    assert keys_of(out) == sorted(["main", "agent:research:main", "agent:research:discord:group:5"])


# -- send policy ----------------------------------------------------------------------------


@pytest.fixture
def discord_deny(state: Path) -> None:
    write_config(
        state,
        {
            "session": {
                "sendPolicy": {
                    "rules": [
                        {"match": {"channel": "discord", "chatType": "group"}, "action": "deny"}
                    ]
                }
            }
        },
    )
    # Real group entries often name the gateway's internal channel: the key's channel decides.
    seed(
        state,
        {"agent:main:main": {}, DISCORD: {"channel": "webchat", "chatType": "group"}, TELEGRAM: {}},
    )


def test_deny_rule_refuses_the_send_and_changes_nothing(state: Path, discord_deny: None) -> None:
    transcript = store_path(state).parent / "main-s1.jsonl"
    before = (store_path(state).read_bytes(), transcript.read_bytes())
    for requester in ((), ("--as", "main")):
        rc, out = run_json(*requester, "send", DISCORD, "hello", "--timeout", "5")
        assert rc == 4, out
        assert out == {
            "status": "forbidden",
            "error": "send blocked by session policy",
            "code": 4,
            "sessionKey": DISCORD,
        }
    # A discord group the index has never seen is caught too, and not created.
    rc, out = run_json("send", "agent:main:discord:group:2", "hello")
    assert rc == 4 and out["status"] == "forbidden"
    assert (store_path(state).read_bytes(), transcript.read_bytes()) == before
    assert records(state) == []
    proc = run_cli("send", DISCORD, "hello")
    assert proc.returncode == 4 and proc.stdout == ""
    assert "send blocked by session policy" in proc.stderr

    rc, out = run_json("send", TELEGRAM, "hello", "--timeout", "20")
    assert rc == 0 and out["reply"] == "echo: hello"
    rc, out = run_json("policy", DISCORD)
    assert out == {"sessionKey": DISCORD, "effective": "deny", "decidedBy": "rule #1"}


def test_session_override_beats_the_rule(state: Path, discord_deny: None) -> None:
    rc, out = run_json("policy", DISCORD, "allow")
    assert rc == 0 and out["effective"] == "allow" and out["decidedBy"] == "override"
    rc, out = run_json("policy", DISCORD)
    assert out == {"sessionKey": DISCORD, "effective": "allow", "decidedBy": "override"}
    rc, out = run_json("send", DISCORD, "now allowed", "--timeout", "20")
    assert rc == 0 and out["reply"] == "echo: now allowed"
    rc, out = run_json("policy", DISCORD, "inherit")
    assert rc == 0 and out["decidedBy"] == "rule #1"
    rc, out = run_json("send", DISCORD, "denied again")
    assert rc == 4


def test_slash_send_off_sets_the_override_and_runs_no_agent(
    state: Path, discord_deny: None
) -> None:
    transcript = store_path(state).parent / "main-s2.jsonl"
    before = transcript.read_bytes()
    rc, out = run_json("send", TELEGRAM, "/send off")
    assert rc == 0, out
    assert out == {"status": "ok", "sessionKey": TELEGRAM, "sendPolicy": "deny"}
    assert records(state) == [] and transcript.read_bytes() == before
    assert json.loads(store_path(state).read_text())[TELEGRAM]["sendPolicy"] == "deny"
    rc, out = run_json("send", TELEGRAM, "hello")
    assert rc == 4 and out["error"] == "send blocked by session policy"
    rc, out = run_json("policy", TELEGRAM)
    assert out["decidedBy"] == "override" and out["effective"] == "deny"
    rc, out = run_json("send", TELEGRAM, " /send inherit ")
    assert rc == 0 and out["sendPolicy"] is None
    assert "sendPolicy" not in json.loads(store_path(state).read_text())[TELEGRAM]
    # `/send on` overrides the deny rule of a discord group, still without a run.
    rc, out = run_json("send", DISCORD, "/send on")
    assert rc == 0 and out["sendPolicy"] == "allow"
    assert records(state) == []
    assert transcript.read_bytes() == before


# -- agents that call the tools themselves --------------------------------------------------


def nested_runner(state: Path, **defaults: Any) -> None:
    runner = {
        "type": "command",
        "command": [sys.executable, str(AGENTS_DIR / "nested.py")],
        "input": "json",
        "output": "json",
    }
    write_config(state, {"agents": {"defaults": {"runner": runner, **defaults}}})


def calls_message(*calls: list[str]) -> str:
    return json.dumps([list(c) for c in calls])


def test_agent_process_acts_as_its_own_sandboxed_session(state: Path, family: None) -> None:
    # Nobody sets SESSIONTOOL_SANDBOXED here: the worker does, because `work` is not main.
    nested_runner(state, sandbox={"mode": "non-main"})
    msg = calls_message(
        ["list", "--json"], ["history", "main", "--json"], ["history", C1, "--json"]
    )
    rc, out = run_json("send", WORK, msg, "--timeout", "30")
    assert rc == 0, out
    reply = json.loads(out["reply"])
    env = reply["env"]
    assert env["SESSIONTOOL_SESSION_KEY"] == WORK
    assert env["SESSIONTOOL_SANDBOXED"] == "1"
    assert env["SESSIONTOOL_RUN_ID"] == out["runId"]
    assert env["SESSIONTOOL_AGENT_ID"] == "main"
    assert Path(env["SESSIONTOOL_STATE_DIR"]).resolve() == state.resolve()
    listed, hist_main, hist_child = reply["calls"]
    assert listed["rc"] == 0, listed["stderr"]
    assert keys_of(json.loads(listed["stdout"])) == [C1]
    assert hist_main["rc"] == 4
    assert (
        json.loads(hist_main["stdout"])["error"]
        == "Session not visible from this sandboxed agent session: main"
    )
    assert hist_child["rc"] == 0
    assert [text_of(m) for m in json.loads(hist_child["stdout"])["messages"]] == [f"hello {C1}"]


def test_spawned_subagent_process_has_no_session_tools(state: Path) -> None:
    nested_runner(state)
    task = calls_message(["list", "--json"], ["send", "main", "hi", "--json"])
    rc, out = run_json("spawn", task)
    assert rc == 0 and out["status"] == "accepted"
    child = out["childSessionKey"]
    recs = settle(state)
    (spawn,) = [r for r in recs if r["kind"] == "spawn"]
    assert spawn["status"] == "ok", spawn
    reply = json.loads(spawn["reply"])
    assert reply["env"]["SESSIONTOOL_SESSION_KEY"] == child
    listed, sent = reply["calls"]
    assert (
        listed["rc"] == 4
        and "sessions_list is not available to sub-agent sessions" in listed["stderr"]
    )
    assert (
        sent["rc"] == 4
        and json.loads(sent["stdout"])["error"]
        == "sessions_send is not available to sub-agent sessions"
    )
    # Only the spawn and its (silent) announce step ran: the refused send created no run.
    assert sorted(r["kind"] for r in recs) == ["spawn", "step"]


def test_nested_send_is_agent_to_agent_and_turn_one_waits_for_the_requester_run(
    state: Path,
) -> None:
    nested_runner(state)
    msg = calls_message(["send", "main", "ping", "--timeout", "20", "--json"])
    rc, out = run_json("send", WORK, msg, "--timeout", "30")
    assert rc == 0, out
    (call,) = json.loads(out["reply"])["calls"]
    assert call["rc"] == 0, call["stderr"]
    inner = json.loads(call["stdout"])
    assert (
        inner["status"] == "ok"
        and inner["reply"] == "nested: ping"
        and inner["sessionKey"] == "main"
    )
    assert inner["delivery"] == {"status": "pending", "mode": "announce"}
    recs = settle(state)
    outer = next(r for r in recs if r["runId"] == out["runId"])
    nested = next(r for r in recs if r["runId"] == inner["runId"])
    assert nested["requesterSessionKey"] == WORK and nested["sessionKey"] == "agent:main:main"
    (turn1,) = [r for r in recs if r.get("step") == "reply"]
    assert turn1["sessionKey"] == WORK and turn1["parentRunId"] == nested["runId"]
    # Turn 1 runs in the requester's lane: only after the run that called send had ended.
    assert turn1["startedAt"] >= outer["endedAt"]
    (announce,) = [r for r in recs if r.get("step") == "announce"]
    assert announce["sessionKey"] == "agent:main:main" and announce["reply"] == "ANNOUNCE_SKIP"
    msgs = transcript_messages(state)
    assert msgs["agent:main:main"][0]["provenance"]["sourceSessionKey"] == WORK
    assert msgs["agent:main:main"][0]["provenance"]["kind"] == "inter_session"
