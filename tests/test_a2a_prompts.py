"""The agent-to-agent prompts must be OpenClaw's texts exactly: agents and runners key on them."""

from __future__ import annotations

import pytest

from sessiontool import protocol
from sessiontool.flow import a2a

REQ = "agent:main:main"
TGT = "agent:research:discord:group:42"


def test_context_prompt_exact() -> None:
    assert a2a.context_prompt(REQ, "telegram", TGT) == (
        "Agent-to-agent message context:\n"
        "Agent 1 (requester) session: agent:main:main.\n"
        "Agent 1 (requester) channel: telegram.\n"
        "Agent 2 (target) session: agent:research:discord:group:42."
    )


@pytest.mark.parametrize("channel", [None, "", "  ", "unknown"])
def test_context_prompt_omits_missing_channel(channel: str | None) -> None:
    assert a2a.context_prompt(REQ, channel, TGT) == (
        "Agent-to-agent message context:\n"
        "Agent 1 (requester) session: agent:main:main.\n"
        "Agent 2 (target) session: agent:research:discord:group:42."
    )


def test_reply_prompt_requester_turn_exact() -> None:
    text = a2a.reply_prompt(
        current="requester",
        turn=1,
        max_turns=5,
        requester_key=REQ,
        requester_channel="telegram",
        target_key=TGT,
        target_channel="discord",
    )
    assert text == (
        "Agent-to-agent reply step:\n"
        "Current agent: Agent 1 (requester).\n"
        "Turn 1 of 5.\n"
        "Agent 1 (requester) session: agent:main:main.\n"
        "Agent 1 (requester) channel: telegram.\n"
        "Agent 2 (target) session: agent:research:discord:group:42.\n"
        "Agent 2 (target) channel: discord.\n"
        'If you want to stop the ping-pong, reply exactly "REPLY_SKIP".'
    )


def test_reply_prompt_target_turn_without_channels() -> None:
    text = a2a.reply_prompt(
        current="target",
        turn=2,
        max_turns=3,
        requester_key=REQ,
        requester_channel=None,
        target_key=TGT,
        target_channel=None,
    )
    assert text == (
        "Agent-to-agent reply step:\n"
        "Current agent: Agent 2 (target).\n"
        "Turn 2 of 3.\n"
        "Agent 1 (requester) session: agent:main:main.\n"
        "Agent 2 (target) session: agent:research:discord:group:42.\n"
        'If you want to stop the ping-pong, reply exactly "REPLY_SKIP".'
    )


def test_announce_prompt_exact() -> None:
    text = a2a.announce_prompt(
        requester_key=REQ,
        requester_channel="telegram",
        target_key=TGT,
        target_channel="discord",
        original="What's the status?",
        round1="All green.",
        latest="Still green.",
    )
    assert text == (
        "Agent-to-agent announce step:\n"
        "Agent 1 (requester) session: agent:main:main.\n"
        "Agent 1 (requester) channel: telegram.\n"
        "Agent 2 (target) session: agent:research:discord:group:42.\n"
        "Agent 2 (target) channel: discord.\n"
        "Original request: What's the status?\n"
        "Round 1 reply: All green.\n"
        "Latest reply: Still green.\n"
        'If you want to remain silent, reply exactly "ANNOUNCE_SKIP".\n'
        "Any other reply will be posted to the target channel.\n"
        "After this reply, the agent-to-agent conversation is over."
    )


def test_announce_prompt_latest_falls_back_to_round1() -> None:
    text = a2a.announce_prompt(
        requester_key=REQ,
        requester_channel=None,
        target_key=TGT,
        target_channel="discord",
        original="hi",
        round1="first",
        latest=None,
    )
    lines = text.split("\n")
    assert "Round 1 reply: first" in lines
    assert "Latest reply: first" in lines
    assert not any(line.startswith("Agent 1 (requester) channel") for line in lines)


def test_announce_prompt_missing_replies() -> None:
    text = a2a.announce_prompt(
        requester_key=REQ,
        requester_channel=None,
        target_key=TGT,
        target_channel=None,
        original="hi",
        round1=None,
        latest="",
    )
    lines = text.split("\n")
    assert "Round 1 reply: (not available)" in lines
    assert "Latest reply: (not available)" in lines


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("REPLY_SKIP", True),
        ("  REPLY_SKIP\n", True),
        ("REPLY_SKIP.", False),
        ("I will REPLY_SKIP", False),
        ("reply_skip", False),
        ("", False),
        (None, False),
    ],
)
def test_is_reply_skip(text: str | None, expected: bool) -> None:
    assert protocol.is_reply_skip(text) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("ANNOUNCE_SKIP", True), ("\tANNOUNCE_SKIP ", True), ("ANNOUNCE_SKIP!", False), (None, False)],
)
def test_is_announce_skip(text: str | None, expected: bool) -> None:
    assert protocol.is_announce_skip(text) is expected
    assert not protocol.is_reply_skip(text)


def test_constants() -> None:
    assert protocol.REPLY_SKIP == "REPLY_SKIP"
    assert protocol.ANNOUNCE_SKIP == "ANNOUNCE_SKIP"
    assert a2a.ANNOUNCE_STEP_MESSAGE == "Agent-to-agent announce step."


def test_session_channel_prefers_key_segment() -> None:
    entry = {
        "channel": "webchat",
        "deliveryContext": {"channel": "webchat"},
        "lastChannel": "webchat",
    }
    assert a2a.session_channel("agent:main:discord:group:1", entry) == "discord"


def test_session_channel_from_delivery_context_then_last_channel() -> None:
    assert (
        a2a.session_channel(
            "agent:main:main", {"deliveryContext": {"channel": "telegram"}, "lastChannel": "x"}
        )
        == "telegram"
    )
    assert a2a.session_channel("agent:main:main", {"lastChannel": "whatsapp"}) == "whatsapp"
    assert a2a.session_channel("agent:main:main", {}) is None
    assert a2a.session_channel("agent:main:main", None) is None
