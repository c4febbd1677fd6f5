"""`sessiontool help --man`: the manual page, wherever the install put it. `pip install` (into a
venv or a prefix) and `pipx install` put it in `<prefix>/share/man/man1` (pipx also links it into
~/.local/share/man, so `man sessiontool` finds it); `uv tool install` links only the executables,
so `man sessiontool` finds no page although the file is in the tool's own environment. This
finds the file in the environment running it (`sys.prefix`), or, in a checkout or an install
that dropped data files, writes this version's page from the command tree (cli/docs.py).

On a terminal the page opens in `man -l`; piped, its roff source is written (`| man -l -`)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from sessiontool.cli import render

PAGE = Path("share") / "man" / "man1" / "sessiontool.1"


def installed() -> Path | None:
    """The page the install put beside the program (the venv's, the tool environment's)."""
    for prefix in dict.fromkeys((sys.prefix, sys.base_prefix)):
        p = Path(prefix) / PAGE
        if p.is_file():
            return p
    return None


def source() -> tuple[str, Path | None]:
    """The page's roff text and the file it came from (None: generated, no file installed)."""
    p = installed()
    if p is not None:
        return p.read_text(encoding="utf-8"), p
    # cli/docs.py builds it from the whole command tree, in a process of its own (nothing in
    # the program imports it; this one has registered `help` first, which would reorder it).
    code = "import sys; from sessiontool.cli.docs import man_page; sys.stdout.write(man_page())"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, encoding="utf-8"
    )
    if done.returncode != 0:
        from sessiontool.errors import SessiontoolError

        raise SessiontoolError("no manual page installed, and it could not be generated")
    return done.stdout, None


def show() -> None:
    text, path = source()
    man = shutil.which("man")
    if man is None or not render.Look().terminal():
        render.write_out(text)
        return
    sys.stdout.flush()
    if path is not None:
        subprocess.run([man, "-l", str(path)], check=False)
        return
    with tempfile.TemporaryDirectory(prefix="sessiontool-man-") as d:
        page = Path(d) / "sessiontool.1"
        page.write_text(text, encoding="utf-8")
        subprocess.run([man, "-l", str(page)], check=False)
