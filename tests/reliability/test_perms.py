"""Permissions: everything sessiontool creates in the state dir is private (dirs 0700, files
0600, whatever the umask), and a state dir open to others, or owned by someone else, gets one
warning line on stderr (sessiontool/perms.py, checked on every command)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from sessiontool.state import perms
from tests.helpers import run_cli, run_json
from tests.reliability.util import FINISHED, wait_until
from tests.runhelpers import records


def _modes(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            p = os.path.join(dirpath, name)
            out[os.path.relpath(p, root)] = oct(stat.S_IMODE(os.lstat(p).st_mode))
    out["."] = oct(stat.S_IMODE(os.stat(root).st_mode))
    return out


def test_everything_created_is_private_even_with_umask_0(state: Path) -> None:
    old = os.umask(0)  # inherited by every command and worker below
    try:
        for args in (
            ("send", "main", "hello", "--timeout", "20"),
            ("send", "cron:nightly", "report", "--timeout", "20", "--deliver"),
            ("spawn", "a small task", "--label", "kid"),
            ("label", "main", "labelled"),
            ("policy", "discord:group:1", "deny", "--create"),
            ("send", "other", "to be deleted", "--timeout", "20"),
            ("delete", "other"),
            ("reset", "cron:nightly"),
            ("sweep",),
        ):
            proc = run_cli(*args)
            assert proc.returncode == 0, (args, proc.stderr)
        wait_until(
            lambda: all(
                r.get("status") in FINISHED and (r["kind"] != "spawn" or r.get("announcedAt"))
                for r in records(state)
            ),
            20,
            "the spawn and its announce",
        )
        wait_until(
            lambda: not list((state / "sessiontool" / "runs").glob("*-*.lock")),
            10,
            "workers to exit",
        )
    finally:
        os.umask(old)
    modes = _modes(state)
    assert any(p.endswith(".jsonl") for p in modes) and "sessiontool/deliveries.jsonl" in modes
    assert any(".deleted." in p for p in modes)  # the archived transcript keeps its mode
    wrong = {
        p: m for p, m in modes.items() if m != ("0o700" if os.path.isdir(state / p) else "0o600")
    }
    assert not wrong, wrong


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("sessiontool: warning: ")]


@pytest.mark.parametrize(
    "mode, word",
    [(0o777, "group- and world-writable"), (0o702, "world-writable"), (0o770, "group-writable")],
)
def test_a_state_dir_others_can_write_warns(state: Path, mode: int, word: str) -> None:
    rc, _ = run_json("send", "main", "hi", "--timeout", "20")
    assert rc == 0
    state.chmod(mode)
    proc = run_cli("list", "--json")
    assert proc.returncode == 0
    assert proc.stdout.startswith('{"count":1')
    (line,) = _warnings(proc.stderr)
    assert proc.stderr == line + "\n"
    assert f"state dir {state} is {word} (mode {mode:04o}); run: chmod 700 {state}" in line
    state.chmod(0o700)
    proc = run_cli("list", "--json")
    assert proc.returncode == 0 and proc.stderr == ""


def test_a_state_dir_owned_by_another_user_warns(state: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("only root can give a directory away")
    rc, _ = run_json("send", "main", "hi", "--timeout", "20")
    assert rc == 0
    os.chown(state, 4242, -1)
    try:
        proc = run_cli("history", "main", "--json")
        assert proc.returncode == 0, proc.stderr
        (line,) = _warnings(proc.stderr)
        assert f"state dir {state} is owned by uid 4242, not by you (uid 0)" in line
        # An error still comes after the warning, each on its own line.
        proc = run_cli("history", "nope")
        assert proc.returncode == 3
        assert (
            len(_warnings(proc.stderr)) == 1
            and "sessiontool: error: Session not found" in proc.stderr
        )
    finally:
        os.chown(state, 0, -1)


def test_the_check_is_silent_and_cheap_for_a_missing_or_private_dir(tmp_path: Path) -> None:
    assert perms.state_dir_problems(tmp_path / "missing") == []
    d = tmp_path / "private"
    d.mkdir(mode=0o700)
    assert perms.state_dir_problems(d) == []
    f = tmp_path / "file"
    f.write_text("")
    assert perms.state_dir_problems(f) == []  # not a dir: other commands report that
    proc = run_cli("list", "--json", env={"SESSIONTOOL_STATE_DIR": str(tmp_path / "missing")})
    assert proc.returncode == 0 and proc.stderr == ""
    assert not (tmp_path / "missing").exists()  # reads never create the state dir
