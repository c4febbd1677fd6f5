"""The release a user installs says what it is: one version (sessiontool.__version__, which
pyproject reads), the same in CHANGELOG.md's newest release and `--version`, and `--version`
names the peer releases the interop suites really install."""

from __future__ import annotations

import re
from pathlib import Path

import sessiontool
from tests.helpers import run_cli

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ROOT / "tests" / "fixtures" / "tools"


def test_version_names_the_release_and_the_peers_it_was_tested_against() -> None:
    proc = run_cli("--version")
    assert proc.returncode == 0
    first = proc.stdout.splitlines()[0]
    assert first.startswith(f"sessiontool {sessiontool.__version__} (tested against ")
    peers = re.findall(r"\d{4}\.\d+\.\d+(?:-\d+)?", first)
    assert len(peers) == 3, first
    installed = "\n".join(
        (TOOLS / name).read_text()
        for name in ("setup-openclaw.sh", "setup-openclaw-json.sh", "peers/package.json")
    )
    for version in peers:  # each one is what an interop setup script installs
        assert re.search(rf"(openclaw|clawdbot)\W{{1,4}}{re.escape(version)}\b", installed) or (
            f"V={version}" in installed
        ), version


def test_changelog_newest_release_is_the_package_version() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    releases = re.findall(r"^## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})$", text, re.M)
    assert releases, "no '## [X.Y.Z] - YYYY-MM-DD' heading"
    assert releases[0][0] == sessiontool.__version__
    dates = [d for _, d in releases]
    assert dates == sorted(dates, reverse=True)  # newest first
    assert "pyproject" not in sessiontool.__version__
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in pyproject and "sessiontool.__version__" in pyproject
