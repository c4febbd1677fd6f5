"""`--help` and usage errors: help text wrapped once at the terminal's width, and an unknown
option pointing at the command's own help."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import run_cli

WIDTH = 80


def _description(text: str) -> list[list[str]]:
    """The paragraphs between the usage line and the first panel, as their lines."""
    body = text.split("Usage:", 1)[1].split("╭", 1)[0].splitlines()[1:]
    paras: list[list[str]] = [[]]
    for line in body:
        if line.strip():
            paras[-1].append(line.strip())
        elif paras[-1]:
            paras.append([])
    return [p for p in paras if p]


@pytest.mark.parametrize("command", ["export", "deliveries", "send", "doctor"])
def test_help_is_wrapped_once_not_mid_sentence(command: str) -> None:
    proc = run_cli(command, "--help", env={"COLUMNS": str(WIDTH)})
    assert proc.returncode == 0, proc.stderr
    paras = _description(proc.stdout)
    assert len(paras) >= 2
    for para in paras:
        for line, nxt in zip(para, para[1:], strict=False):
            # Greedy wrapping: a line ends only where the next word would not have fit.
            fits = len(line) + 1 + len(nxt.split()[0]) <= WIDTH - 2
            assert not fits, f"{command} --help breaks early:\n{line}\n{nxt}"


def test_unknown_option_points_at_the_commands_help() -> None:
    proc = run_cli("list", "--limt", "3")
    assert proc.returncode == 2
    assert "No such option: --limt" in proc.stderr
    assert "hint: see: sessiontool list --help" in proc.stderr


def test_bare_sessiontool_prints_help_and_exits_0() -> None:
    proc = run_cli()
    assert proc.returncode == 0
    assert "Usage: sessiontool" in proc.stdout and "list" in proc.stdout
    assert proc.stderr == ""


def test_help_command_prints_the_commands_own_help() -> None:
    """`help X` is `X --help` (gh, llm and pueue have a help command), `help` alone the
    program's; an unknown command is a usage error naming it."""
    helped = run_cli("help", "send").stdout
    assert helped == run_cli("send", "--help").stdout
    assert "Run a session's agent" in helped
    assert run_cli("help").stdout == run_cli("--help").stdout
    bad = run_cli("help", "nosuch")
    assert bad.returncode == 2 and "No such command 'nosuch'" in bad.stderr


def test_openclaw_words_mean_the_sessiontool_command(tmp_path: Path) -> None:
    """What `openclaw sessions` users type: `sessions`, `sessions list` and `agents list` are
    `list` and `agents`; `sessions X` is X."""
    state = tmp_path / "state"
    base = ("--state-dir", str(state))
    assert run_cli(*base, "send", "main", "hi").returncode == 0
    listing = run_cli(*base, "list", "--json").stdout
    assert run_cli(*base, "sessions", "--json").stdout == listing
    assert run_cli("sessions", "list", "--json", *base).stdout == listing
    assert run_cli(*base, "agents", "list").stdout == run_cli(*base, "agents").stdout
    hist = run_cli(*base, "sessions", "history", "main", "--json")
    assert (
        hist.returncode == 0 and hist.stdout == run_cli(*base, "history", "main", "--json").stdout
    )
