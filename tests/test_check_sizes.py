"""scripts/check-sizes: the parameter rule holds below the CLI and never shapes the command line
(issue 46: a Typer command's signature is its CLI, one parameter per option)."""

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
