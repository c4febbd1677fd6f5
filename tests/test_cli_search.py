"""`search` end to end over the real Clawdbot fixtures and over sessions made by `send`."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import FIXTURE_STATE, run_cli, run_json

MAIN = "agent:main:main"
ALICE = "agent:main:dm:alice"


@pytest.fixture
def fixture_state(state: Path) -> Path:
    shutil.copytree(FIXTURE_STATE, state)
    return state


def _messages(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text().splitlines():
        obj = json.loads(line)
        if obj.get("type") == "message":
            out.append(obj["message"])
    return out


def _text(msg: dict[str, Any]) -> str:
    c = msg.get("content")
    if isinstance(c, str):
        return c
    return "\n".join(
        b.get("text", "") for b in c if isinstance(b, dict) and b.get("type") == "text"
    )


def _transcript(state: Path, agent: str, key: str) -> Path:
    store = json.loads((state / "agents" / agent / "sessions" / "sessions.json").read_text())
    sid = store[key]["sessionId"]
    return state / "agents" / agent / "sessions" / f"{sid}.jsonl"


def _expected_ts(state: Path, agent: str, key: str, role: str, needle: str) -> int:
    hits = [
        m["timestamp"]
        for m in _messages(_transcript(state, agent, key))
        if m["role"] == role and needle in _text(m)
    ]
    assert len(hits) == 1, hits
    return int(hits[0])


def _search(*args: str) -> dict[str, Any]:
    rc, out = run_json("search", *args)
    assert rc == 0, out
    return out  # type: ignore[no-any-return]


def test_user_and_assistant_phrases_with_key_and_timestamp(fixture_state: Path) -> None:
    out = _search('"plan the book club"', "--role", "user")
    (hit,) = out["hits"]
    assert hit["key"] == ALICE
    assert hit["role"] == "user"
    assert hit["timestamp"] == _expected_ts(
        fixture_state, "main", ALICE, "user", "plan the book club"
    )
    assert hit["sessionId"] == _transcript(fixture_state, "main", ALICE).stem
    # The highlight offsets point at the matched words in the snippet.
    words = [hit["snippet"][s:e].lower() for s, e in hit["highlights"]]
    assert words and set(words) <= {"plan", "the", "book", "club", "plan the book club"}

    out = _search('"Left Hand of Darkness"', "--role", "assistant")
    assert out["count"] == 1
    (hit,) = out["hits"]
    assert hit["role"] == "assistant"
    assert hit["timestamp"] == _expected_ts(
        fixture_state, "main", ALICE, "assistant", "Left Hand of Darkness"
    )
    # Without --role, both the question and the reply are found, best match first.
    both = _search('"Left Hand of Darkness"')
    assert {h["role"] for h in both["hits"]} == {"user", "assistant"}


def test_tool_results_only_with_role_tool(fixture_state: Path) -> None:
    # "cannot access" is only in the research agent's exec tool result.
    assert _search('"cannot access"', "--all-agents")["count"] == 0
    out = _search('"cannot access"', "--all-agents", "--role", "tool")
    (hit,) = out["hits"]
    assert hit["role"] == "toolResult"
    assert hit["key"] == "agent:research:main"
    ts = _expected_ts(fixture_state, "research", "agent:research:main", "toolResult", "cannot")
    assert hit["timestamp"] == ts


def _tool_texts(state: Path) -> str:
    out = []
    for path in (state / "agents").glob("*/sessions/*.jsonl*"):
        for m in _messages(path):
            if m["role"] == "toolResult":
                out.append(_text(m))
    return "\n".join(out)


def test_no_hits_in_json_syntax(fixture_state: Path) -> None:
    tool_text = _tool_texts(fixture_state)
    words = ("parentId", "stopReason", "cacheWrite", "openai", "toolCallId", "tc1x0")
    out = _search(" OR ".join(words), "--all-agents", "--include-archived")
    assert out["count"] == 0, out["hits"][:1]
    # Some tool results are JSON text themselves (sessions_history): only the others.
    absent = [w for w in words if w not in tool_text]
    assert absent
    out = _search(" OR ".join(absent), "--all-agents", "--include-archived", "--role", "tool")
    assert out["count"] == 0, out["hits"][:1]


def test_tool_call_arguments_only_with_role_tool(state: Path) -> None:
    assert run_cli("send", "main", "hello there").returncode == 0
    path = _transcript(state, "main", MAIN)
    call = {
        "type": "message",
        "id": "feedc0de",
        "parentId": None,
        "timestamp": "2026-11-21T20:20:00.000Z",
        "message": {
            "role": "assistant",
            "content": [
                {
                    "type": "toolCall",
                    "id": "t1",
                    "name": "exec",
                    "arguments": {"cmd": "zanzibarish"},
                }
            ],
            "timestamp": 1795292400000,
        },
    }
    with path.open("a") as fh:
        fh.write(json.dumps(call) + "\n")
    assert _search("zanzibarish")["count"] == 0
    assert _search("cmd", "--role", "tool")["count"] == 0  # argument names are JSON keys
    (hit,) = _search("zanzibarish", "--role", "tool")["hits"]
    assert hit["role"] == "toolCall" and hit["timestamp"] == 1795292400000


def test_send_found_at_once_delete_gone_archived_on_request(state: Path) -> None:
    assert run_cli("send", "dm:bob", "the quokka ate marmalade").returncode == 0
    out = _search("quokka")
    assert {h["role"] for h in out["hits"]} == {"user", "assistant"}
    assert {h["key"] for h in out["hits"]} == {"agent:main:dm:bob"}
    assert run_cli("send", "dm:bob", "then a wombat came").returncode == 0
    assert _search("wombat")["count"] == 2  # incremental: the new lines only
    assert run_cli("delete", "dm:bob").returncode == 0
    assert _search("quokka")["count"] == 0
    archived = _search("quokka", "--include-archived")
    assert archived["count"] == 2 and all(h.get("archived") for h in archived["hits"])
    assert all(h["key"] is None for h in archived["hits"])


def test_index_deleted_or_truncated_still_answers(fixture_state: Path) -> None:
    assert _search("book")["count"] > 0
    index = fixture_state / "sessiontool" / "index.sqlite"
    assert index.is_file()
    assert oct(index.stat().st_mode & 0o777) == "0o600"
    index.unlink()
    assert _search("book")["count"] > 0
    data = index.read_bytes()
    index.write_bytes(data[: len(data) // 3])
    for p in index.parent.glob("index.sqlite-*"):
        p.unlink()
    proc = run_cli("search", "book", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["count"] > 0
    index.write_bytes(b"garbage, not a database" * 100)
    proc = run_cli("search", "book", "--json")
    assert proc.returncode == 0, proc.stderr
    assert "search index" in proc.stderr and "rebuilt" in proc.stderr
    assert json.loads(proc.stdout)["count"] > 0


def test_rewritten_transcript_is_reindexed(fixture_state: Path) -> None:
    path = _transcript(fixture_state, "main", ALICE)
    assert _search("Darkness")["count"] == 2
    lines = path.read_text().splitlines(keepends=True)
    kept = [ln for ln in lines if "Darkness" not in ln]
    path.write_text("".join(kept))
    assert _search("Darkness")["count"] == 0
    assert _search("book")["count"] > 0


def test_prefix_boolean_and_bad_queries(fixture_state: Path) -> None:
    assert _search("Darkn*")["count"] == 2
    assert _search("book NOT vote")["count"] == 4  # six messages say book, two also vote
    assert _search("wombat OR Darkness")["count"] == 2
    # Bare words FTS5 would reject are searched as the phrase they spell.
    assert _search("fixture-exec-ok", "--role", "user")["count"] == 1
    for bad in ('"unclosed', "book AND"):
        proc = run_cli("search", bad)
        assert proc.returncode == 2, (bad, proc.stderr)
        assert proc.stderr.startswith("sessiontool: error: invalid search query")
        assert "Traceback" not in proc.stderr


def test_filters_session_since_limit(fixture_state: Path) -> None:
    all_hits = _search("REPLY", "--role", "assistant", "--limit", "1000")["hits"]
    assert len({h["key"] for h in all_hits}) > 2
    only = _search("REPLY", "--role", "assistant", "--session", ALICE, "--limit", "1000")
    assert only["count"] > 0 and {h["key"] for h in only["hits"]} == {ALICE}
    assert _search("REPLY", "--limit", "3")["count"] == 3
    cut = sorted(h["timestamp"] for h in all_hits)[len(all_hits) // 2]
    since = _search("REPLY", "--role", "assistant", "--limit", "1000", "--since", _iso(cut))["hits"]
    assert since and all(h["timestamp"] >= cut for h in since)
    until = _search("REPLY", "--role", "assistant", "--limit", "1000", "--until", _iso(cut))["hits"]
    assert len(since) + len(until) == len(all_hits)


def _iso(ms: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds")


def test_cjk_by_trigram_and_by_scan(state: Path) -> None:
    assert run_cli("send", "main", "明日は東京で会議があります").returncode == 0
    long_ = _search("東京で会議")
    assert long_["count"] == 2
    short = _search("東京")  # two characters: under the trigram's reach, answered by a scan
    assert short["count"] == 2 and short["engine"] == "scan"
    (hit, _) = short["hits"]
    s, e = hit["highlights"][0]
    assert hit["snippet"][s:e] == "東京"


def test_tsv_marks_and_fallback_without_fts5(fixture_state: Path) -> None:
    proc = run_cli("search", "Darkness")
    assert proc.returncode == 0
    rows = [ln.split("\t") for ln in proc.stdout.splitlines()]
    assert len(rows) == 2 and all("[Darkness]" in r[4] for r in rows)
    fts = _search("book NOT vote", "--limit", "100")
    proc = run_cli(
        "search", "book NOT vote", "--limit", "100", "--json", env={"SESSIONTOOL_NO_FTS5": "1"}
    )
    assert proc.returncode == 0
    assert "no FTS5" in proc.stderr and len(proc.stderr.splitlines()) == 1
    scan = json.loads(proc.stdout)
    assert scan["engine"] == "scan"
    key = lambda h: (h["sessionId"], h["timestamp"], h["role"])  # noqa: E731
    assert sorted(map(key, scan["hits"])) == sorted(map(key, fts["hits"]))


def test_index_is_ours_only(fixture_state: Path) -> None:
    _search("book")
    con = sqlite3.connect(fixture_state / "sessiontool" / "index.sqlite")
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
    finally:
        con.close()
    assert {"files", "msgs", "days"} <= tables
    # Nothing was written beside OpenClaw's files.
    assert not list((fixture_state / "agents").rglob("*.sqlite*"))


def _pad_store(state: Path, size: int = 1 << 21) -> None:
    """Grow main's sessions.json past the size whose parse is kept (sessions without a
    transcript, like a real store's old entries), written the way OpenClaw writes it."""
    path = state / "agents" / "main" / "sessions" / "sessions.json"
    store = json.loads(path.read_text())
    note = "x" * 900
    i = 0
    while len(json.dumps(store, indent=2)) < size:
        store[f"agent:main:dm:pad-{i}"] = {"sessionId": f"pad-{i}", "updatedAt": i, "note": note}
        i += 1
    tmp = path.with_name("sessions.json.tmp")
    tmp.write_text(json.dumps(store, indent=2))
    tmp.replace(path)


def _kept_rows(state: Path) -> list[Any]:
    with sqlite3.connect(state / "sessiontool" / "index.sqlite") as db:
        got = db.execute("SELECT rows FROM scopes WHERE agent = 'main'").fetchall()
    return [json.loads(r[0]) for r in got]


def _search_twice(*args: str) -> dict[str, Any]:
    """A search, then the same search checked in full (SESSIONTOOL_INDEX_FULL_CHECK): the
    second sight of the store file, where what it lists is kept (sync.keep_listed_rows)."""
    first = _search(*args)
    proc = run_cli("search", *args, "--json", env={"SESSIONTOOL_INDEX_FULL_CHECK": "1"})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == first
    return first


@pytest.mark.slow  # ~22 s on a quiet 2-core machine
def test_big_store_sessions_kept_in_the_index_follow_every_change(fixture_state: Path) -> None:
    """A store of a few MB: what it lists is kept in the index at the second sight of the same
    file (no parse on a later full check), and a label, a delete or a damaged kept row still
    show at once."""
    _pad_store(fixture_state)
    (hit,) = _search('"plan the book club"', "--role", "user")["hits"]
    assert _kept_rows(fixture_state) == [[]]  # seen once: its identity alone
    (hit,) = _search_twice('"plan the book club"', "--role", "user")["hits"]
    assert hit["key"] == ALICE and "label" not in hit
    (rows,) = _kept_rows(fixture_state)
    assert [ALICE, hit["sessionId"]] in [r[:2] for r in rows]
    assert any(r[0] == "agent:main:dm:pad-7" for r in rows)

    assert run_cli("label", "dm:alice", "book club").returncode == 0
    (hit,) = _search_twice('"plan the book club"', "--role", "user")["hits"]
    assert hit["label"] == "book club"
    assert [r[3] for r in _kept_rows(fixture_state)[0] if r[0] == ALICE] == ["book club"]

    with sqlite3.connect(fixture_state / "sessiontool" / "index.sqlite") as db:
        db.execute("UPDATE scopes SET rows = ?", (b'[["agent:main:x", "../up", null, 1, {}]]',))
    (hit,) = _search('"plan the book club"', "--role", "user")["hits"]
    assert hit["key"] == ALICE and hit["label"] == "book club"

    assert run_cli("delete", "dm:alice").returncode == 0
    assert _search('"plan the book club"')["count"] == 0
    assert ALICE not in [r[0] for r in _kept_rows(fixture_state)[0]]
