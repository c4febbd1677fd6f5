"""A runner a newcomer might add (tests/test_tables.py): the message, shouted. Its module is
the whole of it; the one row that names it is patched into `state/runnertable.py`'s table."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from sessiontool.runs.runners.base import RunnerResult, estimated_usage
from sessiontool.state.runnertable import Field

# The keys of its config object beside `type`, as the table's row holds them.
FIELDS = {
    "volume": Field({"type": "integer", "minimum": 0}, "a whole number", "how many `!`"),
}


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
