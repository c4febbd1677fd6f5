"""A running run's own spend against its cost limit (a budget's room when it was submitted, or
`--max-cost`; the record's `costLimit`), checked each time its runner reports usage: the
`openai` and `llm` runners after every model call (`check`, between calls), the worker at the
end of any run (`crossed`: a `command` runner reports its usage only then).

The limit of the run under way is set by the worker around the runner call (`limited`), as the
abort signal's run is (turn.py): one worker process runs one turn at a time."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from sessiontool.runs.runners.base import RunnerError, RunnerResult
from sessiontool.state.prices import Prices, usage_cost

_current: dict[str, Any] = {"limit": None, "prices": None}


class BudgetStop(RunnerError):
    """The run's spend crossed its cost limit: it is stopped (`aborted`, reason `budget`), what
    it did so far kept in `partial`."""


def stop_message(limit: Mapping[str, Any], spent: float) -> str:
    """`budget day: the run spent 0.0123 USD, over the 0.0100 USD it had (limit 5 USD per
    day); stopped`, one line."""
    name = f"budget {limit['budget']}" if limit.get("budget") else "--max-cost"
    return (
        f"{name}: the run spent {spent:.4f} USD, over the {float(limit['usd']):.4f} USD "
        f"it had (limit {float(limit.get('limit', limit['usd'])):g} USD per "
        f"{limit.get('window', 'run')}); stopped"
    )


@contextmanager
def limited(limit: Mapping[str, Any] | None, prices: Prices) -> Iterator[None]:
    """The span of a runner call whose model calls are checked against `limit`."""
    _current.update(limit=limit, prices=prices)
    try:
        yield
    finally:
        _current.update(limit=None, prices=None)


def spent(
    prices: Prices, provider: str | None, model: str | None, usage: Mapping[str, Any]
) -> float:
    return usage_cost(prices, provider or "", model or "", usage)


def crossed(
    limit: Mapping[str, Any] | None,
    prices: Prices,
    provider: str | None,
    model: str | None,
    usage: Mapping[str, Any],
) -> float | None:
    """The run's spend when it is at or over its limit, else None (no limit: None)."""
    if not limit:
        return None
    cost = spent(prices, provider, model, usage)
    return cost if cost >= float(limit["usd"]) else None


def check(result: RunnerResult) -> None:
    """Between model calls: raise BudgetStop (with `result` as what the run did) when the run's
    spend so far is at or over the limit of the run under way."""
    limit, prices = _current["limit"], _current["prices"]
    if limit is None or prices is None:
        return
    cost = crossed(limit, prices, result.provider, model=result.model, usage=result.usage)
    if cost is not None:
        err = BudgetStop(stop_message(limit, cost))
        err.partial = result
        raise err
