"""The stat image a full check keeps with its snapshot (index/stamps.py): the next full check
(after a store write) compares every transcript's stat with it in one pass and catches up only
those that differ. It must find exactly what a full compare with the index's rows finds: a
transcript appended to, rewritten with its size and mtime kept, replaced, or new; and an image
that is damaged, or of another list of sessions, is never trusted."""

from __future__ import annotations

import json
import os
import sqlite3
from array import array
from pathlib import Path
from typing import Any

from tests.test_index_snapshot import (
    T0,
    _append,
    _count,
    _line,
    _make,
    _sessions_dir,
    _transcript,
    _write_store,
)


def _db(state: Path) -> sqlite3.Connection:
    return sqlite3.connect(state / "sessiontool" / "index.sqlite")


def _image(state: Path) -> tuple[list[int], list[int]]:
    """The one image kept: its file ids and stamps."""
    con = _db(state)
    try:
        rows = con.execute("SELECT ids, stamps FROM snap_images").fetchall()
    finally:
        con.close()
    assert len(rows) == 1, rows
    ids, stamps = array("q"), array("q")
    ids.frombytes(rows[0][0])
    stamps.frombytes(rows[0][1])
    return list(ids), list(stamps)


def _files(state: Path) -> dict[int, list[int]]:
    con = _db(state)
    try:
        got = con.execute("SELECT id, dev, ino, size, mtime, ctime FROM files").fetchall()
    finally:
        con.close()
    return {r[0]: list(r[1:]) for r in got}


def _rewrite_store(state: Path, store: dict[str, Any]) -> None:
    """A store write that changes no session (the markers move: the next search checks in full)."""
    _write_store(state, store)


def test_the_image_is_the_index_own_stamps_in_the_listing_order(state: Path) -> None:
    _make(state, 6, aged=True)
    assert _count("word3") == 1
    ids, stamps = _image(state)
    files = _files(state)
    assert sorted(ids) == sorted(files)
    for i, file_id in enumerate(ids):
        assert stamps[i * 5 : i * 5 + 5] == files[file_id]
        st = _transcript(state, i).stat()
        assert files[file_id] == [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def test_a_full_check_by_the_image_catches_up_what_changed(state: Path) -> None:
    store = _make(state, 8, aged=True)
    assert _count("hello") == 8
    _rewrite_store(state, store)
    assert _count("hello") == 8  # a full check by the image: nothing changed
    _append(_transcript(state, 2), "zebra", keep_mtime=True)  # idle, dated back: not hot
    p = _transcript(state, 5)
    st = p.stat()
    p.write_bytes(p.read_bytes().replace(b"word5", b"wordX"))  # the same size...
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))  # ...and mtime: only the ctime moved
    assert _count("zebra") == 0  # the markers did not move: the hot set alone, none hot
    _rewrite_store(state, store)
    assert _count("zebra") == 1
    assert _count("wordX") == 1 and _count("word5") == 0
    ids, stamps = _image(state)  # kept again, with the stamps the index has now
    files = _files(state)
    assert [stamps[i * 5 : i * 5 + 5] for i in range(len(ids))] == [files[i] for i in ids]
    _rewrite_store(state, store)
    assert _count("zebra") == 1 and _count("hello") == 8


def test_a_replaced_transcript_and_a_new_session_are_found(state: Path) -> None:
    store = _make(state, 5, aged=True)
    assert _count("hello") == 5
    p = _transcript(state, 1)
    tmp = p.with_name(p.name + ".new")
    tmp.write_bytes(_line("user", "quokka", 0))
    st = p.stat()
    os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
    tmp.replace(p)  # another inode: the image's stamp of it is no longer true
    _rewrite_store(state, store)
    assert _count("quokka") == 1 and _count("word1") == 0
    d = _sessions_dir(state)
    (d / "new-session.jsonl").write_bytes(_line("user", "narwhal", 0))
    store["agent:main:dm:new"] = {"sessionId": "new-session", "updatedAt": T0}
    _rewrite_store(state, store)  # another list of sessions: checked in full
    assert _count("narwhal") == 1 and _count("hello") == 4


def test_a_damaged_image_is_not_trusted(state: Path) -> None:
    store = _make(state, 4, aged=True)
    assert _count("hello") == 4
    _append(_transcript(state, 0), "ocelot", keep_mtime=True)
    con = _db(state)
    try:
        ids, stamps = array("q"), array("q")
        got = con.execute("SELECT ids, stamps FROM snap_images").fetchone()
        ids.frombytes(got[0])
        stamps.frombytes(got[1])
        st = _transcript(state, 0).stat()
        stamps[0:5] = array("q", [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns])
        # An image claiming the appended file as it is now, but cut short by a byte: refused.
        con.execute("UPDATE snap_images SET stamps = ?", (stamps.tobytes()[:-1],))
        con.commit()
    finally:
        con.close()
    _rewrite_store(state, store)
    assert _count("ocelot") == 1


def test_an_image_of_another_list_is_not_used(state: Path) -> None:
    store = _make(state, 4, aged=True)
    assert _count("hello") == 4
    _append(_transcript(state, 3), "axolotl", keep_mtime=True)
    ids, stamps = _image(state)
    st = _transcript(state, 3).stat()
    at = ids.index(max(ids))  # the last session made is the last file indexed
    stamps[at * 5 : at * 5 + 5] = [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]
    con = _db(state)
    try:
        # The appended file claimed as it is now, under the digest of another list: not used.
        con.execute(
            "UPDATE snap_images SET digest = ?, stamps = ?",
            (b"\0" * 32, array("q", stamps).tobytes()),
        )
        con.commit()
    finally:
        con.close()
    _rewrite_store(state, store)
    assert _count("axolotl") == 1
    del store["agent:main:dm:u3"]  # the session is gone: its transcript is no longer searched
    _rewrite_store(state, store)
    assert _count("axolotl") == 0 and _count("hello") == 3
    got = json.loads(json.dumps(_image(state)[0]))
    assert len(got) == 3
