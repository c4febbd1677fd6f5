"""OpenClaw 2026.7.35's JSON-era store (sessions.json + JSONL in a state dir with openclaw.json),
read from files as the real gateway shows it (issue 45 item 2). The fixture
(tests/fixtures/openclaw-2026.7.35) was written by the real 2026.7.35 gateway, with its own
`sessions.list` and `chat.history` answers beside it: `list --json` carries the tokens the
gateway lists, a failed child's `contextTokens` is its model's window, and `history` hides the
control replies (REPLY_SKIP, ANNOUNCE_SKIP) 7.35's chat.history hides. Clawdbot's chat.history
shows them (its fixture), and so does an export (a copy, as stored)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import FIXTURE_STATE, ROOT, run_cli, run_json

FIXTURE = ROOT / "tests" / "fixtures" / "openclaw-2026.7.35"
GATEWAY = FIXTURE / "expected" / "gateway"
A2A_TARGET = (
    "agent:main:telegram:group:-100555"  # sessions_send's target: REPLY_SKIP, ANNOUNCE_SKIP
)
FAILED_CHILD = "agent:main:subagent:fd5008fb-5f47-4265-ad7c-2b3b651f1be7"  # its run failed


@pytest.fixture(scope="module")
def oc735(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("oc735") / "state"
    shutil.copytree(FIXTURE / "state", dest)
    return dest


def gateway_rows() -> dict[str, dict[str, Any]]:
    rows = json.loads((GATEWAY / "sessions.list.json").read_text())["sessions"]
    return {r["sessionId"]: r for r in rows}


def chat_history(key: str) -> list[dict[str, Any]]:
    page = json.loads((GATEWAY / f"chat.history.{key.replace(':', '_')}.json").read_text())
    return list(page["messages"])


def text(msg: dict[str, Any]) -> str:
    c = msg.get("content")
    if isinstance(c, str):
        return c
    return "\n".join(b["text"] for b in c or [] if isinstance(b, dict) and b.get("type") == "text")


def test_list_json_carries_the_tokens_and_windows_the_gateway_lists(oc735: Path) -> None:
    rc, data = run_json("--state-dir", str(oc735), "list", "--all-agents", "--limit", "all")
    assert rc == 0, data
    gw = gateway_rows()
    mine = {r["sessionId"]: r for r in data["sessions"]}
    assert set(mine) == set(gw)
    for sid, g in gw.items():
        for name in ("inputTokens", "outputTokens", "totalTokens", "status", "spawnedBy"):
            assert mine[sid].get(name) == g.get(name), (g["key"], name)
        if "model" in mine[sid]:  # a session that stores its model: the gateway's window
            assert mine[sid]["contextTokens"] == g["contextTokens"], g["key"]
    (child,) = [
        r for r in data["sessions"] if r["sessionId"] == "3aeab579-b5ad-4b8e-ab6c-0c59563c16dc"
    ]
    assert child["status"] == "timeout" and child["contextTokens"] == 128000  # none stored
    # the fields a user asks for by name are there, not null
    rc, some = run_json(
        "--state-dir", str(oc735), "list", "--fields", "key,inputTokens,outputTokens,contextTokens"
    )
    assert rc == 0 and all(r["contextTokens"] for r in some["sessions"] if r["inputTokens"])


def test_history_shows_what_735s_chat_history_shows(oc735: Path) -> None:
    for key in (A2A_TARGET, "agent:main:discord:group:123", "agent:main:main", FAILED_CHILD):
        rc, data = run_json(
            "--state-dir", str(oc735), "history", key, "--limit", "all", "--include-tools"
        )
        assert rc == 0, data
        mine, theirs = data["messages"], chat_history(key)
        assert [m["role"] for m in mine] == [m["role"] for m in theirs], key
        for a, b in zip(mine, theirs, strict=True):
            if b.get("stopReason") == "error":  # a failed turn: sessiontool names its error
                assert a.get("stopReason") == "error"
                continue
            assert text(a) == text(b), key
    plain = run_cli("--state-dir", str(oc735), "history", A2A_TARGET).stdout
    assert "REPLY_SKIP" not in plain and "ANNOUNCE_SKIP" not in plain, plain
    # the message main sent is main's turn, without OpenClaw's routing preamble, named
    assert "assistant (from agent:main:main via sessions_send):\na2a on 735\n" in plain, plain
    stored = (oc735 / "agents/main/sessions/c93fb6b0-6341-4215-931d-36397de43494.jsonl").read_text()
    assert '"REPLY_SKIP"' in stored and '"ANNOUNCE_SKIP"' in stored  # there, only not shown


def test_list_message_limit_counts_the_shown_messages(oc735: Path) -> None:
    rc, data = run_json(
        "--state-dir", str(oc735), "list", "--message-limit", "2", "--kinds", "group"
    )
    assert rc == 0, data
    (row,) = [r for r in data["sessions"] if r["key"] == A2A_TARGET]
    assert [text(m) for m in row["messages"]] == [text(m) for m in chat_history(A2A_TARGET)[-2:]]


def test_an_export_copies_every_message_as_stored(oc735: Path, tmp_path: Path) -> None:
    out = tmp_path / "copy"
    p = run_cli("--state-dir", str(oc735), "export", "--to", str(out), "--all-agents")
    assert p.returncode == 0, p.stderr
    copied = (out / "agents/main/sessions/c93fb6b0-6341-4215-931d-36397de43494.jsonl").read_text()
    assert '"REPLY_SKIP"' in copied and '"ANNOUNCE_SKIP"' in copied


def test_clawdbots_history_still_shows_its_control_replies(tmp_path: Path) -> None:
    """Clawdbot 2026.1.24's chat.history shows REPLY_SKIP (its fixture): so does history there."""
    key = "agent:main:telegram:group:-100777"
    theirs = json.loads(
        (
            FIXTURE_STATE.parent / "expected/gateway" / f"chat.history.{key.replace(':', '_')}.json"
        ).read_text()
    )
    assert "REPLY_SKIP" in json.dumps(theirs)
    state = tmp_path / "state"
    shutil.copytree(FIXTURE_STATE, state)
    plain = run_cli("--state-dir", str(state), "history", key, "--limit", "all").stdout
    assert "REPLY_SKIP" in plain
