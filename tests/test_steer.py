"""runs/steer.py (a running run's guidance inbox) and how the in-process runners take a spawn's
thinking level: the `openai` request's `reasoning_effort`, the `llm` model's own option."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sessiontool.runs import steer
from sessiontool.runs.runners.llm import with_thinking
from sessiontool.runs.runners.openai import take_guidance, with_reasoning


def test_guidance_is_taken_once_in_order(tmp_path: Path) -> None:
    assert steer.offer(tmp_path, "r1", {"text": "one"})
    assert steer.offer(tmp_path, "r1", {"text": "two", "provenance": {"kind": "x"}})
    assert [i["text"] for i in steer.take(tmp_path, "r1")] == ["one", "two"]
    assert steer.take(tmp_path, "r1") == []
    assert steer.take(tmp_path, "other") == []


def test_a_closed_inbox_takes_nothing_and_hands_back_what_was_left(tmp_path: Path) -> None:
    assert steer.offer(tmp_path, "r2", {"text": "late"})
    assert [i["text"] for i in steer.close(tmp_path, "r2")] == ["late"]
    assert not steer.offer(tmp_path, "r2", {"text": "too late"})  # queued as a turn instead
    assert steer.take(tmp_path, "r2") == []
    # A run that was never steered closes too (a steer after its end is refused).
    assert steer.close(tmp_path, "r3") == []
    assert not steer.offer(tmp_path, "r3", {"text": "x"})


def test_the_openai_runner_takes_guidance_as_user_messages(tmp_path: Path) -> None:
    env = {"SESSIONTOOL_STATE_DIR": str(tmp_path), "SESSIONTOOL_RUN_ID": "r4"}
    steer.offer(tmp_path, "r4", {"text": "go left", "provenance": {"kind": "external_user"}})
    messages: list[dict[str, Any]] = []
    extra: list[Any] = []
    take_guidance(env, messages, extra)
    assert messages == [{"role": "user", "content": "go left"}]
    assert extra[0]["role"] == "user" and extra[0]["provenance"] == {"kind": "external_user"}
    take_guidance(env, messages, extra)
    assert len(messages) == 1


def test_openai_reasoning_effort_from_the_thinking_level() -> None:
    cfg = {"baseUrl": "http://x", "body": {"temperature": 0}}
    assert with_reasoning(cfg, "low")["body"] == {"temperature": 0, "reasoning_effort": "low"}
    assert with_reasoning(cfg, "xhigh")["body"]["reasoning_effort"] == "high"
    assert with_reasoning(cfg, "off") is cfg and with_reasoning(cfg, None) is cfg
    assert cfg["body"] == {"temperature": 0}  # the runner's config is not changed


class _Model:
    def __init__(self, *fields: str) -> None:
        self.Options = type("Options", (), {"model_fields": dict.fromkeys(fields)})


def test_llm_thinking_is_the_models_own_option() -> None:
    assert with_thinking(_Model("reasoning_effort"), {}, {"thinkingLevel": "medium"}) == {
        "reasoning_effort": "medium"
    }
    assert with_thinking(_Model("thinking"), {"x": 1}, {"thinkingLevel": "high"}) == {
        "x": 1,
        "thinking": True,
    }
    assert with_thinking(_Model("thinking"), {}, {"thinkingLevel": "off"}) == {"thinking": False}
    assert with_thinking(_Model("reasoning_effort"), {}, {"thinkingLevel": "ultra"}) == {
        "reasoning_effort": "high"
    }
    assert with_thinking(_Model("temperature"), {}, {"thinkingLevel": "high"}) == {}
    # The runner's own options win over the spawn's level.
    assert with_thinking(
        _Model("reasoning_effort"), {"reasoning_effort": "low"}, {"thinkingLevel": "high"}
    ) == {"reasoning_effort": "low"}
    assert with_thinking(_Model("reasoning_effort"), {}, {}) == {}
