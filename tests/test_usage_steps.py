"""`usage --by tool` and `usage --by turn KEY`: each model turn's tokens and cost split evenly
among the tools it called and the tools whose results it read (docs/search-usage.md), summed
from the search index, caught up across appends; the key sets pinned."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import run_cli, run_json, write_config
from tests.runhelpers import sessions_dir, write_store

T0 = 1_796_000_000_000  # 2026-11-30
PRICE = {"input": 1.0, "output": 0.0, "cacheRead": 0.0, "cacheWrite": 0.0}  # USD per 1M in


def _line(msg: dict[str, Any]) -> str:
    return json.dumps({"type": "message", "message": msg}) + "\n"


def _turn(ts: int, tokens: int, calls: list[str] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    content: list[dict[str, Any]] = [{"type": "text", "text": "thinking"}]
    content += [{"type": "toolCall", "id": f"c{ts}{n}", "name": n, "arguments": {}} for n in calls]
    return {
        "role": "assistant",
        "content": content,
        "provider": "p",
        "model": "m",
        "usage": {"input": tokens, "output": 0},
        "stopReason": "toolUse" if calls else "stop",
        "timestamp": ts,
    }


def _result(ts: int, name: str, error: bool = False) -> dict[str, Any]:
    return {
        "role": "toolResult",
        "toolCallId": f"c{name}",
        "toolName": name,
        "content": [{"type": "text", "text": "out"}],
        "isError": error,
        "timestamp": ts,
    }


def _user(ts: int) -> dict[str, Any]:
    return {"role": "user", "content": "go", "timestamp": ts}


# user; turn A calls read+grep (100k); results (grep fails); turn B reads them, calls read
# (200k); result; turn C reads it, answers (300k); user; turn D answers alone (400k).
MESSAGES = [
    _user(T0),
    _turn(T0 + 1, 100_000, ["read", "grep"]),
    _result(T0 + 2, "read"),
    _result(T0 + 3, "grep", error=True),
    _turn(T0 + 4, 200_000, ["read"]),
    _result(T0 + 5, "read"),
    _turn(T0 + 6, 300_000),
    _user(T0 + 7),
    _turn(T0 + 8, 400_000),
]


@pytest.fixture
def session(state: Path) -> Path:
    write_config(state, {"models": {"providers": {"p": {"models": [{"id": "m", "cost": PRICE}]}}}})
    sid = "s1"
    write_store(state, {"agent:main:main": {"sessionId": sid, "updatedAt": T0}})
    path = sessions_dir(state) / f"{sid}.jsonl"
    header = json.dumps(
        {"type": "session", "version": 3, "id": sid, "timestamp": "2026-11-30T00:00:00Z"}
    )
    path.write_text(header + "\n" + "".join(_line(m) for m in MESSAGES))
    return path


def _rows(out: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["tool"]: r for r in out["rows"]}


def test_by_tool_follows_the_rule(session: Path) -> None:
    rc, out = run_json("usage", "--by", "tool")
    assert rc == 0, out
    rows = _rows(out)
    # A (100k) → read, grep: 50k each. B (200k) read grep's and read's results, called read:
    # read, grep: 100k each. C (300k) read read's result: read. D (400k): (none).
    assert rows["read"]["input"] == 50_000 + 100_000 + 300_000
    assert rows["grep"]["input"] == 50_000 + 100_000
    assert rows["(none)"]["input"] == 400_000
    assert (rows["read"]["calls"], rows["grep"]["calls"], rows["(none)"]["calls"]) == (2, 1, 0)
    assert (rows["read"]["errors"], rows["grep"]["errors"]) == (0, 1)
    assert rows["read"]["turns"] == 2.0 and rows["grep"]["turns"] == 1.0
    assert rows["read"]["cost"] == pytest.approx(0.45)
    # The shares add up to what `usage` counts.
    rc, plain = run_json("usage")
    assert out["total"]["input"] == plain["total"]["input"] == 1_000_000
    assert out["total"]["cost"] == pytest.approx(plain["total"]["cost"]) == pytest.approx(1.0)
    assert [r["tool"] for r in out["rows"]] == ["read", "(none)", "grep"]  # by cost


def test_by_tool_catches_up_across_an_append_between_call_and_result(session: Path) -> None:
    """The index read up to turn A; the results and the turn that reads them come later: the
    later turn is still attributed to A's tools (the boundary's last turn is looked up)."""
    lines = session.read_text().splitlines(keepends=True)
    session.write_text("".join(lines[:3]))  # header, user, turn A
    assert run_json("usage", "--by", "tool")[0] == 0
    session.write_text("".join(lines))
    rc, out = run_json("usage", "--by", "tool")
    rows = _rows(out)
    assert rows["grep"]["input"] == 150_000 and rows["grep"]["errors"] == 1
    assert rows["read"]["input"] == 450_000


def test_by_turn(session: Path) -> None:
    rc, out = run_json("usage", "--by", "turn", "main")
    assert rc == 0, out
    assert set(out) == {"by", "session", "currency", "rows", "total"}
    assert out["session"] == "main"
    assert [r["tools"] for r in out["rows"]] == [["read", "grep"], ["read"], [], []]
    assert [r["input"] for r in out["rows"]] == [100_000, 200_000, 300_000, 400_000]
    assert [r["turn"] for r in out["rows"]] == [1, 2, 3, 4]
    assert set(out["rows"][0]) == {
        "turn",
        "time",
        "model",
        "input",
        "output",
        "cacheRead",
        "cacheWrite",
        "cost",
        "tools",
    }
    assert out["rows"][0]["time"] == T0 + 1 and out["rows"][0]["model"] == "p/m"
    assert out["total"] == {
        "input": 1_000_000,
        "output": 0,
        "cacheRead": 0,
        "cacheWrite": 0,
        "turns": 4,
        "cost": 1.0,
    }
    proc = run_cli("usage", "--by", "turn", "main")  # piped: TSV, TOTAL last
    lines = proc.stdout.splitlines()
    assert lines[0].split("\t") == [
        "1",
        "2026-11-30T00:53:20Z",
        "p/m",
        "100000",
        "0",
        "0",
        "0",
        "0.1000",
        "read,grep",
    ]
    assert lines[-1].startswith("TOTAL\t")


def test_by_tool_key_set_and_tsv(session: Path) -> None:
    rc, out = run_json("usage", "--by", "tool")
    assert set(out) == {"by", "since", "until", "currency", "rows", "total"}
    assert set(out["rows"][0]) == {
        "tool",
        "calls",
        "errors",
        "turns",
        "input",
        "output",
        "cacheRead",
        "cacheWrite",
        "cost",
    }
    proc = run_cli("usage", "--by", "tool")
    first = proc.stdout.splitlines()[0].split("\t")
    assert first == ["read", "2", "0", "2.0", "450000", "0", "0", "0", "0.4500"]


@pytest.mark.parametrize(
    "args, word",
    [
        (("usage", "--by", "turn"), "needs a session"),
        (("usage", "main"), "--by turn only"),
        (("usage", "--by", "tool", "--budget", "1"), "--budget"),
        (("usage", "--by", "turn", "main", "--since", "1d"), "one session"),
    ],
)
def test_bad_combinations(session: Path, args: tuple[str, ...], word: str) -> None:
    proc = run_cli(*args)
    assert proc.returncode == 2 and word in proc.stderr


def test_unknown_session_is_exit_3(session: Path) -> None:
    assert run_cli("usage", "--by", "turn", "agent:main:nope").returncode == 3


def test_html_page_shows_each_turns_cost_and_a_bar_and_the_site_the_costliest(
    session: Path, tmp_path: Path
) -> None:
    import re

    proc = run_cli("history", "main", "--format", "html", "--include-tools")
    assert proc.returncode == 0, proc.stderr
    widths = [int(w) for w in re.findall(r'<svg class="cbar" width="(\d+)"', proc.stdout)]
    assert widths == [30, 60, 90, 120]  # 0.1, 0.2, 0.3, 0.4 USD against the costliest 0.4
    assert "$0.4000" in proc.stdout
    out = tmp_path / "site"
    assert run_cli("export", "--html", str(out)).returncode == 0
    usage = (out / "usage.html").read_text()
    assert "Most expensive turns" in usage
    table = usage[usage.index("Most expensive turns") :]
    costs = re.findall(r'<td class="n">\$(\d\.\d{4})</td><td><a href="([^"]+)"', table)
    assert [c for c, _ in costs] == ["0.4000", "0.3000", "0.2000", "0.1000"]
    page, anchor = costs[0][1].split("#")
    assert f'id="{anchor}"' in (out / page).read_text()


def test_cost_only(session: Path) -> None:
    assert run_cli("usage", "--by", "turn", "main", "--cost-only").stdout == "1.0000\n"
    rc, out = run_json("usage", "--by", "tool", "--cost-only")
    assert out == {"cost": 1.0, "currency": "USD"}
