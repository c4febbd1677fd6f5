"""Command modules; each registers its commands on the shared Typer app when imported."""

from __future__ import annotations

import importlib

# Help lists commands in registration order, so the order here is the order users see.
MODULES = (
    "read",
    "insights",
    "runs",
    "spawncmd",
    "subagents",
    "policycmd",
    "manage",
    "mcpcmd",
    "exportcmd",
)
_registered = False


def register_all() -> None:
    global _registered
    if _registered:
        return
    _registered = True
    for name in MODULES:
        try:
            importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
