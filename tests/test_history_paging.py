"""`history` as OpenClaw's sessions_history pages it (issue 41 item 5): `--offset` backwards
with `offset`/`hasMore`/`totalMessages`/`nextOffset`, and `--message-id` (the window around one
message: how a `search --json` hit, which carries `messageId`, is reopened); the same through
the sessions_history and sessions_search tools' arguments."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sessiontool.context import build_context
from sessiontool.reports.search import search
from sessiontool.runs import tools
from tests.helpers import run_cli, run_json

from .runhelpers import text_of, write_store, write_transcript

TEXTS = [f"message number {i}" if i != 6 else "the rare zebra word" for i in range(10)]


def _session(state: Path) -> None:
    write_store(state, {"agent:main:talk": {"sessionId": "tid", "updatedAt": 1_000}})
    roles = ["user", "assistant"]
    write_transcript(state, "tid", [(roles[i % 2], t, 1_000 + i) for i, t in enumerate(TEXTS)])


def texts(data: dict[str, Any]) -> list[str]:
    return [text_of(m) for m in data["messages"]]


def test_offset_pages_backwards_through_the_whole_transcript(state: Path) -> None:
    _session(state)
    rc, plain = run_json("history", "talk", "--limit", "4")
    assert rc == 0 and "offset" not in plain and "hasMore" not in plain  # no paging asked
    got: list[list[str]] = []
    offset = 0
    while True:
        rc, page = run_json("history", "talk", "--limit", "4", "--offset", str(offset))
        assert rc == 0 and page["offset"] == offset and page["totalMessages"] == 10
        got.append(texts(page))
        if not page["hasMore"]:
            assert "nextOffset" not in page
            break
        assert page["nextOffset"] == offset + 4
        offset = page["nextOffset"]
    assert got[0] == texts(plain) == TEXTS[6:]
    assert [t for page in reversed(got) for t in page] == TEXTS
    rc, past = run_json("history", "talk", "--offset", "50")
    assert rc == 0 and past["messages"] == [] and past["hasMore"] is False


def test_pages_count_records_and_hide_tool_results_after_as_openclaw(state: Path) -> None:
    """OpenClaw's rule (measured on its own tool): offset and limit count the transcript's
    records, a tool result among them is left out of the page afterwards, and nextOffset is
    where the oldest message shown sits; every message is shown once, tool results never."""
    write_store(state, {"agent:main:tools": {"sessionId": "tools", "updatedAt": 1}})
    roles = ["user", "assistant", "toolResult", "assistant", "user", "assistant"]
    write_transcript(
        state, "tools", [(r, t, i) for i, (r, t) in enumerate(zip(roles, "abtcde", strict=True))]
    )

    def page(offset: int, *more: str) -> tuple[list[str], Any]:
        args = ["history", "tools", "--limit", "2", "--offset", str(offset), *more]
        rc, data = run_json(*args)
        assert rc == 0 and data["totalMessages"] == 6
        return texts(data), data.get("nextOffset")

    assert page(0) == (["d", "e"], 2)
    assert page(2) == (["c"], 3)  # the record before c is the tool result: read, not shown
    assert page(3) == (["b"], 5)
    assert page(5) == (["a"], None)
    assert page(2, "--include-tools") == (["t", "c"], 4)


def test_message_id_opens_the_window_around_a_search_hit(state: Path) -> None:
    _session(state)
    rc, found = run_json("search", "zebra")
    assert rc == 0 and found["count"] == 1
    hit = found["hits"][0]
    assert hit["messageId"] == f"{6:08x}"  # the transcript line's entry id
    ids = run_cli("search", "zebra", "--fields", "messageId")  # the TSV column too
    assert ids.returncode == 0 and ids.stdout == hit["messageId"] + "\n"
    rc, window = run_json("history", "talk", "--message-id", hit["messageId"], "--limit", "3")
    assert rc == 0 and texts(window) == TEXTS[5:8]  # the hit in the middle
    rc, edge = run_json("history", "talk", "--message-id", f"{0:08x}", "--limit", "3")
    assert texts(edge) == TEXTS[0:3]  # as near the middle as the start allows
    rc, end = run_json("history", "talk", "--message-id", f"{9:08x}", "--limit", "4")
    assert texts(end) == TEXTS[6:10]
    rc, missing = run_json("history", "talk", "--message-id", "nope")
    assert rc == 0 and missing["messages"] == []  # never the newest instead
    proc = run_cli("history", "talk", "--follow", "--offset", "0")
    assert proc.returncode == 2 and "--follow" in proc.stderr and proc.stdout == ""


def test_the_tools_reopen_a_hit_with_openclaws_names(state: Path) -> None:
    _session(state)
    ctx = build_context(state)
    opts = tools.CallOptions(search=search)
    r = tools.call_tool(ctx, "sessions_search", {"query": "zebra", "limit": 5}, opts)
    assert not r.failed, r.data
    (hit,) = r.data["results"]
    assert hit["sessionKey"] == "agent:main:talk" and hit["sessionId"] == "tid"
    assert hit["role"] == "user" and "zebra" in hit["snippet"]
    h = tools.call_tool(
        ctx,
        "sessions_history",
        {"sessionKey": hit["sessionKey"], "messageId": hit["messageId"], "limit": 1},
    )
    assert texts(h.data) == ["the rare zebra word"]
    page = tools.call_tool(ctx, "sessions_history", {"sessionKey": "talk", "offset": 0, "limit": 2})
    assert page.data["nextOffset"] == 2 and page.data["totalMessages"] == 10
    # without the search handed down (a runner's transport) the tool says so
    alone = tools.call_tool(ctx, "sessions_search", {"query": "zebra"})
    assert alone.failed and alone.data["code"] == 2 and "not offered" in alone.data["error"]
    too_many = tools.call_tool(ctx, "sessions_search", {"query": "x", "limit": 26}, opts)
    assert too_many.failed and "at most 25" in too_many.data["error"]
