"""The price table: the config's prices (`models.providers.<p>.models[].cost`, USD per million
tokens, OpenClaw's field) and how one turn's tokens are priced with it.

Kept in the state layer because two sides price the same turns: the reports (`usage`, the
HTML pages, the budgets' spend) and a running run's worker, which stops a run whose own spend
crosses its budget (runs/runners/spend.py)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from sessiontool.structs import Value

PRICE_FIELDS = ("input", "output", "cacheRead", "cacheWrite")


class Price(Value):
    """USD per million tokens of each kind (a Value: no dataclass created at import)."""

    __slots__ = ("input", "output", "cache_read", "cache_write")

    input: float
    output: float
    cache_read: float
    cache_write: float

    def __init__(self, input: float, output: float, cache_read: float, cache_write: float) -> None:
        self.input, self.output, self.cache_read, self.cache_write = (
            input,
            output,
            cache_read,
            cache_write,
        )

    def of(self, i: int, o: int, cr: int, cw: int) -> float:
        return (
            i * self.input + o * self.output + cr * self.cache_read + cw * self.cache_write
        ) / 1_000_000


Prices = dict[tuple[str, str], Price]


def _price_number(v: Any) -> float | None:
    if v is None:
        return 0.0
    if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v >= 0:
        return float(v)
    return None


def prices_of(providers: Mapping[str, Any]) -> Prices:
    """(provider, model id) → price, from every provider's models that give a usable `cost`."""
    out: Prices = {}
    for pname, p in providers.items():
        models = p.get("models") if isinstance(p, dict) else None
        if not isinstance(models, list):
            continue
        for m in models:
            if not isinstance(m, dict) or not isinstance(m.get("id"), str):
                continue
            cost = m.get("cost")
            if not isinstance(cost, dict):
                continue
            nums = [_price_number(cost.get(f)) for f in PRICE_FIELDS]
            if any(n is None for n in nums):
                continue
            out[(str(pname), m["id"])] = Price(*(n or 0.0 for n in nums))
    return out


def lookup(prices: Prices, provider: str, model: str) -> Price | None:
    """The price of a model as a transcript names it: (provider, model), a `provider/model`
    name, or a bare model id that one provider alone prices."""
    if (provider, model) in prices:
        return prices[(provider, model)]
    if "/" in model:
        p, _, m = model.partition("/")
        if (p, m) in prices:
            return prices[(p, m)]
    if not provider:
        found = [v for (_p, m), v in prices.items() if m == model]
        if len(found) == 1:
            return found[0]
    return None


def usage_cost(prices: Prices, provider: str, model: str, usage: Mapping[str, Any]) -> float:
    """What a usage object (OpenClaw's: input, output, cacheRead, cacheWrite, cost.total) costs:
    the configured price when there is one, else the cost the usage itself reports."""

    def n(k: str) -> int:
        v = usage.get(k)
        return int(v) if isinstance(v, int | float) and not isinstance(v, bool) else 0

    price = lookup(prices, provider, model)
    if price is not None:
        return price.of(n("input"), n("output"), n("cacheRead"), n("cacheWrite"))
    cost = usage.get("cost")
    total = cost.get("total") if isinstance(cost, Mapping) else None
    ok = isinstance(total, int | float) and not isinstance(total, bool) and math.isfinite(total)
    return float(total) if ok else 0.0  # type: ignore[arg-type]
