"""Every runner sessiontool can run, one row each (pre-commit's `all_languages.py`): the type
name a config writes → the module and class that run it, and what its config object must hold.

A new runner is one row here plus its module under `runs/runners/`. The modules are named,
not imported: `runs/runners.get_runner` imports the one a run needs, so start-up does not grow,
and this table sits in the state layer where the config checks (`config.check_runner`) read the
same names."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sessiontool.errors import ConfigError

# check(runner object, where, name): raises ConfigError; `name` words a key for the message.
Check = Callable[[dict[str, Any], str, Callable[[str], str]], None]


def _check_command(runner: dict[str, Any], where: str, name: Callable[[str], str]) -> None:
    cmd = runner.get("command")
    ok = isinstance(cmd, str) and bool(cmd.strip())
    ok = ok or (isinstance(cmd, list) and bool(cmd) and all(isinstance(c, str) for c in cmd))
    if not ok:
        raise ConfigError(f"{name(where + '.command')}: expected a non-empty array of strings")
    for k in ("input", "output"):
        if runner.get(k, "text") not in ("text", "json"):
            raise ConfigError(f'{name(where + "." + k)}: expected "text" or "json"')


def _check_openai(runner: dict[str, Any], where: str, name: Callable[[str], str]) -> None:
    if not isinstance(runner.get("baseUrl", ""), str):
        raise ConfigError(f"{name(where + '.baseUrl')}: expected a URL string")


def _check_llm(runner: dict[str, Any], where: str, name: Callable[[str], str]) -> None:
    if not isinstance(runner.get("model", ""), str):
        raise ConfigError(f"{name(where + '.model')}: expected a model id or alias")
    if not isinstance(runner.get("options", {}), dict):
        raise ConfigError(f"{name(where + '.options')}: expected an object")
    if not isinstance(runner.get("tools", True), bool):
        raise ConfigError(f"{name(where + '.tools')}: expected true or false")


# type name → (module, class, config check or None)
RUNNERS: dict[str, tuple[str, str, Check | None]] = {
    "echo": ("sessiontool.runs.runners.echo", "EchoRunner", None),
    "command": ("sessiontool.runs.runners.command", "CommandRunner", _check_command),
    "openai": ("sessiontool.runs.runners.openai", "OpenAIRunner", _check_openai),
    "llm": ("sessiontool.runs.runners.llm", "LLMRunner", _check_llm),
}


def expected_types() -> str:
    """The runner types, for an error message."""
    return ", ".join(RUNNERS)
