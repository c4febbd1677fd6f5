"""zsh and fish: Tab after a completed option value lists files only where a file is wanted
(issue 45 item 15). The shells' protocols as the shipped scripts speak them (completions/): zsh
evals what the program prints (`_files` lists the directory), fish completes files itself when
`is-args` exits 1."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

NO_FILE = [
    "sessiontool list --kinds main ",  # list takes no file
    "sessiontool list ",
    "sessiontool runs --status ok ",
    "sessiontool history main --limit 5 ",
]
FILE = [
    "sessiontool history main -o ",  # -o FILE
    "sessiontool --state-dir ",  # DIR
    "sessiontool --config ",  # FILE
    "sessiontool export --html ",  # DIR
]


def _ask(shell: str, line: str) -> subprocess.CompletedProcess[str]:
    env = dict(
        os.environ,
        _SESSIONTOOL_COMPLETE=f"complete_{shell}",
        _TYPER_COMPLETE_ARGS=line,
        _TYPER_COMPLETE_FISH_ACTION="is-args",
    )
    return subprocess.run(
        [sys.executable, "-m", "sessiontool"], capture_output=True, text=True, env=env, timeout=60
    )


@pytest.mark.parametrize("line", NO_FILE)
def test_no_files_where_none_is_wanted(state: object, line: str) -> None:
    zsh = _ask("zsh", line)
    assert zsh.returncode == 0 and "_files" not in zsh.stdout, zsh.stdout
    fish = _ask("fish", line)
    assert fish.returncode == 0, "fish would list the directory's files"  # is-args: ours


@pytest.mark.parametrize("line", FILE)
def test_files_where_a_file_is_wanted(state: object, line: str) -> None:
    assert _ask("zsh", line).stdout.strip() == "_files"
    assert _ask("fish", line).returncode == 1  # fish's own file completion


def test_values_still_complete(state: object) -> None:
    out = _ask("zsh", "sessiontool history main --format ").stdout
    assert out.startswith("_arguments") and '"jsonl"' in out
    assert _ask("fish", "sessiontool list --kinds ").returncode == 0
