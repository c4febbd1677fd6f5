"""What an agent or delivery command sees of our environment: by default only what a program
needs to run (PATH, HOME, the locale, TZ, TMPDIR) and sessiontool's own SESSIONTOOL_* variables.
The caller's secrets (API keys, tokens, cloud credentials) reach a command only when the config
names them: `env: ["OPENAI_API_KEY", "LLM_*"]` (globs allowed), or `passEnv: true` for the old
behaviour of passing everything."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from typing import Any

from sessiontool.errors import ConfigError

BASE_NAMES = ("PATH", "HOME", "LANG", "LC_*", "TZ", "TMPDIR", "SESSIONTOOL_*")


def names_from(value: Any, where: str) -> list[str]:
    """The pass-through names of an `env` setting: a list of names/globs. An object (the
    runner's variables to set) names none; anything else is a config error."""
    if value is None or isinstance(value, Mapping):
        return []
    if isinstance(value, list) and all(isinstance(x, str) and x for x in value):
        return list(value)
    raise ConfigError(
        f"{where}: expected an array of variable names (globs allowed), e.g. "
        '["OPENAI_API_KEY", "LLM_*"], or an object of variables to set'
    )


def pass_all(value: Any, where: str) -> bool:
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    raise ConfigError(f"{where}: expected true or false")


def clean(
    base: Mapping[str, str], allow: Iterable[str] = (), *, everything: bool = False
) -> dict[str, str]:
    """The variables of `base` a child command may see (see the module doc)."""
    if everything:
        return dict(base)
    patterns = [*BASE_NAMES, *allow]
    return {k: v for k, v in base.items() if any(fnmatch.fnmatchcase(k, p) for p in patterns)}


def for_config(
    base: Mapping[str, str], cfg: Mapping[str, Any] | None, where: str
) -> dict[str, str]:
    """`clean` as configured by a runner's or the delivery's `env` and `passEnv` keys."""
    cfg = cfg or {}
    return clean(
        base,
        names_from(cfg.get("env"), f"{where}.env"),
        everything=pass_all(cfg.get("passEnv"), f"{where}.passEnv"),
    )
