"""Runners turn a run request into a reply (spec §6). Only the interface (base.py) is imported
here; the runner implementations load lazily through `get_runner`, keeping start-up fast. The
choice of implementation lives here, above them all, so the interface below them never names
one (each implementation builds on it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sessiontool.runs.runners.base import (
    Runner,
    RunnerError,
    RunnerResult,
    RunnerTimeout,
    make_usage,
    usage_from,
)
from sessiontool.state.config import RUNNER_TYPES  # the config checks the same names


def get_runner(cfg: Mapping[str, Any]) -> Runner:
    """The runner for a runner config object (`{"type": "echo"|"command"|"openai"|"llm", ...}`).

    The runner modules are imported here, not at module level: most commands never run an agent
    and should not pay for urllib or subprocess set-up at start-up."""
    rtype = cfg.get("type", "echo")
    if rtype == "echo":
        from sessiontool.runs.runners.echo import EchoRunner

        return EchoRunner(cfg)
    if rtype == "command":
        from sessiontool.runs.runners.command import CommandRunner

        return CommandRunner(cfg)
    if rtype == "openai":
        from sessiontool.runs.runners.openai import OpenAIRunner

        return OpenAIRunner(cfg)
    if rtype == "llm":
        from sessiontool.runs.runners.llm import LLMRunner

        return LLMRunner(cfg)
    raise RunnerError(f"runner.type: expected one of {', '.join(RUNNER_TYPES)}, got {rtype!r}")


__all__ = [
    "Runner",
    "RunnerError",
    "RunnerResult",
    "RunnerTimeout",
    "get_runner",
    "make_usage",
    "usage_from",
]
