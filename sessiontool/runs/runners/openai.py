"""The openai runner: an OpenAI-compatible chat-completions endpoint (OpenAI, Ollama, llama.cpp
server, vLLM) over standard-library HTTP, with the session transcript as the conversation.

It is built from three parts that a tool-calling loop reuses as they are: `to_chat_messages`
(transcript -> chat messages, tool calls and tool results included), `chat_completion` (one
HTTP call, deadline-aware) and `parse_completion` (response -> text, tool calls, usage)."""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sessiontool import __version__
from sessiontool.runs.runners import spend
from sessiontool.runs.runners.base import (
    RunnerError,
    RunnerResult,
    RunnerTimeout,
    format_seconds,
    make_usage,
    positive_seconds,
    requested_model,
    split_model,
    text_of,
    usage_from,
)
from sessiontool.runs.runners.turns import (
    add_usage,
    arguments_json,
    call_offered,
    too_many_rounds,
    tool_calls_of,
    tool_result_message,
    tool_result_text,
    tool_results_by_call,
    tool_use_turn,
    usable_assistant,
)
from sessiontool.runs.tools import offered_tools, tool_context

if TYPE_CHECKING:
    from sessiontool.context import Context

DEFAULT_BASE_URL = "http://127.0.0.1:11434/v1"
DEFAULT_TIMEOUT = 600.0
API = "openai-completions"
EXCERPT = 300
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})

FINISH_TO_STOP = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "toolUse",
    "function_call": "toolUse",
    "content_filter": "error",
}


# -- transcript -> chat messages ------------------------------------------------------------


def _user_content(content: Any) -> str | list[dict[str, Any]]:
    """Plain text, or content parts when the message carries images (data URLs)."""
    if not isinstance(content, list):
        return text_of(content)
    images = [
        b
        for b in content
        if isinstance(b, Mapping) and b.get("type") == "image" and isinstance(b.get("data"), str)
    ]
    if not images:
        return text_of(content)
    parts: list[dict[str, Any]] = []
    for b in content:
        if not isinstance(b, Mapping):
            continue
        if b.get("type") == "text" and isinstance(b.get("text"), str):
            parts.append({"type": "text", "text": b["text"]})
        elif b in images:
            mime = b.get("mimeType") if isinstance(b.get("mimeType"), str) else "image/png"
            url = f"data:{mime};base64,{b['data']}"
            parts.append({"type": "image_url", "image_url": {"url": url}})
    return parts


def chat_tool_calls(calls: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """toolCall blocks as a chat message's `tool_calls`."""
    return [
        {
            "id": c["id"],
            "type": "function",
            "function": {"name": c["name"], "arguments": arguments_json(c.get("arguments"))},
        }
        for c in calls
    ]


def to_chat_messages(
    system: str | None,
    transcript: Sequence[Mapping[str, Any]],
    message: str | None,
    *,
    tools: bool = False,
) -> list[dict[str, Any]]:
    """The conversation for one model call: the system prompt, the transcript, the new message.

    With `tools`, assistant `toolCall` blocks become `tool_calls` and `toolResult` messages
    become role `tool` messages placed right after the call they answer (the API rejects a call
    without its answer or an answer without its call, so unpaired ones are dropped). Without
    `tools`, both are left out. The new message is not added again when the transcript already
    ends with it (the worker may append it before running the agent)."""
    results = tool_results_by_call(transcript) if tools else {}

    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": system})
    for m in transcript:
        role = m.get("role")
        if role == "user":
            out.append({"role": "user", "content": _user_content(m.get("content"))})
        elif role == "assistant":
            if not usable_assistant(m):
                continue
            text = text_of(m.get("content"))
            calls = [b for b in tool_calls_of(m) if b["id"] in results] if tools else []
            if not text and not calls:
                continue
            entry: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                entry["tool_calls"] = chat_tool_calls(calls)
            out.append(entry)
            for b in calls:
                out.append(
                    {
                        "role": "tool",
                        "tool_call_id": b["id"],
                        "content": tool_result_text(results[b["id"]]),
                    }
                )
        # toolResult messages were placed after their calls above (or left out); other roles
        # are not part of a chat conversation.
    if isinstance(message, str):
        last = out[-1] if out else None
        if not (last and last["role"] == "user" and last["content"] == message):
            out.append({"role": "user", "content": message})
    return out


# -- one HTTP call --------------------------------------------------------------------------


def _opener(url: str) -> urllib.request.OpenerDirector:
    """Loopback endpoints (Ollama, llama.cpp, tests) never go through an HTTP proxy from the
    environment: urllib would otherwise send even 127.0.0.1 to $HTTP_PROXY."""
    host = urllib.parse.urlsplit(url).hostname or ""
    if host in LOOPBACK_HOSTS or host.startswith("127."):
        return urllib.request.build_opener(urllib.request.ProxyHandler({}))
    return urllib.request.build_opener()


def _excerpt(body: bytes) -> str:
    """The useful part of an error body: an OpenAI-style `error.message` when there is one."""
    text = body.decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        err = data.get("error")
        message = err.get("message") if isinstance(err, dict) else None
        if isinstance(message, str):
            return message[:EXCERPT]
        if isinstance(err, str):
            return err[:EXCERPT]
    text = " ".join(text.split())
    return (text[:EXCERPT] + "...") if len(text) > EXCERPT else (text or "(empty body)")


def endpoint(cfg: Mapping[str, Any]) -> str:
    base = cfg.get("baseUrl") or DEFAULT_BASE_URL
    if not isinstance(base, str) or not base.startswith(("http://", "https://")):
        raise RunnerError(f"runner.baseUrl: expected an http(s) URL, got {base!r}")
    return base.rstrip("/") + "/chat/completions"


def _headers(cfg: Mapping[str, Any], env: Mapping[str, str] | None) -> dict[str, str]:
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json",
        "User-Agent": f"sessiontool/{__version__}",
    }
    key_env = cfg.get("apiKeyEnv")
    if isinstance(key_env, str) and key_env:
        key = (env or {}).get(key_env) or os.environ.get(key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
    extra = cfg.get("headers")
    if extra is not None:
        if not isinstance(extra, Mapping):
            raise RunnerError("runner.headers: expected an object of strings")
        headers.update({str(k): str(v) for k, v in extra.items()})
    return headers


def chat_completion(
    cfg: Mapping[str, Any],
    messages: list[dict[str, Any]],
    *,
    model: str,
    tools: list[dict[str, Any]] | None = None,
    deadline: float | None = None,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """POST one non-streaming chat completion and return the decoded response object.

    The socket timeout is the shorter of the runner's `timeoutSeconds` and what is left before
    `deadline`; running out of either raises RunnerTimeout. Every other failure is a
    RunnerError that says what to check (the URL, the status and the server's own message)."""
    url = endpoint(cfg)
    own = positive_seconds(cfg, "timeoutSeconds", "runner") or DEFAULT_TIMEOUT
    limit = own
    if deadline is not None:
        limit = min(own, deadline - time.monotonic())
        if limit <= 0:
            raise RunnerTimeout("runner timed out after 0s (no time left before the run deadline)")
    body: dict[str, Any] = {"model": model, "messages": messages, "stream": False}
    if tools:
        body["tools"] = tools
    extra_body = cfg.get("body")
    if isinstance(extra_body, Mapping):
        body.update(extra_body)
    req = urllib.request.Request(
        url,
        data=json.dumps(body, ensure_ascii=False).encode("utf-8"),
        headers=_headers(cfg, env),
        method="POST",
    )
    try:
        with _opener(url).open(req, timeout=limit) as resp:
            raw = resp.read()
    except urllib.error.HTTPError as exc:
        try:
            err_body = exc.read()
        except OSError:
            err_body = b""
        hint = None
        if exc.code in (401, 403):
            key_env = cfg.get("apiKeyEnv")
            hint = f"is {key_env} set to a valid key?" if key_env else "set runner.apiKeyEnv"
        raise RunnerError(
            f"{url} answered HTTP {exc.code}: {_excerpt(err_body)}", hint=hint
        ) from exc
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, TimeoutError):
            raise RunnerTimeout(f"runner timed out after {format_seconds(limit)}") from exc
        raise RunnerError(f"cannot reach {url}: {exc.reason}") from exc
    except TimeoutError as exc:
        raise RunnerTimeout(f"runner timed out after {format_seconds(limit)}") from exc
    except OSError as exc:
        raise RunnerError(f"cannot reach {url}: {exc}") from exc
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise RunnerError(f"{url} did not answer with JSON: {_excerpt(raw)}") from exc
    if not isinstance(data, dict):
        raise RunnerError(f"{url} answered with something other than an object: {_excerpt(raw)}")
    if data.get("error") and not data.get("choices"):
        raise RunnerError(f"{url} answered with an error: {_excerpt(raw)}")
    return data


# -- response -> reply ----------------------------------------------------------------------


@dataclass
class Completion:
    """One model call's answer, in OpenClaw's terms."""

    text: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, Any] = field(default_factory=lambda: make_usage(0, 0))
    stop_reason: str = "stop"
    model: str | None = None

    def content_blocks(self) -> list[dict[str, Any]]:
        """The assistant message content a transcript stores: text, then toolCall blocks."""
        blocks: list[dict[str, Any]] = []
        if self.text:
            blocks.append({"type": "text", "text": self.text})
        blocks.extend(self.tool_calls)
        return blocks


def _parse_arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw) if raw.strip() else {}
        except ValueError:
            return raw  # kept as given; the tool loop reports it to the model
    return raw if raw is not None else {}


def parse_completion(data: Mapping[str, Any]) -> Completion:
    """Text, tool calls (as OpenClaw `toolCall` blocks), usage and stop reason of a response."""
    choices = data.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else None
    msg = first.get("message") if isinstance(first, Mapping) else None
    if not isinstance(msg, Mapping):
        raise RunnerError(
            f"the response has no choices[0].message: {_excerpt(json.dumps(data).encode())}"
        )
    content = msg.get("content")
    text = content if isinstance(content, str) else text_of(content)
    calls: list[dict[str, Any]] = []
    raw_calls = msg.get("tool_calls")
    if isinstance(raw_calls, list):
        for i, call in enumerate(raw_calls):
            fn = call.get("function") if isinstance(call, Mapping) else None
            if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
                continue
            call_id = (
                call.get("id")
                if isinstance(call.get("id"), str) and call.get("id")
                else f"call_{i}"
            )
            calls.append(
                {
                    "type": "toolCall",
                    "id": call_id,
                    "name": fn["name"],
                    "arguments": _parse_arguments(fn.get("arguments")),
                }
            )
    finish = first.get("finish_reason") if isinstance(first, Mapping) else None
    stop = FINISH_TO_STOP.get(finish, "stop") if isinstance(finish, str) else "stop"
    if calls:
        stop = "toolUse"
    usage = usage_from(data.get("usage")) or make_usage(0, 0)
    model = data.get("model")
    return Completion(
        text=text.strip() if text else "",
        tool_calls=calls,
        usage=usage,
        stop_reason=stop,
        model=model if isinstance(model, str) else None,
    )


# -- the runner -----------------------------------------------------------------------------


class OpenAIRunner:
    """`{"type": "openai", "baseUrl": ..., "model": ..., "apiKeyEnv"?: ..., "provider"?: ...,
    "timeoutSeconds"?: N, "headers"?: {...}}`.

    The model is the run's (unless that is only the echo/type-name placeholder), else the
    runner's. A `provider/` prefix equal to the runner's `provider` is removed before sending
    (OpenClaw-style `ollama/llama3.2` names); any other name is sent as written, since real
    ids contain slashes too (`meta-llama/Llama-3.1-8B`)."""

    def __init__(self, cfg: Mapping[str, Any]) -> None:
        self.cfg = cfg
        endpoint(cfg)  # fail on a bad URL before any run starts
        provider = cfg.get("provider")
        self.provider = provider if isinstance(provider, str) and provider else None

    def resolve_model(self, request: Mapping[str, Any]) -> tuple[str, str, str]:
        """(name sent to the API, provider recorded, model recorded)."""
        cfg_model = self.cfg.get("model")
        model = requested_model(request, "openai") or (
            cfg_model if isinstance(cfg_model, str) else None
        )
        if not model:
            raise RunnerError(
                "the openai runner has no model: set runner.model or the agent's model"
            )
        prefix, rest = split_model(model)
        if prefix and self.provider and prefix == self.provider and rest:
            return rest, prefix, rest
        if prefix and rest:
            return model, self.provider or prefix, rest
        return model, self.provider or "openai", model

    def run(
        self,
        request: dict[str, Any],
        *,
        env: dict[str, str],
        on_agent_pid: Callable[[int], object],
        deadline: float | None,
    ) -> RunnerResult:
        api_model, provider, model = self.resolve_model(request)
        system = request.get("system")
        message = request.get("message")
        transcript = request.get("messages")
        tool_ctx = self._tool_context(env)
        tool_specs = offered_tools(tool_ctx) if tool_ctx is not None else []
        messages = to_chat_messages(
            system if isinstance(system, str) else None,
            [m for m in transcript if isinstance(m, Mapping)]
            if isinstance(transcript, list)
            else [],
            message if isinstance(message, str) else None,
            tools=bool(tool_specs),
        )
        max_rounds = tool_ctx.config.max_tool_rounds if tool_ctx is not None else 0
        total = make_usage(0, 0)
        extra: list[dict[str, Any]] = []
        rounds = 0
        cfg = with_reasoning(self.cfg, request.get("thinkingLevel"))
        while True:
            if rounds:
                take_guidance(env, messages, extra)
            data = chat_completion(
                cfg,
                messages,
                model=api_model,
                tools=tool_specs or None,
                deadline=deadline,
                env=env,
            )
            done = parse_completion(data)
            add_usage(total, done.usage)
            result = RunnerResult(
                reply="",
                usage=total,
                model=model,
                provider=provider,
                api=API,
                last_call_usage=done.usage,
                extra_messages=extra,
            )
            if not done.tool_calls or not tool_specs:
                result.reply = done.text
                # no tools were offered: a stray call is not a pending turn
                result.stop_reason = "stop" if done.stop_reason == "toolUse" else done.stop_reason
                return result
            result.reply = done.text  # kept if the run stops here
            spend.check(result)  # between model calls: a budget crossed stops the run
            result.reply = ""
            if rounds >= max_rounds:
                err = too_many_rounds(max_rounds)
                err.partial = result
                raise err
            rounds += 1
            extra.append(
                tool_use_turn(done.content_blocks(), API, provider, model=model, usage=done.usage)
            )
            messages.append(
                {
                    "role": "assistant",
                    "content": done.text or None,
                    "tool_calls": chat_tool_calls(done.tool_calls),
                }
            )
            offered = {t["function"]["name"] for t in tool_specs}
            for call in done.tool_calls:
                outcome = call_offered(tool_ctx, offered, call["name"], call.get("arguments"))
                text = outcome.text()
                extra.append(tool_result_message(call["id"], call["name"], text, outcome))
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": text})

    def _tool_context(self, env: Mapping[str, str]) -> Context | None:
        """The run's own session as the tools' requester; None when tools are off (runner
        `"tools": false`) or the run has no session (a bare runner call)."""
        if self.cfg.get("tools") is False or not env.get("SESSIONTOOL_SESSION_KEY"):
            return None
        return tool_context(env)


# OpenClaw's levels above what a reasoning_effort setting has.
STRONGEST = {"xhigh": "high", "max": "high", "ultra": "high"}


def with_reasoning(cfg: Mapping[str, Any], thinking: Any) -> Mapping[str, Any]:
    """The run's thinking level (a spawn's, else the session's) as the request's
    `reasoning_effort` (OpenAI's words: `minimal` `low` `medium` `high`; `xhigh`, `max` and
    `ultra` are sent as `high`, `off` and `adaptive` send none)."""
    effort = STRONGEST.get(str(thinking), thinking)
    if effort not in ("minimal", "low", "medium", "high"):
        return cfg
    body = dict(cfg["body"]) if isinstance(cfg.get("body"), Mapping) else {}
    body["reasoning_effort"] = effort
    return {**cfg, "body": body}


def take_guidance(env: dict[str, str], messages: list[dict[str, Any]], extra: list[Any]) -> None:
    """Guidance steered into this run (`send --mode steer`) since the last model call: user
    messages before the next one, in the transcript too."""
    from sessiontool.runs.steer import take_from_env, user_message

    for item in take_from_env(env):
        messages.append({"role": "user", "content": item["text"]})
        extra.append(user_message(item))
