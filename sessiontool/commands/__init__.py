"""Command modules; each registers its commands on the shared Typer app when imported."""

from __future__ import annotations

import importlib

MODULES = ("read",)


def register_all() -> None:
    for name in MODULES:
        importlib.import_module(f"{__name__}.{name}")
