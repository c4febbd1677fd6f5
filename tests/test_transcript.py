"""JSONL transcripts: OpenClaw's header and entry shape, whole-line appends under the lock,
torn-line repair, and tail reads that never load a large file."""

from __future__ import annotations

import json
import os
import re
import stat
import threading
from pathlib import Path
from typing import Any

import pytest

from sessiontool.errors import BusyError
from sessiontool.state import transcript

from .test_fixtures import FIXTURE_STATE

ISO_MS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
ENTRY_ID = re.compile(r"^[0-9a-f]{8}$")


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def msg(text: str, role: str = "user") -> dict[str, Any]:
    return {"role": role, "content": text, "timestamp": 1}


def test_header_and_first_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SESSIONTOOL_NOW_MS", "1795292567264")
    p = tmp_path / "sessions" / "s1.jsonl"
    written = transcript.append_message(p, "s1", msg("hi"), cwd="/work/x")
    raw = p.read_bytes()
    assert raw.endswith(b"\n") and raw.count(b"\n") == 2
    first, second = raw.split(b"\n")[:2]
    assert first == (
        b'{"type":"session","version":3,"id":"s1","timestamp":"2026-11-21T20:22:47.264Z","cwd":"/work/x"}'
    )
    entry = json.loads(second)
    assert list(entry)[:4] == ["type", "id", "parentId", "timestamp"]
    assert entry["type"] == "message" and entry["parentId"] is None
    assert ENTRY_ID.match(entry["id"]) and ISO_MS.match(entry["timestamp"])
    assert entry["message"] == msg("hi")
    assert written == entry
    assert b", " not in second and b'": ' not in second  # compact
    assert stat.S_IMODE(p.stat().st_mode) == 0o600
    assert stat.S_IMODE(p.parent.stat().st_mode) == 0o700
    assert sorted(os.listdir(p.parent)) == ["s1.jsonl"]  # the lock is gone


def test_header_defaults_to_process_cwd(tmp_path: Path) -> None:
    p = tmp_path / "s.jsonl"
    transcript.append_message(p, "s", msg("x"))
    assert lines(p)[0]["cwd"] == os.getcwd()


def test_parent_chain_across_appends(tmp_path: Path) -> None:
    p = tmp_path / "s.jsonl"
    transcript.append_entries(
        p,
        "s",
        [
            {"type": "message", "message": msg("a")},
            {"type": "message", "message": msg("b", "assistant")},
        ],
    )
    transcript.append_entries(p, "s", [{"type": "custom", "customType": "x", "data": {}}])
    transcript.append_message(p, "s", msg("c"))
    entries = lines(p)[1:]
    assert [e["type"] for e in entries] == ["message", "message", "custom", "message"]
    assert entries[0]["parentId"] is None
    for prev, cur in zip(entries, entries[1:], strict=False):
        assert cur["parentId"] == prev["id"]
    assert len({e["id"] for e in entries}) == 4
    assert entries[2]["customType"] == "x"  # extra fields kept


def test_append_continues_a_real_openclaw_transcript(tmp_path: Path) -> None:
    src = (
        FIXTURE_STATE
        / "agents"
        / "main"
        / "sessions"
        / "5ae11e65-2836-4744-b866-e188c2c7f82c.jsonl"
    )
    p = tmp_path / src.name
    p.write_bytes(src.read_bytes())
    last_id = lines(p)[-1]["id"]
    entry = transcript.append_message(p, "5ae11e65-2836-4744-b866-e188c2c7f82c", msg("more"))
    assert entry["parentId"] == last_id
    assert p.read_bytes().startswith(src.read_bytes())
    assert lines(p)[0]["type"] == "session"
    assert sum(1 for e in lines(p) if e["type"] == "session") == 1


def test_torn_last_line_is_terminated_before_appending(tmp_path: Path) -> None:
    p = tmp_path / "s.jsonl"
    transcript.append_message(p, "s", msg("ok"))
    good = p.read_bytes()
    with open(p, "ab") as fh:
        fh.write(b'{"type":"message","message":{"role":"us')  # a writer died here
    transcript.append_message(p, "s", msg("after"))
    data = p.read_bytes()
    assert data.startswith(good + b'{"type":"message","message":{"role":"us\n')
    assert data.endswith(b"\n")
    last = json.loads(data.splitlines()[-1])
    assert last["message"]["content"] == "after"
    # The torn line is now a complete bad line: read around and counted.
    res = transcript.read_all(p)
    assert [m["content"] for m in res.messages] == ["ok", "after"]
    assert res.bad_lines == 1


def test_new_file_has_no_leading_newline(tmp_path: Path) -> None:
    p = tmp_path / "s.jsonl"
    p.touch()
    transcript.append_message(p, "s", msg("x"))
    assert p.read_bytes().startswith(b'{"type":"session"')


def test_append_waits_for_a_held_transcript_lock(tmp_path: Path) -> None:
    p = tmp_path / "s.jsonl"
    lock = tmp_path / "s.jsonl.lock"
    lock.write_text(json.dumps({"pid": os.getpid(), "createdAt": 0}))  # ours, alive, ancient
    with pytest.raises(BusyError):
        transcript.append_message(p, "s", msg("x"), timeout=0.2)
    assert not p.exists() or p.read_bytes() == b""
    assert lock.exists()


def test_concurrent_appends_never_interleave(tmp_path: Path) -> None:
    p = tmp_path / "s.jsonl"
    big = "x" * 100_000  # larger than a pipe buffer: one write per line still

    def worker(n: int) -> None:
        for i in range(10):
            transcript.append_message(p, "s", msg(f"{n}-{i}-{big}"), timeout=30)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    entries = lines(p)
    assert entries[0]["type"] == "session" and sum(e["type"] == "session" for e in entries) == 1
    assert len(entries) == 41
    for prev, cur in zip(entries[1:], entries[2:], strict=False):
        assert cur["parentId"] == prev["id"]


# -- reading -----------------------------------------------------------------------------------


def write_lines(p: Path, items: list[Any], tail: bytes = b"") -> None:
    p.write_bytes(b"".join(json.dumps(i).encode() + b"\n" for i in items) + tail)


def test_read_tail_order_limit_and_filter(tmp_path: Path) -> None:
    p = tmp_path / "s.jsonl"
    items: list[Any] = [{"type": "session", "id": "s"}]
    for i in range(10):
        role = "toolResult" if i % 3 == 2 else "user"
        items.append({"type": "message", "message": {"role": role, "content": str(i)}})
        items.append({"type": "model_change", "modelId": "m"})
    write_lines(p, items)
    res = transcript.read_tail(p, 3)
    assert [m["content"] for m in res.messages] == ["7", "8", "9"]
    keep = lambda m: m["role"] != "toolResult"  # noqa: E731
    res = transcript.read_tail(p, 3, keep)
    assert [m["content"] for m in res.messages] == ["6", "7", "9"]
    assert [m["content"] for m in transcript.read_tail(p, None, keep).messages] == [
        "0",
        "1",
        "3",
        "4",
        "6",
        "7",
        "9",
    ]
    assert transcript.read_tail(p, 0).messages == []
    assert transcript.read_tail(p, 100).bad_lines == 0


def test_read_missing_file(tmp_path: Path) -> None:
    res = transcript.read_tail(tmp_path / "none.jsonl", 5)
    assert res.messages == [] and res.exists is False


def test_read_counts_only_bad_lines_it_reads(tmp_path: Path) -> None:
    p = tmp_path / "s.jsonl"
    good = [
        json.dumps({"type": "message", "message": {"role": "user", "content": str(i)}}).encode()
        for i in range(4)
    ]
    p.write_bytes(
        b"\n".join(
            [
                b"garbage-1",
                good[0],
                b"",
                b"\xff\xfe",
                good[1],
                b"   ",
                b"garbage-2",
                good[2],
                good[3],
            ]
        )
        + b"\n{torn"
    )
    assert transcript.read_tail(p, 2).bad_lines == 0  # the last two messages come first
    tail = transcript.read_tail(p, 3)
    assert [m["content"] for m in tail.messages] == ["1", "2", "3"]
    assert tail.bad_lines == 1  # only garbage-2 lies within the part read
    full = transcript.read_tail(p, None)
    assert [m["content"] for m in full.messages] == ["0", "1", "2", "3"]
    # garbage-1, \xff\xfe and garbage-2; blank lines and the torn end are not counted.
    assert full.bad_lines == 3


def test_crlf_lines_and_no_trailing_newline(tmp_path: Path) -> None:
    p = tmp_path / "s.jsonl"
    a = json.dumps({"message": {"role": "user", "content": "a"}}).encode()
    b = json.dumps({"message": {"role": "user", "content": "b"}}).encode()
    p.write_bytes(a + b"\r\n" + b)  # the last line is complete JSON without its newline
    assert [m["content"] for m in transcript.read_all(p).messages] == ["a", "b"]


@pytest.mark.parametrize("block", [7, 64, 4096])
def test_reverse_iteration_is_exact_at_any_block_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int
) -> None:
    monkeypatch.setattr(transcript, "BLOCK", block)
    p = tmp_path / "s.jsonl"
    raw = [b"", b"a", b"bb" * 50, b"", b"ccc", b"d" * 300, b"e"]
    p.write_bytes(b"\n".join(raw) + b"\nunterminated")
    got = list(transcript.iter_lines_reverse(p))
    want = [(b"unterminated", False)] + [(line, True) for line in reversed(raw) if line]
    # Empty lines may be yielded or skipped; compare the non-empty ones.
    assert [g for g in got if g[0]] == want


class CountingFile:
    def __init__(self, fh: Any, counter: list[int]) -> None:
        self._fh, self._counter = fh, counter

    def read(self, n: int = -1) -> bytes:
        data: bytes = self._fh.read(n)
        self._counter[0] += len(data)
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fh, name)

    def __enter__(self) -> CountingFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self._fh.close()


def test_tail_of_a_big_file_reads_only_the_tail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = tmp_path / "big.jsonl"
    line = (
        json.dumps({"type": "message", "message": {"role": "user", "content": "y" * 200}}).encode()
        + b"\n"
    )
    n = 100_000
    with open(p, "wb") as fh:
        fh.write(json.dumps({"type": "session", "id": "big"}).encode() + b"\n")
        fh.write(line * (n - 20))
        for i in range(20):
            fh.write(
                json.dumps(
                    {"type": "message", "message": {"role": "user", "content": f"last-{i}"}}
                ).encode()
                + b"\n"
            )
    size = p.stat().st_size
    assert size > 20_000_000
    counter = [0]
    real_open = open

    def counting_open(path: Any, mode: str = "r", *a: Any, **kw: Any) -> Any:
        return CountingFile(real_open(path, mode, *a, **kw), counter)

    monkeypatch.setattr(transcript, "open", counting_open, raising=False)
    res = transcript.read_tail(p, 20)
    assert [m["content"] for m in res.messages] == [f"last-{i}" for i in range(20)]
    assert counter[0] <= 2 * transcript.BLOCK
    counter[0] = 0
    res = transcript.read_tail(p, 25)
    assert [m["content"] for m in res.messages][-20:] == [f"last-{i}" for i in range(20)]
    assert res.messages[0]["content"] == "y" * 200
    assert counter[0] < size / 100


def test_follow_yields_new_whole_messages(tmp_path: Path) -> None:
    p = tmp_path / "s.jsonl"
    transcript.append_message(p, "s", msg("old"))
    start = transcript.file_size(p)
    gen = transcript.follow(p, start, poll=0.01)
    transcript.append_message(p, "s", msg("new-1"))
    assert next(gen)["content"] == "new-1"
    with open(p, "ab") as fh:
        half = json.dumps({"type": "message", "message": msg("new-2")}).encode()
        fh.write(half[:10])
        fh.flush()
        result: list[dict[str, Any]] = []
        t = threading.Thread(target=lambda: result.append(next(gen)))
        t.start()
        t.join(0.1)
        assert result == []  # a partial line waits
        fh.write(half[10:] + b"\n")
    t.join(5)
    assert result and result[0]["content"] == "new-2"


def test_file_size(tmp_path: Path) -> None:
    assert transcript.file_size(tmp_path / "none") == 0
    (tmp_path / "f").write_bytes(b"abc")
    assert transcript.file_size(tmp_path / "f") == 3


def entry_line(role: str, text: str, ts: int, n: int) -> bytes:
    """A transcript line exactly as OpenClaw writes one."""
    line = {
        "type": "message",
        "id": f"{n:08x}",
        "parentId": f"{n - 1:08x}" if n else None,
        "timestamp": "2026-11-21T20:20:49.915Z",
        "message": {"role": role, "content": [{"type": "text", "text": text}], "timestamp": ts},
    }
    return json.dumps(line, separators=(",", ":")).encode() + b"\n"


def test_since_stops_at_the_first_older_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = tmp_path / "s.jsonl"
    with open(p, "wb") as fh:
        fh.write(b"not json at all\n")  # would be counted if the read went this far
        fh.write(b"".join(entry_line("user", "old " + "x" * 200, 1_000, i) for i in range(8000)))
        fh.write(b"".join(entry_line("user", f"new-{i}", 10**12 + i, 9000 + i) for i in range(5)))
    counter = [0]
    real_open = open
    monkeypatch.setattr(
        transcript,
        "open",
        lambda path, mode="r", *a, **kw: CountingFile(real_open(path, mode, *a, **kw), counter),
        raising=False,
    )

    def older(m: dict[str, Any]) -> bool:
        return bool(m["timestamp"] < 10**12)

    res = transcript.read_tail(p, 100, stop=older)
    assert [m["content"][0]["text"] for m in res.messages] == [f"new-{i}" for i in range(5)]
    assert res.bad_lines == 0
    assert counter[0] <= transcript.BLOCK


def test_tool_result_lines_are_recognised_without_parsing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = tmp_path / "s.jsonl"
    tool = entry_line("toolResult", "output " * 50, 5, 2)
    assert transcript.is_tool_result_line(tool)
    # The same words inside a user's text are escaped: not a tool result.
    pasted = entry_line("user", '{"type":"message","message":{"role":"toolResult"}}', 5, 3)
    assert not transcript.is_tool_result_line(pasted)
    p.write_bytes(entry_line("user", "ask", 1, 1) + tool * 500 + pasted + tool * 500)
    parsed = [0]
    real_parse = transcript._parse

    def counting_parse(raw: bytes) -> Any:
        parsed[0] += 1
        return real_parse(raw)

    monkeypatch.setattr(transcript, "_parse", counting_parse)
    res = transcript.read_tail(
        p, 2, lambda m: m["role"] != "toolResult", skip_line=transcript.is_tool_result_line
    )
    assert [m["role"] for m in res.messages] == ["user", "user"]
    assert parsed[0] == 2
    parsed[0] = 0
    res = transcript.read_tail(p, 2)
    assert [m["role"] for m in res.messages] == ["toolResult", "toolResult"]
