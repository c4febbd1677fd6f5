"""reports/spend_cache.py: the budgets' last spend read, kept under the signatures of the
transcripts it was read from. A warm check answers from it without SQLite; a transcript that
only grew since (another program appended a turn) is read on from where the record stopped,
still without SQLite, counting what the index counts; anything else that changed (a file
replaced, an edit before that point, a transcript new today) reads the index again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
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


def _transcript(state: Path) -> Path:
    sid = read_store(state)["agent:main:main"]["sessionId"]
    return sessions_dir(state) / f"{sid}.jsonl"


def _refused_spend(*args: str) -> Any:
    rc, out = run_json("send", "main", "again", *args)
    assert rc == 6 and out["status"] == "over_budget", out
    return out["spend"]


@pytest.mark.parametrize("window", ["day", "session"])
def test_a_cached_spend_is_used_while_its_transcripts_are_unchanged_or_only_grew(
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
    # Another program appends a turn: the transcript only grew, so the record is read on from
    # where it stopped (the doctored sums and the new turn: no index read).
    transcript = _transcript(state)
    with open(transcript, "a") as fh:
        fh.write(priced_turn(1) + "\n")
    assert _refused_spend() == pytest.approx(doctored + 1.0)
    assert _refused_spend() == pytest.approx(doctored + 1.0)  # the rewritten record, read back
    # Rewritten whole (a new file under the same name, as `rewind` leaves it): the record is
    # stale, the spend is read from the index again.
    tmp = transcript.with_suffix(".tmp")
    tmp.write_bytes(transcript.read_bytes())
    tmp.replace(transcript)
    assert _refused_spend() == pytest.approx(3.0)
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
    # The check after its catch-up wrote the record anew: a turn appended to it is read on.
    with open(orphan, "a") as fh:
        fh.write(priced_turn(3, 250_000) + "\n")
    assert _read(state, "block", windows="day")["day USD"] == pytest.approx(1.75)
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


# The budgets' spend read in a fresh process, each window's turns summed per agent and model
# (the rows' grouping is the reader's own), with `import sqlite3` made to fail when asked:
# then only the record, read on over what a transcript grew by, can answer.
_READ = """
import json, sys
from sessiontool.context import build_context
from sessiontool.sessions.resolve import resolve
ctx = build_context(sys.argv[1])
r = resolve(ctx, "main")
from sessiontool.reports import budgets
from sessiontool.state.prices import prices_of
if sys.argv[2] == "block":
    sys.modules["sqlite3"] = None
spend = budgets.read_spend(ctx, r.agent_id, r.entry, set(sys.argv[3].split(",")))
prices = prices_of(ctx.config.providers)
out = {}
for window, turns in zip(("day", "session"), spend):
    sums = {}
    for agent, model, *n in turns:
        row = sums.setdefault(agent + " " + model, [0, 0, 0, 0, 0.0])
        sums[agent + " " + model] = [a + b for a, b in zip(row, n)]
    out[window] = {k: [*v[:4], round(v[4], 9)] for k, v in sums.items()}
    out[window + " USD"] = round(budgets.cost_of(turns, prices, None, None), 9)
print(json.dumps(out, sort_keys=True))
"""


def _read(state: Path, mode: str, now_ms: int | None = None, windows: str = "day,session") -> Any:
    env = dict(os.environ)
    if now_ms is not None:
        env["SESSIONTOOL_NOW_MS"] = str(now_ms)
    cmd = [sys.executable, "-c", _READ, str(state), mode, windows]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _index_read(state: Path, now_ms: int | None = None) -> Any:
    """The same read with no record: from the index (caught up), which writes the record anew."""
    _cache(state).unlink()
    return _read(state, "allow", now_ms)


def _one_run_read(state: Path) -> Any:
    """One run of 1 USD, the index caught up, and the record written by a check."""
    _config(state, [{"window": "day", "limit": 100}])
    assert run_json("send", "main", "one")[0] == 0
    settle(state)
    assert run_cli("usage", "--json").returncode == 0
    got = _read(state, "allow")
    assert got["day USD"] == pytest.approx(1.0) and got["session USD"] == pytest.approx(1.0)
    return got


def _turn(model: str, ts: int, **fields: Any) -> str:
    msg = {"role": "assistant", "content": [{"type": "text", "text": "x"}], "provider": "p"}
    msg.update(model=model, timestamp=ts, usage={"input": 1_000_000, "output": 0})
    msg.update(fields)
    return json.dumps({"type": "message", "id": uuid.uuid4().hex[:8], "message": msg})


def test_an_appended_turn_is_read_on_from_the_record_without_sqlite(state: Path) -> None:
    """Another program appends turns to a transcript of today (issue 44's missed case): the
    check reads the complete lines added and adds their turns to the record's sums, no SQLite
    imported; the sums are the index's."""
    before = _one_run_read(state)
    with open(_transcript(state), "a") as fh:
        fh.write(priced_turn(1) + "\n" + priced_turn(2, 500_000) + "\n")
    got = _read(state, "block")
    assert got["day USD"] == pytest.approx(2.5) and got["session USD"] == pytest.approx(2.5)
    assert got != before
    assert _read(state, "block") == got  # the record it rewrote, read back
    assert _index_read(state) == got


def test_the_record_read_on_counts_what_the_index_counts(state: Path) -> None:
    """The same sums either way over every kind of line a transcript grows by: models priced
    differently, one unpriced with its recorded cost, a turn dated before midnight (UTC) that
    was written after it (the session's, not today's), the mirrors' own turns, an injected
    note, a failed tool result, a line that is not JSON, a turn dated by its line alone."""
    now = int(time.time() * 1000)
    midnight = now // 86_400_000 * 86_400_000
    _one_run_read(state)
    cfg = json.loads((state / "sessiontool.json5").read_text())
    cfg["models"]["providers"]["p"]["models"].append({"id": "m2", "cost": {"input": 3}})
    (state / "sessiontool.json5").write_text(json.dumps(cfg))
    by_line = json.loads(_turn("m2", 0))
    del by_line["message"]["timestamp"]
    by_line["timestamp"] = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(now / 1000))
    fail = {"role": "toolResult", "toolName": "read", "isError": True, "content": []}
    lines = [
        _turn("m1", now),
        _turn("m2", now),
        _turn("m9", now, usage={"input": 7, "output": 1, "cost": {"total": 0.25}}),
        _turn("m1", midnight - 1),  # started before midnight, appended after it
        json.dumps(
            {
                "type": "message",
                "message": dict(
                    json.loads(_turn("m1", now))["message"],
                    provider="openclaw",
                    model="delivery-mirror",
                ),
            }
        ),
        _turn("m1", now, stopReason="injected"),
        json.dumps({"type": "message", "message": dict(fail, timestamp=now)}),
        '{"type": "message", "message": {"role": "assistant", not json',
        json.dumps({"type": "custom", "customType": "x", "data": {"message": 1}}),
        json.dumps(by_line),
    ]
    with open(_transcript(state), "a") as fh:
        fh.write("\n".join(lines) + "\n")
    got = _read(state, "block", now)
    assert got["day USD"] == pytest.approx(1 + 1 + 3 + 0.25 + 3), got
    assert got["session USD"] == pytest.approx(got["day USD"] + 1), got  # + the one before 0h
    assert _index_read(state, now) == got


def test_an_edit_before_the_records_end_is_read_from_the_index(state: Path) -> None:
    """The bytes the record's sums came from changed in place (same file, same length: the
    first turn's tokens tripled), then a turn appended: the record cannot prove the old sums,
    so the index reads the file again, and the spend is the edited one."""
    _one_run_read(state)
    transcript = _transcript(state)
    data = transcript.read_bytes()
    at = data.index(b'"input":1000000')
    with open(transcript, "r+b") as fh:
        fh.seek(at)
        fh.write(b'"input":3000000')
    with open(transcript, "a") as fh:
        fh.write(priced_turn(1, 500_000) + "\n")
    cmd = [sys.executable, "-c", _READ, str(state), "block", "day,session"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode != 0 and "sqlite3" in proc.stderr, proc.stdout  # not read on
    got = _read(state, "allow")
    assert got["day USD"] == pytest.approx(3.5) and got["session USD"] == pytest.approx(3.5)
    assert _read(state, "block") == got  # the record the index read wrote, read back


def test_a_partly_written_line_counts_once_it_is_complete(state: Path) -> None:
    """A turn caught half written (no newline yet) is not counted, as the index does not count
    it; once its line ends it is, read on from the same place."""
    before = _one_run_read(state)
    line = priced_turn(1).encode()
    with open(_transcript(state), "ab") as fh:
        fh.write(line[:40])
    assert _read(state, "block") == before
    assert _index_read(state) == before
    with open(_transcript(state), "ab") as fh:
        fh.write(line[40:] + b"\n")
    got = _read(state, "block")
    assert got["day USD"] == pytest.approx(2.0) and got["session USD"] == pytest.approx(2.0)
    assert _index_read(state) == got
