"""The program as a whole (cli/main.py, cli/app.py): global options wherever they stand, the state dir,
`--agent`, colour and SIGTERM, as the real CLI shows them."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from tests.helpers import run_cli, run_json, write_config

from .runhelpers import py_command, records, runner_config, sessiontool, wait_until


@pytest.mark.slow
def test_global_options_also_work_after_the_command(tmp_path: Path) -> None:
    other = tmp_path / "other"
    rc, data = run_json("--state-dir", str(other), "send", "main", "hi")
    assert rc == 0 and data["reply"] == "echo: hi"
    for args in (
        ["list", "--state-dir", str(other), "-q"],
        ["list", "-q", f"--state-dir={other}"],
        ["list", "--color", "never", "--state-dir", str(other), "-q"],
    ):
        proc = run_cli(*args)
        assert proc.returncode == 0, (args, proc.stderr)
        assert proc.stdout == "main\n", args
    # A message that merely looks like an option after `--` is left alone.
    proc = run_cli("--state-dir", str(other), "send", "main", "--", "--state-dir")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "echo: --state-dir\n"


@pytest.mark.slow
def test_sigterm_exits_143(state: Path, reap_workers: None) -> None:
    runner_config(state, py_command("import sys,time; sys.stdin.read(); time.sleep(20)"))
    proc = sessiontool("send", "main", "slow", "--timeout", "60")
    wait_until(lambda: bool(records(state)))
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=20)
    assert proc.returncode == 143
    for rec in records(state):
        run_cli("abort", rec["runId"])


def test_state_dir_that_is_a_regular_file(tmp_path: Path) -> None:
    f = tmp_path / "not-a-dir"
    f.write_text("")
    for args in (["list"], ["send", "main", "hi"], ["history", "main"]):
        proc = run_cli("--state-dir", str(f), *args)
        assert proc.returncode == 2, args
        assert proc.stderr.startswith(f"sessiontool: error: state dir {f} is not a directory\n")
    proc = run_cli("--state-dir", str(f), "doctor")
    assert proc.returncode == 1
    assert "state-dir-not-a-directory" in proc.stdout


def test_missing_state_dir_is_an_error_for_reads(tmp_path: Path) -> None:
    typo = tmp_path / ".openclw"
    proc = run_cli("--state-dir", str(typo), "list")
    assert proc.returncode == 3
    assert f"state dir {typo} does not exist" in proc.stderr
    assert not typo.exists()
    proc = run_cli("--state-dir", str(typo), "doctor")
    assert proc.returncode == 2 and "missing-state-dir" in proc.stdout
    assert not typo.exists()


def test_unknown_agent_is_an_error_for_reads(state: Path) -> None:
    assert run_cli("send", "main", "hi").returncode == 0
    proc = run_cli("--agent", "mian", "list")
    assert proc.returncode == 3
    assert "unknown agent 'mian'" in proc.stderr and "main" in proc.stderr
    assert run_cli("--agent", "main", "list", "-q").stdout == "main\n"
    write_config(state, {"agents": {"list": [{"id": "main"}, {"id": "ops"}]}})
    proc = run_cli("--agent", "ops", "list")  # configured, no sessions yet: fine
    assert proc.returncode == 0, proc.stderr


def test_color_always_colours_piped_output(state: Path) -> None:
    assert run_cli("send", "main", "hi").returncode == 0
    proc = run_cli("--color", "always", "history", "main")
    assert "\x1b[" in proc.stdout
    proc = run_cli("list", "--color", "always")
    assert "\x1b[" in proc.stdout and "KEY" in proc.stdout
    # The control: piped without it stays plain.
    assert "\x1b[" not in run_cli("history", "main").stdout
