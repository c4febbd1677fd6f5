"""`diff A B` and `diff --runs R1 R2`: the sides' figures, the first divergence (a user
message, a tool call, a reply, or one side ending), TSV, --json key sets, --format html, and a
session of OpenClaw's SQLite store against a JSONL one."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import FIXTURE_STATE, run_cli, run_json, write_config
from tests.htmlcheck import Page, assert_self_contained, norm
from tests.runhelpers import records, sessions_dir, settle, write_store

T0 = 1_796_000_000_000
SIDE_KEYS = {
    "session",
    "sessionId",
    "messages",
    "turns",
    "tokens",
    "cost",
    "durationMs",
    "tools",
    "steps",
}


def _assistant(
    ts: int, text: str, calls: tuple[str, ...] = (), tokens: int = 1000
) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += [
        {"type": "toolCall", "id": f"c{ts}", "name": n, "arguments": {"q": n}} for n in calls
    ]
    return {
        "role": "assistant",
        "content": content,
        "provider": "p",
        "model": "m",
        "usage": {"input": tokens, "output": 10},
        "timestamp": ts,
    }


def _session(state: Path, key: str, sid: str, msgs: list[dict[str, Any]]) -> None:
    store_file = sessions_dir(state) / "sessions.json"
    store = json.loads(store_file.read_text()) if store_file.exists() else {}
    store[key] = {"sessionId": sid, "updatedAt": T0}
    write_store(state, store)
    lines = [{"type": "session", "version": 3, "id": sid, "timestamp": "2026-11-30T00:00:00Z"}]
    lines += [{"type": "message", "message": m} for m in msgs]
    (sessions_dir(state) / f"{sid}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def _user(ts: int, text: str) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": ts}


@pytest.fixture
def two(state: Path) -> Path:
    price = {"input": 1.0, "output": 0.0}
    write_config(state, {"models": {"providers": {"p": {"models": [{"id": "m", "cost": price}]}}}})
    _session(
        state,
        "agent:main:a",
        "sa",
        [
            _user(T0, "fix the bug"),
            _assistant(T0 + 1000, "", ("read",)),
            _assistant(T0 + 5000, "done"),
        ],
    )
    _session(
        state,
        "agent:main:b",
        "sb",
        [
            _user(T0, "fix the bug"),
            _assistant(T0 + 1000, "", ("grep",), tokens=3000),
            _assistant(T0 + 2000, "", ("read",), tokens=3000),
            _assistant(T0 + 9000, "done"),
        ],
    )
    return state


def test_first_divergence_is_the_tool_call(two: Path) -> None:
    rc, out = run_json("diff", "agent:main:a", "agent:main:b")
    assert rc == 0, out
    assert set(out) == {"kind", "a", "b", "divergence", "same", "sameTools"}
    assert set(out["a"]) == SIDE_KEYS and set(out["a"]["steps"][0]) == {"kind", "text", "ts"}
    assert out["divergence"] == {
        "step": 2,
        "aKind": "toolCall",
        "bKind": "toolCall",
        "a": 'read {"q": "read"}',
        "b": 'grep {"q": "grep"}',
    }
    a, b = out["a"], out["b"]
    assert (a["turns"], b["turns"]) == (2, 3)
    assert (a["tools"], b["tools"]) == (["read"], ["grep", "read"])
    assert (a["durationMs"], b["durationMs"]) == (5000, 9000)
    assert a["cost"] == pytest.approx(0.002) and b["cost"] == pytest.approx(0.007)
    assert a["tokens"]["total"] == 2020 and out["same"] is False and out["sameTools"] is False


def test_tsv_and_a_side_that_ends(two: Path) -> None:
    proc = run_cli("diff", "agent:main:a", "agent:main:a")
    assert proc.returncode == 0
    assert [line.split("\t")[1] for line in proc.stdout.splitlines()] == ["=", "=", "="]
    rc, same = run_json("diff", "agent:main:a", "agent:main:a")
    assert same["divergence"] is None and same["same"] is True
    rows = [
        line.split("\t")
        for line in run_cli("diff", "agent:main:a", "agent:main:b").stdout.splitlines()
    ]
    assert rows[1][:3] == ["2", "!", "toolCall"] and rows[3][2:] == ["", "", "reply", "done"]


def test_html_page(two: Path) -> None:
    proc = run_cli("diff", "agent:main:a", "agent:main:b", "--format", "html")
    assert proc.returncode == 0
    page = Page(proc.stdout)
    assert_self_contained(page, "diff")
    text = norm(page.text)
    assert "First divergence at step 2" in text
    assert 'grep {"q": "grep"}' in text
    assert run_cli("diff", "agent:main:a", "agent:main:b", "--format", "pdf").returncode == 2


def test_unknown_session_is_exit_3(two: Path) -> None:
    assert run_cli("diff", "agent:main:a", "agent:main:nope").returncode == 3


@pytest.mark.usefixtures("reap_workers")
def test_diff_of_a_rerun(state: Path) -> None:
    """A run its --max-cost stopped, rerun without the limit: the same steps, the rerun ok."""
    code = (
        "import json, sys; m = sys.stdin.read().strip(); print(json.dumps({'reply': 'on ' + m, "
        "'model': 'm', 'provider': 'p', 'usage': {'input': 1000000, 'output': 0}}))"
    )
    runner = {"type": "command", "output": "json", "command": [sys.executable, "-c", code]}
    price = {"input": 1.0, "output": 0.0}
    providers = {"p": {"models": [{"id": "m", "cost": price}]}}
    write_config(
        state, {"agents": {"defaults": {"runner": runner}}, "models": {"providers": providers}}
    )
    assert run_json("send", "main", "first")[0] == 0
    rc, original = run_json("send", "main", "second", "--max-cost", "0.5")
    assert rc == 6, original
    rc, again = run_json("rerun", original["runId"])
    assert rc == 0, again
    settle(state)
    rc, out = run_json("diff", "--runs", original["runId"], again["runId"])
    assert rc == 0, out
    assert out["kind"] == "runs" and out["same"] is True
    assert [(s["kind"], s["text"]) for s in out["a"]["steps"]] == [
        ("user", "second"),
        ("reply", "on second"),
    ]
    assert out["a"]["runId"] == original["runId"] and out["a"]["status"] == "aborted"
    assert out["b"]["status"] == "ok" and out["a"]["cost"] == out["b"]["cost"] == 1.0
    assert len(records(state)) == 3


def test_across_stores_sqlite_against_jsonl(state: Path) -> None:
    """An OpenClaw SQLite-era session against a JSONL one (another agent's store)."""
    shutil.copytree(
        FIXTURE_STATE.parent.parent / "openclaw-2026.9.6" / "state", state, dirs_exist_ok=True
    )
    jl = state / "agents" / "jl" / "sessions"
    jl.mkdir(parents=True)
    shutil.copy(
        next((FIXTURE_STATE / "agents" / "main" / "sessions").glob("*.jsonl")), jl / "x.jsonl"
    )
    (jl / "sessions.json").write_text(
        json.dumps({"agent:jl:main": {"sessionId": "x", "updatedAt": T0}})
    )
    rc, out = run_json("diff", "agent:main:main", "agent:jl:main")
    assert rc == 0, out
    assert out["a"]["messages"] > 0 and out["b"]["messages"] > 0
    assert out["divergence"] is not None
