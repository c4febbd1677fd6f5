"""tests/README.md is where a newcomer looks for the tests of a command: every command of the
command map has a row there, every file it names exists, and every test file is named, so the
map cannot quietly go stale when a command or a test file is added or renamed."""

from __future__ import annotations

import re
from pathlib import Path

from sessiontool.cli.commands import COMMANDS

TESTS = Path(__file__).resolve().parent
README = (TESTS / "README.md").read_text()


def _command_rows() -> dict[str, list[str]]:
    """Each command named in the first cell of a row, with the test files the row names."""
    rows: dict[str, list[str]] = {}
    for line in README.splitlines():
        cells = line.split("|")
        if len(cells) < 4:
            continue
        files = re.findall(r"`([\w/]+\.py)`", cells[2])
        for command in re.findall(r"`([a-z]+)`", cells[1]):
            rows.setdefault(command, []).extend(files)
    return rows


def test_every_command_has_a_row_naming_files_that_run_it() -> None:
    rows = _command_rows()
    missing = sorted(set(COMMANDS) - set(rows))
    assert not missing, f"commands with no row in tests/README.md: {missing}"
    for command in COMMANDS:
        files = rows[command]
        assert files, command
        sources = [(TESTS / f).read_text() for f in files]
        # The files run the command: its name is one of the CLI's words there.
        assert any(f'"{command}"' in s for s in sources), (command, files)


def test_every_named_file_exists_and_every_test_file_is_named() -> None:
    named = set(re.findall(r"`([\w/]+\.py)`", README))
    for name in named:
        assert (TESTS / name).is_file() or (TESTS.parent / "sessiontool" / name).is_file(), name
    files = {p.relative_to(TESTS).as_posix() for p in TESTS.glob("test_*.py")}
    files |= {p.relative_to(TESTS).as_posix() for p in TESTS.glob("reliability/test_*.py")}
    assert not sorted(files - named), "test files missing from tests/README.md"
