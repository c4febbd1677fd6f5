"""The README's promise, checked the way a newcomer meets it: `scripts/fresh-clone-check` clones
the committed repository into an empty folder with an empty HOME and runs the README's two
commands there verbatim (it installs from the package index and runs the whole suite, so slow)."""

from __future__ import annotations

import os
import subprocess

import pytest

from .conftest import ROOT


@pytest.mark.slow
def test_readme_commands_pass_in_a_fresh_clone() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SESSIONTOOL_")}
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / "fresh-clone-check"), str(ROOT)],
        capture_output=True,
        text=True,
        env=env,
        timeout=3600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "== command 1: ok" in proc.stdout and "== command 2: ok" in proc.stdout
    assert "echo: hello from sessiontool" in proc.stdout


def test_readme_links_stay_inside_the_repository() -> None:
    import re

    for doc in (ROOT / "README.md", ROOT / "bench" / "README.md"):
        text = doc.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)]+)\)", text):
            if target.startswith(("http://", "https://", "#")):
                continue
            path = (doc.parent / target.split("#", 1)[0]).resolve()
            assert path.is_relative_to(ROOT), (doc.name, target)
            assert path.exists(), (doc.name, target)
        assert "../shared" not in text, doc.name
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
