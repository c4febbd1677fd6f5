"""The snapshot a full check keeps (index/snapshots.py, index/warm.py): while the store's
markers (sessions dir, sessions.json) do not move, a warm `search`/`usage` stats only the hot
transcripts; a marker change, a new or deleted session, or SESSIONTOOL_INDEX_FULL_CHECK checks
in full again. An OpenClaw SQLite store keeps no snapshot."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any

from tests.helpers import FIXTURE_STATE, run_cli, run_json

T0 = 1_795_000_000_000  # 2026-11-18: more than a day before the tests run (not hot)
SID = "5a1d0e52-4a59-4c3e-9d0e-1e2b8f6a7c"
OPENCLAW_STATE = FIXTURE_STATE.parent.parent / "openclaw-2026.9.6" / "state"


def _line(role: str, text: str, n: int) -> bytes:
    msg: dict[str, Any] = {"role": role, "content": [{"type": "text", "text": text}]}
    msg["timestamp"] = T0 + n * 1000
    if role == "assistant":
        msg |= {"provider": "fake", "model": "fake-model", "usage": {"input": 100, "output": 10}}
    obj = {"type": "message", "id": f"{n:08x}", "parentId": None, "message": msg}
    return json.dumps(obj).encode() + b"\n"


def _sessions_dir(state: Path) -> Path:
    return state / "agents" / "main" / "sessions"


def _write_store(state: Path, store: dict[str, Any]) -> None:
    path = _sessions_dir(state) / "sessions.json"
    tmp = path.with_name("sessions.json.tmp")
    tmp.write_text(json.dumps(store, indent=2))
    tmp.replace(path)  # as OpenClaw writes it: a new file renamed over the old one


def _make(state: Path, n: int, *, aged: bool) -> dict[str, Any]:
    """`n` sessions, each with one user line `word<i>`; `aged`: their transcripts last written
    on T0 (an idle store: nothing hot)."""
    d = _sessions_dir(state)
    d.mkdir(parents=True)
    store = {}
    for i in range(n):
        sid = f"{SID}{i:02d}"
        path = d / f"{sid}.jsonl"
        path.write_bytes(_line("user", f"word{i} hello", 0) + _line("assistant", "ok", 1))
        if aged:
            os.utime(path, ns=(T0 * 1_000_000, T0 * 1_000_000))
        store[f"agent:main:dm:u{i}"] = {"sessionId": sid, "updatedAt": T0 + i}
    _write_store(state, store)
    return store


def _append(path: Path, text: str, *, keep_mtime: bool = False) -> None:
    st = path.stat()
    with open(path, "ab") as fh:
        fh.write(_line("user", text, 9))
    if keep_mtime:  # appended, and dated back: still not hot
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def _count(word: str, env: dict[str, str] | None = None) -> int:
    proc = run_cli("search", word, "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    return int(json.loads(proc.stdout)["count"])


def _transcript(state: Path, i: int) -> Path:
    return _sessions_dir(state) / f"{SID}{i:02d}.jsonl"


def _snaps(state: Path) -> int:
    con = sqlite3.connect(f"file:{state / 'sessiontool' / 'index.sqlite'}?mode=ro", uri=True)
    try:
        return int(con.execute("SELECT count(*) FROM snap_scopes").fetchone()[0])
    except sqlite3.OperationalError:  # no such table: none kept
        return 0
    finally:
        con.close()


def test_a_hot_transcript_appended_without_a_store_change_is_seen(state: Path) -> None:
    _make(state, 3, aged=False)  # just written: every transcript is hot
    assert _count("word1") == 1
    assert _snaps(state) == 1
    _append(_transcript(state, 1), "zebra appended")
    assert _count("zebra") == 1
    rc, out = run_json("usage", "--by", "session")
    assert rc == 0, out
    rc, out2 = run_json("usage", "--by", "session")  # warm: the same sums
    assert out2 == out
    _append(_transcript(state, 2), "quagga appended")
    rc, out3 = run_json("usage", "--by", "day")
    assert rc == 0
    assert out3["total"]["turns"] == out["total"]["turns"]  # a user line: no turn
    assert _count("quagga") == 1


def test_an_idle_transcript_appended_by_hand_waits_for_a_full_check(state: Path) -> None:
    """The documented limit: an idle transcript (written and updated over a day ago) appended
    to with no sessions.json change is seen at the next full check: forced by the variable,
    or on the next store change."""
    store = _make(state, 3, aged=True)
    assert _count("word0") == 1
    _append(_transcript(state, 0), "okapi appended", keep_mtime=True)
    assert _count("okapi") == 0  # warm: the idle transcript was not stat'ed
    assert _count("okapi", env={"SESSIONTOOL_INDEX_FULL_CHECK": "1"}) == 1
    _append(_transcript(state, 1), "ibex appended", keep_mtime=True)
    assert _count("ibex") == 0
    store["agent:main:dm:u2"]["label"] = "renamed"  # any store write moves the markers
    _write_store(state, store)
    assert _count("ibex") == 1


def test_a_session_updated_recently_is_hot(state: Path) -> None:
    """The store's protocol: a turn updates the session's updatedAt, then appends."""
    store = _make(state, 3, aged=True)
    assert _count("word0") == 1
    import time

    store["agent:main:dm:u1"]["updatedAt"] = int(time.time() * 1000)
    _write_store(state, store)
    assert _count("word1") == 1  # the full check: u1 is hot now
    _append(_transcript(state, 1), "tapir appended", keep_mtime=True)
    assert _count("tapir") == 1


def test_new_and_deleted_sessions_are_seen(state: Path) -> None:
    store = _make(state, 3, aged=True)
    assert _count("hello") == 3
    # A new session (a new entry and its transcript).
    sid = f"{SID}99"
    (_sessions_dir(state) / f"{sid}.jsonl").write_bytes(_line("user", "newword hello", 0))
    store["agent:main:dm:new"] = {"sessionId": sid, "updatedAt": T0}
    _write_store(state, store)
    assert _count("newword") == 1
    assert _count("hello") == 4
    # A deleted session: its entry gone and its transcript archived (renamed).
    del store["agent:main:dm:u0"]
    _write_store(state, store)
    path = _transcript(state, 0)
    path.rename(path.with_name(path.name + ".deleted.2026-11-18T00-00-00.000Z"))
    assert _count("word0") == 0
    assert _count("hello") == 3
    rc, out = run_json("search", "word0", "--include-archived")
    assert rc == 0, out
    assert out["count"] == 1 and out["hits"][0]["archived"] is True
    # A transcript deleted outright, its entry kept: the directory changed.
    _transcript(state, 1).unlink()
    assert _count("word1") == 0


def test_an_openclaw_sqlite_store_keeps_no_snapshot(state: Path) -> None:
    shutil.copytree(OPENCLAW_STATE, state)
    rc, found = run_json("search", '"Slack channel message"', "--role", "user", "--all-agents")
    assert rc == 0, found
    assert found["count"] == 1
    rc, again = run_json("search", '"Slack channel message"', "--role", "user", "--all-agents")
    assert again == found
    rc, out = run_json("usage", "--all-agents", "--by", "agent")
    assert rc == 0, out
    assert _snaps(state) == 0  # its changes are found by each session's version, every time


def test_sessiontool_appending_to_an_idle_transcript_is_seen_warm(state: Path) -> None:
    """sessiontool's own writer appends a turn's first lines before the store's entry is written
    (at the run's end; a delivery mirror never writes it), but under the transcript lock, whose
    file is made and removed beside the transcript (as OpenClaw's is): that moves the sessions
    dir's mtime, a marker, so the next warm search sees the lines on an idle transcript too."""
    import subprocess
    import sys

    _make(state, 3, aged=True)
    assert _count("word0") == 1
    assert _snaps(state) == 1
    before = _sessions_dir(state).stat().st_mtime_ns
    code = (
        "import sys; from pathlib import Path; from sessiontool.state import transcript; "
        "transcript.append_message(Path(sys.argv[1]), sys.argv[2], "
        "{'role': 'user', 'content': [{'type': 'text', 'text': 'tapir appended'}]})"
    )
    path = _transcript(state, 0)
    proc = subprocess.run([sys.executable, "-c", code, str(path), f"{SID}00"], capture_output=True)
    assert proc.returncode == 0, proc.stderr
    assert _sessions_dir(state).stat().st_mtime_ns != before
    assert _count("tapir") == 1


def _hot(state: Path) -> list[list[Any]]:
    con = sqlite3.connect(f"file:{state / 'sessiontool' / 'index.sqlite'}?mode=ro", uri=True)
    try:
        return [
            h for (blob,) in con.execute("SELECT hot FROM snap_scopes") for h in json.loads(blob)
        ]
    finally:
        con.close()


def test_the_hot_set_ages_by_itself(state: Path) -> None:
    """Issue 47: a transcript stops being hot a day after its last change whatever the store
    does. Built while every transcript is fresh (a state dir just copied), searched three days
    later (the one clock moved) with no store write: no transcript is stat'ed any more, so a
    hand append to one waits for a full check, and the kept hot list is emptied."""
    import time

    _make(state, 3, aged=False)
    assert _count("word1") == 1
    assert len(_hot(state)) == 3
    later = {"SESSIONTOOL_NOW_MS": str(int(time.time() * 1000) + 3 * 86_400_000)}
    _append(_transcript(state, 1), "zebra appended")
    assert _count("zebra", env=later) == 0  # not hot any more: not stat'ed
    assert _hot(state) == []
    assert _count("zebra", env=later | {"SESSIONTOOL_INDEX_FULL_CHECK": "1"}) == 1


def test_a_hot_transcript_caught_up_warm_stays_hot(state: Path) -> None:
    """One written without a store change, caught up warm, is hot for a day from then."""
    import time

    _make(state, 2, aged=False)
    assert _count("word0") == 1
    now = int(time.time() * 1000)
    soon = {"SESSIONTOOL_NOW_MS": str(now + 20 * 3600 * 1000)}  # 20 h later: still hot
    _append(_transcript(state, 0), "zebra appended")
    assert _count("zebra", env=soon) == 1
    later = {"SESSIONTOOL_NOW_MS": str(now + 40 * 3600 * 1000)}  # 20 h after that catch-up
    _append(_transcript(state, 0), "quagga appended")
    assert _count("quagga", env=later) == 1
    assert [h[1] for h in _hot(state)] == [str(_transcript(state, 0))]


def test_an_idle_transcript_edited_in_place_gives_no_stale_hit(state: Path) -> None:
    """Issue 42: an idle transcript (not hot: not stat'ed by a warm search) edited in place,
    the same size and dated back, its word overwritten. The hit's line is read back and its
    file found changed: the hit is dropped and the file indexed again, so the redacted word
    is gone and the new one found from then on."""
    _make(state, 3, aged=True)
    assert _count("word1") == 1
    path = _transcript(state, 1)
    st = path.stat()
    data = path.read_bytes()
    path.write_bytes(data.replace(b"word1 hello", b"xxxxx hello"))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size
    rc, out = run_json("search", "word1")
    assert rc == 0, out
    assert out["count"] == 0
    assert _count("xxxxx") == 1
    assert _count("hello") == 3


def test_a_full_check_parses_the_store_once_and_stats_each_transcript_once(
    state: Path, monkeypatch: Any
) -> None:
    """Issue 47: after a store write (the markers moved) a search lists every session from one
    parse of sessions.json and one stat of each transcript: the floor it is measured against."""
    from collections import Counter

    from sessiontool import testhooks
    from sessiontool.context import build_context
    from sessiontool.reports import search as search_report

    store = _make(state, 6, aged=True)
    assert _count("word1") == 1
    store["agent:main:dm:u2"]["label"] = "renamed"
    _write_store(state, store)
    events: list[str] = []
    stats: Counter[str] = Counter()
    real_stat = os.stat

    def stat(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        stats[os.fspath(path)] += 1
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(testhooks, "note", events.append)  # each parse of a store notes one
    monkeypatch.setattr(os, "stat", stat)
    got = search_report.search(build_context(state), "word1")
    assert got["count"] == 1
    assert events == ["store-parse"]
    transcripts = {k: n for k, n in stats.items() if k.endswith(".jsonl")}
    assert transcripts == {str(_transcript(state, i)): 1 for i in range(6)}


def test_the_listing_of_a_full_check_folds_as_the_store_reader_does(state: Path) -> None:
    """The one-pass listing (index/catalog.py `_rows`) against `sessions_json.fold`: a bare
    legacy key and its full form are one session (the newer wins), reserved keys and ids that
    are no plain name are left out, the sessionFile kept as the entry says."""
    from sessiontool.flow import policy
    from sessiontool.index import catalog
    from sessiontool.state import sessions_json
    from sessiontool.state.paths import transcript_file_for, transcript_path_for

    d = str(_sessions_dir(state))
    store: dict[str, Any] = {
        "dm:old": {"sessionId": "s-old", "updatedAt": 5, "label": "bare"},
        "agent:main:dm:old": {"sessionId": "s-new", "updatedAt": 9, "spawnedBy": "agent:main:x"},
        "agent:main:dm:older": {"sessionId": "s-a", "updatedAt": 9},
        "dm:older": {"sessionId": "s-b", "updatedAt": 3},
        "global": {"sessionId": "s-global"},
        "agent:main:dm:bad": {"sessionId": "../etc"},
        "agent:main:dm:nosid": {"updatedAt": 1},
        "agent:main:dm:file": {"sessionId": "s-f", "sessionFile": f"{d}/s-f-topic.jsonl"},
        "agent:main:dm:away": {"sessionId": "s-g", "sessionFile": "/elsewhere/s-g.jsonl"},
        "agent:main:dm:rel": {"sessionId": "s-r", "sessionFile": "sub/../s-r.jsonl"},
        "agent:main:dm:empty": {"sessionId": "s-e", "label": "", "sessionFile": ""},
        "agent:main:dm:ünï": {"sessionId": "ünïcode", "updatedAt": 2},
    }
    want = []
    for key, f in sessions_json.fold(store, "main").items():
        sid = f.entry["sessionId"]
        if not sessions_json.listable(key) or not catalog.is_plain_name(sid):
            continue
        sf = f.entry.get("sessionFile")
        seen = {k: f.entry[k] for k in (*policy.VISIBILITY_FIELDS, "updatedAt") if k in f.entry}
        want.append(
            [key, sid, sf if isinstance(sf, str) else None, f.entry.get("label") or None, seen]
        )
    assert catalog._rows(store, "main") == want
    assert [r[1] for r in want][:2] == ["s-new", "s-a"]
    for _key, sid, sf, _label, _seen in want:
        assert transcript_file_for(d, sid, sf) == str(transcript_path_for(Path(d), sid, sf))
