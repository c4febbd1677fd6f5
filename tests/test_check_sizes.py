"""scripts/check-sizes: the parameter rule holds below the CLI and never shapes the command line
(issue 46: a Typer command's signature is its CLI, one parameter per option); a call to our own
code passes at most four arguments by position (issue 46 item 4), others' conventions exempt."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT

# check-sizes measures with the pinned ruff of the dev extra (what .ci/run installs); the
# README's `.[test]` install has no ruff, and there the script cannot run at all.
pytest.importorskip("ruff", reason="scripts/check-sizes needs the dev extra's ruff")

SCRIPT = ROOT / "scripts" / "check-sizes"

SOURCE = """
import typer

app = typer.Typer()
group = typer.Typer()


@app.command("wide")
def wide_cmd(a: int, b: int, c: int, d: int, e: int, f: int, g: int) -> None:
    pass


@group.callback()
def _global(a: int, b: int, c: int, d: int, e: int, f: int) -> None:
    pass


def core_helper(a: int, b: int, c: int, d: int, e: int, f: int) -> None:
    pass
"""


def _check(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    module = tmp_path / "mod.py"
    module.write_text(SOURCE, encoding="utf-8")
    allowlist = tmp_path / "allow.txt"
    allowlist.write_text("", encoding="utf-8")
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--allowlist", str(allowlist), str(module)],
        capture_output=True,
        text=True,
        check=False,
    )


def test_a_core_function_over_five_parameters_fails(tmp_path: Path) -> None:
    proc = _check(tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "args" in proc.stdout and "mod.py:core_helper: 6" in proc.stdout


def test_typer_commands_and_callbacks_are_off_the_parameter_rule(tmp_path: Path) -> None:
    proc = _check(tmp_path)
    assert "wide_cmd" not in proc.stdout
    assert "_global" not in proc.stdout
    assert "1 over the limits" in proc.stdout


CALLS = """
import struct
from functools import partial


def five(a: int, b: int, c: int, d: int, e: int) -> int:
    return a


def many(*xs: int) -> int:
    return len(xs)


class Row:
    def __init__(self, a: int, b: int, c: int, d: int, e: int) -> None:
        self.a = a


def caller(xs: list[int]) -> None:
    five(1, 2, 3, 4, 5)
    Row(1, 2, 3, 4, 5)
    five(1, 2, 3, 4, e=5)
    five(*xs)
    many(1, 2, 3, 4, 5)
    min(1, 2, 3, 4, 5)
    struct.pack("<5B", 1, 2, 3, 4, 5)
    partial(five, 1, 2, 3, 4)
"""


def _check_calls(tmp_path: Path, allowed: str) -> subprocess.CompletedProcess[str]:
    module = tmp_path / "calls.py"
    module.write_text(CALLS, encoding="utf-8")
    allowlist = tmp_path / "allow.txt"
    allowlist.write_text(allowed.format(module=module), encoding="utf-8")
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--allowlist", str(allowlist), str(module)],
        capture_output=True,
        text=True,
        check=False,
    )


def test_own_calls_with_more_than_four_positionals_fail_with_their_lines(tmp_path: Path) -> None:
    """Only the calls to the checked files' own functions and classes with five positionals
    count: a keyword, a splat, a `*args` callee, a builtin and an imported module's function do
    not."""
    proc = _check_calls(tmp_path, "")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    over = [line for line in proc.stdout.splitlines() if "over: positional" in line]
    assert len(over) == 2, proc.stdout
    assert "calls.py:five: 5 (limit 4; not in the allowlist); at " in over[1]
    assert over[1].endswith("calls.py:20 five")
    assert over[0].endswith("calls.py:21 Row")
    assert "2 over the limits" in proc.stdout


def test_allowlisted_positional_calls_may_only_shrink(tmp_path: Path) -> None:
    allowed = "positional {module}:five 5\npositional {module}:Row 5\n"
    assert _check_calls(tmp_path, allowed).returncode == 0
    lower = "positional {module}:five 4\npositional {module}:Row 5\n"
    proc = _check_calls(tmp_path, lower)
    assert proc.returncode == 1
    assert "calls.py:five: 5, grew from 4" in proc.stdout
