"""`sessiontool help --man` (issue 45 item 13): after `uv tool install` (which links only the
executables) `man sessiontool` finds no page, but the page is in the tool's environment, where
pip and pipx put it too (`<prefix>/share/man/man1`): `help --man` finds it there. Run from a
fresh environment laid out as those installs lay it out (the package on its path, the page
under its prefix), as the user runs it; piped, the page's roff source, which man renders."""

from __future__ import annotations

import os
import shutil
import site as sitelib
import subprocess
import sys
from pathlib import Path

import pytest

import sessiontool
from tests.helpers import ROOT, run_cli

PACKAGE_DIR = Path(sessiontool.__file__).resolve().parent.parent


def _tool_env(tmp_path: Path, page: str | None) -> Path:
    """A venv as `uv tool install` / pipx / pip make one: sessiontool importable in it, and
    (unless None) its man page at <venv>/share/man/man1/sessiontool.1."""
    venv = tmp_path / "tools" / "sessiontool"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)],
        check=True,
        timeout=300,
    )
    site = next((venv / "lib").glob("python3*/site-packages"))
    deps = "".join(f"{d}\n" for d in sitelib.getsitepackages())  # typer and the rest
    (site / "sessiontool-src.pth").write_text(f"{PACKAGE_DIR}\n{deps}")
    if page is not None:
        man1 = venv / "share" / "man" / "man1"
        man1.mkdir(parents=True)
        (man1 / "sessiontool.1").write_text(page)
    return venv


def _help_man(venv: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{venv / 'bin'}:/usr/bin:/bin"}
    return subprocess.run(
        [str(venv / "bin" / "python"), "-m", "sessiontool", "help", *extra, "--man"],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )


def test_help_man_finds_the_page_in_the_tools_environment(tmp_path: Path) -> None:
    shipped = (ROOT / "man" / "sessiontool.1").read_text()
    installed = shipped.replace(".SH NAME", '.\\" the installed copy\n.SH NAME', 1)
    venv = _tool_env(tmp_path, installed)
    p = _help_man(venv)
    assert p.returncode == 0, p.stderr
    assert p.stdout == installed  # the file the install put there, not a copy made up
    q = _help_man(venv, "send")  # `help send --man`: the same page (each command is a section)
    assert q.returncode == 0 and q.stdout == installed


def test_help_man_without_an_installed_page_writes_this_versions_page(tmp_path: Path) -> None:
    venv = _tool_env(tmp_path, None)
    p = _help_man(venv)
    assert p.returncode == 0, p.stderr
    assert p.stdout == (ROOT / "man" / "sessiontool.1").read_text()


@pytest.mark.skipif(shutil.which("man") is None, reason="no man")
def test_what_help_man_writes_is_a_page_man_renders() -> None:
    p = run_cli("help", "--man")
    assert p.returncode == 0, p.stderr
    shown = subprocess.run(
        ["man", "-l", "-"],
        input=p.stdout,
        capture_output=True,
        text=True,
        env={**os.environ, "MANPAGER": "cat", "MANWIDTH": "80"},
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    assert "SESSIONTOOL(1)" in shown.stdout and "sessiontool send" in shown.stdout
