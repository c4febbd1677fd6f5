"""`--model` validation: a CLI user who names a model should learn at once that it is unknown,
rather than get a run on some other model (OpenClaw only warns, with `modelApplied: false`)."""

from __future__ import annotations

from .config import Config
from .errors import UsageError


def validate_model(config: Config, name: str) -> str:
    """The model name, trimmed, when the config knows it; else a usage error (exit 2) that lists
    the known models so the user can pick one."""
    text = name.strip()
    if not text:
        raise UsageError("--model must not be empty")
    if config.is_known_model(text):
        return text
    known = config.known_models()
    raise UsageError(
        f"unknown model '{text}' (known: {', '.join(known)})",
        hint="add it to agents.defaults.models or an agent's model in the config",
    )
