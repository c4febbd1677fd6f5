"""The search index against a hostile or careless state dir: a planted link never makes SQLite
write outside the state dir, an in-place edit the stat cannot see is still found, and one bad
transcript costs only its own hits."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import FIXTURE_STATE, run_cli
from tests.test_index_catchup import DAY, T0, _conversation, _line, _make_state

INDEX = ("sessiontool", "index.sqlite")


def _search(*args: str) -> dict[str, Any]:
    proc = run_cli("search", *args, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def _other_program_db(path: Path) -> bytes:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE mine(x)")
    con.execute("INSERT INTO mine VALUES (1)")
    con.commit()
    con.close()
    return path.read_bytes()


@pytest.mark.parametrize("suffix", ["", "-wal", "-shm", "-journal"])
def test_a_link_planted_at_an_index_file_is_refused_and_nothing_outside_changes(
    state: Path, tmp_path: Path, suffix: str
) -> None:
    shutil.copytree(FIXTURE_STATE, state)
    (state / INDEX[0]).mkdir(exist_ok=True)
    other = tmp_path / "other.sqlite"
    before = _other_program_db(other)
    planted = state.joinpath(*INDEX).with_name(INDEX[1] + suffix)
    missing = tmp_path / "elsewhere" / "new.sqlite"
    missing.parent.mkdir()
    for target in (other, missing):
        if planted.is_symlink():
            planted.unlink()
        planted.symlink_to(target)
        for cmd in (["search", "book"], ["usage"]):
            proc = run_cli(*cmd)
            assert proc.returncode == 5, proc.stderr
            lines = proc.stderr.strip().splitlines()
            assert len(lines) == 1 and "link" in lines[0] and str(planted) in lines[0]
        assert other.read_bytes() == before
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("other")) == [
            "other.sqlite"
        ]
        assert not missing.exists()
    # Once the link is gone the index is built in the state dir as usual.
    planted.unlink()
    assert _search("book")["count"] > 0
    assert state.joinpath(*INDEX).is_file() and not state.joinpath(*INDEX).is_symlink()


def test_an_index_that_is_a_directory_is_exit_5_with_one_honest_line(state: Path) -> None:
    shutil.copytree(FIXTURE_STATE, state)
    index = state.joinpath(*INDEX)
    index.mkdir(parents=True)
    proc = run_cli("search", "book")
    assert proc.returncode == 5
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert "not a regular file" in lines[0] and "rebuilt" not in lines[0].split(":")[1]
    assert index.is_dir()


def _rewrite_keeping_size_and_mtime(path: Path, old: bytes, new: bytes) -> None:
    assert len(old) == len(new)
    st = path.stat()
    data = path.read_bytes()
    assert old in data
    with open(path, "r+b") as fh:  # in place, as `cp -p` onto it does
        fh.write(data.replace(old, new))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (
        st.st_size,
        st.st_mtime_ns,
        st.st_ino,
    )


def test_an_index_of_the_schema_before_is_rebuilt_silently(state: Path) -> None:
    """Schema 11 gave a transcript's digest and a virtual transcript's version a column each
    (schema 10 kept either in `files.tail`): an index left by the release before is rebuilt,
    never read with the other meaning, and says nothing (it is disposable). Its message rows
    are taken out first, so an index read as it is would answer no hit."""
    _make_state(state, {"agent:main:main": _conversation(1)})
    assert _search("alpha")["count"] == 8
    db = state.joinpath(*INDEX)
    con = sqlite3.connect(db)
    con.execute("ALTER TABLE files DROP COLUMN version")
    con.execute("ALTER TABLE files RENAME COLUMN digest TO tail")
    con.execute("DELETE FROM msgs")
    con.execute("PRAGMA user_version = 10")
    con.commit()
    con.close()
    proc = run_cli("search", "alpha", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["count"] == 8
    assert proc.stderr == ""
    con = sqlite3.connect(db)
    try:
        columns = [r[1] for r in con.execute("PRAGMA table_info(files)")]
        assert con.execute("PRAGMA user_version").fetchone() == (11,)
    finally:
        con.close()
    assert "tail" not in columns and {"digest", "version"} <= set(columns)


def test_same_size_rewrite_with_the_mtime_kept_is_seen(state: Path) -> None:
    path = _make_state(state, {"agent:main:main": _conversation(1)})["agent:main:main"]
    assert _search("alpha")["count"] == 8
    _rewrite_keeping_size_and_mtime(path, b"alpha", b"gamma")
    assert _search("gamma")["count"] == 8
    assert _search("alpha")["count"] == 0


def test_earlier_line_edited_to_the_same_length_then_an_append_is_seen(state: Path) -> None:
    path = _make_state(state, {"agent:main:main": _conversation(2)})["agent:main:main"]
    assert _search("alpha")["count"] == 14
    data = path.read_bytes()
    first = data.index(b"alpha question 0")
    path.write_bytes(data[:first] + b"kappa" + data[first + 5 :])
    with open(path, "ab") as fh:
        fh.write(_line("user", T0 + 3 * DAY, "appended words", 77))
    assert _search("kappa")["count"] == 1
    assert _search("alpha")["count"] == 13
    assert _search("appended")["count"] == 1
    # Every hit's snippet holds the word it was found by.
    for word in ("alpha", "kappa"):
        for hit in _search(word)["hits"]:
            assert word in hit["snippet"].lower()


def test_truncated_and_rewritten_with_the_same_first_bytes_is_seen(state: Path) -> None:
    path = _make_state(state, {"agent:main:main": _conversation(1)})["agent:main:main"]
    assert _search("alpha")["count"] == 8
    data = path.read_bytes()
    keep = data.index(b"alpha question 1")
    rest = data[keep:].replace(b"alpha", b"sigma")
    with open(path, "r+b") as fh:
        fh.truncate(0)
        fh.write(data[:keep] + rest + _line("user", T0 + DAY, "more", 80))
    assert _search("sigma")["count"] == 6
    assert _search("alpha")["count"] == 2


def test_a_transcript_that_became_a_directory_is_skipped_with_a_warning(state: Path) -> None:
    paths = _make_state(
        state,
        {
            "agent:main:main": _conversation(1, word="alpha"),
            "agent:main:other": _conversation(1, word="bravo"),
        },
    )
    assert _search("alpha OR bravo", "--limit", "100")["count"] == 16  # an index that knows both
    bad = paths["agent:main:other"]
    bad.unlink()
    bad.mkdir()
    for _ in range(2):
        proc = run_cli("search", "alpha OR bravo", "--limit", "100", "--json")
        assert proc.returncode == 0, proc.stderr
        out = json.loads(proc.stdout)
        assert out["count"] == 8
        assert {h["key"] for h in out["hits"]} == {"main"}
        warnings = [ln for ln in proc.stderr.splitlines() if str(bad) in ln]
        assert len(warnings) == 1 and "left out" in warnings[0]
    proc = run_cli("usage", "--json")
    assert proc.returncode == 0 and str(bad) in proc.stderr
    assert json.loads(proc.stdout)["total"]["turns"] == 4
    # Asked for that session: its error, with the documented exit code (a directory: 5).
    proc = run_cli("search", "bravo", "--session", "agent:main:other")
    assert proc.returncode == 5, proc.stderr
    assert str(bad) in proc.stderr and "internal error" not in proc.stderr
    # Back as a file with the same words: found again.
    bad.rmdir()
    bad.write_bytes(b"".join(_conversation(1, word="bravo")))
    assert _search("bravo")["count"] == 8
