"""Command modules; each registers its commands on the shared Typer app when imported.

A run needs only its own command: `register_for(name)` looks the command up in COMMANDS and
imports that module alone. Anything else (help, completion, an unknown name) registers every
module, in order. COMMANDS is written out, not read from the sources: a test holds it equal to
the registered Typer tree (tests/test_command_map.py)."""

from __future__ import annotations

import importlib

# Every command → the module that registers it. Help lists commands in registration order,
# so the order here (and MODULES, derived from it) is the order users see.
COMMANDS: dict[str, str] = {
    "list": "read",
    "history": "read",
    "search": "insights",
    "usage": "insights",
    "diff": "diffcmd",
    "send": "runcmd",
    "wait": "runcmd",
    "runs": "runcmd",
    "rerun": "runcmd",
    "abort": "runcmd",
    "spawn": "spawncmd",
    "agents": "subagents",
    "sweep": "subagents",
    "policy": "policycmd",
    "deliveries": "policycmd",
    "label": "managecmd",
    "reset": "managecmd",
    "delete": "managecmd",
    "paths": "managecmd",
    "doctor": "managecmd",
    "prune": "managecmd",
    "completion": "managecmd",
    "archive": "lifecmd",
    "restore": "lifecmd",
    "pin": "lifecmd",
    "unpin": "lifecmd",
    "session": "lifecmd",
    "fork": "lifecmd",
    "rewind": "lifecmd",
    "compact": "lifecmd",
    "mcp": "mcpcmd",
    "export": "exportcmd",
    "gateway": "gatewaycmd",
    "config": "configcmd",
    "top": "top",
    "help": "helpcmd",
}
# What a user of OpenClaw's own CLI types, read as the sessiontool command it means
# (`openclaw sessions`, `openclaw sessions list`, `openclaw agents list`): the first word is
# dropped, or both words become the one command. `sessions X` for a command X of ours is X.
OPENCLAW_WORDS: dict[tuple[str, ...], tuple[str, ...]] = {
    ("sessions",): ("list",),
    ("sessions", "list"): ("list",),
    ("agents", "list"): ("agents",),
}
MODULES = tuple(dict.fromkeys(COMMANDS.values()))
_registered: set[str] = set()


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


def register_for(command: str | None) -> None:
    module = COMMANDS.get(command) if command else None
    if module is None:
        register_all()
    else:
        _import(module)
