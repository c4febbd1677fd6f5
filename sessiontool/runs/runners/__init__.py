"""Runners turn a run request into a reply (spec §6). Only the interface is imported here; the
runner implementations load lazily through `get_runner`, keeping start-up fast."""

from __future__ import annotations

from sessiontool.runs.runners.base import (
    Runner,
    RunnerError,
    RunnerResult,
    RunnerTimeout,
    get_runner,
    make_usage,
    usage_from,
)

__all__ = [
    "Runner",
    "RunnerError",
    "RunnerResult",
    "RunnerTimeout",
    "get_runner",
    "make_usage",
    "usage_from",
]
