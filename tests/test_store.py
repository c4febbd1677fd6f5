"""sessions.json: tolerant reads, legacy names, duplicate folding, and the locked atomic
read-modify-write that never loses another writer's update."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from sessiontool.errors import CorruptStateError
from sessiontool.state import sessions_json as store

from .test_fixtures import MAIN_STORE


def write(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


# -- read -------------------------------------------------------------------------------------


def test_read_missing_and_empty(tmp_path: Path) -> None:
    assert store.read_store(tmp_path / "none.json") == {}
    (tmp_path / "empty.json").write_text("  \n")
    assert store.read_store(tmp_path / "empty.json") == {}


def test_read_the_real_fixture_store() -> None:
    data = store.read_store(MAIN_STORE)
    assert len(data) == 10
    assert "skillsSnapshot" in data["agent:main:main"]


def test_read_json5(tmp_path: Path) -> None:
    p = tmp_path / "s.json"
    p.write_text("{ // comment\n 'agent:main:a': {sessionId: 'a', updatedAt: 1,}, }")
    assert store.read_store(p) == {"agent:main:a": {"sessionId": "a", "updatedAt": 1}}


@pytest.mark.parametrize("content", ["{", "[]", "1", '"x"', "{'a': }"])
def test_read_corrupt_raises_with_path(tmp_path: Path, content: str) -> None:
    p = tmp_path / "s.json"
    p.write_text(content)
    with pytest.raises(CorruptStateError) as info:
        store.read_store(p)
    assert str(p) in info.value.message
    assert int(info.value.code) == 5


def test_read_directory_is_corrupt(tmp_path: Path) -> None:
    (tmp_path / "s.json").mkdir()
    with pytest.raises(CorruptStateError):
        store.read_store(tmp_path / "s.json")


# -- legacy names and folding -------------------------------------------------------------------


def test_normalize_entry_legacy_names() -> None:
    e = {
        "sessionId": "x",
        "provider": "slack",
        "lastProvider": "signal",
        "room": "#eng",
        "other": 1,
    }
    out = store.normalize_entry(e)
    assert out == {
        "sessionId": "x",
        "channel": "slack",
        "lastChannel": "signal",
        "groupChannel": "#eng",
        "other": 1,
    }
    assert e["provider"] == "slack"  # the input is not mutated
    # A current name wins over a legacy one.
    assert store.normalize_entry({"provider": "old", "channel": "new"})["channel"] == "new"
    plain = {"sessionId": "y"}
    assert store.normalize_entry(plain) is plain


def test_fold_bare_and_full_newest_wins() -> None:
    raw = {
        "hook:bare-one": {"sessionId": "s", "updatedAt": 20, "model": "m-bare"},
        "agent:main:hook:bare-one": {"sessionId": "s", "updatedAt": 10},
        "agent:main:cron:x": {"sessionId": "c", "updatedAt": 5},
        "cron:x": {"sessionId": "c", "updatedAt": 50, "label": "newer"},
        "not-an-entry": [1, 2],
        "no-id": {"updatedAt": 3},
    }
    folded = store.fold(raw, "main")
    assert set(folded) == {"agent:main:hook:bare-one", "agent:main:cron:x"}
    bare = folded["agent:main:hook:bare-one"]
    assert bare.entry["model"] == "m-bare"
    assert sorted(bare.stored_keys) == ["agent:main:hook:bare-one", "hook:bare-one"]
    assert folded["agent:main:cron:x"].entry["label"] == "newer"


def test_fold_keeps_first_on_equal_or_missing_updated_at() -> None:
    raw = {
        "agent:main:a": {"sessionId": "first", "updatedAt": 7},
        "a": {"sessionId": "second", "updatedAt": 7},
        "agent:main:b": {"sessionId": "first"},
        "b": {"sessionId": "second", "updatedAt": "soon"},
    }
    folded = store.fold(raw, "main")
    assert folded["agent:main:a"].entry["sessionId"] == "first"
    assert folded["agent:main:b"].entry["sessionId"] == "first"


def test_fold_the_real_fixture_duplicate() -> None:
    folded = store.fold(store.read_store(MAIN_STORE), "main")
    assert len(folded) == 9
    entry = folded["agent:main:hook:bare-one"].entry
    assert entry["updatedAt"] == 1795292439844 and "model" in entry


def test_fold_other_agent_store() -> None:
    folded = store.fold({"cron:x": {"sessionId": "c", "updatedAt": 1}}, "research")
    assert list(folded) == ["agent:research:cron:x"]


def test_entry_helpers_move_bare_keys_to_full() -> None:
    raw: dict[str, Any] = {
        "hook:b": {"sessionId": "s", "updatedAt": 2},
        "agent:main:hook:b": {"sessionId": "s", "updatedAt": 1},
    }
    assert store.get_entry(raw, "main", "agent:main:hook:b") == {"sessionId": "s", "updatedAt": 2}
    store.set_entry(raw, "main", "agent:main:hook:b", {"sessionId": "s", "updatedAt": 3})
    assert raw == {"agent:main:hook:b": {"sessionId": "s", "updatedAt": 3}}
    raw["hook:b"] = {"sessionId": "s", "updatedAt": 9}
    assert store.remove_entry(raw, "main", "agent:main:hook:b") == {
        "sessionId": "s",
        "updatedAt": 9,
    }
    assert raw == {}
    assert store.remove_entry(raw, "main", "agent:main:none") is None


# -- write --------------------------------------------------------------------------------------


def test_update_keeps_unknown_fields_and_other_entries(tmp_path: Path) -> None:
    original = json.loads(MAIN_STORE.read_text())
    p = write(tmp_path / "agents" / "main" / "sessions" / "sessions.json", original)

    def mutate(s: dict[str, Any]) -> str:
        s["agent:main:main"]["label"] = "x"
        return "done"

    assert store.update_store(p, mutate) == "done"
    after = json.loads(p.read_text())
    expected = json.loads(json.dumps(original))
    expected["agent:main:main"]["label"] = "x"
    assert after == expected  # skillsSnapshot, systemPromptReport, origin... all kept
    assert list(after) == list(original)  # key order too


def test_write_format_mode_and_no_leftovers(tmp_path: Path) -> None:
    d = tmp_path / "agents" / "main" / "sessions"
    p = d / "sessions.json"
    store.update_store(p, lambda s: s.update({"agent:main:x": {"sessionId": "é", "updatedAt": 1}}))
    text = p.read_text(encoding="utf-8")
    assert text == json.dumps(
        {"agent:main:x": {"sessionId": "é", "updatedAt": 1}}, indent=2, ensure_ascii=False
    )
    assert stat.S_IMODE(p.stat().st_mode) == 0o600
    assert stat.S_IMODE(d.stat().st_mode) == 0o700
    assert sorted(os.listdir(d)) == ["sessions.json"]  # no .lock, no .tmp


def test_update_replaces_atomically(tmp_path: Path) -> None:
    """The store is replaced by rename, never rewritten in place: an open reader keeps the
    old inode's complete content."""
    p = write(tmp_path / "sessions.json", {"agent:main:a": {"sessionId": "a", "updatedAt": 1}})
    ino = p.stat().st_ino
    with open(p, "rb") as old:
        store.update_store(p, lambda s: s.clear())
        assert json.loads(old.read()) == {"agent:main:a": {"sessionId": "a", "updatedAt": 1}}
    assert p.stat().st_ino != ino
    assert json.loads(p.read_text()) == {}


def test_corrupt_store_is_never_overwritten(tmp_path: Path) -> None:
    p = tmp_path / "d" / "sessions.json"
    p.parent.mkdir()
    p.write_bytes(b'{"agent:main:a": {')
    called = []
    with pytest.raises(CorruptStateError):
        store.update_store(p, lambda s: called.append(1))
    assert called == []
    assert p.read_bytes() == b'{"agent:main:a": {'
    assert sorted(os.listdir(p.parent)) == ["sessions.json"]


def test_failing_mutation_writes_nothing_and_releases_the_lock(tmp_path: Path) -> None:
    p = write(tmp_path / "d" / "sessions.json", {"k": {"sessionId": "a", "updatedAt": 1}})
    before = p.read_bytes()

    def boom(s: dict[str, Any]) -> None:
        s.clear()
        raise RuntimeError("no")

    with pytest.raises(RuntimeError):
        store.update_store(p, boom)
    assert p.read_bytes() == before
    assert sorted(os.listdir(p.parent)) == ["sessions.json"]


WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from sessiontool.state.sessions_json import update_store

    path, who, n = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    for i in range(n):
        def add(s, i=i):
            s[f"agent:main:{who}:{i}"] = {"sessionId": f"{who}-{i}", "updatedAt": i}
            s.setdefault("counter", {"sessionId": "c", "updatedAt": 0})["updatedAt"] += 1
        update_store(path, add, timeout=30)
    """
)


def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    p = write(
        tmp_path / "agents" / "main" / "sessions" / "sessions.json",
        {"agent:main:keep": {"sessionId": "k", "updatedAt": 1, "skillsSnapshot": {"x": [1, 2]}}},
    )
    n_procs, n_each = 6, 15
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(p), f"w{j}", str(n_each)], stderr=subprocess.PIPE
        )
        for j in range(n_procs)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
    data = json.loads(p.read_text())
    for j in range(n_procs):
        for i in range(n_each):
            assert data[f"agent:main:w{j}:{i}"] == {"sessionId": f"w{j}-{i}", "updatedAt": i}
    assert data["counter"]["updatedAt"] == n_procs * n_each
    assert data["agent:main:keep"]["skillsSnapshot"] == {"x": [1, 2]}
    assert sorted(os.listdir(p.parent)) == ["sessions.json"]


def test_read_utf8_with_bom_and_refuse_other_encodings(tmp_path: Path) -> None:
    p = tmp_path / "s.json"
    p.write_bytes(b'\xef\xbb\xbf{"agent:main:a": {"sessionId": "\xc3\xa9", "updatedAt": 1}}')
    assert store.read_store(p)["agent:main:a"]["sessionId"] == "é"
    p.write_bytes('{"agent:main:a": {"sessionId": "é"}}'.encode("latin-1"))
    with pytest.raises(CorruptStateError, match="not UTF-8"):
        store.read_store(p)


# -- one key's stored forms -------------------------------------------------------------------

_KEY_PARTS = ["main", "dm:alice", "subagent:x", "global", "unknown", "agent:main:main"]
_STORED = _KEY_PARTS + [
    "agent:main:dm:alice",
    "agent:other:main",
    "agent:main:subagent:x",
    "agent:MAIN:main",
    "agent::main",
    "agent:main:",
]


def _by_scan_get(s: dict[str, Any], agent: str, full: str) -> Any:
    """The scan over every stored key that get_entry replaced: the reference."""
    from sessiontool.state.keys import stored_to_full

    sub = {k: v for k, v in s.items() if stored_to_full(k, agent) == full}
    f = store.fold(sub, agent).get(full)
    return f.entry if f else None


def test_one_keys_lookup_set_and_remove_match_a_scan_of_every_key() -> None:
    """get_entry / set_entry / remove_entry look only at a key's stored forms (the full key and
    its legacy bare form): the same answers as mapping every stored key, legacy pairs (the newer
    wins, ties to the one stored first) included."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from sessiontool.state.keys import stored_to_full

    entry = st.fixed_dictionaries(
        {"sessionId": st.sampled_from(["a", "b", "c"]), "updatedAt": st.integers(0, 3)}
    )
    stores = st.dictionaries(st.sampled_from(_STORED), entry | st.just("junk"), max_size=8)
    fulls = st.sampled_from(
        ["agent:main:main", "agent:main:dm:alice", "global", "agent:other:main", "agent:main:x"]
    )

    @settings(max_examples=300, deadline=None)
    @given(stores, st.sampled_from(["main", "other"]), fulls)
    def check(s: dict[str, Any], agent: str, full: str) -> None:
        assert store.get_entry(s, agent, full) == _by_scan_get(s, agent, full)
        after_set = dict(s)
        store.set_entry(after_set, agent, full, {"sessionId": "new"})
        expect = {k: v for k, v in s.items() if k == full or stored_to_full(k, agent) != full}
        expect[full] = {"sessionId": "new"}
        assert after_set == expect
        after_remove = dict(s)
        found = store.remove_entry(after_remove, agent, full)
        assert found == _by_scan_get(s, agent, full)
        assert after_remove == {k: v for k, v in s.items() if stored_to_full(k, agent) != full}

    check()
