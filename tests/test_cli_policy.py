"""`sessiontool policy`: the effective decision, and setting / clearing the override on disk."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import run_cli, run_json, write_config

from .runhelpers import read_store, store_path, write_store

NOW = "1767225600000"
GROUP = "agent:main:discord:group:1"


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
    write_store(
        state,
        {
            GROUP: {
                "sessionId": "g1",
                "updatedAt": 100,
                "channel": "webchat",
                "chatType": "group",
                "label": "team",
            },
            "agent:main:telegram:group:-100777": {
                "sessionId": "t1",
                "updatedAt": 100,
                "channel": "webchat",
            },
            "agent:main:main": {
                "sessionId": "m1",
                "updatedAt": 100,
                "skillsSnapshot": {"keep": True},
            },
        },
    )


def test_policy_shows_rule(discord_deny: None) -> None:
    rc, data = run_json("policy", GROUP)
    assert rc == 0
    assert data == {"sessionKey": GROUP, "effective": "deny", "decidedBy": "rule #1"}
    rc, data = run_json("policy", "telegram:group:-100777")
    assert data == {
        "sessionKey": "agent:main:telegram:group:-100777",
        "effective": "allow",
        "decidedBy": "default",
    }
    rc, data = run_json("policy", "main")
    assert data == {"sessionKey": "main", "effective": "allow", "decidedBy": "default"}


def test_policy_for_key_without_entry_shows_rules_and_writes_nothing(
    discord_deny: None, state: Path
) -> None:
    before = store_path(state).read_text()
    rc, data = run_json("policy", "discord:group:999")
    assert rc == 0
    assert data == {
        "sessionKey": "agent:main:discord:group:999",
        "effective": "deny",
        "decidedBy": "rule #1",
    }
    assert store_path(state).read_text() == before


def test_policy_allow_override_beats_rule_and_is_stored(discord_deny: None, state: Path) -> None:
    rc, data = run_json("policy", GROUP, "allow", env={"SESSIONTOOL_NOW_MS": NOW})
    assert rc == 0
    assert data == {
        "status": "ok",
        "sessionKey": GROUP,
        "sendPolicy": "allow",
        "effective": "allow",
        "decidedBy": "override",
    }
    entry = read_store(state)[GROUP]
    assert entry["sendPolicy"] == "allow"
    assert entry["sessionId"] == "g1" and entry["label"] == "team" and entry["channel"] == "webchat"
    assert entry["updatedAt"] == int(NOW)
    rc, data = run_json("policy", GROUP)
    assert (data["effective"], data["decidedBy"]) == ("allow", "override")

    rc, data = run_json("policy", GROUP, "inherit")
    assert rc == 0
    assert (data["sendPolicy"], data["effective"], data["decidedBy"]) == (None, "deny", "rule #1")
    assert "sendPolicy" not in read_store(state)[GROUP]


@pytest.mark.parametrize(
    ("word", "stored"), [("on", "allow"), ("off", "deny"), ("deny", "deny"), ("ALLOW", "allow")]
)
def test_policy_action_spellings(discord_deny: None, state: Path, word: str, stored: str) -> None:
    rc, data = run_json("policy", "main", word)
    assert rc == 0
    assert data["sendPolicy"] == stored
    store = read_store(state)
    assert store["agent:main:main"]["sendPolicy"] == stored
    assert store["agent:main:main"]["skillsSnapshot"] == {"keep": True}  # unknown fields kept


def test_policy_by_label(discord_deny: None, state: Path) -> None:
    rc, data = run_json("policy", "--label", "team", "on")
    assert rc == 0
    assert (data["sessionKey"], data["sendPolicy"]) == (GROUP, "allow")
    assert read_store(state)[GROUP]["sendPolicy"] == "allow"
    rc, data = run_json("policy", "--label", "team")
    assert data["decidedBy"] == "override"


def test_policy_on_a_missing_key_is_not_found_and_creates_nothing(state: Path) -> None:
    """A typo (`policy nosuch deny`) must not create a session: exit 3, store untouched."""
    write_store(state, {"agent:main:main": {"sessionId": "m1", "updatedAt": 5}})
    before = store_path(state).read_bytes()
    proc = run_cli("policy", "nosuch", "deny")
    assert proc.returncode == 3
    assert "Session not found: agent:main:nosuch" in proc.stderr and "--create" in proc.stderr
    assert store_path(state).read_bytes() == before
    # The agent's main session always exists in OpenClaw's sense.
    rc, _ = run_json("policy", "main", "deny")
    assert rc == 0


def test_policy_creates_entry_for_new_key(state: Path) -> None:
    rc, data = run_json(
        "policy", "cron:nightly", "deny", "--create", env={"SESSIONTOOL_NOW_MS": NOW}
    )
    assert rc == 0
    assert data["sessionKey"] == "agent:main:cron:nightly"
    entry = read_store(state)["agent:main:cron:nightly"]
    assert entry["sendPolicy"] == "deny"
    assert entry["updatedAt"] == int(NOW)
    import uuid

    assert uuid.UUID(entry["sessionId"]).version == 4
    assert not (store_path(state).parent / f"{entry['sessionId']}.jsonl").exists()
    mode = store_path(state).stat().st_mode & 0o777
    assert mode == 0o600


def test_policy_inherit_on_missing_key_creates_nothing(state: Path) -> None:
    rc, data = run_json("policy", "cron:nightly", "inherit")
    assert rc == 0
    assert data["sendPolicy"] is None and data["decidedBy"] == "default"
    assert not store_path(state).exists()


def test_policy_moves_legacy_key_to_full_form(state: Path) -> None:
    write_store(state, {"cron:job-1": {"sessionId": "c1", "updatedAt": 5}})
    rc, _ = run_json("policy", "cron:job-1", "off")
    assert rc == 0
    store = read_store(state)
    assert "cron:job-1" not in store
    assert store["agent:main:cron:job-1"]["sendPolicy"] == "deny"


def test_policy_other_agent_store(state: Path) -> None:
    write_store(
        state, {"agent:research:main": {"sessionId": "r1", "updatedAt": 5}}, agent="research"
    )
    rc, data = run_json("policy", "agent:research:main", "deny")
    assert rc == 0
    assert data["sessionKey"] == "agent:research:main"
    assert read_store(state, "research")["agent:research:main"]["sendPolicy"] == "deny"


def test_policy_bad_action(state: Path) -> None:
    rc, data = run_json("policy", "main", "maybe")
    assert rc == 2
    assert "maybe" in data["error"]


def test_policy_unknown_uuid(state: Path) -> None:
    rc, data = run_json("policy", "0b5c8d4e-8f1a-4d2b-9c3e-123456789abc")
    assert rc == 3


def test_policy_refuses_session_requesters(discord_deny: None, state: Path) -> None:
    before = store_path(state).read_text()
    rc, data = run_json("--as", "main", "policy", GROUP, "allow")
    assert rc == 4
    assert data["status"] == "forbidden"
    assert "operator" in data["error"]
    rc, _ = run_json("policy", GROUP, env={"SESSIONTOOL_SESSION_KEY": "agent:main:subagent:x"})
    assert rc == 4
    assert store_path(state).read_text() == before


def test_policy_human_line(discord_deny: None) -> None:
    proc = run_cli("policy", GROUP)
    assert proc.returncode == 0
    assert proc.stdout == f"{GROUP}: send deny (rule #1)\n"
    proc = run_cli("policy", GROUP, "allow")
    assert proc.returncode == 0
    assert proc.stdout.startswith(f"{GROUP}: send allow (override)")


def test_policy_operator_other_agent_default_display(state: Path) -> None:
    write_config(state, {"agents": {"list": [{"id": "main", "default": True}, {"id": "ops"}]}})
    rc, data = run_json("--agent", "ops", "policy", "main", "on")
    assert rc == 0
    assert data["sessionKey"] == "main"
    assert read_store(state, "ops")["agent:ops:main"]["sendPolicy"] == "allow"
