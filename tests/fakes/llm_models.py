"""Models for in-process tests of the llm runner, registered as an `llm` plugin for the length of
one test: `recorder` keeps what every call received (the prompt's message chain, system prompt,
earlier responses, tool results) and answers from a script; `sleeper` blocks until released, so
deadlines and interruptions can be tested without a real model."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import llm


@dataclass
class Call:
    messages: list[dict[str, Any]]
    system: str
    prompt: str
    previous: list[str | None]
    tool_results: list[dict[str, Any]]
    tools: list[str]


@dataclass
class Script:
    """Each call's answer: a string, or `{"text"?, "tool_calls"?: [...], "usage"?: (in, out)}`."""

    answer: Callable[[Call], Any] = lambda call: "ok"
    calls: list[Call] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)


SCRIPT = Script()


class Recorder(llm.Model):
    model_id = "recorder"
    supports_tools = True

    def execute(
        self, prompt: Any, stream: bool, response: Any, conversation: Any = None
    ) -> Iterator[str]:
        call = Call(
            messages=[m.to_dict() for m in prompt.messages],
            system=prompt.system,
            prompt=prompt.prompt,
            previous=[r.prompt.prompt for r in conversation.responses] if conversation else [],
            tool_results=[
                {"name": r.name, "output": r.output, "exception": r.exception}
                for r in prompt.tool_results
            ],
            tools=[t.name for t in prompt.tools],
        )
        SCRIPT.calls.append(call)
        answer = SCRIPT.answer(call)
        if isinstance(answer, str):
            answer = {"text": answer}
        for tc in answer.get("tool_calls", []):
            response.add_tool_call(llm.ToolCall(name=tc["name"], arguments=tc.get("arguments", {})))
        usage = answer.get("usage", (7, 3))
        response.set_usage(input=usage[0], output=usage[1], details=answer.get("details"))
        if answer.get("text"):
            yield answer["text"]


class NoTools(Recorder):
    model_id = "recorder-no-tools"
    supports_tools = False


class Sleeper(llm.Model):
    model_id = "sleeper"

    def execute(
        self, prompt: Any, stream: bool, response: Any, conversation: Any = None
    ) -> Iterator[str]:
        SCRIPT.release.wait(600)  # released by the test fixture at the latest
        yield "woke"


class Failing(llm.Model):
    model_id = "failing"

    def execute(
        self, prompt: Any, stream: bool, response: Any, conversation: Any = None
    ) -> Iterator[str]:
        raise llm.ModelError("the service said no: quota exceeded")
        yield ""


class Plugin:
    @staticmethod
    @llm.hookimpl
    def register_models(register: Any) -> None:
        register(Recorder())
        register(NoTools())
        register(Sleeper())
        register(Failing())
