"""`sessiontool.budgets`: the spending limits that refuse and stop runs (docs/budgets.md).

    "sessiontool": {"budgets": [
      {"window": "day", "limit": 5},                         // every agent, per UTC day
      {"window": "session", "limit": 1, "agent": "main"},    // each session of agent main
      {"window": "run", "limit": 0.25, "model": "openai/gpt-4o", "name": "gpt4o-run"}
    ]}

A limit is in the currency of the price table (USD). `agent` and `model` narrow a budget to
the runs of that agent or model (and, for `day` and `session`, to that agent's or model's
spend). Parsed here, once, so a bad entry fails every command with exit 2 naming the file and
the entry, before any worker finds it wrong."""

from __future__ import annotations

import math
from typing import Any

from sessiontool.errors import ConfigError
from sessiontool.structs import Value

WINDOWS = ("day", "session", "run")
_KEYS = frozenset({"window", "limit", "agent", "model", "name"})


class Budget(Value):
    """One spending limit: over a `window` (a UTC day, a session's life, one run), USD.
    (A Value, not a dataclass: every command that loads a config with budgets builds these.)"""

    __slots__ = ("name", "window", "limit", "agent", "model")

    name: str
    window: str
    limit: float
    agent: str | None
    model: str | None

    def __init__(
        self,
        name: str,
        window: str,
        limit: float,
        agent: str | None = None,
        model: str | None = None,
    ) -> None:
        self.name, self.window, self.limit, self.agent, self.model = (
            name,
            window,
            limit,
            agent,
            model,
        )

    def applies(self, agent_id: str, model: str | None) -> bool:
        """Whether a run of this agent on this model (None: not known) is under it."""
        if self.agent is not None and self.agent != agent_id:
            return False
        return self.model is None or model is None or same_model(self.model, model)


def same_model(wanted: str, model: str) -> bool:
    """`gpt-4o` matches `openai/gpt-4o` and the reverse; a full name matches itself."""
    if wanted == model:
        return True
    return wanted.partition("/")[2] == model or model.partition("/")[2] == wanted


def _name(item: dict[str, Any]) -> str:
    parts = [str(item["window"])]
    parts += [f"{k}={item[k]}" for k in ("agent", "model") if item.get(k)]
    return " ".join(parts)


def _entry(item: Any, where: str) -> Budget:
    if not isinstance(item, dict):
        raise ConfigError(f"{where}: expected an object, got {item!r}")
    unknown = sorted(set(item) - _KEYS)
    if unknown:
        raise ConfigError(
            f"{where}: unknown key {unknown[0]!r} (valid: {', '.join(sorted(_KEYS))})"
        )
    window = item.get("window")
    if window not in WINDOWS:
        raise ConfigError(f"{where}.window: expected one of {', '.join(WINDOWS)}, got {window!r}")
    limit = item.get("limit")
    if (
        isinstance(limit, bool)
        or not isinstance(limit, int | float)
        or not math.isfinite(limit)
        or limit < 0
    ):
        raise ConfigError(f"{where}.limit: expected a non-negative amount in USD, got {limit!r}")
    for k in ("agent", "model", "name"):
        v = item.get(k)
        if v is not None and (not isinstance(v, str) or not v.strip()):
            raise ConfigError(f"{where}.{k}: expected a non-empty string, got {v!r}")
    return Budget(
        name=item.get("name") or _name(item),
        window=str(window),
        limit=float(limit),
        agent=item.get("agent"),
        model=item.get("model"),
    )


def parse_budgets(value: Any, where: str) -> tuple[Budget, ...]:
    """The budgets of `sessiontool.budgets` (`where` names the file and key for errors)."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ConfigError(f"{where}: expected a list of budgets, got {value!r}")
    out = tuple(_entry(item, f"{where}[{i}]") for i, item in enumerate(value))
    names = [b.name for b in out]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise ConfigError(f'{where}: two budgets are named {dup!r}: give one a "name"')
    return out
