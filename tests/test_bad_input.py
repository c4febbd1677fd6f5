"""Hostile and broken input: keys that would name paths, entries pointing outside the state dir,
damaged transcripts and stores, bad options and config. Each must fail cleanly (one stderr line,
the right exit code, JSON on stdout with --json) or be read around, and never change a file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sessiontool.errors import UsageError
from sessiontool.sessions.resolve import validate_key_input
from sessiontool.state import paths
from tests.helpers import run_cli, run_json, write_config

from .test_fixtures import copy_state

SECRET = "TOP-SECRET-do-not-leak"


def make_state(root: Path, store: dict[str, Any] | str | bytes, agent: str = "main") -> Path:
    d = root / "agents" / agent / "sessions"
    d.mkdir(parents=True, exist_ok=True)
    if isinstance(store, dict):
        (d / "sessions.json").write_text(json.dumps(store))
    elif isinstance(store, str):
        (d / "sessions.json").write_text(store)
    else:
        (d / "sessions.json").write_bytes(store)
    return d


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("sessiontool: error:")]


@pytest.mark.parametrize(
    "key",
    ["../x", "/etc/passwd", "agent:main:../../x", "..\\x", "a\x01b", "ma\nin"],
    ids=["dotdot", "absolute", "agent-dotdot", "backslash", "control", "newline"],
)
def test_path_like_keys_are_refused(tmp_path: Path, key: str) -> None:
    state = copy_state(tmp_path / "state")
    proc = run_cli("--state-dir", str(state), "history", key, "--json")
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.splitlines()) == 1
    assert error_lines(proc.stderr) and "invalid session key" in proc.stderr
    data = json.loads(proc.stdout)
    assert (
        data["status"] == "error" and data["code"] == 2 and "invalid session key" in data["error"]
    )


def test_nul_in_keys_and_ids_is_refused() -> None:
    """argv cannot carry NUL, so check the guards themselves."""
    with pytest.raises(UsageError):
        validate_key_input("agent:main:a\x00b")
    for bad in ("a\x00b", "../x", "/etc/passwd", "..", ".", "", "a/b", "x" * 300):
        assert not paths.is_plain_name(bad)
        with pytest.raises(UsageError):
            paths.require_plain_name(bad)
    sp = paths.StatePaths(Path("/state"))
    with pytest.raises(UsageError):
        sp.transcript("main", "../../etc/passwd")
    with pytest.raises(UsageError):
        sp.sessions_dir("../x")


def test_hostile_ids_in_the_store_never_become_paths(tmp_path: Path) -> None:
    state = tmp_path / "state"
    (tmp_path / "secret.jsonl").write_text(
        json.dumps({"type": "message", "message": {"role": "user", "content": SECRET}}) + "\n"
    )
    make_state(
        state,
        {
            "agent:main:dotdot": {"sessionId": "../../secret", "updatedAt": 3},
            "agent:main:nul": {"sessionId": "a\u0000b", "updatedAt": 2},
            "agent:main:abs": {"sessionId": str(tmp_path / "secret"), "updatedAt": 1},
        },
    )
    rc, data = run_json("--state-dir", str(state), "list", "--message-limit", "5")
    assert rc == 0
    assert data["count"] == 3
    for row in data["sessions"]:
        assert "transcriptPath" not in row
        assert row["messages"] == []
    for key in ("agent:main:dotdot", "agent:main:nul", "agent:main:abs"):
        proc = run_cli("--state-dir", str(state), "history", key, "--json", "--include-tools")
        assert proc.returncode == 0
        assert SECRET not in proc.stdout
        assert json.loads(proc.stdout)["messages"] == []


@pytest.mark.parametrize("where", ["absolute", "relative", "sibling-agent"])
def test_session_file_outside_the_sessions_dir_is_not_read(tmp_path: Path, where: str) -> None:
    state = tmp_path / "state"
    secret_line = (
        json.dumps({"type": "message", "message": {"role": "user", "content": SECRET}}) + "\n"
    )
    if where == "sibling-agent":
        outside = state / "agents" / "other" / "sessions" / "leak.jsonl"
    else:
        outside = tmp_path / "leak.jsonl"
    outside.parent.mkdir(parents=True, exist_ok=True)
    outside.write_text(secret_line)
    session_file = (
        str(outside)
        if where == "absolute"
        else "../../other/sessions/leak.jsonl"
        if where == "sibling-agent"
        else "../../../../leak.jsonl"
    )
    d = make_state(
        state, {"agent:main:x": {"sessionId": "own", "updatedAt": 1, "sessionFile": session_file}}
    )
    own_line = (
        json.dumps({"type": "message", "message": {"role": "user", "content": "mine"}}) + "\n"
    )
    (d / "own.jsonl").write_text(own_line)
    listed = run_cli("--state-dir", str(state), "list", "--json", "--message-limit", "5")
    shown = run_cli("--state-dir", str(state), "history", "agent:main:x", "--json")
    for proc in (listed, shown):
        assert proc.returncode == 0, proc.stderr
        assert SECRET not in proc.stdout
    assert json.loads(shown.stdout)["messages"] == [{"role": "user", "content": "mine"}]
    row = json.loads(listed.stdout)["sessions"][0]
    assert row["transcriptPath"] == str(d / "own.jsonl")


def _damaged_transcript(d: Path) -> None:
    good = [
        json.dumps(
            {
                "type": "session",
                "version": 3,
                "id": "t1",
                "timestamp": "2026-01-01T00:00:00.000Z",
                "cwd": "/",
            }
        )
    ]
    for i in range(4):
        good.append(
            json.dumps(
                {
                    "type": "message",
                    "id": f"{i:08x}",
                    "message": {"role": "user", "content": f"m{i}"},
                }
            )
        )
    lines = [
        good[0].encode(),
        good[1].encode(),
        b"",
        b"   ",
        good[2].encode(),
        b"this is not json",
        b'{"type":"message","message":{"role":"user","content":"bad \xff\xfe bytes"}}',
        good[3].encode(),
        b"",
        good[4].encode(),
    ]
    # The last line is torn: a writer died in the middle of it.
    (d / "t1.jsonl").write_bytes(b"\n".join(lines) + b'\n{"type":"message","message":{"role":"us')


@pytest.mark.parametrize("command", ["history", "list"])
def test_damaged_transcript_is_read_around_with_one_warning(tmp_path: Path, command: str) -> None:
    state = tmp_path / "state"
    d = make_state(state, {"agent:main:main": {"sessionId": "t1", "updatedAt": 1}})
    _damaged_transcript(d)
    before = (d / "t1.jsonl").read_bytes()
    args = ("history", "main") if command == "history" else ("list", "--message-limit", "20")
    proc = run_cli("--state-dir", str(state), *args, "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    msgs = data["messages"] if command == "history" else data["sessions"][0]["messages"]
    assert [m["content"] for m in msgs] == ["m0", "m1", "m2", "m3"]
    warnings = proc.stderr.splitlines()
    assert len(warnings) == 1, proc.stderr
    assert warnings[0].startswith("sessiontool: warning:")
    assert "t1.jsonl" in warnings[0] and "2 " in warnings[0]  # not JSON + not UTF-8
    assert (d / "t1.jsonl").read_bytes() == before


def test_only_a_torn_last_line_is_silent(tmp_path: Path) -> None:
    state = tmp_path / "state"
    d = make_state(state, {"agent:main:main": {"sessionId": "t1", "updatedAt": 1}})
    line = json.dumps({"type": "message", "message": {"role": "user", "content": "ok"}})
    (d / "t1.jsonl").write_text(line + "\n\n" + line[:20])
    proc = run_cli("--state-dir", str(state), "history", "main", "--json")
    assert proc.returncode == 0 and proc.stderr == ""
    assert len(json.loads(proc.stdout)["messages"]) == 1


@pytest.mark.parametrize(
    "content",
    [
        b'{"agent:main:main": {"sessionId": "x", ',
        b"[1, 2, 3]",
        b'"a string"',
        b"\xff\xfe{}",
        b"null",
    ],
    ids=["truncated", "array", "string", "binary", "null"],
)
def test_unreadable_store_is_exit_5_and_untouched(tmp_path: Path, content: bytes) -> None:
    state = tmp_path / "state"
    d = make_state(state, content)
    store = d / "sessions.json"
    mtime = store.stat().st_mtime_ns
    for args in (("list",), ("history", "main", "--json"), ("list", "--all-agents", "--json")):
        proc = run_cli("--state-dir", str(state), *args)
        assert proc.returncode == 5, (args, proc.stderr)
        errs = error_lines(proc.stderr)
        assert len(errs) == 1 and str(store) in errs[0]
        if "--json" in args:
            data = json.loads(proc.stdout)
            assert data["status"] == "error" and data["code"] == 5 and str(store) in data["error"]
        else:
            assert proc.stdout == ""
    assert store.read_bytes() == content
    assert store.stat().st_mtime_ns == mtime
    assert sorted(p.name for p in d.iterdir()) == ["sessions.json"]


def test_parse_position_is_in_the_message(tmp_path: Path) -> None:
    state = tmp_path / "state"
    make_state(state, '{\n  "a": {"sessionId": "x", "updatedAt": 1},\n  "b": oops\n}')
    proc = run_cli("--state-dir", str(state), "list")
    assert proc.returncode == 5
    assert "line 3" in proc.stderr


def test_json5_store_is_accepted(tmp_path: Path) -> None:
    """OpenClaw reads stores with a JSON5 parser, so a hand-edited one with comments works."""
    state = tmp_path / "state"
    make_state(state, "{\n // edited by hand\n 'agent:main:x': {sessionId: 'x', updatedAt: 5,},\n}")
    rc, data = run_json("--state-dir", str(state), "list")
    assert rc == 0 and [r["key"] for r in data["sessions"]] == ["agent:main:x"]


def test_missing_state_dir_is_not_found_and_creates_nothing(tmp_path: Path) -> None:
    """A --state-dir that does not exist (a typo such as ~/.openclw) is exit 3, not an empty
    listing; the environment's state dir may not exist yet (nothing written): empty."""
    state = tmp_path / "does" / "not" / "exist"
    proc = run_cli("--state-dir", str(state), "list", "--json")
    assert proc.returncode == 3
    assert json.loads(proc.stdout)["code"] == 3
    assert proc.stderr.startswith(f"sessiontool: error: state dir {state} does not exist\n")
    assert not (tmp_path / "does").exists()
    proc = run_cli("list", "--json", env={"SESSIONTOOL_STATE_DIR": str(state)})
    assert proc.returncode == 0
    assert proc.stdout == '{"count":0,"hasMore":false,"limitApplied":200,"sessions":[]}\n'
    assert proc.stderr == ""
    assert not (tmp_path / "does").exists()


def test_history_in_missing_state_dir_is_not_found(tmp_path: Path) -> None:
    state = tmp_path / "nope"
    proc = run_cli("--state-dir", str(state), "history", "main")
    assert proc.returncode == 3
    assert not state.exists()


def test_unknown_kind_lists_the_valid_ones(tmp_path: Path) -> None:
    proc = run_cli("list", "--kinds", "main,bogus")
    assert proc.returncode == 2
    errs = error_lines(proc.stderr)
    assert len(errs) == 1 and "bogus" in errs[0]
    for kind in ("main", "group", "cron", "hook", "node", "other"):
        assert kind in errs[0]
    rc, data = run_json("list", "--kinds", "bogus")
    assert rc == 2 and data == {"status": "error", "error": data["error"], "code": 2}


@pytest.mark.parametrize(
    "args",
    [
        ("list", "--limit", "0"),
        ("list", "--limit", "lots"),
        ("list", "--active-minutes", "0"),
        ("list", "--active-minutes", "-5"),
        ("list", "--active-minutes", "soon"),
        ("list", "--message-limit", "-1"),
        ("list", "--since", "yesterday-ish"),
        ("list", "--no-such-option"),
        ("history", "main", "--format", "xml"),
        ("history", "main", "--limit", "-3"),
        ("history",),
    ],
)
def test_bad_options_are_usage_errors(args: tuple[str, ...]) -> None:
    proc = run_cli(*args, "--json")
    assert proc.returncode == 2, proc.stderr
    assert len(error_lines(proc.stderr)) == 1
    assert "Traceback" not in proc.stderr
    data = json.loads(proc.stdout)
    assert data["status"] == "error" and data["code"] == 2 and data["error"]


def test_json_flag_before_the_command_also_reports_errors_as_json(tmp_path: Path) -> None:
    proc = run_cli("--json", "history", "agent:main:nothing")
    assert proc.returncode == 3
    data = json.loads(proc.stdout)
    assert data["status"] == "error" and data["code"] == 3


def test_bad_config_file_names_the_file(tmp_path: Path, state: Path) -> None:
    state.mkdir(parents=True)
    cfg = state / "sessiontool.json5"
    cfg.write_text("{ agents: [ }")
    proc = run_cli("list")
    assert proc.returncode == 2
    errs = error_lines(proc.stderr)
    assert len(errs) == 1 and str(cfg) in errs[0]
    rc, data = run_json("list")
    assert rc == 2 and str(cfg) in data["error"]


def test_bad_config_value_names_file_and_key(state: Path) -> None:
    cfg = write_config(
        state, {"agents": {"list": [{"id": "main", "runner": {"type": "telepathy"}}]}}
    )
    proc = run_cli("list")
    assert proc.returncode == 2
    assert str(cfg) in proc.stderr
    assert "agents.list[0].runner.type" in proc.stderr
    assert "telepathy" in proc.stderr


def test_missing_explicit_config_is_exit_2(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json5"
    proc = run_cli("--config", str(missing), "list")
    assert proc.returncode == 2 and str(missing) in proc.stderr
    env_proc = run_cli("list", env={"SESSIONTOOL_CONFIG": str(missing)})
    assert env_proc.returncode == 2 and str(missing) in env_proc.stderr


def test_no_traceback_for_unexpected_store_shapes(tmp_path: Path) -> None:
    """Entries of the wrong shape are skipped, not crashed on."""
    state = tmp_path / "state"
    make_state(
        state,
        {
            "agent:main:a": {"sessionId": "a", "updatedAt": "yesterday", "totalTokens": "many"},
            "agent:main:b": {"sessionId": 42, "updatedAt": 1},
            "agent:main:c": [],
            "agent:main:d": {"sessionId": "d", "updatedAt": True, "deliveryContext": "x"},
        },
    )
    proc = run_cli("--state-dir", str(state), "list", "--json", "--message-limit", "3")
    assert proc.returncode == 0, proc.stderr
    keys = [r["key"] for r in json.loads(proc.stdout)["sessions"]]
    assert sorted(keys) == ["agent:main:a", "agent:main:d"]
    assert run_cli("--state-dir", str(state), "list").returncode == 0


def test_transcript_that_is_a_directory(tmp_path: Path) -> None:
    state = tmp_path / "state"
    d = make_state(state, {"agent:main:main": {"sessionId": "t1", "updatedAt": 1}})
    (d / "t1.jsonl").mkdir()
    rc, data = run_json("--state-dir", str(state), "history", "main")
    assert rc == 0 and data["messages"] == []
