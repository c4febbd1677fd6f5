"""The command → module map in cli/commands/__init__.py is written out by hand; this holds it
equal to the Typer tree the modules register: every command (and every subcommand of a
group) is in the map, under the module that defines it, and the map names nothing else."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import typer

from sessiontool.cli.app import app
from sessiontool.cli.commands import COMMANDS, MODULES, register_all

Path = tuple[str, ...]


def _tree(t: typer.Typer, prefix: Path = ()) -> Iterator[tuple[Path, Callable[..., Any]]]:
    """Every registered command as (its words, its callback), groups walked down."""
    for info in t.registered_commands:
        assert info.callback is not None
        name = info.name or info.callback.__name__.replace("_", "-")
        yield (*prefix, name), info.callback
    for group in t.registered_groups:
        sub = group.typer_instance
        assert sub is not None
        name = group.name or sub.info.name
        assert isinstance(name, str)
        if sub.registered_callback is not None and sub.registered_callback.callback is not None:
            yield (*prefix, name), sub.registered_callback.callback
        yield from _tree(sub, (*prefix, name))


def _registered() -> dict[Path, str]:
    register_all()
    return {
        words: callback.__module__.removeprefix("sessiontool.cli.commands.")
        for words, callback in _tree(app)
    }


def test_every_command_and_subcommand_is_mapped_to_the_module_that_registers_it() -> None:
    found = _registered()
    assert found, "no command registered"
    wrong = {
        " ".join(words): (COMMANDS.get(words[0]), module)
        for words, module in found.items()
        if COMMANDS.get(words[0]) != module
    }
    assert wrong == {}, "map says / module that registers it"


def test_the_map_names_only_registered_commands_and_known_modules() -> None:
    top = {words[0] for words in _registered()}
    assert set(COMMANDS) == top
    assert set(COMMANDS.values()) == set(MODULES)
    assert len(MODULES) == len(set(MODULES))


def test_help_lists_the_commands_in_the_maps_order() -> None:
    """Help lists commands in registration order, so the map's order is the order users see:
    `--help` in a fresh process (every module registered) shows exactly COMMANDS, in order."""
    out = subprocess.run(
        [sys.executable, "-m", "sessiontool", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, COLUMNS="200", NO_COLOR="1"),
    ).stdout
    section = out.split("Commands", 1)[1]
    shown = re.findall(r"^\W+([a-z]+)\s{2,}\S", section, re.MULTILINE)
    assert shown == list(COMMANDS)
