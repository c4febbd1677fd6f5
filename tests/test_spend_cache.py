"""reports/spend_cache.py: the budgets' last spend read, kept under the signatures of the
transcripts it was read from. A warm check answers from it without SQLite; a turn written since
(by another program, by a run of sessiontool's own) or a transcript new today changes its key,
so the spend is read from the index again and counted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import run_cli, run_json
from tests.runhelpers import priced_turn, read_store, sessions_dir, settle
from tests.test_budgets import _config

pytestmark = pytest.mark.usefixtures("reap_workers")


def _cache(state: Path) -> Path:
    from sessiontool.state.paths import StatePaths

    return StatePaths(state).budget_spend


def _spent(state: Path, n: int, window: str, limit: float) -> None:
    """`n` runs of 1 USD each under a roomy budget, then the budget of the test."""
    _config(state, [{"window": window, "limit": 100}])
    for i in range(n):
        assert run_json("send", "main", f"turn {i}")[0] == 0
    settle(state)
    _config(state, [{"window": window, "limit": limit}])


def _refused_spend(*args: str) -> Any:
    rc, out = run_json("send", "main", "again", *args)
    assert rc == 6 and out["status"] == "over_budget", out
    return out["spend"]


@pytest.mark.parametrize("window", ["day", "session"])
def test_a_cached_spend_is_used_only_while_its_transcripts_are_unchanged(
    state: Path, window: str
) -> None:
    _spent(state, 2, window, 2)  # 2 USD of 2
    assert run_cli("usage", "--json").returncode == 0  # the index caught up
    assert _refused_spend() == pytest.approx(2.0)
    rec = json.loads(_cache(state).read_text())
    key = "today" if window == "day" else "session"
    assert rec[key], rec  # written by that check
    # The record answers while nothing changed: doctored, its spend is what the check reports
    # (so what follows shows a record that is not used, not one never read).
    for t in rec[key]:
        t[2] = 2_500_000  # input tokens of each summed row: 2.5 USD each
    _cache(state).write_text(json.dumps(rec))
    doctored = 2.5 * len(rec[key])
    assert _refused_spend() == pytest.approx(doctored)
    # Another program appends a turn: the transcript's signature changed, the record is stale.
    sid = read_store(state)["agent:main:main"]["sessionId"]
    with open(sessions_dir(state) / f"{sid}.jsonl", "a") as fh:
        fh.write(priced_turn(1) + "\n")
    assert _refused_spend() == pytest.approx(3.0)
    assert _refused_spend() == pytest.approx(3.0)  # the rewritten record, read back
    # A run of sessiontool's own after the record was written: its spend counts.
    rc, out = run_json("send", "main", "four", "--force")
    assert rc == 0, out
    settle(state)
    assert _refused_spend() == pytest.approx(4.0)


def test_a_transcript_new_today_changes_a_day_records_key(state: Path) -> None:
    _spent(state, 1, "day", 1)
    assert _refused_spend() == pytest.approx(1.0)
    assert _cache(state).is_file()
    orphan = sessions_dir(state) / "0f0f0f0f-0000-4000-8000-000000000000.jsonl"
    head = {"type": "session", "version": 3, "id": orphan.stem, "timestamp": "x"}
    orphan.write_text(json.dumps(head) + "\n" + priced_turn(2, 500_000) + "\n")
    assert _refused_spend() == pytest.approx(1.5)
    orphan.unlink()  # removed: its spend no longer counts (as without the record)
    assert _refused_spend() == pytest.approx(1.0)


def test_a_record_of_another_index_or_unreadable_is_not_used(state: Path) -> None:
    _spent(state, 1, "day", 1)
    assert _refused_spend() == pytest.approx(1.0)
    rec = json.loads(_cache(state).read_text())
    rec["today"] = [[*t[:2], 9_000_000, *t[3:]] for t in rec["today"]]
    rec["index"] = [rec["index"][0], rec["index"][1] + 1]  # as after a rebuild
    _cache(state).write_text(json.dumps(rec))
    assert _refused_spend() == pytest.approx(1.0)
    _cache(state).write_text("{not json")
    assert _refused_spend() == pytest.approx(1.0)


def test_a_warm_check_answered_by_the_record_imports_no_sqlite(state: Path) -> None:
    """The point of the record (issue 44): SQLite is not imported by the gate on a warm check."""
    _config(state, [{"window": "day", "limit": 100}])
    assert run_json("send", "main", "one")[0] == 0
    settle(state)
    assert run_cli("usage", "--json").returncode == 0
    # The second check runs with `import sqlite3` made to fail (None in sys.modules): it can only
    # answer from the record. (A check of sys.modules would not do: under coverage, coverage
    # itself has imported sqlite3 in every child.)
    code = (
        "import sys\n"
        "from sessiontool.context import build_context\n"
        "from sessiontool.sessions.resolve import resolve\n"
        "ctx = build_context(sys.argv[1])\n"
        "r = resolve(ctx, 'main')\n"
        "from sessiontool.reports.budgets import BudgetGate\n"
        "if sys.argv[2] == 'block':\n"
        "    sys.modules['sqlite3'] = None\n"
        "limit = BudgetGate(ctx).allow(r.agent_id, r.key, r.entry, None)\n"
        "print(limit['spend'])\n"
    )
    outs = [
        subprocess.run(
            [sys.executable, "-c", code, str(state), mode],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for mode in ("allow", "block")
    ]
    assert outs == ["1.0", "1.0"], outs  # the second: answered by the record the first wrote
    # Without the record the same blocked check has to open the index, and cannot.
    (state / "sessiontool" / "budget-spend.json").unlink()
    proc = subprocess.run(
        [sys.executable, "-c", code, str(state), "block"], capture_output=True, text=True
    )
    assert proc.returncode != 0 and "sqlite3" in proc.stderr, proc.stderr


def test_the_index_file_name_is_the_index_modules() -> None:
    from sessiontool.index.db import INDEX_NAME
    from sessiontool.reports import spend_cache

    assert spend_cache.INDEX_NAME == INDEX_NAME
