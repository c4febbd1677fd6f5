"""scripts/check-coverage, the coverage floor CI holds the default suite to (issue 46): a total
below the floor fails, `--update` raises the floor and never lowers it, and a commit that lowered
the floor by hand is named. Real coverage data, from `coverage run` over a small module."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from importlib.machinery import SourceFileLoader
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "check-coverage"
pytest.importorskip("coverage", reason="coverage is in the test extras: pip install -e '.[test]'")

# Two of three functions called: line coverage well below 100, above 50.
MODULE = """
def used(x):
    if x:
        return 1
    return 2

def also_used():
    return 3

def never():
    a = 1
    b = 2
    return a + b

used(True)
also_used()
"""


@pytest.fixture
def data(tmp_path: Path) -> tuple[Path, Path]:
    """A coverage data file of MODULE, and the config it was measured with."""
    (tmp_path / "mod.py").write_text(MODULE)
    rc = tmp_path / "covrc"
    rc.write_text("[run]\nbranch = True\n")
    subprocess.run(
        [sys.executable, "-m", "coverage", "run", f"--rcfile={rc}", "--data-file=.cov", "mod.py"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    return tmp_path / ".cov", rc


def _check(data: tuple[Path, Path], floor: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    cov, rc = data
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--data-file", str(cov), "--rcfile", str(rc)]
        + ["--floor-file", str(floor), "--no-history", *extra],
        capture_output=True,
        text=True,
    )


def _total(out: str) -> float:
    line = next(ln for ln in out.splitlines() if ln.startswith("coverage: total "))
    return float(line.split()[2].rstrip("%"))


def test_a_total_at_or_above_the_floor_passes_and_is_printed(
    data: tuple[Path, Path], tmp_path: Path
) -> None:
    floor = tmp_path / "floor.txt"
    floor.write_text("# comment\n10.0\n")
    proc = _check(data, floor)
    assert proc.returncode == 0, proc.stderr
    total = _total(proc.stdout)
    assert 50 < total < 100
    assert "mod.py" in proc.stdout  # the report itself, per file
    assert "floor 10.0%" in proc.stdout


def test_a_total_below_the_floor_fails_with_both_numbers(
    data: tuple[Path, Path], tmp_path: Path
) -> None:
    floor = tmp_path / "floor.txt"
    floor.write_text("99.5\n")
    proc = _check(data, floor)
    assert proc.returncode == 1
    assert "below the floor 99.5%" in proc.stderr


def test_update_raises_the_floor_and_never_lowers_it(
    data: tuple[Path, Path], tmp_path: Path
) -> None:
    floor = tmp_path / "floor.txt"
    floor.write_text("10.0\n")
    proc = _check(data, floor, "--update")
    assert proc.returncode == 0, proc.stderr
    raised = float(floor.read_text().split()[-1])
    assert 10.0 < raised <= _total(proc.stdout)
    floor.write_text("99.5\n")
    proc = _check(data, floor, "--update")
    assert proc.returncode == 1
    assert floor.read_text().strip() == "99.5"


@pytest.mark.parametrize("text", ["", "abc\n", "101\n", "50\n60\n"])
def test_an_unreadable_floor_is_a_usage_error(
    data: tuple[Path, Path], tmp_path: Path, text: str
) -> None:
    floor = tmp_path / "floor.txt"
    floor.write_text(text)
    proc = _check(data, floor)
    assert proc.returncode == 2
    assert proc.stderr.startswith("check-coverage: ") and len(proc.stderr.splitlines()) == 1


def test_missing_data_is_a_usage_error(tmp_path: Path) -> None:
    floor = tmp_path / "floor.txt"
    floor.write_text("10\n")
    proc = _check((tmp_path / "none.cov", tmp_path / "covrc"), floor)
    assert proc.returncode == 2
    assert "check-coverage: " in proc.stderr


def _script() -> ModuleType:
    loader = SourceFileLoader("check_coverage", str(SCRIPT))
    spec = importlib.util.spec_from_loader("check_coverage", loader)
    assert spec is not None
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def test_a_commit_that_lowered_the_floor_is_named() -> None:
    lowered = _script().lowered
    assert lowered([("a1", 80.0), ("b2", 81.5), ("c3", 81.5)]) == []
    assert lowered([("a1", 80.0), ("b2", 82.0), ("c3", 81.0), ("d4", 83.0)]) == [
        "c3 lowered the floor from 82.0 to 81.0"
    ]


def test_this_checkouts_floor_never_went_down() -> None:
    """The committed history of scripts/coverage-floor.txt, as CI's clone has it."""
    mod = _script()
    history = mod.floor_history(mod.DEFAULT_FLOOR)
    assert mod.lowered(history) == []
    assert mod.read_floor(mod.DEFAULT_FLOOR.read_text()) > 50
