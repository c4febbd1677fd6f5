"""Session-key grammar: canonical and display forms, kind, channel, chat type, agent ids."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessiontool.state import keys

AGENT_ID = re.compile(r"^[a-z0-9_-]{1,64}$")

# Keys made of the characters real keys use (no whitespace at the ends: input is trimmed).
key_text = st.text(
    alphabet=st.sampled_from("abcdefghijklmnopqrstuvwxyzABC0123456789:-_@.+"),
    min_size=1,
    max_size=40,
)
agent_ids = st.from_regex(AGENT_ID, fullmatch=True)
# ...and full keys, with agent ids that still need normalising.
full_keys = st.builds(
    lambda a, r: f"agent:{a}:{r}",
    st.text(alphabet=st.sampled_from("abcXYZ019_- ."), min_size=1, max_size=10)
    .map(str.strip)
    .filter(bool),
    key_text,
)
any_key = st.one_of(
    key_text, full_keys, st.sampled_from(["main", "global", "unknown", "agent:main:main"])
)


# -- normalize_agent_id --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        ("main", "main"),
        ("  Research ", "research"),
        ("Ops Team!", "ops-team-"),
        ("a.b/c", "a-b-c"),
        ("", "main"),
        ("   ", "main"),
        (None, "main"),
        ("x" * 100, "x" * 64),
        ("ÄgentÜ", "-gent-"),
        ("under_score-dash", "under_score-dash"),
    ],
)
def test_normalize_agent_id(raw: str | None, want: str) -> None:
    assert keys.normalize_agent_id(raw) == want


@given(st.text(max_size=200))
def test_normalize_agent_id_always_valid(raw: str) -> None:
    out = keys.normalize_agent_id(raw)
    assert AGENT_ID.match(out), out
    assert keys.normalize_agent_id(out) == out  # idempotent


# -- canonical ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "agent", "want"),
    [
        ("main", "main", "agent:main:main"),
        ("main", "research", "agent:research:main"),
        ("cron:nightly", "main", "agent:main:cron:nightly"),
        ("discord:group:42", "ops", "agent:ops:discord:group:42"),
        ("agent:research:main", "main", "agent:research:main"),
        ("agent:Research:x", "main", "agent:research:x"),
        ("  agent:main:dm:alice  ", "main", "agent:main:dm:alice"),
        ("global", "main", "global"),
        ("unknown", "main", "unknown"),
    ],
)
def test_canonical(raw: str, agent: str, want: str) -> None:
    assert keys.canonical(raw, agent) == want


def test_canonical_with_configured_main_key_and_global_scope() -> None:
    assert keys.canonical("main", "ops", main_key="home") == "agent:ops:home"
    assert keys.canonical("home", "ops", main_key="home") == "agent:ops:home"
    assert keys.canonical("main", "ops", scope="global") == "global"


@given(any_key, agent_ids)
def test_canonical_is_idempotent(raw: str, agent: str) -> None:
    once = keys.canonical(raw, agent)
    assert keys.canonical(once, agent) == once
    # ...and a full key no longer depends on the requester.
    assert keys.canonical(once, "someone-else") == once


@given(any_key, agent_ids)
def test_canonical_is_full_or_reserved(raw: str, agent: str) -> None:
    out = keys.canonical(raw, agent)
    assert out in keys.RESERVED_KEYS or keys.split_agent_key(out) is not None
    if out not in keys.RESERVED_KEYS:
        assert AGENT_ID.match(keys.agent_of(out))
        assert keys.split_agent_key(out)[0] == keys.agent_of(out)  # type: ignore[index]


# -- display ------------------------------------------------------------------------------------


def test_display() -> None:
    assert keys.display("agent:main:main", "main") == "main"
    assert keys.display("agent:research:main", "main") == "agent:research:main"
    assert keys.display("agent:research:main", "research") == "main"
    assert keys.display("agent:main:dm:alice", "main") == "agent:main:dm:alice"
    assert keys.display("global", "main") == "main"
    assert keys.display("agent:ops:home", "ops", main_key="home") == "main"
    assert keys.display("agent:ops:main", "ops", main_key="home") == "agent:ops:main"


@given(any_key, agent_ids)
def test_display_round_trips_through_canonical(raw: str, agent: str) -> None:
    full = keys.canonical(raw, agent)
    if full in keys.RESERVED_KEYS:
        return
    assert keys.canonical(keys.display(full, agent), agent) == full


# -- stored_to_full / split ---------------------------------------------------------------------


def test_stored_to_full() -> None:
    assert keys.stored_to_full("hook:bare-one", "main") == "agent:main:hook:bare-one"
    assert keys.stored_to_full("cron:job-1", "research") == "agent:research:cron:job-1"
    assert keys.stored_to_full("agent:main:x", "research") == "agent:main:x"
    assert keys.stored_to_full("global", "main") == "global"


def test_split_agent_key() -> None:
    assert keys.split_agent_key("agent:main:a:b") == ("main", "a:b")
    assert keys.split_agent_key("agent:main") is None
    assert keys.split_agent_key("agent::x") is None
    assert keys.split_agent_key("agent:main:") is None
    assert keys.split_agent_key("cron:x") is None


def test_looks_like_uuid() -> None:
    assert keys.looks_like_uuid("ed5f1813-5bfc-4949-8877-9b52151c0848")
    assert keys.looks_like_uuid("ED5F1813-5BFC-4949-8877-9B52151C0848")
    assert not keys.looks_like_uuid("dev-orphan-42")
    assert not keys.looks_like_uuid("ed5f1813-5bfc-4949-8877-9b52151c084")


# -- kind ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "entry", "want"),
    [
        ("agent:main:main", None, "main"),
        ("global", None, "main"),
        ("agent:research:main", None, "main"),
        ("agent:main:cron:daily-report", None, "cron"),
        ("cron:daily-report", None, "cron"),
        ("agent:main:hook:3b9e2f47", None, "hook"),
        ("agent:main:node-pi4", None, "node"),
        ("agent:main:node:pi4", None, "node"),
        ("agent:main:discord:channel:987", None, "group"),
        ("agent:main:telegram:group:-100777", None, "group"),
        ("agent:main:whatsapp:group:1203@g.us", None, "group"),
        ("agent:main:dm:alice", None, "other"),
        ("agent:main:dm:alice", {"chatType": "group"}, "group"),
        ("agent:main:dm:alice", {"chatType": "channel"}, "group"),
        ("agent:main:dm:alice", {"chatType": "direct"}, "other"),
        ("agent:main:subagent:1234", None, "other"),
        # order matters: a cron key that mentions a group is still cron
        ("agent:main:cron:group:x", None, "cron"),
        ("agent:main:nodes", None, "other"),
        ("agent:main:mainframe", None, "other"),
    ],
)
def test_kind_of(key: str, entry: dict[str, str] | None, want: str) -> None:
    assert keys.kind_of(key, entry) == want


def test_kind_with_configured_main_key() -> None:
    assert keys.kind_of("agent:main:home", None, main_key="home") == "main"
    assert keys.kind_of("agent:main:main", None, main_key="home") == "other"


@given(any_key, agent_ids)
def test_kind_is_one_of_the_kinds(raw: str, agent: str) -> None:
    assert keys.kind_of(keys.canonical(raw, agent)) in keys.KINDS


def test_is_subagent() -> None:
    assert keys.is_subagent("agent:research:subagent:bb902131")
    assert not keys.is_subagent("agent:research:main")
    assert not keys.is_subagent("agent:main:dm:subagent:x")


# -- channel ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "entry", "want"),
    [
        ("agent:main:cron:x", {"lastChannel": "slack"}, "internal"),
        ("agent:main:hook:x", {}, "internal"),
        ("agent:main:node-1", {"deliveryContext": {"channel": "x"}}, "internal"),
        ("agent:main:telegram:group:-1", {"channel": "webchat"}, "webchat"),
        ("agent:main:discord:channel:987", {"lastChannel": "webchat"}, "discord"),
        ("agent:main:Discord:group:1", {}, "discord"),
        (
            "agent:main:main",
            {"deliveryContext": {"channel": "whatsapp"}, "lastChannel": "x"},
            "whatsapp",
        ),
        ("agent:main:main", {"lastChannel": "signal"}, "signal"),
        ("agent:main:dm:alice", {}, "unknown"),
        ("agent:main:dm:alice", {"deliveryContext": {"channel": ""}}, "unknown"),
        ("agent:main:dm:alice", {"chatType": "group"}, "unknown"),
    ],
)
def test_row_channel(key: str, entry: dict[str, object], want: str) -> None:
    assert keys.row_channel(key, entry) == want


@pytest.mark.parametrize(
    ("key", "entry", "want"),
    [
        ("agent:main:dm:alice", None, "direct"),
        ("agent:main:discord:group:1", None, "group"),
        ("agent:main:discord:channel:1", None, "channel"),
        ("agent:main:discord:channel:1", {"chatType": "direct"}, "direct"),
        ("agent:main:dm:alice", {"chatType": "group"}, "group"),
        ("agent:main:dm:alice", {"chatType": "bogus"}, "direct"),
    ],
)
def test_chat_type(key: str, entry: dict[str, str] | None, want: str) -> None:
    assert keys.chat_type(key, entry) == want


def test_policy_channel_prefers_the_key_segment() -> None:
    assert keys.policy_channel("agent:main:discord:group:1", {"channel": "webchat"}) == "discord"
    assert keys.policy_channel("agent:main:dm:a", {"channel": "Signal"}) == "signal"
    assert keys.policy_channel("agent:main:dm:a", {"lastChannel": "Slack"}) == "slack"
    assert keys.policy_channel("agent:main:dm:a", None) is None


def test_key_group_target() -> None:
    assert keys.key_group_target("agent:main:discord:group:42") == ("discord", "group:42")
    assert keys.key_group_target("agent:main:whatsapp:group:1203@g.us") == (
        "whatsapp",
        "group:1203@g.us",
    )
    assert keys.key_group_target("agent:main:slack:channel:C1:thread:9") == (
        "slack",
        "channel:C1:thread:9",
    )
    assert keys.key_group_target("agent:main:dm:alice") is None
