"""OpenClaw 2026.9.6's SQLite session store (the real fixture): `list` and `history` agree with
the real program's own outputs, reads never change a byte of the database, its WAL or its
shared-memory index (even while another process holds a write transaction), and no command
creates anything under agents/ (writes exit 4); `history --limit` of a long session steps
through its newest events only."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import run_cli, run_json
from tests.runhelpers import append_openclaw_events

OC = Path(__file__).resolve().parent / "fixtures" / "openclaw-2026.9.6"
OC_STATE = OC / "state"
CLI_EXPECTED = OC / "expected" / "cli"
GW_EXPECTED = OC / "expected" / "gateway"
GATEWAY_TEXT_CAP = 8000
MAIN_DB = Path("agents") / "main" / "agent" / "openclaw-agent.sqlite"

# OpenClaw's `classification` (gateway sessions.list) → sessiontool's kind (README).
KIND_MAP = {
    "main": "main",
    "group": "group",
    "channel": "group",
    "cron": "cron",
    "hook": "hook",
    "node": "node",
    "subagent": "other",
    "custom": "other",
}


def copy_oc(dest: Path) -> Path:
    shutil.copytree(OC_STATE, dest)
    return dest


def tree_digest(root: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            p = Path(dirpath) / name
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def db_digest(db: Path) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for suffix in ("", "-wal", "-shm"):
        p = Path(str(db) + suffix)
        out[suffix or "db"] = hashlib.sha256(p.read_bytes()).hexdigest() if p.exists() else None
    return out


@pytest.fixture(scope="module")
def oc_state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_oc(tmp_path_factory.mktemp("oc") / "state")


def _gw_list() -> dict[str, dict[str, Any]]:
    data = json.loads((GW_EXPECTED / "sessions.list.all.json").read_text())
    return {s["key"]: s for s in data["sessions"]}


def _file_part(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", key)


def test_list_all_agents_matches_the_real_program(oc_state: Path) -> None:
    rc, got = run_json("--state-dir", str(oc_state), "list", "--all-agents", "--limit", "all")
    assert rc == 0
    cli = json.loads((CLI_EXPECTED / "sessions.all-agents.json").read_text())
    gw = _gw_list()
    assert got["count"] == cli["count"] == len(gw) == 12
    # Same sessions in the same order (newest first).
    full = ["agent:main:main" if r["key"] == "main" else r["key"] for r in got["sessions"]]
    assert full == [s["key"] for s in cli["sessions"]]
    for row, real in zip(got["sessions"], cli["sessions"], strict=True):
        g = gw[real["key"]]
        # Documented divergence: the requester agent's main session shows as `main`.
        assert row["key"] == ("main" if real["key"] == "agent:main:main" else real["key"])
        assert row["sessionId"] == real["sessionId"] == g["sessionId"]
        assert row["updatedAt"] == real["updatedAt"] == g["updatedAt"]
        assert row.get("totalTokens") == real.get("totalTokens") == g.get("totalTokens")
        assert row.get("label") == real.get("label") == g.get("label")
        assert row["kind"] == KIND_MAP[g["classification"]]
        if g.get("channel"):
            assert row["channel"] == g["channel"]
        if "model" in row:
            assert row["model"] == real["model"]
        if "contextTokens" in row:
            assert row["contextTokens"] == real["contextTokens"]
        if "displayName" in row:  # the gateway shows a label in place of the stored name
            assert row.get("label", row["displayName"]) == g["displayName"]
        assert "transcriptPath" not in row  # the transcript is in the database, not a file


def test_list_default_and_one_agent(oc_state: Path) -> None:
    rc, got = run_json("--state-dir", str(oc_state), "list")
    assert rc == 0
    real = json.loads((CLI_EXPECTED / "sessions.json").read_text())
    assert [("agent:main:main" if r["key"] == "main" else r["key"]) for r in got["sessions"]] == [
        s["key"] for s in real["sessions"]
    ]
    rc, got = run_json("--state-dir", str(oc_state), "--agent", "ops", "list")
    real = json.loads((CLI_EXPECTED / "sessions.agent-ops.json").read_text())
    assert [("agent:ops:main" if r["key"] == "main" else r["key"]) for r in got["sessions"]] == [
        s["key"] for s in real["sessions"]
    ]


def _strip_gateway_extras(ours: dict[str, Any], real: dict[str, Any]) -> dict[str, Any]:
    """The gateway adds bookkeeping to each message (`__openclaw` ids and positions, a sender
    label); sessiontool shows the stored message. What is stored must be what it shows."""
    real = {k: v for k, v in real.items() if k not in ("senderLabel", "senderSession")}
    if "__openclaw" in real:
        mine = ours.get("__openclaw") or {}
        assert {k: real["__openclaw"].get(k) for k in mine} == mine
        real = {k: v for k, v in real.items() if k != "__openclaw"}
    if real.get("role") == "custom":  # nested tool records: the gateway re-renders content
        return {"role": "custom", "customType": real.get("customType")}
    if real.get("role") == "toolResult" and isinstance(real.get("content"), list):
        # The gateway cuts a tool result's text at 8000 characters for display; sessiontool
        # shows it whole. The cut text must be the start of ours.
        blocks = []
        for mine, theirs in zip(ours.get("content") or [], real["content"], strict=True):
            t = theirs.get("text")
            if isinstance(t, str) and len(t) == GATEWAY_TEXT_CAP and mine["text"].startswith(t):
                theirs = {**theirs, "text": mine["text"]}
            blocks.append(theirs)
        real = {**real, "content": blocks}
    return real


def _comparable(ours: dict[str, Any]) -> dict[str, Any]:
    ours = {k: v for k, v in ours.items() if k != "__openclaw"}
    if ours.get("role") == "custom":
        return {"role": "custom", "customType": ours.get("customType")}
    return ours


# Keys also checked without tools and with --limit 2 (tool turns, forwarded messages, a reset).
LIMIT_KEYS = ("agent:main:main", "agent:main:discord:group:123", "agent:main:reset-me")


def _history_keys() -> list[str]:
    return sorted(_gw_list())


@pytest.mark.parametrize("key", _history_keys())
def test_history_matches_chat_history(oc_state: Path, key: str) -> None:
    real = json.loads((GW_EXPECTED / f"chat.history.{_file_part(key)}.json").read_text())
    rc, got = run_json("--state-dir", str(oc_state), "history", key, "--include-tools")
    assert rc == 0, got
    assert got["sessionId"] == real["sessionId"]
    assert [_comparable(m) for m in got["messages"]] == [
        _strip_gateway_extras(o, m) for o, m in zip(got["messages"], real["messages"], strict=True)
    ]
    if key not in LIMIT_KEYS:
        return
    # Without --include-tools: the same list without tool results (as for JSONL stores).
    rc, plain = run_json("--state-dir", str(oc_state), "history", key)
    assert rc == 0
    assert plain["messages"] == [
        m
        for m in got["messages"]
        if m["role"] != "toolResult"
        and not (m["role"] == "custom" and "tool" in m.get("customType", ""))
    ]
    limited = json.loads((GW_EXPECTED / f"chat.history.limit2.{_file_part(key)}.json").read_text())
    rc, two = run_json(
        "--state-dir", str(oc_state), "history", key, "--include-tools", "--limit", "2"
    )
    assert [_comparable(m) for m in two["messages"]] == [
        _strip_gateway_extras(o, m)
        for o, m in zip(two["messages"], limited["messages"], strict=True)
    ]


def test_history_decodes_zstd_events(oc_state: Path) -> None:
    """The main session has 7 events stored as zstd frames; they read like the others."""
    conn = sqlite3.connect(f"file:{oc_state / MAIN_DB}?mode=ro&readonly_shm=1", uri=True)
    n = conn.execute("SELECT count(*) FROM transcript_events WHERE event_zstd IS NOT NULL")
    assert n.fetchone()[0] == 7
    conn.close()
    rc, got = run_json("--state-dir", str(oc_state), "history", "main", "--include-tools")
    assert rc == 0 and len(got["messages"]) == 33


def test_reset_shows_one_reset_line(oc_state: Path) -> None:
    rc, got = run_json("--state-dir", str(oc_state), "history", "reset-me")
    assert got["messages"] == [
        {
            "role": "system",
            "content": [{"type": "text", "text": "Reset"}],
            "timestamp": 1795373019361,
        }
    ]


def test_paths_and_doctor_name_the_store(oc_state: Path) -> None:
    rc, got = run_json("--state-dir", str(oc_state), "paths")
    fmt = {a["id"]: (a["format"], a["why"]) for a in got["agents"]}
    assert fmt["main"][0] == fmt["ops"][0] == "openclaw-sqlite"
    assert "openclaw-agent.sqlite present" in fmt["ops"][1]
    rc, doc = run_json("--state-dir", str(oc_state), "doctor")
    # Only that no gateway runs to write the store (a warning: exit 2).
    assert rc == 2 and [p["kind"] for p in doc["problems"]] == ["gateway-not-running"]
    assert {s["agent"]: s["format"] for s in doc["stores"]} == {
        "main": "openclaw-sqlite",
        "ops": "openclaw-sqlite",
    }


def test_database_wins_over_a_leftover_sessions_json(tmp_path: Path) -> None:
    state = copy_oc(tmp_path / "state")
    legacy = state / "agents" / "ops" / "sessions" / "sessions.json"
    legacy.parent.mkdir(parents=True)
    legacy.write_text(json.dumps({"agent:ops:old": {"sessionId": "old-1", "updatedAt": 1}}))
    rc, got = run_json("--state-dir", str(state), "--agent", "ops", "list")
    assert [r["key"] for r in got["sessions"]] == ["agent:ops:telegram:group:-100555", "main"]
    rc, got = run_json("--state-dir", str(state), "--store", "jsonl", "--agent", "ops", "list")
    assert [r["key"] for r in got["sessions"]] == ["agent:ops:old"]
    proc = run_cli("--state-dir", str(state), "--store", "sqlite", "list")
    assert proc.returncode == 2


def test_no_wal_or_shm_files_reads_the_main_file_and_creates_none(tmp_path: Path) -> None:
    state = copy_oc(tmp_path / "state")
    for suffix in ("-wal", "-shm"):
        os.unlink(str(state / MAIN_DB) + suffix)
    before = tree_digest(state / "agents")
    rc, got = run_json("--state-dir", str(state), "list")
    assert rc == 0 and got["count"] == 10
    rc, got = run_json("--state-dir", str(state), "history", "main")
    assert rc == 0 and got["messages"]
    assert tree_digest(state / "agents") == before


# -- a concurrent writer ---------------------------------------------------------------------

WRITER = r"""
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("UPDATE session_nodes SET label='committed-label' WHERE session_key='agent:main:custom-other'")
c.execute("UPDATE session_nodes SET entry_json=json_set(entry_json,'$.label','committed-label') WHERE session_key='agent:main:custom-other'")
c.execute("BEGIN IMMEDIATE")
c.execute("UPDATE session_nodes SET entry_json=json_set(entry_json,'$.label','uncommitted') WHERE session_key='agent:main:custom-other'")
print("holding", flush=True)
sys.stdin.readline()
c.execute("ROLLBACK")
"""


def test_reads_during_a_write_transaction_see_the_last_commit_and_change_nothing(
    tmp_path: Path,
) -> None:
    state = copy_oc(tmp_path / "state")
    db = state / MAIN_DB
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "holding"
        before = db_digest(db)
        assert before["-wal"] is not None
        rc, got = run_json("--state-dir", str(state), "list", "--all-agents")
        assert rc == 0
        row = next(r for r in got["sessions"] if r["key"] == "agent:main:custom-other")
        assert row["label"] == "committed-label"
        rc, hist = run_json("--state-dir", str(state), "history", "--label", "committed-label")
        assert rc == 0 and hist["sessionKey"] == "agent:main:custom-other"
        for args in (["doctor"], ["paths"], ["list", "--message-limit", "2"]):
            run_json("--state-dir", str(state), *args)
        assert db_digest(db) == before
    finally:
        assert writer.stdin is not None
        writer.stdin.write("\n")
        writer.stdin.close()
        writer.wait(timeout=30)
        writer.stdout.close()


def test_a_crashed_writers_wal_is_read_without_touching_it(tmp_path: Path) -> None:
    """A WAL with committed pages and a stale index (the writer was killed): read from a private
    copy or read-only, never recovered in place."""
    state = copy_oc(tmp_path / "state")
    db = state / MAIN_DB
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert writer.stdout is not None and writer.stdout.readline().strip() == b"holding"
    writer.kill()
    writer.wait()
    writer.stdout.close()
    assert writer.stdin is not None
    writer.stdin.close()
    for drop_shm in (False, True):
        if drop_shm:
            os.unlink(str(db) + "-shm")
        before = tree_digest(state / "agents")
        rc, got = run_json("--state-dir", str(state), "list")
        assert rc == 0
        row = next(r for r in got["sessions"] if r["key"] == "agent:main:custom-other")
        assert row["label"] == "committed-label"
        assert tree_digest(state / "agents") == before


# -- never harm an install ---------------------------------------------------------------------

WRITE_COMMANDS = [
    ["send", "main", "hi", "--timeout", "0"],
    ["send", "discord:group:123", "hello"],
    ["send", "agent:main:brand-new", "hello"],
    ["spawn", "do something"],
    ["label", "discord:group:123", "new-label"],
    ["reset", "discord:group:123"],
    ["delete", "discord:group:123"],
    ["policy", "discord:group:123", "deny"],
    ["sweep"],
    ["prune", "--older-than", "1d"],
]
READ_COMMANDS = [
    ["list"],
    ["list", "--all-agents", "--message-limit", "3"],
    ["history", "main"],
    ["history", "--label", "ops-room-fixture", "--format", "markdown"],
    ["history", "0d297c45-92ab-4ff1-95f6-c9c44659fa06"],
    ["paths"],
    ["doctor"],
    ["agents"],
    ["runs"],
    ["deliveries"],
    ["policy", "discord:group:123"],
    ["wait", "no-such-run", "--timeout", "0"],
    ["abort", "no-such-run"],
]


def test_every_command_leaves_agents_untouched(tmp_path: Path) -> None:
    state = copy_oc(tmp_path / "state")
    before = tree_digest(state / "agents")
    for args in WRITE_COMMANDS:
        proc = run_cli("--state-dir", str(state), *args)
        assert proc.returncode == 4, (args, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "written through OpenClaw's gateway" in lines[0], lines
        assert "internal error" not in proc.stderr
    for args in READ_COMMANDS:
        proc = run_cli("--state-dir", str(state), *args)
        assert "internal error" not in proc.stderr, (args, proc.stderr)
    assert tree_digest(state / "agents") == before
    assert not (state / "agents" / "main" / "sessions" / "sessions.json").exists()


# -- schema checks and cold storage ------------------------------------------------------------


def test_missing_columns_are_refused_with_the_schema_version(tmp_path: Path) -> None:
    state = copy_oc(tmp_path / "state")
    conn = sqlite3.connect(state / "agents" / "ops" / "agent" / "openclaw-agent.sqlite")
    conn.execute("DROP TABLE session_transcript_active_events")
    conn.execute("UPDATE schema_meta SET schema_version = 31")
    conn.commit()
    conn.close()
    proc = run_cli("--state-dir", str(state), "--agent", "ops", "list")
    assert proc.returncode == 5
    assert "schema version 31" in proc.stderr
    assert "session_transcript_active_events.session_id" in proc.stderr
    assert "internal error" not in proc.stderr


def _make_cold(state: Path, session_id: str) -> None:
    """Move one session's transcript to cold storage the way OpenClaw lays it out."""
    import zstandard

    db = state / MAIN_DB
    conn = sqlite3.connect(db)
    lines = [
        json.dumps({"kind": "header", "version": 1, "sessionId": session_id, "generation": "g1"})
    ]
    for seq, ev, z, created in conn.execute(
        "SELECT seq, event_json, event_zstd, created_at FROM transcript_events "
        "WHERE session_id=? ORDER BY seq",
        (session_id,),
    ):
        text = ev if ev is not None else zstandard.ZstdDecompressor().decompress(z).decode()
        lines.append(
            json.dumps(
                {"kind": "event", "row": {"seq": seq, "event_json": text, "created_at": created}}
            )
        )
    for ap, es, mp, ce in conn.execute(
        "SELECT active_position, event_seq, message_position, context_eligible "
        "FROM session_transcript_active_events WHERE session_id=?",
        (session_id,),
    ):
        row = {
            "active_position": ap,
            "event_seq": es,
            "message_position": mp,
            "context_eligible": ce,
        }
        lines.append(json.dumps({"kind": "active", "row": row}))
    payload = zstandard.ZstdCompressor().compress(("\n".join(lines) + "\n").encode())
    sha = hashlib.sha256(payload).hexdigest()
    name = f"{sha}.jsonl.zst"
    cold = state / "agents" / "main" / "sessions" / "cold"
    cold.mkdir(parents=True, exist_ok=True)
    (cold / name).write_bytes(payload)
    conn.execute(
        "INSERT INTO session_transcript_cold_archives (session_id, generation, archive_name, "
        "archive_sha256, event_count, raw_bytes, archive_bytes, last_seq, archived_at, storage) "
        "VALUES (?, 'g1', ?, ?, 1, 0, ?, 0, 0, 'file')",
        (session_id, name, sha, len(payload)),
    )
    conn.execute("DELETE FROM session_transcript_active_events WHERE session_id=?", (session_id,))
    conn.execute("DELETE FROM transcript_event_identities WHERE session_id=?", (session_id,))
    conn.execute("DELETE FROM transcript_events WHERE session_id=?", (session_id,))
    conn.commit()
    conn.close()


def test_cold_stored_transcript_is_read(tmp_path: Path) -> None:
    state = copy_oc(tmp_path / "state")
    rc, warm = run_json("--state-dir", str(state), "history", "main", "--include-tools")
    _make_cold(state, warm["sessionId"])
    conn = sqlite3.connect(state / MAIN_DB)
    n = conn.execute(
        "SELECT count(*) FROM transcript_events WHERE session_id=?", (warm["sessionId"],)
    ).fetchone()[0]
    conn.close()
    assert n == 0
    rc, cold = run_json("--state-dir", str(state), "history", "main", "--include-tools")
    assert rc == 0 and cold == warm


# -- a long session --------------------------------------------------------------------------

# Counts SQLite's virtual-machine steps (one tick per 100 instructions) in every connection the
# command opens, written at exit: how many rows a read stepped through, whatever the timing.
STEPS_SITE = r"""
import atexit, os
_log = os.environ.get("SQLITE_STEPS_LOG")
if _log:
    import sqlite3
    _connect, _steps = sqlite3.connect, [0]

    def _tick():
        _steps[0] += 1
        return 0

    def _counting_connect(*a, **kw):
        conn = _connect(*a, **kw)
        conn.set_progress_handler(_tick, 100)
        return conn

    sqlite3.connect = _counting_connect
    atexit.register(lambda: open(_log, "w").write(str(_steps[0])))
"""

MAIN_SID = "792f111c-3bb9-4b35-afcd-c0f4605431d4"


def _append_messages(db: Path, sid: str, n: int) -> None:
    """`n` messages at the end of the session's active branch, the newest reading the same
    whatever `n` ("message 0" is the last)."""

    def build(seq: int, created: int) -> list[dict[str, Any]]:
        events = []
        for i in range(n):
            age = n - 1 - i
            msg = {"role": "user", "content": f"message {age}", "timestamp": created - age}
            events.append({"type": "message", "id": f"m{age}", "parentId": None, "message": msg})
        return events

    append_openclaw_events(db, sid, build)


def _history_steps(state: Path, tmp_path: Path) -> tuple[list[Any], int]:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(STEPS_SITE)
    log = tmp_path / f"steps-{state.name}.log"
    env = {
        "PYTHONPATH": os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p),
        "SQLITE_STEPS_LOG": str(log),
    }
    rc, got = run_json("--state-dir", str(state), "history", "main", "--limit", "20", env=env)
    assert rc == 0, got
    return got["messages"], int(log.read_text())


def test_history_limit_steps_through_the_newest_events_only(tmp_path: Path) -> None:
    """`history --limit 20` fetches rows newest first only until it has 20 messages: a session
    10,000 events longer costs no more SQLite steps (fetching the whole branch before looking
    at it made 100,000 events 3x the time of 100: bench `oc_history_big_vs_small`)."""
    short, long_ = copy_oc(tmp_path / "short"), copy_oc(tmp_path / "long")
    _append_messages(short / MAIN_DB, MAIN_SID, 20)
    _append_messages(long_ / MAIN_DB, MAIN_SID, 10_000)
    short_msgs, short_steps = _history_steps(short, tmp_path)
    long_msgs, long_steps = _history_steps(long_, tmp_path)
    assert [m["content"] for m in long_msgs] == [f"message {i}" for i in range(19, -1, -1)]
    assert long_msgs == short_msgs
    assert short_steps > 0
    assert long_steps < 2 * short_steps, (long_steps, short_steps)
