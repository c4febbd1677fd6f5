"""OpenClaw's transcript messages as the model runners (`llm`, `openai`) read and write them.

Both runners turn the same transcript into a conversation and record their tool rounds as the
same toolCall/toolResult messages; what counts as a usable turn, which calls are answered, how
a result reads and how one call's usage adds to a run's are decided here once, so the two cannot
drift apart (they did: one summed the cost of a run's calls, the other dropped it)."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sessiontool.protocol import is_delivery_mirror
from sessiontool.runs.runners.base import NO_OUTPUT, RunnerError, text_of

if TYPE_CHECKING:
    from sessiontool.context import Context
    from sessiontool.runs.tools import ToolResult


def usable_assistant(message: Mapping[str, Any]) -> bool:
    """Delivery mirrors and failed or aborted turns are not part of what the model said."""
    return not is_delivery_mirror(message) and message.get("stopReason") not in ("error", "aborted")


def tool_calls_of(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """An assistant message's toolCall blocks that name their call and tool."""
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [
        b
        for b in content
        if isinstance(b, Mapping)
        and b.get("type") == "toolCall"
        and isinstance(b.get("id"), str)
        and isinstance(b.get("name"), str)
    ]


def tool_results_by_call(transcript: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """toolCallId → the first toolResult that answers it: model APIs reject a call without its
    answer, so only answered calls are sent."""
    results: dict[str, Mapping[str, Any]] = {}
    for m in transcript:
        if m.get("role") == "toolResult" and isinstance(m.get("toolCallId"), str):
            results.setdefault(m["toolCallId"], m)
    return results


def tool_result_text(message: Mapping[str, Any]) -> str:
    """A toolResult's text for the model; an image-only result is named, an empty one said."""
    content = message.get("content")
    text = text_of(content)
    if not text and isinstance(content, list) and content:
        text = "(see attached image)"
    return text or NO_OUTPUT


def arguments_object(value: Any) -> dict[str, Any]:
    """A call's arguments as an object (a JSON string parsed; anything else: no arguments)."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return {}
        return parsed if isinstance(parsed, dict) else {}
    return {}


def arguments_json(arguments: Any) -> str:
    """A call's arguments as the JSON text chat-completions APIs carry."""
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments if arguments is not None else {}, ensure_ascii=False)


def add_usage(total: dict[str, Any], part: Mapping[str, Any]) -> None:
    """Sum one call's usage into a run's (the run record's `usage` covers every call, its cost
    included)."""
    for k in ("input", "output", "cacheRead", "cacheWrite", "totalTokens"):
        total[k] = (total.get(k) or 0) + (part.get(k) or 0)
    cost = part.get("cost")
    if isinstance(cost, Mapping):
        tc = total.setdefault("cost", {})
        for k, v in cost.items():
            if isinstance(v, int | float):
                tc[k] = (tc.get(k) or 0) + v


def tool_use_turn(
    blocks: list[dict[str, Any]], api: str, provider: str, model: str, usage: Mapping[str, Any]
) -> dict[str, Any]:
    """The assistant message that asked for tool calls, as OpenClaw records it."""
    return {
        "role": "assistant",
        "content": blocks,
        "api": api,
        "provider": provider,
        "model": model,
        "usage": usage,
        "stopReason": "toolUse",
        "timestamp": int(time.time() * 1000),
    }


def tool_result_message(call_id: str, name: str, text: str, outcome: ToolResult) -> dict[str, Any]:
    """The toolResult message of one executed call (`outcome`: runs.tools' ToolResult, `text`
    what the model is told of it)."""
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": name,
        "content": [{"type": "text", "text": text}],
        "details": outcome.data,
        "isError": outcome.malformed,
        "timestamp": int(time.time() * 1000),
    }


def call_offered(ctx: Context | None, offered: set[str], name: str, arguments: Any) -> ToolResult:
    """Execute one tool call as the session (runs.tools' ToolResult): a tool the run did not
    offer (a sub-agent's model naming one it was not given) is refused, never run."""
    from sessiontool.runs.tools import ToolResult, call_tool

    if name not in offered or ctx is None:  # no context: the run offered no tools
        available = ", ".join(sorted(offered)) or "none"
        return ToolResult(
            {
                "status": "forbidden",
                "error": f"{name} is not available to this session (available: {available})",
                "code": 4,
            },
            failed=True,
            malformed=True,
        )
    return call_tool(ctx, name, arguments)


def too_many_rounds(max_rounds: int) -> RunnerError:
    """The failure of a run whose model still calls tools after the allowed rounds."""
    return RunnerError(
        f"the model was still calling tools after {max_rounds} rounds "
        "(sessiontool.maxToolRounds); stopped"
    )
