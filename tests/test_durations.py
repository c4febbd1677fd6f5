"""Durations (durations.py) as the options that take them parse them: `--timeout`,
`--older-than`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import run_cli, run_json


@pytest.mark.slow
def test_compound_durations(state: Path) -> None:
    rc, data = run_json("send", "main", "x", "--timeout", "1m30s")
    assert rc == 0 and data["status"] == "ok"
    for good in ("1h30m", "2d 4h", "1m30s"):
        assert run_cli("prune", "--older-than", good, "--dry-run").returncode == 0, good
    for bad in ("1h30", "h30m", "30x"):
        proc = run_cli("prune", "--older-than", bad, "--dry-run")
        assert proc.returncode == 2, bad
        assert "1h30m" in proc.stderr
