"""How the search/usage index catches up with transcripts: only appended bytes are read, a
rewritten or replaced transcript is read again, an unchanged state writes nothing, worker
processes build the same index as one process, and `usage` sums whole days from its per-day
summaries and the partial days at a --since/--until boundary from single turns."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import FIXTURE_STATE, run_cli, run_json

DAY = 86_400_000
T0 = 1_795_000_000_000  # 2026-11-18T...Z
SID = "0b0e5c52-4a59-4c3e-9d0e-1e2b8f6a7c11"


def _line(kind: str, ts: int, text: str, n: int) -> bytes:
    msg: dict[str, Any] = {
        "role": kind,
        "content": [{"type": "text", "text": text}],
        "timestamp": ts,
    }
    if kind == "assistant":
        msg |= {
            "provider": "fake",
            "model": "fake-model",
            "usage": {"input": 100 + n, "output": 10 + n, "cacheRead": n, "cacheWrite": 2 * n},
        }
    iso = datetime.fromtimestamp(ts / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    obj = {"type": "message", "id": f"{n:08x}", "parentId": None, "timestamp": iso, "message": msg}
    return json.dumps(obj).encode() + b"\n"


def _make_state(state: Path, sessions: dict[str, list[bytes]]) -> dict[str, Path]:
    d = state / "agents" / "main" / "sessions"
    d.mkdir(parents=True)
    store = {}
    paths = {}
    for i, (key, lines) in enumerate(sessions.items()):
        sid = SID[:-2] + f"{i:02d}"
        head = {"type": "session", "version": 3, "id": sid, "timestamp": "2026-11-18T00:00:00Z"}
        paths[key] = d / f"{sid}.jsonl"
        paths[key].write_bytes(json.dumps(head).encode() + b"\n" + b"".join(lines))
        store[key] = {"sessionId": sid, "updatedAt": T0 + i}
    (d / "sessions.json").write_text(json.dumps(store, indent=2))
    return paths


def _conversation(days: int, step_h: int = 7, word: str = "alpha") -> list[bytes]:
    out = []
    for n, t in enumerate(range(T0, T0 + days * DAY, step_h * 3_600_000)):
        out.append(_line("user", t, f"{word} question {n}", n))
        out.append(_line("assistant", t + 1000, f"{word} answer {n}", n))
    return out


def _search(*args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    proc = run_cli("search", *args, "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def _db(state: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{state / 'sessiontool' / 'index.sqlite'}?mode=ro", uri=True)


def _msg_ids(state: Path) -> list[int]:
    con = _db(state)
    try:
        return [r[0] for r in con.execute("SELECT id FROM msgs ORDER BY id")]
    finally:
        con.close()


def test_appended_bytes_only_and_partial_lines_wait(state: Path) -> None:
    path = _make_state(state, {"agent:main:main": _conversation(1)})["agent:main:main"]
    assert _search("alpha")["count"] == 8
    before = _msg_ids(state)
    with open(path, "ab") as fh:
        fh.write(_line("user", T0 + 2 * DAY, "bravo appended", 99))
    assert _search("bravo")["count"] == 1
    after = _msg_ids(state)
    # The old rows were kept as they were (not read again): one new row after them.
    assert after[: len(before)] == before and len(after) == len(before) + 1
    assert after[-1] > before[-1]
    # A line still being written (no newline yet) is not read until it is complete.
    line = _line("user", T0 + 2 * DAY + 5, "charlie halfway", 100)
    with open(path, "ab") as fh:
        fh.write(line[:-20])
    assert _search("charlie")["count"] == 0
    with open(path, "ab") as fh:
        fh.write(line[-20:])
    hit = _search("charlie")["hits"]
    assert len(hit) == 1 and hit[0]["timestamp"] == T0 + 2 * DAY + 5
    con = _db(state)
    try:
        (off,) = con.execute("SELECT off FROM files").fetchone()
    finally:
        con.close()
    assert off == path.stat().st_size


def test_same_size_rewrite_and_replaced_file_are_read_again(state: Path) -> None:
    path = _make_state(state, {"agent:main:main": _conversation(1)})["agent:main:main"]
    assert _search("alpha")["count"] == 8
    st = path.stat()
    data = path.read_bytes().replace(b"alpha", b"delta")
    path.write_bytes(data)  # same size, same inode: the bytes before the offset differ
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert path.stat().st_size == st.st_size
    assert _search("alpha")["count"] == 0
    assert _search("delta")["count"] == 8
    # Replaced by another file (new inode) that is longer: read again from the start.
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(data.replace(b"delta", b"omega") + _line("user", T0 + DAY, "tango", 50))
    os.replace(tmp, path)
    assert _search("delta")["count"] == 0
    assert _search("omega")["count"] == 8
    assert _search("tango")["count"] == 1


def test_unchanged_state_leaves_the_index_untouched(state: Path) -> None:
    _make_state(state, {"agent:main:main": _conversation(2)})
    assert _search("alpha")["count"] == 14
    # Each command's first full check keeps its snapshot (index/snapshots.py); after that,
    # nothing changed means nothing written.
    rc, _out = run_json("usage", "--by", "day")
    assert rc == 0
    index = state / "sessiontool" / "index.sqlite"
    digest = hashlib.sha256(index.read_bytes()).hexdigest()
    assert _search("alpha")["count"] == 14
    rc, _out = run_json("usage", "--by", "day")
    assert rc == 0
    assert hashlib.sha256(index.read_bytes()).hexdigest() == digest


def _dump(state: Path) -> Any:
    con = _db(state)
    try:
        return {
            "msgs": con.execute(
                "SELECT f.path, m.ts, m.role, m.off, m.part FROM msgs m JOIN files f "
                "ON f.id = m.file_id ORDER BY f.path, m.off, m.part"
            ).fetchall(),
            "days": con.execute(
                "SELECT f.path, d.day, d.provider, d.model, d.turns, d.runs, d.input, "
                "d.output, d.cache_read, d.cache_write FROM days d JOIN files f "
                "ON f.id = d.file_id ORDER BY 1, 2, 3, 4"
            ).fetchall(),
            "files": con.execute(
                "SELECT path, size, off, digest, last_role FROM files ORDER BY 1"
            ).fetchall(),
        }
    finally:
        con.close()


def test_worker_processes_build_the_same_index(tmp_path: Path) -> None:
    dumps = []
    outs = []
    for name, env in (
        ("one", {"SESSIONTOOL_INDEX_WORKERS": "0"}),
        ("workers", {"SESSIONTOOL_INDEX_PARALLEL_MIN": "1", "SESSIONTOOL_INDEX_WORKERS": "2"}),
    ):
        state = tmp_path / name
        shutil.copytree(FIXTURE_STATE, state)
        env = {**env, "SESSIONTOOL_STATE_DIR": str(state)}
        found = _search("book OR Darkness", "--limit", "100", "--all-agents", env=env)
        proc = run_cli("usage", "--by", "day", "--json", env=env)
        assert proc.returncode == 0, proc.stderr
        for h in found["hits"]:
            h["transcriptPath"] = Path(h["transcriptPath"]).name
        outs.append((found, json.loads(proc.stdout)))
        dump = _dump(state)
        for k in dump:
            dump[k] = [(Path(r[0]).name, *r[1:]) for r in dump[k]]
        dumps.append(dump)
    assert outs[0][0]["count"] > 0
    assert outs[0] == outs[1]
    assert dumps[0] == dumps[1]
    assert len(dumps[0]["files"]) > 1 and dumps[0]["days"]


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds")


def _expected(paths: list[Path], since: int | None, until: int | None) -> dict[str, list[int]]:
    """Independently: per UTC day, [turns, input, output, cacheRead, cacheWrite]."""
    out: dict[str, list[int]] = {}
    for p in paths:
        for raw in p.read_text().splitlines():
            msg = json.loads(raw).get("message")
            if not msg or msg.get("role") != "assistant":
                continue
            ts = msg["timestamp"]
            if (since is not None and ts < since) or (until is not None and ts >= until):
                continue
            day = datetime.fromtimestamp(ts / 1000, tz=UTC).strftime("%Y-%m-%d")
            u = msg["usage"]
            row = out.setdefault(day, [0, 0, 0, 0, 0])
            for i, v in enumerate((1, u["input"], u["output"], u["cacheRead"], u["cacheWrite"])):
                row[i] += v
    return out


def test_usage_by_day_whole_and_partial_days(state: Path) -> None:
    paths = _make_state(
        state,
        {"agent:main:main": _conversation(6), "agent:main:dm:bob": _conversation(4, step_h=5)},
    )
    files = list(paths.values())
    day0 = T0 - T0 % DAY
    cases = [
        (None, None),
        (T0 + 3 * 3_600_000, None),  # since mid-day
        (None, day0 + 3 * DAY + 5 * 3_600_000),  # until mid-day
        (day0 + DAY, day0 + 3 * DAY),  # whole days only
        (day0 + DAY + 7_200_000, day0 + 4 * DAY + 3_600_000),  # partial days at both ends
        (day0 + 2 * DAY + 3_600_000, day0 + 2 * DAY + 20 * 3_600_000),  # within one day
        (day0 + 2 * DAY + 3_600_000, day0 + 3 * DAY + 3_600_000),  # two partial days
    ]
    for since, until in cases:
        args = ["usage", "--by", "day"]
        if since is not None:
            args += ["--since", _iso(since)]
        if until is not None:
            args += ["--until", _iso(until)]
        rc, out = run_json(*args)
        assert rc == 0, out
        got = {
            r["day"]: [r["turns"], r["input"], r["output"], r["cacheRead"], r["cacheWrite"]]
            for r in out["rows"]
        }
        assert got == _expected(files, since, until), (since, until)
        rc, by_model = run_json(*args[:2], "model", *args[3:])
        assert by_model["total"] == out["total"]


def test_a_vanished_transcript_is_dropped_even_when_its_session_remains(state: Path) -> None:
    paths = _make_state(
        state, {"agent:main:main": _conversation(1), "agent:main:dm:bob": _conversation(1)}
    )
    assert _search("alpha")["count"] == 16
    paths["agent:main:dm:bob"].unlink()
    found = _search("alpha")
    assert found["count"] == 8 and {h["key"] for h in found["hits"]} == {"main"}
    con = _db(state)
    try:
        names = [Path(r[0]).name for r in con.execute("SELECT path FROM files")]
    finally:
        con.close()
    assert names == [paths["agent:main:main"].name]


def _costed(days: int) -> list[bytes]:
    """A user message, then two assistant turns (one run) every 5 hours; every other turn
    records a cost."""
    out = []
    for n, t in enumerate(range(T0, T0 + days * DAY, 5 * 3_600_000)):
        out.append(_line("user", t, f"question {n}", n))
        for k in (1, 2):
            obj = json.loads(_line("assistant", t + k * 60_000, f"answer {n}.{k}", n))
            if (n + k) % 2:
                obj["message"]["usage"]["cost"] = {"total": 0.001 * (n + k)}
            out.append(json.dumps(obj).encode() + b"\n")
    return out


def test_partial_days_sum_as_the_whole_days_do(state: Path) -> None:
    # A range of whole days is summed from the per-day sums; split at a mid-day point, each half
    # has a partial day, summed from that day's single turns: the totals (runs and recorded
    # cost too) must agree.
    _make_state(state, {"agent:main:main": _costed(4), "agent:main:dm:bob": _costed(3)})
    day0 = T0 - T0 % DAY
    a, c = day0 + DAY, day0 + 3 * DAY
    keys = ("turns", "runs", "input", "output", "cacheRead", "cacheWrite")

    def total(since: int, until: int) -> dict[str, Any]:
        rc, out = run_json("usage", "--since", _iso(since), "--until", _iso(until))
        assert rc == 0, out
        return out["total"]  # type: ignore[no-any-return]

    whole = total(a, c)
    assert whole["turns"] > 0 and whole["runs"] * 2 == whole["turns"] and whole["cost"] > 0
    b = a + DAY + 11 * 3_600_000
    left, right = total(a, b), total(b, c)
    assert left["turns"] and right["turns"]
    for k in keys:
        assert left[k] + right[k] == whole[k], k
    assert left["cost"] + right["cost"] == pytest.approx(whole["cost"])
