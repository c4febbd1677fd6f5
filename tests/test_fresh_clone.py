"""The README's promise, checked the way a newcomer meets it: `scripts/fresh-clone-check` clones
the committed repository into an empty folder with an empty HOME and runs the README's two
commands there verbatim (it installs from the package index and runs the whole suite, so slow)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.helpers import ROOT


@pytest.mark.slow
def test_readme_commands_pass_in_a_fresh_clone() -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("SESSIONTOOL_") and k != "PYTHONWARNINGS"
    }
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

    def anchors(doc: Path) -> set[str]:
        out, fence = set(), False
        for line in doc.read_text(encoding="utf-8").splitlines():
            if line.startswith("```"):
                fence = not fence
            elif not fence and line.startswith("#"):
                title = line.lstrip("#").strip().lower()
                out.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
        return out

    docs = [ROOT / "README.md", ROOT / "bench" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for doc in docs:
        text = doc.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)]+)\)", text):
            if target.startswith(("http://", "https://")):
                continue
            file_part, _, anchor = target.partition("#")
            path = (doc.parent / file_part).resolve() if file_part else doc
            assert path.is_relative_to(ROOT), (doc.name, target)
            assert path.exists(), (doc.name, target)
            if anchor and path.suffix == ".md":
                assert anchor in anchors(path), (doc.name, target)
        assert "../shared" not in text, doc.name
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")


def test_extras_install_lines_work_from_a_checkout() -> None:
    """sessiontool is not on a package index: `pip install "sessiontool[llm]"` only works in a
    venv that already has it. Every install line names the checkout (`.[llm]`, `.[mcp]`)."""
    import re

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert not re.search(r"sessiontool\[", text)
    for extra in ("llm", "mcp"):
        assert f"pip install '.[{extra}]'" in text
        assert f"pipx install '.[{extra}]'" in text
