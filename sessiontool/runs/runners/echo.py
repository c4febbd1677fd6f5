"""The built-in echo agent: offline and deterministic, so a fresh install works and every flow
(sends, reply-back turns, announces, token accounting) can be tested without a model. It is a
demo agent, not a model."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from sessiontool.protocol import REPLY_SKIP
from sessiontool.runs.runners.base import (
    NO_OUTPUT,
    RunnerResult,
    RunnerTimeout,
    estimated_usage,
    format_seconds,
    positive_seconds,
    remaining,
)


def echo_reply(request: Mapping[str, Any]) -> str:
    """The reply the echo agent gives: it skips every reply-back turn (so agent-to-agent flows
    end at once) and announces what the conversation produced."""
    if request.get("kind") == "step":
        step = request.get("step")
        if step == "reply":
            return REPLY_SKIP
        if step == "announce":
            announce = request.get("announce")
            info: Mapping[str, Any] = announce if isinstance(announce, Mapping) else {}
            value = info.get("childReply") if "childReply" in info else info.get("round1")
            return f"echo: {value if isinstance(value, str) and value else NO_OUTPUT}"
    if request.get("kind") == "compact":
        return compact_summary(request.get("messages"))
    message = request.get("message")
    return f"echo: {message if isinstance(message, str) else ''}"


def compact_summary(messages: Any) -> str:
    """The echo agent's summary for `compact`: deterministic, for tests: how many messages it
    replaced, and each user message's first 40 characters."""
    msgs = messages if isinstance(messages, list) else []
    asked = []
    for m in msgs:
        if isinstance(m, Mapping) and m.get("role") == "user":
            content = m.get("content")
            text = content if isinstance(content, str) else ""
            if isinstance(content, list):
                text = " ".join(
                    str(b.get("text")) for b in content if isinstance(b, Mapping) and "text" in b
                )
            asked.append(" ".join(text.split())[:40])
    return f"echo summary of {len(msgs)} messages; asked: " + " | ".join(asked)


class EchoRunner:
    """`{"type": "echo", "delaySeconds"?: N}`. The delay lets tests and demos see a run that
    takes time (queued lanes, `wait`, run timeouts) without a real agent."""

    def __init__(self, cfg: Mapping[str, Any]) -> None:
        self.delay = positive_seconds(cfg, "delaySeconds", "runner") or 0.0

    def run(
        self,
        request: dict[str, Any],
        *,
        env: dict[str, str],
        on_agent_pid: Callable[[int], object],
        deadline: float | None,
    ) -> RunnerResult:
        if self.delay:
            left = remaining(deadline)
            if left is not None and left < self.delay:
                time.sleep(max(0.0, left))
                raise RunnerTimeout(f"runner timed out after {format_seconds(max(0.0, left))}")
            time.sleep(self.delay)
        reply = echo_reply(request)
        system = request.get("system")
        message = request.get("message")
        return RunnerResult(
            reply=reply,
            usage=estimated_usage(
                system if isinstance(system, str) else None,
                message if isinstance(message, str) else None,
                reply,
            ),
            model="echo",
            provider="sessiontool",
            api="sessiontool-echo",
        )
