"""The models a config names and what they cost: the list `spawn --model` and the announce
check a model name against, and the per-million-token prices a run's cost is computed from.

Apart from config.py, which reads and checks settings, because this walks every place a model
can be named (agent defaults, each agent and its runner, the providers' model lists)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from sessiontool.state.config import model_primary

if TYPE_CHECKING:
    from sessiontool.state.config import Config


def model_cost(cfg: Config, provider: str | None, model: str | None) -> dict[str, float] | None:
    """Per-million-token prices for a model, when the config gives them."""
    if not model:
        return None
    for pname, p in cfg.providers.items():
        if provider and pname != provider:
            continue
        models = p.get("models") if isinstance(p, dict) else None
        if not isinstance(models, list):
            continue
        for m in models:
            if isinstance(m, dict) and m.get("id") == model and isinstance(m.get("cost"), dict):
                prices = [_price(m["cost"].get(k, 0)) for k in ("input", "output")]
                if prices[0] is None or prices[1] is None:
                    return None  # a price of Infinity, NaN, -1 or "x": no estimate ("est $inf")
                return {"input": prices[0], "output": prices[1]}
    return None


def context_window(cfg: Config, provider: Any, model: str) -> int | None:
    """A model's `contextWindow` in the config's catalog (`models.providers.<p>.models[]`), the
    window OpenClaw's gateway lists for a session that stores its model but no contextTokens;
    `model` may be `provider/id`. None when the catalog does not say."""
    if "/" in model and not isinstance(provider, str):
        provider, model = model.split("/", 1)
    for pname, p in cfg.providers.items():
        if isinstance(provider, str) and provider and pname != provider:
            continue
        models = p.get("models") if isinstance(p, dict) else None
        for m in models if isinstance(models, list) else ():
            if isinstance(m, dict) and m.get("id") == model:
                w = m.get("contextWindow")
                if isinstance(w, int) and not isinstance(w, bool) and w > 0:
                    return w
    return None


def _price(value: Any) -> float | None:
    """A usable per-million-token price: a finite number, not negative (as `usage` takes it)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        n = float(value)
    except ValueError:
        return None
    return n if math.isfinite(n) and n >= 0 else None


def known_models(cfg: Config, *, demo: bool = True) -> list[str]:
    """Every model name the config knows, for `spawn --model` validation; `demo`: with
    sessiontool's demo `echo` model first (not on a store OpenClaw's gateway runs, whose agent
    answers with the install's models)."""
    names: list[str] = ["echo"] if demo else []

    def add(v: Any) -> None:
        primary, fallbacks = model_primary(v)
        for n in (primary, *fallbacks):
            if n and n not in names:
                names.append(n)

    add(cfg.get("agents.defaults.model"))
    add(cfg.get("agents.defaults.subagents.model"))
    dm = cfg.get("agents.defaults.models")
    if isinstance(dm, dict):
        for k in dm:
            add(k)
    for a in cfg.agents():
        add(a.model)
        for fb in a.model_fallbacks:
            add(fb)
        add(a.subagent_model)
        if a.runner and isinstance(a.runner.get("model"), str):
            add(a.runner["model"])
    default_runner = cfg.get("agents.defaults.runner")
    if isinstance(default_runner, dict) and isinstance(default_runner.get("model"), str):
        add(default_runner["model"])
    for pname, p in cfg.providers.items():
        models = p.get("models") if isinstance(p, dict) else None
        if isinstance(models, list):
            for m in models:
                if isinstance(m, dict) and isinstance(m.get("id"), str):
                    add(f"{pname}/{m['id']}")
    return names


def is_known_model(cfg: Config, name: str, *, demo: bool = True) -> bool:
    """Whether `name` is a model the config knows, with or without its `provider/`."""
    known = known_models(cfg, demo=demo)
    if name in known:
        return True
    return any("/" in k and k.split("/", 1)[1] == name for k in known)
