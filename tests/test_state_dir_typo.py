"""A typo in `--state-dir` (issue 33 item 10): a write that creates the state dir `--state-dir`
names says so on stderr, once; a read of a state dir that does not exist is refused (exit 3)
and creates nothing; the state dir SESSIONTOOL_STATE_DIR names is the user's default and is
created quietly."""

from __future__ import annotations

import os
from pathlib import Path

from tests.helpers import run_cli


def test_a_write_says_it_created_the_state_dir_once(tmp_path: Path) -> None:
    typo = tmp_path / ".openclw"
    first = run_cli("--state-dir", str(typo), "send", "main", "hi")
    assert first.returncode == 0 and first.stdout == "echo: hi\n", first.stderr
    assert first.stderr == (
        f"sessiontool: warning: created state dir {typo} (from --state-dir, not the default); "
        "check it if that is a typo\n"
    )
    again = run_cli("--state-dir", str(typo), "send", "main", "hi again")
    assert again.returncode == 0 and again.stderr == "", again.stderr


def test_a_read_of_a_missing_state_dir_creates_nothing(tmp_path: Path) -> None:
    typo = tmp_path / ".openclw"
    for args in (("list",), ("history", "main"), ("usage",), ("runs",), ("search", "hi")):
        proc = run_cli("--state-dir", str(typo), *args)
        assert proc.returncode == 3 and f"state dir {typo} does not exist" in proc.stderr, args
        assert not typo.exists(), args


def test_the_environments_state_dir_is_created_quietly(tmp_path: Path) -> None:
    state = Path(os.environ["SESSIONTOOL_STATE_DIR"])
    assert not state.exists()
    proc = run_cli("send", "main", "hi")
    assert proc.returncode == 0 and proc.stderr == "" and state.is_dir(), proc.stderr
    # Naming the default with --state-dir is no typo either.
    other = run_cli("--state-dir", str(state), "send", "main", "hi")
    assert other.returncode == 0 and other.stderr == ""
