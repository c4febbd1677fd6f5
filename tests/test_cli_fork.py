"""`fork` and `rewind` end to end on sessiontool's own store: the transcripts on disk byte for
byte, the lineage (`forkSource`), the archive of what a rewind cut, the message ids `history
--json` gives, and the lane rule (a rewind under a queued run is refused, naming it)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import run_cli, run_json

from .runhelpers import NOW, read_store, sessions_dir, write_store, write_transcript

WORK_SID = "22222222-2222-4222-8222-222222222222"
TURNS = [
    ("user", "first question", NOW - 4000),
    ("assistant", "first answer", NOW - 3900),
    ("user", "second question", NOW - 3000),
    ("assistant", "second answer", NOW - 2900),
]


@pytest.fixture
def work(state: Path) -> Path:
    write_store(
        state,
        {
            "agent:main:main": {"sessionId": "11111111-1111-4111-8111-111111111111"},
            "agent:main:work": {
                "sessionId": WORK_SID,
                "updatedAt": NOW - 2900,
                "modelOverride": "big",
                "thinkingLevel": "high",
            },
        },
    )
    write_transcript(state, WORK_SID, TURNS)
    return state


def transcript(state: Path, sid: str = WORK_SID) -> Path:
    return sessions_dir(state) / f"{sid}.jsonl"


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(ln) for ln in path.read_text().splitlines()]


def ids(key: str = "work") -> list[str]:
    rc, data = run_json("history", key)
    assert rc == 0, data
    assert len(data["messageIds"]) == len(data["messages"])
    return list(data["messageIds"])


def test_history_json_gives_the_ids_of_the_transcript_entries(work: Path) -> None:
    assert ids() == [e["id"] for e in lines(transcript(work))[1:]]


def test_fork_at_a_user_message_copies_what_came_before(work: Path) -> None:
    at = ids()[2]  # the second question
    rc, data = run_json("fork", "work", "--at", at, "--label", "branch-b")
    assert rc == 0, data
    assert data["editorText"] == "second question"
    assert data["forkedFrom"] == "agent:main:work"
    new = data["sessionKey"]
    assert new.startswith("agent:main:dashboard:")
    entry = read_store(work)[new]
    # OpenClaw's sessions.fork records the entry it was cut at too (fork_source_entry_id).
    assert entry["forkSource"] == {
        "sessionKey": "agent:main:work",
        "sessionId": WORK_SID,
        "entryId": at,
    }
    assert entry["forkedFromParent"] is True and entry["label"] == "branch-b"
    assert (entry["modelOverride"], entry["thinkingLevel"]) == ("big", "high")
    copy = lines(transcript(work, entry["sessionId"]))
    assert copy[0]["type"] == "session" and copy[0]["id"] == entry["sessionId"]
    assert copy[1:] == lines(transcript(work))[1:3]  # byte for byte the first turn
    # The source is untouched; the fork is listed, by its label too, and takes sends.
    assert len(lines(transcript(work))) == 5
    rc, listed = run_json("list")
    assert new in [r["key"] for r in listed["sessions"]]
    row = next(r for r in listed["sessions"] if r["key"] == new)
    assert row["forkSource"]["sessionKey"] == "agent:main:work"
    rc, sent = run_json("send", "--label", "branch-b", "again")
    assert rc == 0 and sent["status"] == "ok"


def test_fork_without_at_copies_the_whole_transcript(work: Path) -> None:
    proc = run_cli("fork", "work", "-q")
    assert proc.returncode == 0
    new = proc.stdout.strip()
    sid = read_store(work)[new]["sessionId"]
    assert lines(transcript(work, sid))[1:] == lines(transcript(work))[1:]


def test_rewind_cuts_at_the_message_and_keeps_what_followed(work: Path) -> None:
    before = transcript(work).read_bytes()
    at = ids()[2]
    rc, data = run_json("rewind", "work", at)
    assert rc == 0, data
    assert data["editorText"] == "second question"
    kept = lines(transcript(work))
    assert [e["message"]["content"] for e in kept[1:]][0] == "first question"
    assert len(kept) == 3
    archive = Path(data["archived"])
    assert archive.name.startswith(f"{WORK_SID}.jsonl.rewound.")
    # The archive is the transcript as it was; the transcript now is its first part.
    assert archive.read_bytes() == before
    assert before.startswith(transcript(work).read_bytes())
    assert len(ids()) == 2
    # Two names, two contents: the transcript is a new file, not the archive's (a name
    # exchanged into place and the temp name dropped), and no temp name is left behind.
    assert os.stat(transcript(work)).st_ino != os.stat(archive).st_ino
    assert sorted(p.name for p in sessions_dir(work).iterdir()) == sorted(
        [f"{WORK_SID}.jsonl", archive.name, "sessions.json"]
    )


@pytest.mark.parametrize("command", ["fork", "rewind"])
def test_an_assistant_message_or_an_unknown_id_is_refused(work: Path, command: str) -> None:
    before = transcript(work).read_bytes()
    store = read_store(work)
    extra = ["--at"] if command == "fork" else []
    proc = run_cli(command, "work", *extra, ids()[1])
    assert proc.returncode == 2 and "not one of the user's messages" in proc.stderr
    proc = run_cli(command, "work", *extra, "feedbeef")
    assert proc.returncode == 3 and "no message feedbeef" in proc.stderr
    assert transcript(work).read_bytes() == before and read_store(work) == store
    assert sorted(p.name for p in sessions_dir(work).iterdir()) == [
        f"{WORK_SID}.jsonl",
        "sessions.json",
    ]


def test_fork_label_in_use_is_refused_and_writes_nothing(work: Path) -> None:
    assert run_cli("label", "main", "taken").returncode == 0
    store = read_store(work)
    proc = run_cli("fork", "work", "--label", "taken")
    assert proc.returncode == 2 and "label already in use" in proc.stderr
    assert read_store(work) == store
    assert len(list(sessions_dir(work).glob("*.jsonl"))) == 1


SLOW = "import sys, time; sys.stdin.read(); time.sleep(60); print('late')"


@pytest.mark.usefixtures("reap_workers")
def test_rewind_under_a_queued_run_is_refused_naming_it(work: Path) -> None:
    runner = {"type": "command", "command": [sys.executable, "-c", SLOW]}
    (work / "sessiontool.json5").write_text(
        json.dumps({"agents": {"defaults": {"runner": runner}}})
    )
    at = ids()[2]
    rc, sent = run_json("send", "work", "slow one", "--timeout", "0")
    assert rc == 0 and sent["status"] == "accepted"
    rc, data = run_json("rewind", "work", at)
    assert rc == 4, data
    assert sent["runId"] in data["error"] and data["runId"] == sent["runId"]
    assert run_cli("abort", sent["runId"]).returncode == 0
