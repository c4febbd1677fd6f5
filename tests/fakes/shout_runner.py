"""A runner a newcomer might add (tests/test_tables.py): the message, shouted. Its module is
the whole of it; the one row that names it is patched into `state/runnertable.py`'s table."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from sessiontool.errors import ConfigError
from sessiontool.runs.runners.base import RunnerResult, estimated_usage


def check(runner: dict[str, Any], where: str, name: Callable[[str], str]) -> None:
    if not isinstance(runner.get("volume", 1), int):
        raise ConfigError(f"{name(where + '.volume')}: expected a whole number")


class ShoutRunner:
    def __init__(self, cfg: Mapping[str, Any]) -> None:
        self.volume = int(cfg.get("volume", 1))

    def run(
        self,
        request: dict[str, Any],
        *,
        env: dict[str, str],
        on_agent_pid: Callable[[int], object],
        deadline: float | None,
    ) -> RunnerResult:
        reply = str(request.get("message", "")).upper() + "!" * self.volume
        return RunnerResult(reply=reply, usage=estimated_usage(None, None, reply), model="shout")
