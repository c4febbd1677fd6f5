"""Each command's `--help` ends with two or three examples, as gh's does (issue 33 item 17),
from one table (cli/examples.py); every option an example uses is one the command has, so an
example cannot go stale. Start-up stays lean: the table is read only for --help."""

from __future__ import annotations

import shlex
from typing import Any

import pytest
import typer

from sessiontool.cli.app import app
from sessiontool.cli.commands import COMMANDS, register_all
from sessiontool.cli.examples import EXAMPLES
from sessiontool.cli.main import GLOBAL_FLAGS, GLOBAL_VALUE_OPTIONS
from tests.helpers import run_cli


def _tree() -> Any:
    register_all()
    return typer.main.get_command(app)


def _argv(line: str) -> list[str]:
    """The words after `sessiontool` in an example line (the shell around it dropped)."""
    rest = line[line.index("sessiontool ") + len("sessiontool ") :] if " " in line else ""
    for stop in ("|", "<", ">", ")"):
        rest = rest.split(stop)[0]
    return shlex.split(rest)


def test_every_command_has_two_or_three_examples() -> None:
    assert set(EXAMPLES) == set(COMMANDS)
    for name, rows in EXAMPLES.items():
        assert 2 <= len(rows) <= 3, name


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_examples_use_only_options_the_command_has(name: str) -> None:
    root = _tree()
    root_opts = {o for p in root.params for o in (*p.opts, *p.secondary_opts)}
    for line, _what in EXAMPLES[name]:
        words = _argv(line)
        i = 0
        while words[i].startswith("-"):  # global options before the command
            assert words[i] in GLOBAL_VALUE_OPTIONS or words[i] in root_opts, (line, words[i])
            i += 2 if words[i] in GLOBAL_VALUE_OPTIONS else 1
        assert words[i] == name, line
        cmd = root.commands[name]
        opts = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}
        for w in words[i + 1 :]:
            if w.startswith("-") and w != "-":
                known = opts | set(GLOBAL_VALUE_OPTIONS) | set(GLOBAL_FLAGS) | {"--json"}
                assert w.split("=")[0] in known, (line, w)


def test_help_ends_with_the_examples() -> None:
    for name in ("list", "send", "deliveries"):
        proc = run_cli(name, "--help", env={"COLUMNS": "200"})
        assert proc.returncode == 0
        tail = [ln.strip() for ln in proc.stdout.rstrip().splitlines()]
        n = len(EXAMPLES[name])
        assert tail[-2 * n - 1] == "Examples:", tail[-8:]
        assert tail[-2 * n :][1::2] == [cmd for cmd, _ in EXAMPLES[name]]
        assert tail[-2 * n :][0::2] == [f"# {what}" for _, what in EXAMPLES[name]]


def test_config_keys_named_in_hints_are_documented() -> None:
    """A hint that sends the user to a config key sends them to one docs/reference.md
    explains (`agents.defaults.models` was named, not documented)."""
    import re

    from tests.helpers import ROOT

    key = re.compile(
        r"\b(?:agents|session|tools|models|sessiontool)\.(?:defaults|list\[\]|providers|"
        r"agentToAgent|subagents|sendPolicy|mainKey|scope|delivery|maxToolRounds|"
        r"maxConcurrentRuns)(?:\.[A-Za-z*<>\[\]]+)*"
    )
    hint = re.compile(r'hint=(?:f?"[^"]*"|\(\s*(?:f?"[^"]*"\s*)+\))')
    named = {
        k
        for f in (ROOT / "sessiontool").rglob("*.py")
        for m in hint.finditer(f.read_text())
        for k in key.findall(m.group())
    }
    assert "agents.defaults.models" in named
    reference = (ROOT / "docs" / "reference.md").read_text()
    assert not [k for k in named if f"`{k}`" not in reference]


def test_readme_says_where_llm_runner_turns_are() -> None:
    from tests.helpers import ROOT

    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "Its turns are not logged in `llm`'s own database (`llm logs` does not show" in readme
    # What it says is so: the runner never writes llm's log (Response.log_to_db).
    assert "log_to_db" not in (ROOT / "sessiontool" / "runs" / "runners" / "llm.py").read_text()
