"""`doctor`'s look at `sessiontool.budgets`: a budget that cannot be enforced (docs/budgets.md).

A run's spend is priced from the price table; a model with no price there counts only the cost
its transcript records, which sessiontool's own runners leave at 0 unless the model's API
reports one: a budget over such a model would never stop its runs. And a run that OpenClaw's
gateway carries out is stopped mid-turn on the output tokens the gateway tells after each model
call; its input tokens count only at the turn's end (a turn with one long prompt can pass its
limit by them)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sessiontool.context import Context


def _models_in_use(ctx: Context) -> list[str]:
    from sessiontool.state.config_models import known_models

    return [m for m in known_models(ctx.config) if m != "echo"]


def budget_findings(ctx: Context) -> Iterator[dict[str, Any]]:
    """(kind, path, detail, hint) of each budget that cannot be enforced, as warnings."""
    from sessiontool.state.budget_config import same_model
    from sessiontool.state.detect import detect, local_agent_ids
    from sessiontool.state.prices import lookup, prices_of

    budgets = ctx.config.budgets
    if not budgets:
        return
    where = str(ctx.config.own_file or "config")
    prices = prices_of(ctx.config.providers)
    in_use = _models_in_use(ctx)
    for b in budgets:
        models = [m for m in in_use if same_model(b.model, m)] if b.model else in_use
        if b.model and not models:
            models = [b.model]
        for m in models:
            p, _, name = m.partition("/") if "/" in m else ("", "", m)
            if lookup(prices, p, name) is None:
                yield {
                    "kind": "budget-unenforceable",
                    "path": where,
                    "detail": f"budget {b.name}: no price for the model {m}: its runs count "
                    "only the cost their transcripts record",
                    "hint": f"add a cost to models.providers.<provider>.models[] for {m}",
                }
    gateway = [a for a in local_agent_ids(ctx.paths) if detect(ctx.paths, a).gateway_written]
    if gateway:
        yield {
            "kind": "budget-not-stopping",
            "path": where,
            "detail": "runs through OpenClaw's gateway (agents "
            f"{', '.join(gateway)}) are stopped mid-turn on the output tokens the gateway "
            "tells after each model call; their input tokens count only at the turn's end",
            "hint": "docs/budgets.md",
        }
