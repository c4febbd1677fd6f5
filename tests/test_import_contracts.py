"""The import contracts of pyproject `[tool.importlinter]` catch what they promise: `lint-imports`
(run by .ci/run) fails on a new import cycle among the modules of `cli/`, a lazy import inside a
function included. Checked on a copy of the package with one import added."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.helpers import ROOT

LINT = str(Path(sys.executable).with_name("lint-imports"))


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(
        ROOT / "sessiontool", root / "sessiontool", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    return root


def test_a_lazy_import_cycle_in_cli_breaks_the_acyclic_contract(tmp_path: Path) -> None:
    """columns imports render; render asking columns back, inside a function, is the cycle the
    two had (and the one a helper added to the wrong module would bring back)."""
    root = _copy(tmp_path)
    render = root / "sessiontool" / "cli" / "render.py"
    render.write_text(
        render.read_text(encoding="utf-8")
        + "\n\ndef _back() -> object:\n    from sessiontool.cli import columns\n\n"
        "    return columns\n",
        encoding="utf-8",
    )
    proc = subprocess.run(
        [LINT, "--no-cache", "--contract", "acyclic"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, PYTHONPATH=str(root)),
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "No cycles are allowed in sessiontool.cli." in out, out
    assert re.search(r"- \.(render -> \.columns|columns -> \.render) \(", out), out
