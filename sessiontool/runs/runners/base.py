"""The runner interface: one request in, one `RunnerResult` out, whatever answers (the built-in
echo agent, any program, or an OpenAI-compatible endpoint). The engine only ever sees this
module's names (and `get_runner` in the package, which picks the implementation), so a new runner
type never changes the worker."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from sessiontool.errors import SessiontoolError
from sessiontool.state.runnertable import MAX_SECONDS

# What a reply or tool result that said nothing reads as, to a model and to the announce.
NO_OUTPUT = "(no output)"


@dataclass
class RunnerResult:
    """What one run produced. `usage` is always complete (every key, every number), so the
    worker can sum and store it without checking."""

    reply: str
    usage: dict[str, Any]
    model: str | None = None
    provider: str | None = None
    api: str = "sessiontool"
    stop_reason: str = "stop"
    last_call_usage: dict[str, Any] | None = None
    extra_messages: list[dict[str, Any]] = field(default_factory=list)


class RunnerError(SessiontoolError):
    """The run failed; the message is what a person needs to fix it (e.g. the stderr tail).
    `partial` carries what the run did produce before failing (a tool loop's calls and
    results, their usage), so the transcript and the record still show it."""

    partial: RunnerResult | None = None


class RunnerTimeout(RunnerError):
    """The runner's own `timeoutSeconds` or the run deadline was hit; the agent's process group
    has already been killed when this is raised."""


class Runner(Protocol):
    def run(
        self,
        request: dict[str, Any],
        *,
        env: dict[str, str],
        on_agent_pid: Callable[[int], object],
        deadline: float | None,
    ) -> RunnerResult: ...


# -- usage ---------------------------------------------------------------------------------


def _num(value: Any) -> float | None:
    """A finite number from JSON, or None (bools and strings are not token counts)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not math.isfinite(value):
        return None
    return value


def _int(value: Any) -> int:
    n = _num(value)
    return max(0, int(n)) if n is not None else 0


def make_cost(cost: Mapping[str, Any] | float | int | None = None) -> dict[str, float]:
    """A complete cost object. A bare number is taken as the total (what OpenRouter reports)."""
    if cost is None or isinstance(cost, bool):
        return {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}
    if not isinstance(cost, Mapping):
        total = _num(cost) or 0
        return {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": total}
    out: dict[str, float] = {}
    for key in ("input", "output", "cacheRead", "cacheWrite"):
        out[key] = _num(cost.get(key)) or 0
    reported = _num(cost.get("total"))
    out["total"] = reported if reported is not None else sum(out.values())
    return out


def make_usage(
    input: int,
    output: int,
    cache_read: int = 0,
    cache_write: int = 0,
    cost: Mapping[str, Any] | float | None = None,
) -> dict[str, Any]:
    """OpenClaw's usage object, every field present. `totalTokens` counts cache reads and
    writes too, as OpenClaw does (a caller that was told the total sets it after)."""
    return {
        "input": input,
        "output": output,
        "cacheRead": cache_read,
        "cacheWrite": cache_write,
        "totalTokens": input + output + cache_read + cache_write,
        "cost": make_cost(cost),
    }


def estimate_tokens(text: str | None) -> int:
    """Characters / 4: the crude estimate used when a runner reports no usage, so token
    accounting is still exercised (and clearly an estimate)."""
    return len(text or "") // 4


def estimated_usage(system: str | None, message: str | None, reply: str) -> dict[str, Any]:
    return make_usage(estimate_tokens((system or "") + (message or "")), estimate_tokens(reply))


def usage_from(raw: Any, cost: Any = None) -> dict[str, Any] | None:
    """Normalise a usage object someone else reported: ours (`input`/`output`/`cacheRead`...),
    OpenAI's (`prompt_tokens`/`completion_tokens`, cached tokens inside `prompt_tokens_details`)
    or Anthropic's (`input_tokens`/`output_tokens`). None when it is none of these.

    OpenAI counts cached tokens inside `prompt_tokens`; OpenClaw keeps them apart (`input` is
    the uncached part, `cacheRead` the cached one), so they are split out here."""
    if not isinstance(raw, Mapping):
        return None
    if cost is None:
        cost = raw.get("cost")
    if "input" in raw or "output" in raw:
        reported = _num(raw.get("totalTokens"))
        usage = make_usage(
            _int(raw.get("input")),
            _int(raw.get("output")),
            _int(raw.get("cacheRead")),
            _int(raw.get("cacheWrite")),
            cost=cost,
        )
        if reported is not None:
            usage["totalTokens"] = int(reported)
        return usage
    if "prompt_tokens" in raw or "completion_tokens" in raw:
        details = raw.get("prompt_tokens_details")
        cached = _int(details.get("cached_tokens")) if isinstance(details, Mapping) else 0
        prompt = _int(raw.get("prompt_tokens"))
        cached = min(cached, prompt)
        return make_usage(prompt - cached, _int(raw.get("completion_tokens")), cached, cost=cost)
    if "input_tokens" in raw or "output_tokens" in raw:
        return make_usage(
            _int(raw.get("input_tokens")),
            _int(raw.get("output_tokens")),
            _int(raw.get("cache_read_input_tokens")),
            _int(raw.get("cache_creation_input_tokens")),
            cost=cost,
        )
    return None


# -- small shared helpers ------------------------------------------------------------------


def split_model(model: str | None) -> tuple[str | None, str | None]:
    """`provider/model` splits at the first `/` (spec §6); a bare name has no provider."""
    if not model:
        return None, None
    if "/" in model:
        provider, name = model.split("/", 1)
        if provider and name:
            return provider, name
    return None, model


def requested_model(request: Mapping[str, Any], runner_type: str) -> str | None:
    """The run's model, unless it is only the placeholder the resolution falls back to: the
    type name of the runner that runs it. Another type's name is a real model id (`echo` is
    llm-echo's model, which a `command` runner calling `llm -m {model}` must pass on)."""
    model = request.get("model")
    if isinstance(model, str) and model.strip() not in ("", runner_type):
        return model.strip()
    return None


def remaining(deadline: float | None) -> float | None:
    """Seconds until a `time.monotonic()` deadline (may be <= 0), or None without one."""
    return None if deadline is None else deadline - time.monotonic()


def format_seconds(seconds: float) -> str:
    """`30s`, `1.5s`: whole numbers without a fraction, so messages read naturally."""
    seconds = max(0.0, seconds)
    if abs(seconds - round(seconds)) < 0.05:
        return f"{round(seconds)}s"
    return f"{seconds:.1f}s"


# MAX_SECONDS (runnertable.py): longer is no timeout anyone meant; past it sleep() overflows.


def positive_seconds(cfg: Mapping[str, Any], key: str, where: str) -> float | None:
    """An optional positive number of seconds from a runner config."""
    value = cfg.get(key)
    if value is None:
        return None
    n = _num(value)
    if n is None or not 0 < n <= MAX_SECONDS:
        raise RunnerError(
            f"{where}.{key}: expected a positive number of seconds up to {MAX_SECONDS:,} "
            f"(about 31 years), got {value!r}"
        )
    return float(n)


def text_of(content: Any) -> str:
    """The text of a message's content: a string, or the `text` blocks joined by newlines."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            b["text"]
            for b in content
            if isinstance(b, Mapping) and b.get("type") == "text" and isinstance(b.get("text"), str)
        ]
        return "\n".join(parts)
    return ""
