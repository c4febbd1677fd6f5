"""A model name as the `llm` library resolves it: its ids and aliases, and an OpenClaw-style
`provider/model` that llm does not know tried once more without the provider.

Asked when a run uses the llm runner (runners/llm.py) and before a run is queued, when `--model`
names a model for an llm-runner agent (submit.validate_model), so the two agree on what llm
knows. Not in the runner's module: the runner offers the session tools, whose send and spawn
are the very submit that checks `--model`."""

from __future__ import annotations

from typing import Any


def resolve(llm: Any, name: str | None) -> Any:
    """The model `llm` resolves the name to (None: llm's default model); llm's own
    UnknownModelError for the name as given when neither form is known."""
    try:
        return llm.get_model(name)
    except llm.UnknownModelError:
        rest = name.split("/", 1)[1] if name and "/" in name else ""
        if rest:
            try:
                return llm.get_model(rest)
            except llm.UnknownModelError:
                pass
        raise


def knows_model(name: str) -> bool | None:
    """Whether `llm` resolves the name; None when the llm library is not installed, so the
    caller falls back to the config's model list."""
    try:
        import llm
    except ImportError:
        return None
    try:
        resolve(llm, name)
    except llm.UnknownModelError:
        return False
    return True
