"""Send-policy decisions (spec §8): override, rules in order, matchers, default."""

from __future__ import annotations

from typing import Any

import pytest

from sessiontool.flow.policy import send_decision

DISCORD_GROUPS_DENIED: dict[str, Any] = {
    "rules": [{"match": {"channel": "discord", "chatType": "group"}, "action": "deny"}]
}


def test_no_config_allows_by_default() -> None:
    d = send_decision({}, "agent:main:main", {"sessionId": "s"})
    assert (d.effective, d.decided_by, d.allowed) == ("allow", "default", True)


def test_default_deny() -> None:
    d = send_decision({"default": "deny"}, "agent:main:main", None)
    assert (d.effective, d.decided_by) == ("deny", "default")


def test_deny_rule_uses_key_channel_even_when_entry_says_webchat() -> None:
    entry = {"sessionId": "s", "channel": "webchat", "lastChannel": "webchat", "chatType": "group"}
    d = send_decision(DISCORD_GROUPS_DENIED, "agent:main:discord:group:1", entry)
    assert (d.effective, d.decided_by) == ("deny", "rule #1")
    # Without an entry at all the key alone names channel and chat type.
    assert (
        send_decision(DISCORD_GROUPS_DENIED, "agent:main:discord:group:1", None).effective == "deny"
    )


def test_deny_rule_leaves_other_channels_alone() -> None:
    d = send_decision(
        DISCORD_GROUPS_DENIED, "agent:main:telegram:group:-100777", {"sessionId": "s"}
    )
    assert (d.effective, d.decided_by) == ("allow", "default")


def test_deny_rule_leaves_discord_direct_chats_alone() -> None:
    d = send_decision(
        DISCORD_GROUPS_DENIED, "agent:main:main", {"sessionId": "s", "lastChannel": "discord"}
    )
    assert d.effective == "allow"


def test_rule_channel_is_case_insensitive() -> None:
    cfg = {"rules": [{"match": {"channel": "Discord"}, "action": "deny"}]}
    assert send_decision(cfg, "agent:main:main", {"lastChannel": "DISCORD"}).effective == "deny"


def test_channel_falls_back_to_entry_then_last_channel() -> None:
    cfg = {"rules": [{"match": {"channel": "slack"}, "action": "deny"}]}
    assert send_decision(cfg, "agent:main:dm:alice", {"channel": "slack"}).effective == "deny"
    assert send_decision(cfg, "agent:main:dm:alice", {"lastChannel": "slack"}).effective == "deny"
    assert (
        send_decision(cfg, "agent:main:dm:alice", {"lastChannel": "telegram"}).effective == "allow"
    )


@pytest.mark.parametrize("override", ["allow", "deny"])
def test_session_override_beats_rules(override: str) -> None:
    cfg = {
        "rules": [
            {"match": {"channel": "discord"}, "action": "deny" if override == "allow" else "allow"}
        ],
        "default": "deny" if override == "allow" else "allow",
    }
    d = send_decision(cfg, "agent:main:discord:group:1", {"sessionId": "s", "sendPolicy": override})
    assert (d.effective, d.decided_by) == (override, "override")


def test_first_matching_deny_wins_over_earlier_allow() -> None:
    cfg = {
        "rules": [
            {"match": {"channel": "discord"}, "action": "allow"},
            {"match": {"keyPrefix": "cron:"}, "action": "allow"},
            {"match": {"chatType": "group"}, "action": "deny"},
            {"match": {"channel": "discord", "chatType": "group"}, "action": "deny"},
        ]
    }
    d = send_decision(cfg, "agent:main:discord:group:1", None)
    assert (d.effective, d.decided_by) == ("deny", "rule #3")


def test_matching_allow_without_deny_names_first_allow() -> None:
    cfg = {
        "rules": [
            {"match": {"channel": "telegram"}, "action": "deny"},
            {"match": {"channel": "discord"}, "action": "allow"},
            {"match": {"chatType": "group"}, "action": "allow"},
        ],
        "default": "deny",
    }
    d = send_decision(cfg, "agent:main:discord:group:1", None)
    assert (d.effective, d.decided_by) == ("allow", "rule #2")
    d = send_decision(cfg, "agent:main:main", None)
    assert (d.effective, d.decided_by) == ("deny", "default")


@pytest.mark.parametrize("prefix", ["cron:", "agent:main:cron:", "agent:main:cron:nightly"])
def test_key_prefix_with_and_without_agent_prefix(prefix: str) -> None:
    cfg = {"rules": [{"match": {"keyPrefix": prefix}, "action": "deny"}]}
    assert send_decision(cfg, "agent:main:cron:nightly", None).effective == "deny"
    assert send_decision(cfg, "agent:main:hook:x", None).effective == "allow"


def test_key_prefix_of_other_agent_does_not_match() -> None:
    cfg = {"rules": [{"match": {"keyPrefix": "agent:ops:cron:"}, "action": "deny"}]}
    assert send_decision(cfg, "agent:main:cron:nightly", None).effective == "allow"


def test_every_matcher_must_match() -> None:
    cfg = {"rules": [{"match": {"channel": "discord", "keyPrefix": "cron:"}, "action": "deny"}]}
    assert send_decision(cfg, "agent:main:discord:group:1", None).effective == "allow"


def test_empty_match_matches_everything() -> None:
    cfg = {"rules": [{"match": {}, "action": "deny"}]}
    assert send_decision(cfg, "agent:main:main", None).decided_by == "rule #1"


def test_chat_type_from_entry_and_key() -> None:
    cfg = {"rules": [{"match": {"chatType": "channel"}, "action": "deny"}]}
    assert send_decision(cfg, "agent:main:discord:channel:987", None).effective == "deny"
    assert send_decision(cfg, "agent:main:x", {"chatType": "channel"}).effective == "deny"
    assert send_decision(cfg, "agent:main:x", None).effective == "allow"


def test_never_matches_on_session_id() -> None:
    cfg = {"rules": [{"match": {"keyPrefix": "abc"}, "action": "deny"}]}
    assert send_decision(cfg, "agent:main:main", {"sessionId": "abc-123"}).effective == "allow"


def test_malformed_rules_are_skipped() -> None:
    cfg: dict[str, Any] = {"rules": ["nope", {"match": "x", "action": "deny"}, {"action": "deny"}]}
    assert send_decision(cfg, "agent:main:main", None).decided_by == "rule #3"
