"""`sessiontool top` as a program: it refuses a pipe (exit 2, pointing at `list`/`runs --json`),
names the pip command when Textual is missing, is known to completion and the man page, and in
tmux, as a person runs it, shows the sessions, filters, follows a transcript and leaves with 0
and the terminal restored."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import FIXTURE_STATE, ROOT, run_cli

from .tmuxpane import pane


def test_piped_stdout_is_refused_with_the_commands_for_scripts(state: Path) -> None:
    pytest.importorskip("textual")
    shutil.copytree(FIXTURE_STATE, state)
    proc = run_cli("top")
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("sessiontool: error: top is a full-screen")
    assert "sessiontool list --json" in lines[0] and "sessiontool runs --json" in lines[0]


def test_missing_textual_names_the_install_command(state: Path) -> None:
    code = (
        "import sys; sys.modules['textual'] = None; "
        "from sessiontool.cli.main import main; main(['top'])"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert "needs Textual" in lines[0] and "pip install '.[tui]'" in lines[0]


def test_a_bad_budget_is_a_usage_error() -> None:
    proc = run_cli("top", "--budget", "-1")
    assert proc.returncode == 2 and "--budget" in proc.stderr


def test_completion_and_man_page_know_top() -> None:
    env = dict(
        os.environ,
        _SESSIONTOOL_COMPLETE="complete_bash",
        COMP_WORDS="sessiontool to",
        COMP_CWORD="1",
    )
    proc = subprocess.run(
        [sys.executable, "-m", "sessiontool"], capture_output=True, text=True, env=env, timeout=60
    )
    assert "top" in proc.stdout.split()
    env.update(COMP_WORDS="sessiontool top --", COMP_CWORD="2")
    proc = subprocess.run(
        [sys.executable, "-m", "sessiontool"], capture_output=True, text=True, env=env, timeout=60
    )
    assert {"--budget", "--all-agents"} <= set(proc.stdout.split())
    man = (ROOT / "man" / "sessiontool.1").read_text()
    assert '.SS "top"' in man and "\\fB\\-\\-budget\\fR" in man


# -- in tmux, as a person ----------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_top_in_tmux_as_a_person_runs_it(state: Path, tmp_path: Path) -> None:
    pytest.importorskip("textual")
    shutil.copytree(FIXTURE_STATE, state)
    rc_file = tmp_path / "rc"
    argv = [sys.executable, "-m", "sessiontool", "--state-dir", str(state), "top"]
    after = f"echo top-exited=$? > {shlex.quote(str(rc_file))}; echo AFTER-TOP"
    with pane(argv, dict(os.environ), after=after) as p:
        screen = p.wait_for("agent:main:dm:alice")
        assert "Sessions (9)" in screen and "store: jsonl" in screen
        assert "Runs" in screen and "Deliveries" in screen
        # One key press at a time, as a person types (a burst is one paste).
        p.keys("/")
        p.wait_for("filter sessions")
        p.keys("tg-lounge")
        screen = p.wait_for("Sessions (1 of 9 matching /tg-lounge)")
        assert "agent:main:dm:alice" not in screen
        p.keys("Enter")  # keep the filter
        time.sleep(1.0)  # a person's pause: a key sent at once would still go to the filter
        p.keys("Enter")  # the one row left: its transcript
        screen = p.wait_for("following (Esc: back)")
        assert "agent:main:telegram:group:-100777 — following" in screen
        p.keys("Escape")
        p.wait_for("Sessions (1 of 9")
        p.keys("q")
        screen = p.wait_for("AFTER-TOP")
        assert rc_file.read_text().strip() == "top-exited=0"
        assert "Sessions (" not in screen  # the alternate screen is gone: the shell is back
