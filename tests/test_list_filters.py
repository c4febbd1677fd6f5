"""`list` as OpenClaw's sessions_list pages and filters it (issue 41 item 5): `--offset` with
`hasMore`/`nextOffset`/`limitApplied`, `--label`, `--search` (metadata text, never the
transcripts), `--active-only` (a real run in progress), `--exclude-subagents`; the same through
the sessions_list tool's arguments."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from sessiontool.context import build_context
from sessiontool.runs import tools
from tests.helpers import run_cli, run_json

from .runhelpers import poll, runner_config, write_store, write_transcript

AGENTS = Path(__file__).resolve().parent / "agents"


def _store(state: Path) -> None:
    """Six sessions, newest first: s5 .. s0, with labels, a displayName, a sub-agent and a
    session spawned from main; s2's transcript says "needle" (its metadata does not)."""
    store: dict[str, Any] = {}
    for i in range(4):
        store[f"agent:main:s{i}"] = {"sessionId": f"id{i}", "updatedAt": 1_000 + i}
    store["agent:main:s0"]["label"] = "kid"
    store["agent:main:s1"]["label"] = "kiddo"
    store["agent:main:s3"]["displayName"] = "Weekly REPORT"
    store["agent:main:subagent:s4"] = {"sessionId": "id4", "updatedAt": 1_004}
    store["agent:main:s5"] = {
        "sessionId": "id5",
        "updatedAt": 1_005,
        "spawnedBy": "agent:main:main",
    }
    write_store(state, store)
    write_transcript(state, "id2", [("user", "the needle is here", 1_002)])


def keys_of(*args: str) -> list[str]:
    rc, data = run_json("list", *args)
    assert rc == 0, data
    return [r["key"] for r in data["sessions"]]


def test_pages_cover_the_list_once_with_openclaws_paging_keys(state: Path) -> None:
    _store(state)
    rc, whole = run_json("list")
    assert rc == 0 and whole["hasMore"] is False and "nextOffset" not in whole
    assert whole["limitApplied"] == 200 and whole["count"] == 6
    seen: list[str] = []
    offset = 0
    pages = 0
    while True:
        rc, page = run_json("list", "--limit", "4", "--offset", str(offset))
        assert rc == 0 and page["limitApplied"] == 4 and page["count"] == len(page["sessions"])
        seen += [r["key"] for r in page["sessions"]]
        pages += 1
        if not page["hasMore"]:
            assert "nextOffset" not in page
            break
        offset = page["nextOffset"]
    assert pages == 2 and seen == [r["key"] for r in whole["sessions"]]
    rc, past = run_json("list", "--offset", "10")
    assert rc == 0 and past["sessions"] == [] and past["hasMore"] is False
    rc, every = run_json("list", "--limit", "all", "--offset", "5")
    assert rc == 0 and "limitApplied" not in every and every["count"] == 1


def test_label_search_and_exclude_subagents(state: Path) -> None:
    _store(state)
    assert keys_of("--label", "kid") == ["agent:main:s0"]  # exact, not kiddo
    assert keys_of("--search", "KID") == ["agent:main:s1", "agent:main:s0"]  # any case
    assert keys_of("--search", "weekly report") == ["agent:main:s3"]  # the displayName
    assert keys_of("--search", "s2") == ["agent:main:s2"]  # the key
    assert keys_of("--search", "ID3") == ["agent:main:s3"]  # the sessionId, as OpenClaw's
    assert keys_of("--search", "needle") == []  # only in the transcript: that is `search`
    assert keys_of("--exclude-subagents") == [f"agent:main:s{i}" for i in (3, 2, 1, 0)]
    # filters apply before the page is cut
    rc, page = run_json("list", "--exclude-subagents", "--limit", "1", "--offset", "1")
    assert rc == 0 and [r["key"] for r in page["sessions"]] == ["agent:main:s2"]
    assert page["nextOffset"] == 2
    for bad in (["--search", " "], ["--label", ""], ["--offset", "-1"]):
        proc = run_cli("list", *bad)
        assert proc.returncode == 2, proc.stderr
        assert proc.stdout == "" and "error" in proc.stderr.lower()


def test_the_tool_takes_openclaws_argument_names(state: Path) -> None:
    _store(state)
    ctx = build_context(state)

    def call(**args: Any) -> list[str]:
        r = tools.call_tool(ctx, "sessions_list", args)
        assert not r.failed, r.data
        return [row["key"] for row in r.data["sessions"]]

    assert call(label="kid") == keys_of("--label", "kid")
    assert call(search="kid") == keys_of("--search", "kid")
    assert call(excludeSubagents=True, limit=2, offset=1) == keys_of(
        "--exclude-subagents", "--limit", "2", "--offset", "1"
    )
    r = tools.call_tool(ctx, "sessions_list", {"limit": 500})
    assert r.data["limitApplied"] == 200  # OpenClaw's page bound
    bad = tools.call_tool(ctx, "sessions_list", {"offset": -1})
    assert bad.failed and bad.data["code"] == 2


@pytest.mark.usefixtures("reap_workers")
def test_active_only_is_a_run_queued_or_running(state: Path) -> None:
    runner_config(
        state, {"type": "command", "command": [sys.executable, str(AGENTS / "sleepy.py"), "120"]}
    )
    _store(state)
    proc = run_cli("send", "s1", "take your time", "--timeout", "0")
    assert proc.returncode == 0, proc.stderr
    run_id = proc.stdout.strip()
    assert keys_of("--active-only") == ["agent:main:s1"]
    ctx = build_context(state)
    r = tools.call_tool(ctx, "sessions_list", {"activeOnly": True})
    assert [row["key"] for row in r.data["sessions"]] == ["agent:main:s1"]
    assert run_cli("abort", run_id).returncode == 0
    poll(lambda: keys_of("--active-only") == [], message="the aborted run still active")
    assert len(keys_of()) == 6


def test_on_a_store_openclaw_wrote(tmp_path: Path) -> None:
    """OpenClaw 2026.8+'s own SQLite store (the fixture its gateway wrote): the same filters and
    pages over its rows, and history's pages over its transcript; `--message-id` names a JSONL
    line, which this store has not, so it is refused (exit 2) rather than guessed."""
    from .test_openclaw_sqlite import OC_STATE

    state = tmp_path / "oc"
    shutil.copytree(OC_STATE, state)
    env = {"SESSIONTOOL_STATE_DIR": str(state)}

    def keys(*args: str) -> list[str]:
        rc, data = run_json("list", "--all-agents", *args, env=env)
        assert rc == 0, data
        return [r["key"] for r in data["sessions"]]

    every = keys()
    assert len(every) == 12
    sub = "agent:main:subagent:96e0c7a6-e46b-424e-a8eb-556208f4ca46"
    assert keys("--label", "weather-fixture") == [sub]
    assert keys("--search", "OPS-ROOM") == ["agent:main:slack:channel:c0123"]
    assert keys("--exclude-subagents") == [k for k in every if k != sub]
    assert keys("--active-only") == []  # every row says `done`
    assert (
        keys("--limit", "5")
        + keys("--limit", "5", "--offset", "5")
        + keys("--limit", "5", "--offset", "10")
        == every
    )
    # OpenClaw's rule: the offset counts the inventory's rows; kinds are checked per page
    rc, groups = run_json(
        "list", "--all-agents", "--kinds", "group", "--limit", "2", "--offset", "1", env=env
    )
    assert [r["key"] for r in groups["sessions"]] == [
        "agent:main:slack:channel:c0123",
        "agent:main:discord:group:123",
    ]
    assert (groups["hasMore"], groups["nextOffset"]) == (True, 5)  # the row after discord's
    rc, rest = run_json(
        "list", "--all-agents", "--kinds", "group", "--limit", "2", "--offset", "5", env=env
    )
    assert [r["key"] for r in rest["sessions"]] == [
        "agent:ops:telegram:group:-100555",
        "agent:main:telegram:group:-100555",
    ]
    assert rest["hasMore"] is False  # the last group was the inventory's last row
    rc, whole = run_json("history", "main", "--limit", "all", env=env)
    got: list[Any] = []
    offset: int | None = 0
    while offset is not None:
        rc, page = run_json("history", "main", "--limit", "10", "--offset", str(offset), env=env)
        # OpenClaw's count: every record, tool results included (24 shown without them)
        assert rc == 0 and page["totalMessages"] == 33 and len(whole["messages"]) == 24
        got = page["messages"] + got
        offset = page.get("nextOffset")
    assert got == whole["messages"]
    proc = run_cli("history", "main", "--message-id", "x", env=env)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "OpenClaw's database" in proc.stderr
