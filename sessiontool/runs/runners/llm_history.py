"""The session transcript as the `llm` library takes a conversation, in both of its forms: the
message list of a prompt (`messages=`, llm's message parts: the current way plugins read it) and
the earlier responses of a `Conversation` (the way older plugins still read it). Both are built
from the same transcript, so every plugin sees the system prompt, the earlier turns (tool calls
and results included) and the new message.

Apart from the llm runner's model calls and tool loop (runs/runners/llm.py) because this is a
translation of one format into another, testable without a model; like that module it is
imported only when a run uses the llm runner."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sessiontool.runs.runners.base import text_of
from sessiontool.runs.runners.turns import (
    arguments_object,
    tool_calls_of,
    tool_result_text,
    tool_results_by_call,
    usable_assistant,
)


def _images(llm: Any, model: Any, content: Any) -> list[Any]:
    """Image blocks of a user message as `llm` attachments, when the model takes that type."""
    if not isinstance(content, list):
        return []
    import base64
    import binascii

    accepted = set(getattr(model, "attachment_types", ()) or ())
    out = []
    for b in content:
        if not (isinstance(b, Mapping) and b.get("type") == "image"):
            continue
        data, mime = b.get("data"), b.get("mimeType")
        if not isinstance(data, str) or not isinstance(mime, str) or mime not in accepted:
            continue
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            continue
        out.append(llm.Attachment(type=mime, content=raw))
    return out


@dataclass
class Turn:
    """One earlier exchange as an older plugin reads it from `conversation.responses`: its input
    (a user prompt or tool results), the chain before the reply, and the reply message."""

    prompt: str | None
    tool_results: list[Any]
    chain: list[Any]
    reply: Any = None


@dataclass
class History:
    """The transcript in `llm`'s two forms: the message chain and the earlier turns."""

    messages: list[Any] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)


def to_history(
    llm: Any,
    model: Any,
    system: str | None,
    transcript: Sequence[Mapping[str, Any]],
    message: str | None,
) -> History:
    """The system prompt and the transcript as `llm` messages (the new message is not included:
    it is the prompt). Tool calls become `tool_call` parts of the assistant message and their
    results a `tool` message right after it; a call without its result (or a result without
    its call) is left out, since model APIs reject either half alone. A transcript that
    already ends with the new message (the worker may append it first) does not repeat it."""
    from llm.parts import AttachmentPart, Message, TextPart, ToolCallPart, ToolResultPart

    results = tool_results_by_call(transcript)

    msgs = [m for m in transcript if m.get("role") in ("user", "assistant")]
    if (
        message is not None
        and msgs
        and msgs[-1].get("role") == "user"
        and text_of(msgs[-1].get("content")) == message
    ):
        msgs = msgs[:-1]

    out = History()
    if system:
        out.messages.append(Message(role="system", parts=[TextPart(text=system)]))
    pending: Turn | None = None  # the user input that waits for its reply

    for m in msgs:
        if m.get("role") == "user":
            text = text_of(m.get("content"))
            parts: list[Any] = [TextPart(text=text)] if text else []
            parts += [AttachmentPart(attachment=a) for a in _images(llm, model, m.get("content"))]
            if not parts:
                continue
            out.messages.append(Message(role="user", parts=parts))
            if pending is not None and pending.reply is None and pending.prompt is not None:
                pending.prompt = f"{pending.prompt}\n\n{text}" if text else pending.prompt
                pending.chain = list(out.messages)
            else:
                pending = Turn(prompt=text, tool_results=[], chain=list(out.messages))
                out.turns.append(pending)
            continue
        if not usable_assistant(m):
            continue
        text = text_of(m.get("content"))
        calls = [b for b in tool_calls_of(m) if b["id"] in results]
        if not text and not calls:
            continue
        parts = [TextPart(text=text)] if text else []
        parts += [
            ToolCallPart(
                name=b["name"], arguments=arguments_object(b.get("arguments")), tool_call_id=b["id"]
            )
            for b in calls
        ]
        reply = Message(role="assistant", parts=parts)
        if pending is None or pending.reply is not None:
            # An assistant message without a user message before it (a transcript that starts
            # mid-conversation): its turn has no input of its own.
            pending = Turn(prompt=None, tool_results=[], chain=list(out.messages))
            out.turns.append(pending)
        out.messages.append(reply)
        pending.reply = reply
        if calls:
            tool_results = [
                llm.ToolResult(
                    name=b["name"],
                    output=tool_result_text(results[b["id"]]),
                    tool_call_id=b["id"],
                )
                for b in calls
            ]
            out.messages.append(
                Message(
                    role="tool",
                    parts=[
                        ToolResultPart(name=r.name, output=r.output, tool_call_id=r.tool_call_id)
                        for r in tool_results
                    ],
                )
            )
            pending = Turn(prompt=None, tool_results=tool_results, chain=list(out.messages))
            out.turns.append(pending)
    return out


def earlier_responses(llm: Any, model: Any, turns: Sequence[Turn]) -> list[Any]:
    """The earlier turns as finished `llm` responses, for plugins that read the history from
    `conversation.responses` (each response's prompt text, tool results, reply and calls).
    A turn that got no reply (its run failed) is left out: such plugins would send an empty
    assistant message, which model APIs reject; the message chain still has it."""
    out = []
    for turn in turns:
        reply = turn.reply
        if reply is None:
            continue
        data = {
            "model": model.model_id,
            "prompt": {"messages": [m.to_dict() for m in turn.chain]},
            "messages": [reply.to_dict()],
        }
        response = llm.Response.from_dict(data, model=model)
        response.prompt = llm.Prompt(
            turn.prompt,
            model=model,
            tool_results=turn.tool_results,
            messages=turn.chain,
        )
        out.append(response)
    return out
