"""`archive`, `restore`, `pin`, `unpin` and `session` end to end on sessiontool's own store: the
real CLI on a tmp state dir, the fields checked in sessions.json as OpenClaw stores them
(`archivedAt`, `pinnedAt`, `modelOverride`/`providerOverride`, `thinkingLevel`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import run_cli, run_json

from .runhelpers import NOW, read_store, write_store, write_transcript

MAIN_SID = "11111111-1111-4111-8111-111111111111"
WORK_SID = "22222222-2222-4222-8222-222222222222"
CHILD_SID = "33333333-3333-4333-8333-333333333333"


@pytest.fixture
def life(state: Path) -> Path:
    """main, a root session `work` with a transcript, and a sub-agent spawned by main."""
    write_store(
        state,
        {
            "agent:main:main": {"sessionId": MAIN_SID, "updatedAt": NOW - 5000},
            "agent:main:work": {"sessionId": WORK_SID, "updatedAt": NOW - 3000, "label": "w"},
            "agent:main:subagent:kid": {
                "sessionId": CHILD_SID,
                "updatedAt": NOW - 1000,
                "spawnedBy": "agent:main:main",
            },
        },
    )
    write_transcript(state, WORK_SID, [("user", "hello", NOW - 4000), ("assistant", "hi", NOW)])
    return state


def keys_of(*args: str) -> list[str]:
    rc, data = run_json("list", *args)
    assert rc == 0, data
    return [r["key"] for r in data["sessions"]]


def entry(state: Path, key: str) -> dict[str, Any]:
    found: dict[str, Any] = read_store(state)[key]
    return found


def test_archive_leaves_list_keeps_transcript_and_restore_brings_it_back(life: Path) -> None:
    rc, data = run_json("archive", "work")
    assert rc == 0
    assert data["archived"] is True and data["sessionKey"] == "agent:main:work"
    e = entry(life, "agent:main:work")
    assert isinstance(e["archivedAt"], int) and e["archiveReason"] == "manual"
    assert "agent:main:work" not in keys_of()
    rows = {r["key"]: r for r in run_json("list", "--archived", "all")[1]["sessions"]}
    assert rows["agent:main:work"]["archived"] is True
    assert "archived" not in rows["main"]
    assert keys_of("--archived", "yes") == ["agent:main:work"]
    # The transcript is untouched and still readable.
    rc, hist = run_json("history", "work")
    assert rc == 0 and [m["role"] for m in hist["messages"]] == ["user", "assistant"]
    assert hist["archived"] is True
    rc, data = run_json("restore", "work")
    assert rc == 0 and data["archived"] is False
    assert "archivedAt" not in entry(life, "agent:main:work")
    assert "agent:main:work" in keys_of()


def test_the_table_says_archived_and_pinned(life: Path) -> None:
    assert run_cli("archive", "work").returncode == 0
    assert run_cli("pin", "main").returncode == 0
    out = run_cli("list", "--archived", "all", env={"SESSIONTOOL_OUTPUT_FORMAT": "table"}).stdout
    lines = {ln.split()[0]: ln for ln in out.splitlines()[1:] if ln.strip()}
    assert "(archived)" in lines["agent:main:work"]
    assert "(pinned)" in lines["main"]


def test_send_to_an_archived_session_is_refused_with_exit_4(life: Path) -> None:
    assert run_cli("archive", "work").returncode == 0
    proc = run_cli("send", "work", "are you there?")
    assert proc.returncode == 4
    assert "archived" in proc.stderr and "restore" in proc.stderr
    assert proc.stderr.count("\n") == 2  # the error and its hint
    # Nothing was appended to its transcript.
    assert len((life / "agents/main/sessions" / f"{WORK_SID}.jsonl").read_text().splitlines()) == 3


def test_a_main_session_cannot_be_archived(life: Path) -> None:
    proc = run_cli("archive", "main")
    assert proc.returncode == 4 and "main session" in proc.stderr
    assert "archivedAt" not in entry(life, "agent:main:main")


@pytest.mark.parametrize("command", ["archive", "reset", "delete"])
def test_expect_session_id_refuses_another_generation(life: Path, command: str) -> None:
    before = read_store(life)
    rc, data = run_json(command, "work", "--expect-session-id", MAIN_SID)
    assert rc == 4
    assert "session changed" in data["error"] and data["sessionId"] == WORK_SID
    assert read_store(life) == before  # nothing written
    rc, _ = run_json(command, "work", "--expect-session-id", WORK_SID)
    assert rc == 0


def test_restore_with_expect_session_id(life: Path) -> None:
    assert run_cli("archive", "work").returncode == 0
    assert run_cli("restore", "work", "--expect-session-id", MAIN_SID).returncode == 4
    assert "archivedAt" in entry(life, "agent:main:work")
    assert run_cli("restore", "work", "--expect-session-id", WORK_SID).returncode == 0


def test_pinned_sessions_come_first_and_only_roots_pin(life: Path) -> None:
    assert keys_of()[0] == "agent:main:subagent:kid"  # the newest
    rc, data = run_json("pin", "main")
    assert rc == 0 and data["pinned"] is True
    assert isinstance(entry(life, "agent:main:main")["pinnedAt"], int)
    assert keys_of()[0] == "main"
    proc = run_cli("pin", "agent:main:subagent:kid")
    assert proc.returncode == 4 and "child session" in proc.stderr
    assert run_cli("unpin", "main").returncode == 0
    assert "pinnedAt" not in entry(life, "agent:main:main")
    assert keys_of()[0] == "agent:main:subagent:kid"


def test_archiving_unpins_and_an_archived_session_cannot_be_pinned(life: Path) -> None:
    assert run_cli("pin", "work").returncode == 0
    assert run_cli("archive", "work").returncode == 0
    assert "pinnedAt" not in entry(life, "agent:main:work")
    proc = run_cli("pin", "work")
    assert proc.returncode == 4 and "restore it first" in proc.stderr


def test_quiet_prints_the_key_alone(life: Path) -> None:
    proc = run_cli("pin", "--label", "w", "-q")
    assert proc.returncode == 0 and proc.stdout == "agent:main:work\n"


def test_session_model_and_thinking_are_stored_as_openclaw_stores_them(life: Path) -> None:
    (life / "sessiontool.json5").write_text(
        json.dumps({"agents": {"defaults": {"models": {"openai/gpt-x": {}}}}})
    )
    rc, data = run_json("session", "work", "--model", "openai/gpt-x", "--thinking", "think hard")
    assert rc == 0, data
    assert data["model"] == "openai/gpt-x" and data["thinkingLevel"] == "low"
    e = entry(life, "agent:main:work")
    assert (e["providerOverride"], e["modelOverride"], e["thinkingLevel"]) == (
        "openai",
        "gpt-x",
        "low",
    )
    row = next(r for r in run_json("list")[1]["sessions"] if r["key"] == "agent:main:work")
    assert row["modelOverride"] == "gpt-x" and row["thinkingLevel"] == "low"
    text = run_cli("history", "work").stdout
    assert text.startswith("session: model openai/gpt-x, thinking low\n")
    rc, hist = run_json("history", "work")
    assert hist["model"] == "openai/gpt-x"
    rc, data = run_json("session", "work", "--model", "default", "--thinking", "default")
    assert rc == 0 and data["model"] is None and data["thinkingLevel"] is None
    e = entry(life, "agent:main:work")
    assert not {"providerOverride", "modelOverride", "thinkingLevel"} & set(e)


def test_session_refuses_unknown_models_and_levels(life: Path) -> None:
    before = read_store(life)
    proc = run_cli("session", "work", "--model", "nosuch")
    assert proc.returncode == 2 and "unknown model 'nosuch'" in proc.stderr
    proc = run_cli("session", "work", "--thinking", "loud")
    assert proc.returncode == 2 and "invalid thinking level" in proc.stderr
    assert read_store(life) == before


AGENT = (
    "import json, os, sys; sys.stdin.read(); "
    "print(json.dumps([sys.argv[1], os.environ.get('SESSIONTOOL_THINKING_LEVEL')]))"
)


@pytest.mark.usefixtures("reap_workers")
def test_the_next_run_uses_the_sessions_model_and_thinking_level(life: Path) -> None:
    runner = {"type": "command", "command": [sys.executable, "-c", AGENT, "{model}"]}
    cfg = {"agents": {"defaults": {"runner": runner, "models": {"prov/big": {}}}}}
    (life / "sessiontool.json5").write_text(json.dumps(cfg))
    assert run_cli("session", "work", "--model", "prov/big", "--thinking", "high").returncode == 0
    rc, data = run_json("send", "work", "go")
    assert rc == 0, data
    assert json.loads(data["reply"]) == ["prov/big", "high"]
    assert run_cli("session", "work", "--model", "default", "--thinking", "off").returncode == 0
    rc, data = run_json("send", "work", "again")
    model, level = json.loads(data["reply"])
    assert model != "prov/big" and level == "off"


def test_a_session_requester_cannot_archive(life: Path) -> None:
    proc = run_cli("archive", "work", env={"SESSIONTOOL_SESSION_KEY": "agent:main:main"})
    assert proc.returncode == 4
    assert "archivedAt" not in entry(life, "agent:main:work")


OC_STATE = Path(__file__).resolve().parent / "fixtures" / "openclaw-2026.9.6" / "state"


def test_list_archived_reads_openclaws_sqlite_store(tmp_path: Path) -> None:
    """A session OpenClaw archived (its `archived_at` column) is left out of `list` and shown
    by `list --archived yes|all`, read straight from its database."""
    import shutil
    import sqlite3

    state = tmp_path / "oc"
    shutil.copytree(OC_STATE, state)
    db = sqlite3.connect(state / "agents/main/agent/openclaw-agent.sqlite")
    with db:
        db.execute(
            "UPDATE session_nodes SET archived_at = ? WHERE session_key = ?",
            (NOW, "agent:main:cron:job-abc"),
        )
    db.close()
    env = {"SESSIONTOOL_STATE_DIR": str(state)}
    rc, plain = run_json("list", env=env)
    assert rc == 0 and "agent:main:cron:job-abc" not in [r["key"] for r in plain["sessions"]]
    rc, only = run_json("list", "--archived", "yes", env=env)
    assert [r["key"] for r in only["sessions"]] == ["agent:main:cron:job-abc"]
    assert only["sessions"][0]["archived"] is True and only["sessions"][0]["agentId"] == "main"
    rc, both = run_json("list", "--archived", "all", env=env)
    assert both["count"] == plain["count"] + 1
    proc = run_cli("list", "--archived", "maybe", env=env)
    assert proc.returncode == 2 and "--archived" in proc.stderr


def test_top_shows_pinned_sessions_first_and_says_so(life: Path) -> None:
    """`top` reads `list_sessions` (pinned first) and marks a pinned row."""
    from sessiontool.context import build_context
    from sessiontool.sessions.listing import list_sessions
    from sessiontool.tui.rows import session_rows

    assert run_cli("pin", "work").returncode == 0
    rows = list_sessions(build_context(life), limit=None)["sessions"]
    shown = session_rows(rows, {}, NOW)
    assert shown[0][0] == "agent:main:work" and shown[0][1][1] == "other (pinned)"
    assert all("(pinned)" not in cells[1] for _, cells in shown[1:])


def test_pin_and_fork_origin_are_read_from_openclaws_sqlite_columns(tmp_path: Path) -> None:
    """OpenClaw 2026.9.6 projects a pin into `pinned_at` and a fork's origin into
    `fork_source_session_key/_id/_entry_id`: read from those where the entry does not say them,
    the pinned session listed first and marked, the fork's origin in `list` and `history`."""
    import shutil
    import sqlite3

    state = tmp_path / "oc"
    shutil.copytree(OC_STATE, state)
    source_sid = "0d297c45-92ab-4ff1-95f6-c9c44659fa06"
    db = sqlite3.connect(state / "agents/main/agent/openclaw-agent.sqlite")
    with db:
        db.execute(
            "UPDATE session_nodes SET pinned_at = ? WHERE session_key = ?",
            (NOW - 5, "agent:main:cron:job-abc"),
        )
        db.execute(
            "UPDATE session_nodes SET fork_source_session_key = ?, fork_source_session_id = ?, "
            "fork_source_entry_id = ? WHERE session_key = ?",
            ("agent:main:discord:group:123", source_sid, "e-42", "agent:main:custom-other"),
        )
    db.close()
    env = {"SESSIONTOOL_STATE_DIR": str(state), "SESSIONTOOL_OUTPUT_FORMAT": "json"}
    rc, data = run_json("list", env=env)
    assert rc == 0, data
    rows = {r["key"]: r for r in data["sessions"]}
    assert data["sessions"][0]["key"] == "agent:main:cron:job-abc"
    assert rows["agent:main:cron:job-abc"]["pinnedAt"] == NOW - 5
    assert rows["agent:main:custom-other"]["forkSource"] == {
        "sessionKey": "agent:main:discord:group:123",
        "sessionId": source_sid,
        "entryId": "e-42",
    }
    assert "pinnedAt" not in rows["agent:main:custom-other"]
    table = run_cli("list", env={**env, "SESSIONTOOL_OUTPUT_FORMAT": "table"}).stdout
    assert "(pinned)" in next(ln for ln in table.splitlines() if "job-abc" in ln)
    rc, hist = run_json("history", "agent:main:custom-other", env=env)
    assert rc == 0 and hist["forkSource"]["entryId"] == "e-42"
    text = run_cli(
        "history", "agent:main:custom-other", env={**env, "SESSIONTOOL_OUTPUT_FORMAT": "text"}
    )
    assert "forked from agent:main:discord:group:123 at e-42" in text.stdout
    rc, pinned = run_json("history", "agent:main:cron:job-abc", env=env)
    assert pinned["pinned"] is True and "forkSource" not in pinned
