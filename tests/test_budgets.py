"""Budgets that refuse and stop runs (`sessiontool.budgets`, `send`/`spawn --max-cost`): a
spent budget refuses a new run with exit 6 naming the budget, its spend and its window; a run
whose spend crosses its limit is stopped where its runner reports usage (the `openai` runner
between model calls, a `command` runner at its end), ends `aborted` with the reason `budget`
(`runs`, `wait` exit 6, the announce) and keeps what it did."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import run_cli, run_json
from tests.runhelpers import records, settle

pytestmark = pytest.mark.usefixtures("reap_workers")

# 1,000,000 input tokens at 1 USD per million: each run of this command costs exactly 1 USD.
ONE_USD = (
    "import json, sys; sys.stdin.read(); print(json.dumps({'reply': 'partial answer', "
    "'model': 'm1', 'provider': 'p', 'usage': {'input': 1000000, 'output': 0}}))"
)
PRICES = {"p": {"models": [{"id": "m1", "cost": {"input": 1, "output": 2}}]}}


def _config(
    state: Path, budgets: list[dict[str, Any]], runner: dict[str, Any] | None = None
) -> None:
    state.mkdir(parents=True, exist_ok=True)
    runner = runner or {
        "type": "command",
        "output": "json",
        "command": [sys.executable, "-c", ONE_USD],
    }
    cfg = {
        "agents": {"defaults": {"runner": runner}},
        "models": {"providers": PRICES},
        "sessiontool": {"budgets": budgets},
    }
    (state / "sessiontool.json5").write_text(json.dumps(cfg))


def test_day_budget_stops_the_crossing_run_then_refuses(state: Path) -> None:
    _config(state, [{"window": "day", "limit": 2.5}])
    assert run_json("send", "main", "one")[0] == 0
    assert run_json("send", "main", "two")[0] == 0
    # The third run has 0.5 USD left: its command reports 1 USD at its end, so it is stopped.
    rc, out = run_json("send", "main", "three")
    assert rc == 6, out
    assert out["status"] == "error" and out["runStatus"] == "aborted"
    assert out["reason"] == "budget" and "budget day" in out["error"]
    rec = next(r for r in records(state) if r["message"] == "three")
    assert rec["status"] == "aborted" and rec["abortReason"] == "budget"
    assert rec["costLimit"]["usd"] == pytest.approx(0.5)
    assert rec["reply"] == "partial answer"  # the partial turn is kept
    # The next run is refused before it starts: nothing is queued for it.
    before = len(records(state))
    proc = run_cli("send", "main", "four")
    assert proc.returncode == 6
    assert "budget day" in proc.stderr and "3.0000 USD spent today" in proc.stderr
    assert "limit of 2.5 USD" in proc.stderr and "--force" in proc.stderr
    assert len(records(state)) == before
    rc, out = run_json("send", "main", "four")
    assert rc == 6 and out["status"] == "over_budget"
    assert (out["budget"], out["window"], out["limit"], out["spend"]) == ("day", "day", 2.5, 3.0)
    # --force lifts it.
    assert run_json("send", "main", "five", "--force")[0] == 0


def test_aborted_for_budget_in_runs_and_wait(state: Path) -> None:
    _config(state, [])
    rc, out = run_json("send", "main", "hi", "--max-cost", "0.25", "--timeout", "0")
    assert rc == 0
    proc = run_cli("wait", out["runId"])
    assert proc.returncode == 6, proc.stderr
    assert "--max-cost: the run spent 1.0000 USD" in proc.stderr
    rc, runs = run_json("runs", out["runId"])
    assert runs["status"] == "aborted" and runs["abortReason"] == "budget"
    assert runs["costLimit"] == {"usd": 0.25, "limit": 0.25, "window": "run"}


def test_session_budget_counts_that_session_only(state: Path) -> None:
    _config(state, [{"window": "session", "limit": 1}])
    assert run_json("send", "agent:main:dm:a", "one")[0] == 6  # crossed: 1 USD of 1
    proc = run_cli("send", "agent:main:dm:a", "again")
    assert proc.returncode == 6 and "in session agent:main:dm:a" in proc.stderr
    assert run_json("send", "agent:main:dm:b", "other")[0] == 6  # b had its own 1 USD
    assert run_cli("send", "agent:main:dm:b", "again").returncode == 6


def test_agent_and_model_narrow_a_budget(state: Path) -> None:
    _config(
        state,
        [
            {"window": "day", "limit": 0, "agent": "other"},
            {"window": "run", "limit": 5, "model": "zzz"},
        ],
    )
    rc, out = run_json("send", "main", "hi")
    assert rc == 0, out
    rec = records(state)[0]
    assert "costLimit" not in rec  # neither budget is over this agent's run on its model


def test_spawn_refused_and_stopped(state: Path) -> None:
    _config(state, [{"window": "run", "limit": 0.5, "name": "per-run"}])
    rc, out = run_json("spawn", "task")
    assert rc == 0, out
    recs = settle(state)
    child = next(r for r in recs if r["runId"] == out["runId"])
    assert child["status"] == "aborted" and child["abortReason"] == "budget"
    assert "budget per-run" in child["error"]
    # The announce says why, and keeps the child's partial reply.
    rc, hist = run_json("history", "main")
    text = hist["messages"][-1]["content"][0]["text"]
    assert text.startswith("Status: aborted (budget)\nResult: partial answer\n")
    assert "Notes: budget per-run: the run spent 1.0000 USD" in text
    _config(state, [{"window": "run", "limit": 0, "name": "none"}])
    proc = run_cli("spawn", "task")
    assert proc.returncode == 6 and "budget none" in proc.stderr


@pytest.mark.parametrize(
    "budgets, word",
    [
        ({"window": "week", "limit": 1}, "window"),
        ({"window": "day", "limit": -1}, "limit"),
        ({"window": "day", "limit": "5"}, "limit"),
        ({"window": "day", "limit": 1, "color": "red"}, "unknown key"),
        ("daily", "list of budgets"),
    ],
)
def test_bad_budget_config_is_exit_2(state: Path, budgets: Any, word: str) -> None:
    state.mkdir(parents=True, exist_ok=True)
    value = budgets if isinstance(budgets, str) else [budgets]
    (state / "sessiontool.json5").write_text(json.dumps({"sessiontool": {"budgets": value}}))
    proc = run_cli("list")
    assert proc.returncode == 2
    assert "sessiontool.budgets" in proc.stderr and word in proc.stderr


def test_bad_max_cost_is_exit_2(state: Path) -> None:
    _config(state, [])
    proc = run_cli("send", "main", "hi", "--max-cost", "-1")
    assert proc.returncode == 2 and "--max-cost" in proc.stderr
    assert records(state) == []


def test_openai_run_stopped_between_model_calls(state: Path) -> None:
    """The model asks for a tool each call; the first call's usage (1 USD) crosses the 0.5 USD
    limit, so no tool runs and no second call is made; the partial turn is in the transcript."""
    calls = {"tool": {"tool_calls": [{"name": "agents_list", "arguments": {}}]}}
    with FakeOpenAI(default=lambda body: calls["tool"]) as srv:
        for_call = {"prompt_tokens": 1_000_000, "completion_tokens": 0}
        calls["tool"] = {**calls["tool"], "usage": for_call}
        _config(
            state,
            [{"window": "run", "limit": 0.5}],
            {"type": "openai", "baseUrl": srv.base_url, "model": "p/m1", "provider": "p"},
        )
        rc, out = run_json("send", "main", "go")
        assert rc == 6, out
        assert out["reason"] == "budget"
        assert len(srv.requests) == 1  # stopped before the tool round's next call
    rc, hist = run_json("history", "main", "--json", "--include-tools")
    last = hist["messages"][-1]
    assert last["role"] == "assistant" and last["stopReason"] == "aborted"
    assert last["usage"]["input"] == 1_000_000  # the spent call's usage is kept


def test_top_shows_each_budgets_fill_and_the_runs_it_stopped(state: Path) -> None:
    """`top`'s model and rows (no Textual): today's spend of a day budget, its fill, SPENT when
    it is full, and a run its budget stopped marked in the runs pane."""
    from sessiontool.context import build_context
    from sessiontool.tui import model, rows

    _config(state, [{"window": "day", "limit": 4, "name": "daily"}, {"window": "run", "limit": 9}])
    assert run_json("send", "main", "one")[0] == 0
    ctx = build_context(str(state))
    cost = model.cost_today(ctx, model.Options())
    fills = {b["budget"]: b for b in cost.budgets}
    assert fills["daily"]["spend"] == pytest.approx(1.0) and fills["daily"]["fill"] == 0.25
    assert fills["run"]["fill"] is None  # spent per run: no fill of its own
    line, over = rows.status_line(model.Snapshot(), "none", cost, None)
    assert "budget daily: $1.00 of $4.00 (25%)" in line and not over
    assert run_json("send", "main", "two")[0] == 0
    assert run_json("send", "main", "three")[0] == 0
    assert run_json("send", "main", "four")[0] == 6  # crosses: 1 USD with none left... stopped
    cost = model.cost_today(build_context(str(state)), model.Options())
    line, over = rows.status_line(model.Snapshot(), "none", cost, None)
    assert "(100%) SPENT" in line and over
    stopped = [r for r in records(state) if r.get("abortReason") == "budget"]
    cells = rows.run_rows(stopped, {}, 0)[0][1]
    assert cells[2] == "aborted (budget)"


def test_doctor_lists_budgets_that_cannot_be_enforced(state: Path) -> None:
    _config(
        state, [{"window": "day", "limit": 4, "model": "q/unpriced"}, {"window": "run", "limit": 1}]
    )
    cfg = json.loads((state / "sessiontool.json5").read_text())
    cfg["agents"]["defaults"]["model"] = "p/m1"  # priced: no finding for it
    (state / "sessiontool.json5").write_text(json.dumps(cfg))
    rc, out = run_json("doctor")
    found = [p for p in out["problems"] if p["kind"] == "budget-unenforceable"]
    assert [p["detail"] for p in found] == [
        "budget day model=q/unpriced: no price for the model q/unpriced: its runs count only "
        "the cost their transcripts record"
    ]
    assert found[0]["severity"] == "warning"


def test_a_rerun_passes_the_budgets_too(state: Path) -> None:
    _config(state, [{"window": "day", "limit": 1}])
    rc, out = run_json("send", "main", "one")
    assert rc == 6 and out["reason"] == "budget"  # 1 USD of 1: stopped at its end
    proc = run_cli("rerun", out["runId"])
    assert proc.returncode == 6 and "budget day" in proc.stderr
    assert len(records(state)) == 1


@pytest.mark.parametrize("window", ["day", "session"])
def test_a_turn_written_after_the_index_caught_up_is_counted(state: Path, window: str) -> None:
    """The gate reads the spend from the index without a catch-up when every transcript it
    needs is indexed as it is now; a turn another program appended since (OpenClaw, an edit)
    changes the file, so that read is not taken and the turn counts."""

    from tests.runhelpers import priced_turn, read_store, sessions_dir

    _config(state, [{"window": window, "limit": 2.5}])
    assert run_json("send", "main", "one")[0] == 0
    assert run_json("send", "main", "two")[0] == 0  # 2 USD of 2.5 now
    settle(state)
    assert run_cli("usage", "--json").returncode == 0  # the index caught up
    sid = read_store(state)["agent:main:main"]["sessionId"]
    with open(sessions_dir(state) / f"{sid}.jsonl", "a") as fh:
        fh.write(priced_turn(1) + "\n")
    rc, out = run_json("send", "main", "three")
    assert rc == 6 and out["status"] == "over_budget", out
    assert out["spend"] == pytest.approx(3.0)
    # Nothing changed since that check: the quick read gives the same spend.
    rc, again = run_json("send", "main", "three")
    assert rc == 6 and again["spend"] == pytest.approx(3.0), again


def test_with_budgets_a_run_leaves_the_index_current_for_its_transcript(state: Path) -> None:
    """A run's worker catches its transcript up in the search index after the run (only with
    budgets configured), so the next run's check reads the spend without a catch-up: the
    index's row for the transcript is the file as it is after the run."""
    import os
    import sqlite3

    from tests.runhelpers import read_store, sessions_dir

    def indexed(path: Path) -> tuple[int, int] | None:
        db = sqlite3.connect(state / "sessiontool" / "index.sqlite")
        try:
            got = db.execute("SELECT size, mtime FROM files WHERE path = ?", (str(path),))
            row = got.fetchone()
        finally:
            db.close()
        return (int(row[0]), int(row[1])) if row else None

    _config(state, [{"window": "day", "limit": 100}])
    for n, text in enumerate(["one", "two"], start=1):
        assert run_json("send", "main", text)[0] == 0
        settle(state)
        path = sessions_dir(state) / f"{read_store(state)['agent:main:main']['sessionId']}.jsonl"
        st = os.stat(path)
        assert indexed(path) == (st.st_size, st.st_mtime_ns), n
    # Without budgets, a run leaves the index alone: the third turn is not in it yet.
    _config(state, [])
    assert run_json("send", "main", "three")[0] == 0
    settle(state)
    assert indexed(path) is not None and indexed(path) != (
        os.stat(path).st_size,
        os.stat(path).st_mtime_ns,
    )


def test_a_models_own_send_and_spawn_pass_the_budgets_as_tool_errors(state: Path) -> None:
    """A run's model calling `sessions_send` / `sessions_spawn` (the `openai` runner's tools,
    carried out in the worker) is gated as the CLI is: over a spent budget each is refused as a
    tool error with the budget's message, and nothing is queued for it."""
    _config(state, [{"window": "day", "limit": 1}])
    assert run_json("send", "main", "spend it")[0] == 6  # 1 USD: the day's budget is spent

    def model(body: dict[str, Any]) -> Any:
        results = [m for m in body["messages"] if m.get("role") == "tool"]
        if len(results) == 2:
            return {"content": "tools said: " + " | ".join(str(m["content"]) for m in results)}
        return {
            "tool_calls": [
                {"name": "sessions_send", "arguments": {"sessionKey": "bob", "message": "hi"}},
                {"name": "sessions_spawn", "arguments": {"task": "a child task"}},
            ]
        }

    with FakeOpenAI(default=model) as srv:
        runner = {"type": "openai", "baseUrl": srv.base_url, "model": "fake-model"}
        _config(state, [{"window": "day", "limit": 1}], runner)
        before = len(records(state))
        rc, out = run_json("send", "main", "delegate", "--force")  # this run is let through
        assert rc == 0, out
    reply = out["reply"]
    assert reply.count('"status": "over_budget"') == 2, reply
    assert reply.count("budget day: 1.0000 USD spent today") == 2, reply
    assert len(records(state)) == before + 1  # the send alone: no run for bob, no child
