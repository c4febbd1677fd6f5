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


def get_runner(cfg: Mapping[str, Any]) -> Runner:
    """The runner for a runner config object (`{"type": "echo"|"command"|"openai"|"llm", ...}`),
    looked up in the one table of runners (`state/runnertable.py`).

    The runner module is imported here, not at module level: most commands never run an agent
    and should not pay for urllib or subprocess set-up at start-up."""
    import importlib

    from sessiontool.state.runnertable import RUNNERS, expected_types

    rtype = cfg.get("type", "echo")
    row = RUNNERS.get(rtype) if isinstance(rtype, str) else None
    if row is None:
        raise RunnerError(f"runner.type: expected one of {expected_types()}, got {rtype!r}")
    module, cls, _check = row
    runner: Runner = getattr(importlib.import_module(module), cls)(cfg)
    return runner


__all__ = [
    "Runner",
    "RunnerError",
    "RunnerResult",
    "RunnerTimeout",
    "get_runner",
    "make_usage",
    "usage_from",
]
