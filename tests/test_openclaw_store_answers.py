"""search, usage, list and export over OpenClaw 2026.9.6's SQLite store (the real fixture) give
the answers the database holds: events appended without an updatedAt bump, a deleted session's
archived `.zst` transcript, the turns before an in-place reset, the fields OpenClaw's own rows
carry, and a malformed page (exit 5, never an internal error)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

from tests.helpers import run_cli, run_json
from tests.runhelpers import append_openclaw_events
from tests.test_openclaw_sqlite import MAIN_DB, copy_oc

MAIN_SID = "792f111c-3bb9-4b35-afcd-c0f4605431d4"
RESET_SID = "4c67dff9-7050-4b47-936f-76bb94646ca7"
DELETED_SID = "4e8a114e-c5fd-468f-adc3-97caa3a26037"


def _search(state: Path, *args: str) -> dict[str, Any]:
    rc, out = run_json("--state-dir", str(state), "search", *args)
    assert rc == 0, out
    return out  # type: ignore[no-any-return]


def _append_event(db: Path, sid: str, text: str, role: str = "user") -> None:
    """Append one message event to the session's active branch as OpenClaw does mid-turn:
    the session entry (and its updatedAt) is left alone."""

    def build(seq: int, created: int) -> list[dict[str, Any]]:
        msg: dict[str, Any] = {"role": role, "content": text, "timestamp": created}
        if role == "assistant":
            msg = {
                **msg,
                "content": [{"type": "text", "text": text}],
                "provider": "fake",
                "model": "fake-model",
                "usage": {"input": 1000, "output": 7, "cacheRead": 0, "cacheWrite": 0},
            }
        return [
            {
                "type": "message",
                "id": f"added-{seq}",
                "parentId": None,
                "timestamp": "2026-11-22T19:00:00.000Z",
                "message": msg,
            }
        ]

    append_openclaw_events(db, sid, build)


def test_events_appended_without_an_updated_at_bump_are_found(tmp_path: Path) -> None:
    state = copy_oc(tmp_path / "state")
    db = state / MAIN_DB
    updated = (
        sqlite3.connect(db)
        .execute(
            "SELECT updated_at, entry_json FROM session_nodes WHERE current_session_id=?",
            (MAIN_SID,),
        )
        .fetchone()
    )
    assert _search(state, "quokka")["count"] == 0
    _, usage0 = run_json("--state-dir", str(state), "usage")
    for n in range(3):
        _append_event(db, MAIN_SID, f"quokka number{n}")
        _append_event(db, MAIN_SID, f"marsupial reply{n}", role="assistant")
        assert _search(state, "quokka")["count"] == n + 1
        assert _search(state, f"reply{n}")["count"] == 1
    # The entry was never touched: the change was seen in the events themselves.
    assert (
        sqlite3.connect(db)
        .execute(
            "SELECT updated_at, entry_json FROM session_nodes WHERE current_session_id=?",
            (MAIN_SID,),
        )
        .fetchone()
        == updated
    )
    _, usage1 = run_json("--state-dir", str(state), "usage")
    assert usage1["total"]["input"] == usage0["total"]["input"] + 3000
    assert usage1["total"]["output"] == usage0["total"]["output"] + 21


def test_a_deleted_sessions_archived_zst_counts_in_usage_and_archived_search(
    tmp_path: Path,
) -> None:
    state = copy_oc(tmp_path / "state")
    (archive,) = (state / "agents" / "main" / "sessions").glob(f"{DELETED_SID}.jsonl.deleted.*")
    assert archive.name.endswith(".zst")
    _, usage = run_json("--state-dir", str(state), "usage")
    (row,) = [r for r in usage["rows"] if r["session"].startswith(DELETED_SID)]
    assert (row["input"], row["output"], row["turns"]) == (11369, 17, 1)
    out = _search(state, '"will be deleted"', "--include-archived")
    assert out["count"] == 2
    assert {h["sessionId"] for h in out["hits"]} == {DELETED_SID}
    assert all(h["archived"] for h in out["hits"])
    assert _search(state, '"will be deleted"')["count"] == 0


def test_pre_reset_turns_only_with_include_archived(tmp_path: Path) -> None:
    state = copy_oc(tmp_path / "state")
    _, hist = run_json("--state-dir", str(state), "history", "agent:main:reset-me")
    assert "will be reset" not in json.dumps(hist)
    assert _search(state, '"will be reset"')["count"] == 0
    out = _search(state, '"will be reset"', "--include-archived")
    assert out["count"] == 2
    assert all(h["archived"] and h["sessionId"] == RESET_SID for h in out["hits"])
    # A turn after the reset is live again.
    _append_event(state / MAIN_DB, RESET_SID, "after the wombat reset")
    out = _search(state, "wombat")
    assert out["count"] == 1 and out["hits"][0]["key"] == "agent:main:reset-me"
    assert "archived" not in out["hits"][0]


def _pages_of(db: Path, table: str) -> list[int]:
    conn = sqlite3.connect(db)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # every page in the main file
        return [
            r[0]
            for r in conn.execute(
                "SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf'", (table,)
            )
        ]
    finally:
        conn.close()


def test_a_malformed_page_is_exit_5_never_an_internal_error(tmp_path: Path) -> None:
    clean = copy_oc(tmp_path / "clean")
    pages = _pages_of(clean / MAIN_DB, "transcript_events")
    assert pages
    keys = ["main", "agent:main:discord:group:123", "agent:main:cron:job-abc"]
    codes: list[int] = []
    for page in pages[:4]:
        state = tmp_path / f"p{page}"
        shutil.copytree(clean, state)
        with open(state / MAIN_DB, "r+b") as fh:
            fh.seek((page - 1) * 4096 + 8)
            fh.write(b"\xff" * 600)
        for args in [["history", k] for k in keys] + [["search", "fixture"], ["usage"]]:
            proc = run_cli("--state-dir", str(state), *args)
            assert proc.returncode in (0, 5), proc.stderr
            assert "Traceback" not in proc.stderr
            if proc.returncode == 5:
                lines = proc.stderr.strip().splitlines()
                assert len(lines) == 1 and str(state / MAIN_DB) in lines[0], lines
            codes.append(proc.returncode)
    assert 5 in codes


def test_list_json_shows_the_fields_openclaws_own_rows_carry(tmp_path: Path) -> None:
    from sessiontool.sessions.listing import OPENCLAW_ROW_FIELDS
    from tests.test_openclaw_sqlite import CLI_EXPECTED

    state = copy_oc(tmp_path / "state")
    rc, got = run_json("--state-dir", str(state), "list", "--all-agents", "--limit", "all")
    assert rc == 0
    real = json.loads((CLI_EXPECTED / "sessions.all-agents.json").read_text())["sessions"]
    assert len(got["sessions"]) == len(real) == 12
    shown = 0
    for row, theirs in zip(got["sessions"], real, strict=True):
        assert row["agentId"] == theirs["agentId"]
        for name in OPENCLAW_ROW_FIELDS:  # lineage too: parentSessionKey, spawnDepth
            if name in row or name in theirs:
                # Where OpenClaw's CLI fills a field from the agent's defaults (a reset entry
                # has no model), the row leaves it out rather than guess (README).
                if name in row:
                    assert row[name] == theirs[name], (theirs["key"], name)
                    shown += 1
                else:
                    assert theirs["key"] == "agent:main:reset-me" and name == "modelProvider"
    assert shown >= 12 * 3
    sub = [r for r in got["sessions"] if r.get("spawnedBy")]
    assert [r["spawnedBy"] for r in sub] == ["agent:main:main"]
    assert [(r["parentSessionKey"], r["spawnDepth"]) for r in sub] == [("agent:main:main", 1)]


def test_export_keeps_openclaws_participants(tmp_path: Path) -> None:
    from tests.test_openclaw_sqlite import GW_EXPECTED

    state = copy_oc(tmp_path / "state")
    dest = tmp_path / "export"
    rc, _ = run_json("--state-dir", str(state), "export", "--to", str(dest), "--all-agents")
    assert rc == 0
    store = json.loads((dest / "agents" / "main" / "sessions" / "sessions.json").read_text())
    gw = {
        s["key"]: s
        for s in json.loads((GW_EXPECTED / "sessions.list.all.json").read_text())["sessions"]
    }
    with_participants = [k for k in store if gw.get(k, {}).get("participants")]
    assert len(with_participants) >= 5
    for key in with_participants:
        assert store[key]["participants"] == gw[key]["participants"], key
    # A re-run sees nothing changed.
    rc, again = run_json("--state-dir", str(state), "export", "--to", str(dest), "--all-agents")
    assert again["written"] == 0


def test_search_for_a_symbol(tmp_path: Path) -> None:
    state = copy_oc(tmp_path / "state")
    db = state / MAIN_DB
    _append_event(db, MAIN_SID, "tests pass ✓ — ship it")
    _append_event(db, MAIN_SID, "nothing to see")
    for query, n in (("✓", 1), ("—", 1), ("ship ✓", 1), ("nothing NOT ✓", 1), ("✓ NOT ship", 0)):
        out = _search(state, query)
        assert out["count"] == n, (query, out)
        for hit in out["hits"]:
            assert any(
                hit["snippet"][a:b] in ("✓", "—", "ship", "nothing") for a, b in hit["highlights"]
            )
