"""`compact` end to end on sessiontool's own store: a run of kind `compact` in the session's
lane, OpenClaw's `compaction` entry appended (the transcript before it kept aside), what the
next run sees (the summary and the kept turns), and `wait` / `abort` / the lane order."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import run_cli, run_json

from .runhelpers import NOW, read_store, sessions_dir, write_store, write_transcript

SID = "44444444-4444-4444-8444-444444444444"
TURNS = [
    ("user", "plan the trip", NOW - 9000),
    ("assistant", "to Lisbon, in May", NOW - 8900),
    ("user", "book the hotel", NOW - 8000),
    ("assistant", "booked", NOW - 7900),
    ("user", "and the train?", NOW - 7000),
    ("assistant", "the 9:40", NOW - 6900),
]


@pytest.fixture
def trip(state: Path) -> Path:
    write_store(state, {"agent:main:trip": {"sessionId": SID, "updatedAt": NOW - 6900}})
    write_transcript(state, SID, TURNS)
    return state


def path(state: Path) -> Path:
    return sessions_dir(state) / f"{SID}.jsonl"


def lines(p: Path) -> list[dict[str, Any]]:
    return [json.loads(ln) for ln in p.read_text().splitlines()]


@pytest.mark.usefixtures("reap_workers")
def test_compact_appends_openclaws_entry_and_keeps_the_transcript_before(trip: Path) -> None:
    before = path(trip).read_bytes()
    rc, data = run_json("compact", "trip", "--keep", "1")
    assert rc == 0, data
    assert data["status"] == "ok"
    # The echo runner's summary is deterministic: what it replaced, the user's asks.
    assert data["reply"] == "echo summary of 4 messages; asked: plan the trip | book the hotel"
    info = data["compaction"]
    assert info["compacted"] is True and info["summarized"] == 4
    entries = lines(path(trip))
    last = entries[-1]
    assert last["type"] == "compaction" and last["summary"] == data["reply"]
    assert last["firstKeptEntryId"] == entries[5]["id"]  # the last turn's user message
    assert last["parentId"] == entries[-2]["id"]
    assert isinstance(last["tokensBefore"], int) and isinstance(last["tokensAfter"], int)
    # Nothing is lost: the whole transcript as it was, beside it; and still in the file.
    assert Path(info["archived"]).read_bytes() == before
    assert path(trip).read_bytes().startswith(before)
    assert read_store(trip)["agent:main:trip"]["compactionCount"] == 1
    # history still shows every message (a compaction entry is no message).
    rc, hist = run_json("history", "trip")
    assert len(hist["messages"]) == 6
    # The run is listed as a compaction.
    rc, runs = run_json("runs", "--kind", "compact")
    assert [r["runId"] for r in runs["runs"]] == [data["runId"]]


COUNTER = (
    "import json, sys; req = json.load(sys.stdin); "
    "msgs = req['messages']; "
    "first = msgs[0]['content'][0]['text'] if msgs and isinstance(msgs[0]['content'], list) "
    "else ''; "
    "print(json.dumps({'reply': json.dumps([len(msgs), first[:40]])}) if req['kind'] != "
    "'compact' else json.dumps({'reply': 'SUMMARY'}))"
)


@pytest.mark.usefixtures("reap_workers")
def test_the_next_run_sees_the_summary_and_the_kept_turns(trip: Path) -> None:
    runner = {
        "type": "command",
        "command": [sys.executable, "-c", COUNTER],
        "input": "json",
        "output": "json",
    }
    (trip / "sessiontool.json5").write_text(
        json.dumps({"agents": {"defaults": {"runner": runner}}})
    )
    rc, data = run_json("compact", "trip", "--keep", "1")
    assert rc == 0 and data["reply"] == "SUMMARY", data
    rc, sent = run_json("send", "trip", "what next?")
    assert rc == 0, sent
    count, first = json.loads(sent["reply"])
    assert count == 3  # the summary, then the kept turn (user + assistant)
    assert first.startswith("The conversation so far, summarized:")


def test_nothing_to_compact_writes_nothing(trip: Path, reap_workers: None) -> None:
    before = path(trip).read_bytes()
    rc, data = run_json("compact", "trip", "--keep", "3")
    assert rc == 0 and data["compaction"] == {"compacted": False, "reason": "nothing to compact"}
    assert path(trip).read_bytes() == before
    assert sorted(p.name for p in sessions_dir(trip).iterdir()) == [f"{SID}.jsonl", "sessions.json"]


SLOW = (
    "import json, sys, time; req = json.load(sys.stdin); "
    "time.sleep(60 if req['kind'] == 'compact' else 0); print(json.dumps({'reply': 'x'}))"
)


@pytest.mark.usefixtures("reap_workers")
def test_a_compaction_is_queued_waited_on_and_aborted_like_a_run(trip: Path) -> None:
    runner = {
        "type": "command",
        "command": [sys.executable, "-c", SLOW],
        "input": "json",
        "output": "json",
    }
    (trip / "sessiontool.json5").write_text(
        json.dumps({"agents": {"defaults": {"runner": runner}}})
    )
    before = path(trip).read_bytes()
    proc = run_cli("compact", "trip", "--timeout", "0", "-q")
    assert proc.returncode == 0
    rc, data = run_json("compact", "trip", "--timeout", "0")
    assert data["status"] == "accepted"
    run_id = data["runId"]
    # A rewind is refused while the compaction is queued or running, naming a run.
    rc, refused = run_json("rewind", "trip", lines(path(trip))[1]["id"])
    assert rc == 4 and refused["runId"] in refused["error"]
    rc, waited = run_json("wait", run_id, "--timeout", "0.5")
    assert waited["status"] == "timeout"
    for rid in (run_id, *[r["runId"] for r in run_json("runs", "--kind", "compact")[1]["runs"]]):
        run_cli("abort", rid)
    rc, waited = run_json("wait", run_id, "--timeout", "60")
    assert waited["runStatus"] == "aborted"
    assert path(trip).read_bytes() == before  # an aborted compaction writes nothing


def test_keep_must_not_be_negative(trip: Path) -> None:
    proc = run_cli("compact", "trip", "--keep", "-1")
    assert proc.returncode == 2 and "--keep" in proc.stderr


def test_a_compaction_run_is_not_rerun(trip: Path, reap_workers: None) -> None:
    rc, data = run_json("compact", "trip")
    assert rc == 0
    proc = run_cli("rerun", data["runId"])
    assert proc.returncode == 2


@pytest.mark.usefixtures("reap_workers")
def test_lines_only_the_standard_json_reads_are_still_in_what_is_summarized(trip: Path) -> None:
    """A run's context is read with orjson and, for a line it refuses, the standard library's
    parser: a message with NaN (which orjson refuses and Python's `json` writes) or an integer
    past 64 bits is summarized with the rest, not dropped."""
    raw = path(trip).read_text().splitlines()
    second = json.loads(raw[3])  # "book the hotel"
    assert second["message"]["role"] == "user"
    second["message"]["big"] = 2**70
    second["message"]["score"] = float("nan")
    raw[3] = json.dumps(second)  # `NaN` and 1180591620717411303424: json's, not orjson's
    path(trip).write_text("\n".join(raw) + "\n")
    rc, data = run_json("compact", "trip", "--keep", "1")
    assert rc == 0, data
    assert data["reply"] == "echo summary of 4 messages; asked: plan the trip | book the hotel"
