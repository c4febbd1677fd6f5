"""Command modules; each registers its commands on the shared Typer app when imported.

A run needs only its own command: `register_for(args)` finds the command name in the
arguments, the module that defines it (by reading the modules' `@app.command("name")` lines,
without importing them), and imports that module alone. Anything else (help, completion, an
unknown name) registers every module, in order."""

from __future__ import annotations

import importlib
import os
import re

# Help lists commands in registration order, so the order here is the order users see.
MODULES = (
    "read",
    "insights",
    "runcmd",
    "spawncmd",
    "subagents",
    "policycmd",
    "manage",
    "mcpcmd",
    "exportcmd",
    "gatewaycmd",
)
_registered: set[str] = set()
_COMMAND_LINE = re.compile(rb'^@app\.command\(\s*"([^"]+)"', re.MULTILINE)


def _import(name: str) -> None:
    if name in _registered:
        return
    _registered.add(name)
    try:
        importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{name}":
            raise


def register_all() -> None:
    for name in MODULES:
        _import(name)


def module_of(command: str) -> str | None:
    """The module whose source registers `command`, or None."""
    here = os.path.dirname(__file__)
    for name in MODULES:
        try:
            with open(os.path.join(here, name + ".py"), "rb") as fh:
                source = fh.read()
        except OSError:
            continue
        if os.fsencode(command) in _COMMAND_LINE.findall(source):
            return name
    return None


def register_for(command: str | None) -> None:
    module = module_of(command) if command else None
    if module is None:
        register_all()
    else:
        _import(module)
