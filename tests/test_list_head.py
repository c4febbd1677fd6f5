"""`list` over a big store reads the first rows kept from its last parse (sessions/listhead.py,
issue 47) and answers exactly as a full parse does: the same rows, counts and pages, a change to
the store seen at once, a page past the head or a filter listed in full, and a head file that
is damaged, or kept under another store file, never used."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from tests.helpers import run_cli
from tests.runhelpers import write_store

N = 9_000  # with the padding below, a store past 1 MiB (smaller ones are parsed every time)


def _store(n: int = N, agent: str = "main", shift: int = 0) -> dict[str, Any]:
    store: dict[str, Any] = {}
    for i in range(n):
        kind = "group" if i % 997 == 0 else "dm"
        store[f"agent:{agent}:{kind}:u-{i:05d}"] = {
            "sessionId": f"{agent}-{i:05d}",
            "updatedAt": 1_700_000_000_000 + (i * 7919) % n * 1000 + shift,
            "label": f"l-{i}",
            "chatType": "group" if kind == "group" else "direct",
            "note": "x" * 60,
        }
    store[f"agent:{agent}:main"] = {"sessionId": f"{agent}-main", "updatedAt": 1, "pinnedAt": 5}
    return store


def _settled(path: Path) -> None:
    """Wait until the store's ctime is older than a head's racy window (listhead.RACY_NS)."""
    age = time.time() - path.stat().st_ctime
    if age < 1.1:
        time.sleep(1.1 - age)


def _list(*args: str, events: Path | None = None) -> dict[str, Any]:
    env = {"SESSIONTOOL_TEST_EVENTS": str(events)} if events is not None else None
    proc = run_cli("list", "--json", *args, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    out = json.loads(proc.stdout)
    assert isinstance(out, dict)
    return out


def _parses(events: Path) -> int:
    if not events.exists():
        return 0
    n = sum(1 for line in events.read_text().splitlines() if line.startswith("store-parse"))
    events.unlink()
    return n


def _big(state: Path, store: dict[str, Any] | None = None, agent: str = "main") -> Path:
    path = write_store(state, store if store is not None else _store(agent=agent), agent)
    assert path.stat().st_size >= 1 << 20
    (state / "sessiontool").mkdir(exist_ok=True)
    return path


def test_a_page_is_read_from_the_head_kept_by_the_last_parse(state: Path, tmp_path: Path) -> None:
    path = _big(state)
    _settled(path)
    events = tmp_path / "events.txt"
    first = _list("--limit", "20", events=events)
    assert _parses(events) == 1
    head = json.loads((state / "sessiontool" / "list-head.json").read_text())
    kept = head["agents"]["main"]
    assert kept["total"] == N + 1 and len(kept["rows"]) == 500
    assert first["count"] == 20 and first["hasMore"] is True and first["nextOffset"] == 20
    assert first["sessions"][0]["key"] == "main"  # pinned first, then the newest
    stamps = [r["updatedAt"] for r in first["sessions"][1:]]
    assert stamps == sorted(stamps, reverse=True)
    for args in (("--limit", "20"), ("--limit", "50", "--offset", "30"), ("--kinds", "other")):
        again = _list(*args, events=events)
        assert _parses(events) == 0, args  # no parse of the 1 MiB store
        (state / "sessiontool" / "list-head.json").rename(tmp_path / "aside.json")
        full = _list(*args, events=events)
        assert _parses(events) == 1
        (tmp_path / "aside.json").rename(state / "sessiontool" / "list-head.json")
        assert again == full, args


def test_a_change_to_the_store_is_seen_at_once(state: Path, tmp_path: Path) -> None:
    path = _big(state)
    _settled(path)
    _list("--limit", "5")
    store = _store()
    store["agent:main:dm:u-00003"]["updatedAt"] = 1_800_000_000_000
    store["agent:main:dm:u-00003"]["label"] = "bumped"
    path.write_text(json.dumps(store, indent=2))  # in place, the same file: its ctime moves
    events = tmp_path / "events.txt"
    got = _list("--limit", "5", events=events)
    assert _parses(events) == 1
    assert got["sessions"][1]["key"] == "agent:main:dm:u-00003"
    assert got["sessions"][1]["label"] == "bumped"


def test_a_page_past_the_head_or_a_filter_lists_in_full(state: Path, tmp_path: Path) -> None:
    path = _big(state)
    _settled(path)
    events = tmp_path / "events.txt"
    whole = _list("--limit", "all", events=events)["sessions"]
    assert _parses(events) == 1 and len(whole) == N + 1
    page = _list("--offset", "490", "--limit", "30", events=events)
    assert _parses(events) == 1  # past the 500 rows kept
    assert page["sessions"] == whole[490:520]
    # Groups are one row in 997 (ten in all): nine of them are not all among the 500 kept.
    groups = _list("--kinds", "group", "--limit", "9", events=events)
    assert _parses(events) == 1  # the head, found short, then the store in full
    assert groups["sessions"] == [r for r in whole if r["kind"] == "group"][:9]
    labelled = _list("--label", "l-7", events=events)
    assert _parses(events) == 1
    assert [r["key"] for r in labelled["sessions"]] == ["agent:main:dm:u-00007"]


def test_a_damaged_head_or_one_of_another_store_is_not_used(state: Path, tmp_path: Path) -> None:
    path = _big(state)
    _settled(path)
    want = _list("--limit", "10")
    head_file = state / "sessiontool" / "list-head.json"
    good = json.loads(head_file.read_text())
    events = tmp_path / "events.txt"
    bad_rows = json.loads(json.dumps(good))
    bad_rows["agents"]["main"]["rows"][0] = ["not", "a", "row"]
    short = json.loads(json.dumps(good))
    del short["agents"]["main"]["rows"][-1]
    moved = json.loads(json.dumps(good))
    moved["agents"]["main"]["store"] = str(tmp_path / "elsewhere.json")
    for damaged in (b"{not json", json.dumps(bad_rows).encode(), json.dumps(short).encode()):
        head_file.write_bytes(damaged)
        assert _list("--limit", "10", events=events) == want
        assert _parses(events) == 1
    head_file.write_text(json.dumps(moved))
    assert _list("--limit", "10", events=events) == want
    assert _parses(events) == 1


def test_every_agents_heads_merge_in_the_inventory_order(state: Path, tmp_path: Path) -> None:
    paths = [_big(state, _store(agent=a, shift=s), a) for a, s in (("main", 0), ("work", 500))]
    for p in paths:
        _settled(p)
    events = tmp_path / "events.txt"
    whole = _list("--all-agents", "--limit", "all", events=events)["sessions"]
    assert _parses(events) == 2
    assert {r["key"].split(":")[1] for r in whole[1:40] if r["key"] != "main"} == {"main", "work"}
    for args in (("--limit", "30"), ("--limit", "100", "--offset", "400")):
        got = _list("--all-agents", *args, events=events)
        assert _parses(events) == 0, args
        off = int(args[3]) if len(args) > 2 else 0
        assert got["sessions"] == whole[off : off + int(args[1])], args
    # Past the 500 kept of either agent, the merged order is not known: in full.
    late = _list("--all-agents", "--limit", "100", "--offset", "950", events=events)
    assert _parses(events) == 2
    assert late["sessions"] == whole[950:1050]


def test_a_head_that_would_not_read_back_the_same_is_not_kept(state: Path) -> None:
    store = _store()
    store["agent:main:dm:u-00001"]["updatedAt"] = 1_900_000_000_000
    store["agent:main:dm:u-00001"]["score"] = float("nan")  # orjson would write null
    path = _big(state, store)
    _settled(path)
    got = _list("--limit", "3")
    assert got["sessions"][1]["key"] == "agent:main:dm:u-00001"
    assert not (state / "sessiontool" / "list-head.json").exists()


def test_no_head_is_kept_for_a_store_written_a_moment_ago(state: Path) -> None:
    path = _big(state)
    os.utime(path)  # written just now (its ctime moves with it)
    _list("--limit", "3")
    assert not (state / "sessiontool" / "list-head.json").exists()
