"""`usage` over the real Clawdbot fixtures: totals equal an independent sum of the assistant
messages' usage, cost uses the configured prices, `--budget` exits 6 only when over."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import FIXTURE_STATE, run_cli, run_json, write_config

PRICE = {"input": 3.0, "output": 15.0, "cacheRead": 0.3, "cacheWrite": 3.75}
FIELDS = ("input", "output", "cacheRead", "cacheWrite")


@pytest.fixture
def fixture_state(state: Path) -> Path:
    shutil.copytree(FIXTURE_STATE, state)
    return state


def _assistant_usages(state: Path, since: int | None = None) -> list[dict[str, Any]]:
    """Every assistant message's usage in every transcript on disk (archived included): a
    turn is an assistant message that carries `usage` and that a model wrote (not a note
    injected with `stopReason: "injected"`)."""
    out = []
    for path in sorted((state / "agents").glob("*/sessions/*.jsonl*")):
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            obj = json.loads(line)
            msg = obj.get("message") if obj.get("type") == "message" else None
            if not msg or msg.get("role") != "assistant" or not isinstance(msg.get("usage"), dict):
                continue
            if msg.get("stopReason") == "injected":
                continue
            if since is not None and msg["timestamp"] < since:
                continue
            out.append(msg.get("usage") or {})
    return out


def _priced(state: Path) -> None:
    write_config(
        state,
        {"models": {"providers": {"fake": {"models": [{"id": "fake-model", "cost": PRICE}]}}}},
    )


def test_totals_equal_independent_sum(fixture_state: Path) -> None:
    usages = _assistant_usages(fixture_state)
    rc, out = run_json("usage", "--all-agents")
    assert rc == 0
    total = out["total"]
    for f in FIELDS:
        assert total[f] == sum(u.get(f, 0) for u in usages), f
    assert total["turns"] == len(usages)
    assert 0 < total["runs"] <= total["turns"]
    assert total["cost"] == 0  # the fixture's config prices fake-model at 0
    # Rows add up to the total, whatever the grouping.
    for by in ("session", "agent", "model", "day", "label"):
        rc, grouped = run_json("usage", "--all-agents", "--by", by)
        assert rc == 0
        for f in (*FIELDS, "turns", "runs"):
            assert sum(r[f] for r in grouped["rows"]) == total[f], (by, f)
    rc, by_agent = run_json("usage", "--all-agents", "--by", "agent")
    assert {r["agent"] for r in by_agent["rows"]} == {"main", "research"}


def test_cost_from_configured_prices_and_budget(fixture_state: Path) -> None:
    _priced(fixture_state)
    usages = _assistant_usages(fixture_state)
    expected = sum(u.get(f, 0) * PRICE[f] for u in usages for f in FIELDS) / 1_000_000
    rc, out = run_json("usage", "--all-agents", "--by", "model")
    assert rc == 0
    assert out["total"]["cost"] == pytest.approx(expected, abs=1e-6)
    # chat.inject wrote one assistant message with no model (and no tokens).
    row = next(r for r in out["rows"] if r["model"] == "fake/fake-model")
    assert row["input"] == out["total"]["input"] and row["cost"] == out["total"]["cost"]
    assert "unpriced" not in out

    proc = run_cli("usage", "--all-agents", "--cost-only")
    assert proc.returncode == 0 and float(proc.stdout) == pytest.approx(expected, abs=1e-4)
    under = run_cli("usage", "--all-agents", "--budget", str(expected * 2), "--cost-only")
    assert under.returncode == 0, under.stderr
    over = run_cli("usage", "--all-agents", "--budget", str(expected / 2))
    assert over.returncode == 6
    assert "over budget" in over.stderr
    assert over.stdout.splitlines()[-1].startswith("TOTAL\t")  # the report is still printed
    rc, data = run_json("usage", "--all-agents", "--budget", str(expected / 2), "--cost-only")
    assert rc == 6 and data["overBudget"] is True and data["budget"] == expected / 2
    bad = run_cli("usage", "--all-agents", "--budget", "-1")
    assert bad.returncode == 2 and bad.stderr.startswith("sessiontool: error:")


def test_since_counts_only_newer_messages(fixture_state: Path) -> None:
    _priced(fixture_state)
    all_ts = sorted(
        json.loads(line)["message"]["timestamp"]
        for p in (fixture_state / "agents").glob("*/sessions/*.jsonl*")
        for line in p.read_text().splitlines()
        if '"role":"assistant"' in line
    )
    cut = all_ts[len(all_ts) // 2]
    iso = datetime.fromtimestamp(cut / 1000, tz=UTC).isoformat(timespec="milliseconds")
    usages = _assistant_usages(fixture_state, since=cut)
    rc, out = run_json("usage", "--all-agents", "--since", iso)
    assert rc == 0
    assert out["total"]["turns"] == len(usages)
    assert out["total"]["input"] == sum(u["input"] for u in usages)
    # A period with nothing in it costs nothing: never over any budget.
    proc = run_cli("usage", "--all-agents", "--since", "1m", "--budget", "0")
    assert proc.returncode == 0, proc.stderr


def test_new_messages_counted_after_send(state: Path) -> None:
    assert run_cli("send", "main", "count me please").returncode == 0
    rc, first = run_json("usage", "--all-agents")
    assert rc == 0 and first["total"]["turns"] == 1 and first["total"]["runs"] == 1
    assert run_cli("send", "main", "and me too").returncode == 0
    rc, second = run_json("usage", "--all-agents", "--by", "session")
    assert second["total"]["turns"] == 2 and second["total"]["runs"] == 2
    assert second["rows"][0]["session"] == "main"


def test_table_and_tsv(fixture_state: Path) -> None:
    proc = run_cli("usage", "--all-agents", "--by", "day")
    assert proc.returncode == 0
    lines = [ln.split("\t") for ln in proc.stdout.splitlines()]
    assert lines[-1][0] == "TOTAL"  # no header row: the first line is data, as in every TSV
    assert lines[0][0] == "2026-11-21"
    bad = run_cli("usage", "--all-agents", "--by", "week")
    assert bad.returncode == 2 and "unknown --by" in bad.stderr


OPENCLAW_STATE = FIXTURE_STATE.parent.parent / "openclaw-2026.9.6" / "state"


def _openclaw_assistant_usages(state: Path) -> list[dict[str, Any]]:
    """Straight from OpenClaw's files: every assistant message with usage on the active branch
    of each current session (silent replies and turns before a reset included), and in the
    archived transcripts of deleted sessions."""
    import sqlite3

    import zstandard

    out = []
    for db in sorted((state / "agents").glob("*/agent/openclaw-agent.sqlite")):
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            cols = {r[1] for r in con.execute("PRAGMA table_info(session_nodes)")}
            live = " WHERE archived_at IS NULL" if "archived_at" in cols else ""
            sids = [
                r[0] for r in con.execute("SELECT current_session_id FROM session_nodes" + live)
            ]
            for sid in sids:
                rows = con.execute(
                    "SELECT e.event_json, e.event_zstd FROM session_transcript_active_events a "
                    "JOIN transcript_events e ON e.session_id = a.session_id "
                    "AND e.seq = a.event_seq WHERE a.session_id = ?",
                    (sid,),
                ).fetchall()
                for text, blob in rows:
                    if text is None:
                        text = zstandard.ZstdDecompressor().decompressobj().decompress(blob)
                    ev = json.loads(text)
                    msg = ev.get("message") if ev.get("type") == "message" else None
                    if (
                        msg
                        and msg.get("role") == "assistant"
                        and isinstance(msg.get("usage"), dict)
                    ):
                        out.append(msg["usage"])
        finally:
            con.close()
    # A deleted session's transcript, archived by OpenClaw as `<id>.jsonl.deleted.<time>.zst`:
    # what was spent stays spent.
    for archive in sorted((state / "agents").glob("*/sessions/*.jsonl.deleted.*.zst")):
        with open(archive, "rb") as fh:
            data = zstandard.ZstdDecompressor().stream_reader(fh).read()
        for line in data.splitlines():
            ev = json.loads(line)
            msg = ev.get("message") if ev.get("type") == "message" else None
            if msg and msg.get("role") == "assistant" and isinstance(msg.get("usage"), dict):
                out.append(msg["usage"])
    return out


def test_openclaw_sqlite_store_through_the_reader(state: Path) -> None:
    shutil.copytree(OPENCLAW_STATE, state)
    usages = _openclaw_assistant_usages(state)
    assert usages
    rc, out = run_json("usage", "--all-agents", "--by", "agent")
    assert rc == 0, out
    for f in FIELDS:
        assert out["total"][f] == sum(u.get(f, 0) for u in usages), f
    assert out["total"]["turns"] == len(usages)
    assert {r["agent"] for r in out["rows"]} == {"main", "ops"}
    # search reads the same store: a user message, with its key and timestamp
    rc, found = run_json("search", '"Slack channel message"', "--role", "user", "--all-agents")
    assert rc == 0, found
    (hit,) = found["hits"]
    assert hit["key"] == "agent:main:slack:channel:c0123"
    rc, hist = run_json("history", "agent:main:slack:channel:c0123")
    (user,) = [m for m in hist["messages"] if m["role"] == "user"]
    assert hit["timestamp"] == user["timestamp"]
    # ... and OpenClaw's files are untouched: our index is in our own directory only.
    assert (state / "sessiontool" / "index.sqlite").is_file()


def test_usage_reads_the_current_agent_like_list_and_search(fixture_state: Path) -> None:
    rc, mine = run_json("usage", "--by", "agent")
    assert rc == 0 and {r["agent"] for r in mine["rows"]} == {"main"}
    rc, research = run_json("--agent", "research", "usage", "--by", "agent")
    assert rc == 0 and {r["agent"] for r in research["rows"]} == {"research"}
    rc, every = run_json("usage", "--all-agents", "--by", "agent")
    assert {r["agent"] for r in every["rows"]} == {"main", "research"}
    assert every["total"]["turns"] == mine["total"]["turns"] + research["total"]["turns"]
    rc, typo = run_json("--agent", "reserch", "usage")
    assert rc == 3 and "did you mean 'research'" in typo["error"]


@pytest.mark.parametrize("first", ["usage", "search"])
def test_an_injected_note_is_no_turn_of_an_unknown_model(state: Path, first: str) -> None:
    """The Clawdbot fixture holds a note pinned by chat.inject: an assistant message with
    `stopReason: "injected"`, zero usage and no model. No model wrote it, so `usage` counts no
    turn for it (it was a turn of `(unknown)`), whether the index was built for usage alone or
    for a search first."""
    shutil.copytree(FIXTURE_STATE, state)
    injected = [
        line
        for f in (state / "agents" / "main" / "sessions").glob("*.jsonl")
        for line in f.read_text().splitlines()
        if '"stopReason":"injected"' in line.replace(" ", "")
    ]
    assert injected, "the fixture holds an injected note"
    if first == "search":
        assert run_cli("search", "pinned").returncode == 0
    code, out = run_json("usage", "--by", "model")
    assert code == 0
    assert [r["model"] for r in out["rows"]] == ["fake/fake-model"], out["rows"]
    assert out["total"]["turns"] == out["rows"][0]["turns"]
    hits = run_json("search", "Moderator note pinned")[1]
    assert hits["count"] >= 1  # the note is still found: only its turn is gone
