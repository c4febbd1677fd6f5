"""How the index is built: `usage` reads the turns alone (no text, no full-text rows) and a later
`search` adds the text without counting a turn twice; a build interrupted with Ctrl-C keeps
the parts it committed and the next command answers as an uninterrupted one; a long build shows
a progress line on a terminal and never in piped output or with --json."""

from __future__ import annotations

import json
import os
import pty
import select
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import run_cli
from tests.test_index_catchup import DAY, T0, _conversation, _dump, _line, _make_state

INDEX = ("sessiontool", "index.sqlite")
SESSIONS = {f"agent:main:dm:s{i}": _conversation(3, word=f"alpha{i}") for i in range(6)}
ONE_AT_A_TIME = {"SESSIONTOOL_INDEX_WORKERS": "0"}
TWO_WORKERS = {"SESSIONTOOL_INDEX_PARALLEL_MIN": "1", "SESSIONTOOL_INDEX_WORKERS": "2"}


def _cli(state: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    proc = run_cli(*args, "--json", env={"SESSIONTOOL_STATE_DIR": str(state), **(env or {})})
    assert proc.returncode == 0, proc.stderr
    assert "internal error" not in proc.stderr
    return json.loads(proc.stdout)


def _answers(state: Path) -> Any:
    found = _cli(state, "search", "alpha0 OR alpha3 OR bravo", "--limit", "100")
    for h in found["hits"]:
        h["transcriptPath"] = Path(h["transcriptPath"]).name
    return found, _cli(state, "usage", "--by", "day"), _cli(state, "usage", "--by", "session")


def _names(dump: Any) -> Any:
    return {k: [(Path(r[0]).name, *r[1:]) for r in rows] for k, rows in dump.items()}


def _db(state: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{state.joinpath(*INDEX)}?mode=ro", uri=True)


def _count(state: Path, sql: str) -> int:
    con = _db(state)
    try:
        return int(con.execute(sql).fetchone()[0])
    finally:
        con.close()


def test_usage_builds_no_text_and_a_later_search_adds_it(tmp_path: Path) -> None:
    first, second = tmp_path / "usage-first", tmp_path / "search-first"
    paths = _make_state(first, SESSIONS)
    shutil.copytree(first, second)
    usage = _cli(first, "usage", "--by", "day")
    assert usage["total"]["turns"] == 6 * 11
    # The turns and per-day sums only: no message rows, no words.
    assert _count(first, "SELECT count(*) FROM msgs") == 0
    assert _count(first, "SELECT count(*) FROM files WHERE text = 0") == 6
    assert _count(first, "SELECT sum(turns) FROM days") == 6 * 11
    fts_pages = _count(first, "SELECT count(*) FROM fts_data")

    # An append, read by usage alone (turns only), then by a search (text from the start).
    for state in (first, second):
        with open(state / paths["agent:main:dm:s0"].relative_to(first), "ab") as fh:
            fh.write(_line("user", T0 + 4 * DAY, "bravo appended", 90))
            fh.write(_line("assistant", T0 + 4 * DAY + 5, "bravo answered", 91))
    assert _cli(second, "search", "alpha1")["count"] > 0  # second: text from its first build
    after = _cli(first, "usage", "--by", "day")
    assert after["total"]["turns"] == 6 * 11 + 1
    assert _count(first, "SELECT count(*) FROM msgs") == 0
    assert _count(first, "SELECT count(*) FROM fts_data") == fts_pages
    assert _answers(first) == _answers(second)
    assert _names(_dump(first)) == _names(_dump(second))
    assert _count(first, "SELECT count(*) FROM files WHERE text = 0") == 0
    # A search over a text-less index answers as one over an index built by search.
    con = _db(first)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        con.close()


def _start(state: Path, args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    full = {**os.environ, "SESSIONTOOL_STATE_DIR": str(state), **env}
    return subprocess.Popen(
        [sys.executable, "-m", "sessiontool", *args],
        env=full,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_pause(proc: subprocess.Popen[str]) -> None:
    assert proc.stderr is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if "test pause: index-part" in line:
            return
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise AssertionError(f"the build never paused (exit {proc.wait()})")


@pytest.mark.parametrize(
    ("env", "kept"),
    [
        ({**ONE_AT_A_TIME, "SESSIONTOOL_INDEX_COMMIT_BYTES": "1"}, 1),
        ({**TWO_WORKERS, "SESSIONTOOL_INDEX_COMMIT_BYTES": "1"}, 1),
        (ONE_AT_A_TIME, 0),
    ],
    ids=["committed-part-one-process", "committed-part-workers", "nothing-committed-yet"],
)
@pytest.mark.parametrize("command", ["usage", "search"])
def test_ctrl_c_during_a_first_build_leaves_an_index_the_next_command_continues(
    tmp_path: Path, env: dict[str, str], kept: int, command: str
) -> None:
    state, fresh = tmp_path / "interrupted", tmp_path / "fresh"
    _make_state(state, SESSIONS)
    shutil.copytree(state, fresh)
    args = ["usage", "--json"] if command == "usage" else ["search", "alpha2", "--json"]
    proc = _start(state, args, {**env, "SESSIONTOOL_TEST_PAUSE": "index-part:60"})
    _wait_for_pause(proc)  # one transcript read and written; a commit after it when kept
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "internal error" not in err and "Traceback" not in err and out == ""
    con = _db(state)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        read = con.execute("SELECT count(*) FROM files WHERE off > 0").fetchone()[0]
        # What was committed is whole: each file read has all its turns, the others none.
        per_file = con.execute(
            "SELECT f.off > 0, coalesce(sum(d.turns), 0) FROM files f LEFT JOIN days d "
            "ON d.file_id = f.id GROUP BY f.id"
        ).fetchall()
    finally:
        con.close()
    assert read == kept
    assert all((n == 11) if done else (n == 0) for done, n in per_file), per_file
    # The next commands answer as if nothing had happened.
    assert _answers(state) == _answers(fresh)
    assert _names(_dump(state)) == _names(_dump(fresh))


def _on_a_terminal(state: Path, args: list[str], env: dict[str, str]) -> str:
    """Run with stdout and stderr on a pseudo-terminal; what it showed there."""
    master, slave = pty.openpty()
    full = {**os.environ, "SESSIONTOOL_STATE_DIR": str(state), "TERM": "xterm", **env}
    proc = subprocess.Popen(
        [sys.executable, "-m", "sessiontool", *args],
        env=full,
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
    )
    os.close(slave)
    got = bytearray()
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the last writer closed the terminal
                    break
                if not chunk:
                    break
                got += chunk
            elif proc.poll() is not None:
                break
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
        assert proc.wait(timeout=30) == 0, got.decode(errors="replace")
    return got.decode(errors="replace")


# Six transcripts, each followed by a 0.3 s pause: a build of about two seconds.
SLOW = {**ONE_AT_A_TIME, "SESSIONTOOL_TEST_PAUSE": "index-part:0.3"}


@pytest.mark.parametrize("args", [["usage"], ["search", "alpha1"]])
def test_a_long_build_shows_progress_on_a_terminal(tmp_path: Path, args: list[str]) -> None:
    state = tmp_path / args[0]
    _make_state(state, SESSIONS)
    shown = _on_a_terminal(state, args, SLOW)
    assert "indexing transcripts" in shown and "/6 files" in shown, shown
    assert "internal error" not in shown
    # Warm: nothing to catch up, no line.
    assert "indexing" not in _on_a_terminal(state, args, SLOW)


def test_a_long_build_shows_no_progress_with_json_or_piped(tmp_path: Path) -> None:
    # With --json, even on a terminal: the JSON and nothing else.
    state = tmp_path / "json"
    _make_state(state, SESSIONS)
    shown = _on_a_terminal(state, ["usage", "--json"], SLOW)
    assert "indexing" not in shown
    assert json.loads(shown[shown.index("{") :])["total"]["turns"] == 66

    # Piped: never.
    state = tmp_path / "piped"
    _make_state(state, SESSIONS)
    proc = run_cli("usage", env={"SESSIONTOOL_STATE_DIR": str(state), **SLOW})
    assert proc.returncode == 0, proc.stderr
    assert "indexing" not in proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1].startswith("TOTAL\t")


def test_counts_json_reads_but_no_integer_holds_count_as_zero(state: Path) -> None:
    """`1e400` (infinity to Python's json) or NaN as a token count: 0, not an internal error."""
    paths = _make_state(state, {"agent:main:main": _conversation(1)})
    with open(paths["agent:main:main"], "ab") as fh:
        for n, value in enumerate((b"1e400", b"-1e400", b"NaN", b"Infinity")):
            fh.write(
                b'{"type":"message","id":"x%d","message":{"role":"assistant","timestamp":%d,'
                b'"content":"big %d","usage":{"input":%s,"output":5}}}\n'
                % (n, T0 + DAY + n, n, value)
            )
    total = _cli(state, "usage")["total"]
    assert total["turns"] == 4 + 4 and total["output"] == (10 + 11 + 12 + 13) + 4 * 5
    assert total["input"] == 100 + 101 + 102 + 103  # the four counts read as 0
    assert _cli(state, "search", "big")["count"] == 4


@pytest.mark.parametrize("first", ["usage", "search"])
def test_numbers_past_64_bits_are_no_count_or_time(state: Path, first: str) -> None:
    """A count, time or cost past SQLite's 64-bit INTEGER (JSON has no bound; the fuzz's
    hostile gateway sent one): 0 or no time, not 'internal error: OverflowError'."""
    paths = _make_state(state, {"agent:main:main": _conversation(1)})
    huge = b"9" * 30
    with open(paths["agent:main:main"], "ab") as fh:
        for n, (ts, count) in enumerate(
            ((huge, b"7"), (b"1e400", huge), (b"-" + huge, b"-" + huge), (b"%d" % (T0 + DAY), huge))
        ):
            fh.write(
                b'{"type":"message","id":"h%d","timestamp":"2026-01-02T00:00:00.000Z",'
                b'"message":{"role":"assistant","timestamp":%s,"content":"huge %d",'
                b'"usage":{"input":%s,"output":5,"cost":{"total":%s}}}}\n' % (n, ts, n, count, huge)
            )
    got = {
        cmd: _cli(state, *args)
        for cmd, args in (
            (first, [first] + (["huge"] if first == "search" else [])),
            ("other", ["search", "huge"] if first == "usage" else ["usage"]),
        )
    }
    usage = got["usage" if first == "usage" else "other"]["total"]
    hits = got["search" if first == "search" else "other"]
    assert usage["turns"] == 4 + 4 and usage["input"] == 100 + 101 + 102 + 103 + 7
    assert hits["count"] == 4


def test_first_builds_at_once_share_the_work_and_agree(tmp_path: Path) -> None:
    """Several commands building the same index at once, each committing after every file:
    one waits for another's part, sees it written and plans again; every answer is right and
    no turn or row is written twice."""
    state, fresh = tmp_path / "busy", tmp_path / "fresh"
    _make_state(state, SESSIONS)
    shutil.copytree(state, fresh)
    env = {**ONE_AT_A_TIME, "SESSIONTOOL_INDEX_COMMIT_BYTES": "1"}
    # Each pauses between a commit and taking the lock again: the others get in there.
    env["SESSIONTOOL_TEST_PAUSE"] = "index-commit:0.3"
    procs = [_start(state, ["usage", "--by", "day", "--json"], env) for _ in range(3)]
    query = ["search", "alpha0 OR alpha3 OR bravo", "--limit", "100", "--json"]
    procs.append(_start(state, query, env))
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (_out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
        assert "internal error" not in err
    expected = _answers(fresh)
    assert all(json.loads(out) == expected[1] for out, _ in outs[:3])
    found = json.loads(outs[3][0])
    for h in found["hits"]:
        h["transcriptPath"] = Path(h["transcriptPath"]).name
    assert found == expected[0]
    assert _answers(state) == expected
    assert _names(_dump(state)) == _names(_dump(fresh))
