"""The spawn texts: the child's system prompt, the announce step prompt, the announce message,
OpenClaw's Stats line formats, and `--model` validation."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessiontool.errors import ExitCode, UsageError
from sessiontool.flow import announce
from sessiontool.flow.announce import (
    ANNOUNCE_STEP_MESSAGE,
    announce_message,
    announce_step_prompt,
    format_count,
    format_duration,
    format_usd,
    pick_result,
    stats_line,
    subagent_system_prompt,
)
from sessiontool.protocol import is_announce_skip
from sessiontool.runs.submit import validate_model
from sessiontool.state.config import Config, load_config
from sessiontool.state.paths import StatePaths
from tests.helpers import write_config

CHILD = "agent:main:subagent:0b6f2c1e-5d7a-4c1b-9e3f-2a4b6c8d0e1f"


# -- announce step ------------------------------------------------------------------------------


def test_announce_step_prompt_is_the_spec_text() -> None:
    text = announce_step_prompt(
        task="Summarise the logs", label="logs", outcome="ok", latest_reply="All quiet."
    )
    assert text == (
        "Sub-agent announce step:\n"
        "Task: Summarise the logs\n"
        "Label: logs\n"
        "Outcome: ok\n"
        "Latest reply: All quiet.\n"
        'If you want to remain silent, reply exactly "ANNOUNCE_SKIP".\n'
        "Any other reply is reported to the requester as the result."
    )


@pytest.mark.parametrize("reply", [None, "", "   \n"])
def test_announce_step_prompt_without_a_reply(reply: str | None) -> None:
    text = announce_step_prompt(task="t", label=None, outcome="timeout", latest_reply=reply)
    lines = text.split("\n")
    assert lines[2] == "Label: (none)"
    assert lines[3] == "Outcome: timeout"
    assert lines[4] == "Latest reply: (not available)"


def test_announce_step_message() -> None:
    assert ANNOUNCE_STEP_MESSAGE == "Sub-agent announce step."


@pytest.mark.parametrize(
    ("reply", "silent"),
    [
        ("ANNOUNCE_SKIP", True),
        ("  ANNOUNCE_SKIP\n", True),
        ("ANNOUNCE_SKIP now", False),
        (None, False),
    ],
)
def test_is_announce_skip(reply: str | None, silent: bool) -> None:
    assert is_announce_skip(reply) is silent


# -- system prompt ------------------------------------------------------------------------------


def test_system_prompt_frames_one_task() -> None:
    text = subagent_system_prompt(
        task="Find the flaky test",
        label="flaky",
        requester_key="agent:main:main",
        requester_channel="discord",
        child_key=CHILD,
    )
    assert "sub-agent" in text
    assert "Find the flaky test" in text
    assert "Label: flaky" in text
    assert "Requester session: agent:main:main" in text
    assert "Requester channel: discord" in text
    assert f"Your own session: {CHILD}" in text
    assert "reported back to the requester" in text


def test_system_prompt_without_label_or_channel() -> None:
    text = subagent_system_prompt(
        task="x",
        label=None,
        requester_key="agent:main:main",
        requester_channel=None,
        child_key=CHILD,
    )
    assert "Label: (none)" in text
    assert "Requester channel" not in text


def test_system_prompt_defuses_tokens_in_user_text() -> None:
    text = subagent_system_prompt(
        task='Reply "ANNOUNCE_SKIP" or REPLY_SKIP; ANNOUNCE_ANNOUNCE_SKIPSKIP',
        label="REPLY_REPLY_SKIPSKIP",
        requester_key="agent:main:REPLY_SKIP",
        requester_channel="ANNOUNCE_SKIP",
        child_key=CHILD,
    )
    assert "REPLY_SKIP" not in text
    assert "ANNOUNCE_SKIP" not in text


_token_text = st.lists(
    st.sampled_from(
        ["REPLY_SKIP", "ANNOUNCE_SKIP", "_SKIP", "REPLY", "ANNOUNCE", "_", "SKIP", " ", "x"]
    )
    | st.text(max_size=5),
    max_size=12,
).map("".join)


@given(task=_token_text, label=st.none() | _token_text, channel=st.none() | _token_text)
def test_system_prompt_never_contains_skip_tokens(
    task: str, label: str | None, channel: str | None
) -> None:
    text = subagent_system_prompt(
        task=task,
        label=label,
        requester_key="agent:main:main",
        requester_channel=channel,
        child_key=CHILD,
    )
    assert "REPLY_SKIP" not in text
    assert "ANNOUNCE_SKIP" not in text


# -- Stats formats ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (150_000, "2m30s"),
        (3_720_000, "1h2m"),
        (4_000, "4s"),
        (2_500, "3s"),  # rounded half up, as Math.round does
        (59_600, "1m0s"),
        (3_600_000, "1h0m"),
        (400, "0s"),
        (0, "n/a"),
        (None, "n/a"),
    ],
)
def test_format_duration(ms: int | None, text: str) -> None:
    assert format_duration(ms) == text


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (12_345, "12.3k"),
        (1_234_567, "1.2m"),
        (999, "999"),
        (1_000, "1.0k"),
        (0, "0"),
        (None, "0"),
        (999_999, "1.0m"),
    ],
)
def test_format_count(n: int | None, text: str) -> None:
    assert format_count(n) == text


def test_format_usd() -> None:
    assert format_usd(0.04002) == "$0.04"
    assert format_usd(0.0012) == "$0.0012"
    assert format_usd(12.5) == "$12.50"
    assert format_usd(None) is None


def test_stats_line_full() -> None:
    line = stats_line(
        started_at=1_000_000,
        ended_at=1_150_000,
        usage={"input": 10_100, "output": 2_200, "totalTokens": 12_300},
        cost={"input": 1.0, "output": 13.6},
        child_key=CHILD,
        session_id="abc",
        transcript="/state/agents/main/sessions/abc.jsonl",
    )
    assert line == (
        "Stats: runtime 2m30s \u2022 tokens 12.3k (in 10.1k / out 2.2k) \u2022 est $0.04 "
        f"\u2022 sessionKey {CHILD} \u2022 sessionId abc "
        "\u2022 transcript /state/agents/main/sessions/abc.jsonl"
    )


def test_stats_line_small_cost_and_total_from_parts() -> None:
    line = stats_line(
        started_at=0,
        ended_at=4_000,
        usage={"input": 1_000, "output": 100},
        cost={"input": 1.0, "output": 2.0},
        child_key=CHILD,
        session_id=None,
        transcript=None,
    )
    assert line == (
        f"Stats: runtime 4s \u2022 tokens 1.1k (in 1.0k / out 100) \u2022 est $0.0012 "
        f"\u2022 sessionKey {CHILD}"
    )


def test_stats_line_without_usage_times_or_cost() -> None:
    line = stats_line(
        started_at=None,
        ended_at=None,
        usage=None,
        cost={"input": 1.0, "output": 1.0},
        child_key=CHILD,
        session_id="abc",
        transcript=None,
    )
    assert (
        line
        == f"Stats: runtime n/a \u2022 tokens n/a \u2022 sessionKey {CHILD} \u2022 sessionId abc"
    )


def test_stats_line_has_no_estimate_without_prices() -> None:
    line = stats_line(
        started_at=0,
        ended_at=1_000,
        usage={"inputTokens": 5, "outputTokens": 7},
        cost=None,
        child_key=CHILD,
        session_id=None,
        transcript=None,
    )
    assert "est" not in line
    assert "tokens 12 (in 5 / out 7)" in line


# -- the announce message -----------------------------------------------------------------------


def test_announce_message() -> None:
    text = announce_message(status="ok", result="Done.", notes=None, stats="Stats: runtime 4s")
    assert text == "Status: ok\nResult: Done.\nNotes: none\nStats: runtime 4s"
    text = announce_message(status="error", result="x", notes="exit 3", stats="Stats: s")
    assert text.split("\n")[2] == "Notes: exit 3"


@pytest.mark.parametrize(
    ("step_reply", "failed", "child_reply", "result"),
    [
        ("Summary.", False, "child", "Summary."),
        (None, True, "child said", "child said"),
        ("partial", True, "child said", "child said"),
        ("", False, "child said", "child said"),
        (None, True, None, "(no output)"),
        (None, True, "  ", "(no output)"),
    ],
)
def test_pick_result(
    step_reply: str | None, failed: bool, child_reply: str | None, result: str
) -> None:
    assert pick_result(step_reply, failed, child_reply) == result


def test_module_has_no_rich() -> None:
    assert "rich" not in vars(announce)


# -- --model ------------------------------------------------------------------------------------

MODEL_CONFIG = {
    "agents": {
        "defaults": {
            "model": {"primary": "anthropic/claude-sonnet", "fallbacks": ["openai/gpt-4o"]},
            "models": {"anthropic/claude-opus": {}},
        },
        "list": [
            {"id": "main", "model": "local-a"},
            {"id": "research", "runner": {"type": "openai", "model": "qwen2.5"}},
        ],
    },
    "models": {"providers": {"ollama": {"models": [{"id": "llama3.2:3b"}]}}},
}


@pytest.fixture
def cfg(state: Path) -> Config:
    write_config(state, MODEL_CONFIG)
    return load_config(StatePaths(state))


@pytest.mark.parametrize(
    "name",
    [
        "echo",
        "local-a",
        "anthropic/claude-sonnet",
        "claude-sonnet",
        "openai/gpt-4o",
        "gpt-4o",
        "claude-opus",
        "qwen2.5",
        "ollama/llama3.2:3b",
        "llama3.2:3b",
        "  local-a ",
    ],
)
def test_known_models_pass(cfg: Config, name: str) -> None:
    assert validate_model(cfg, name) == name.strip()


def test_unknown_model_names_the_known_ones(cfg: Config) -> None:
    with pytest.raises(UsageError) as info:
        validate_model(cfg, "nope")
    assert info.value.code == ExitCode.USAGE
    msg = info.value.message
    assert msg.startswith("unknown model 'nope' (known: ")
    for name in ("echo", "local-a", "anthropic/claude-sonnet", "qwen2.5", "ollama/llama3.2:3b"):
        assert name in msg


def test_empty_model_is_a_usage_error(cfg: Config) -> None:
    with pytest.raises(UsageError):
        validate_model(cfg, "  ")


def test_without_config_only_echo_is_known(state: Path) -> None:
    cfg = load_config(StatePaths(state))
    assert validate_model(cfg, "echo") == "echo"
    with pytest.raises(UsageError, match=r"\(known: echo\)"):
        validate_model(cfg, "gpt-4o")
