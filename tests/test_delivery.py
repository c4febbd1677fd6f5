"""Delivery (spec §7): target resolution, the outbox line, policy, the delivery command, the
transcript mirror, and reading / following the outbox (also through the real CLI)."""

from __future__ import annotations

import json
import os
import select
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sessiontool.flow.delivery import (
    deliver,
    follow_deliveries,
    mirror_message,
    read_deliveries,
    resolve_target,
)
from sessiontool.state.config import Config
from sessiontool.state.paths import StatePaths
from tests.helpers import run_cli, run_json

GROUP_KEY = "agent:main:discord:group:42"
DM_KEY = "agent:main:dm:alice"
RECORD_FIELDS = {
    "ts",
    "runId",
    "sessionKey",
    "mode",
    "channel",
    "to",
    "accountId",
    "text",
    "status",
}


def write_store(state: Path, agent: str, store: dict[str, Any]) -> Path:
    d = state / "agents" / agent / "sessions"
    d.mkdir(parents=True, exist_ok=True)
    (d / "sessions.json").write_text(json.dumps(store))
    return d


def outbox_lines(state: Path) -> list[dict[str, Any]]:
    path = state / "sessiontool" / "deliveries.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def transcript_messages(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line)["message"] for line in path.read_text().splitlines()[1:]]


@pytest.fixture
def sessions(state: Path) -> Path:
    return write_store(
        state,
        "main",
        {
            GROUP_KEY: {
                "sessionId": "group-sess",
                "updatedAt": 1,
                "channel": "webchat",
                "chatType": "group",
                "deliveryContext": {"channel": "discord", "to": "group:42", "accountId": "bot-1"},
            },
            DM_KEY: {
                "sessionId": "dm-sess",
                "updatedAt": 2,
                "deliveryContext": {"channel": "telegram", "to": "12345"},
                "lastAccountId": "acct-9",
            },
            "agent:main:main": {"sessionId": "main-sess", "updatedAt": 3},
        },
    )


# -- resolve_target ----------------------------------------------------------------------------


def test_target_from_group_key_beats_entry_routing() -> None:
    entry = {"deliveryContext": {"channel": "webchat", "to": "x"}, "lastChannel": "webchat"}
    assert resolve_target("agent:main:telegram:group:-100777", entry) == (
        "telegram",
        "group:-100777",
        None,
    )
    assert resolve_target("agent:main:discord:channel:987", None) == (
        "discord",
        "channel:987",
        None,
    )


def test_target_group_key_keeps_account_of_same_channel() -> None:
    entry = {"deliveryContext": {"channel": "discord", "accountId": "bot-1"}}
    assert resolve_target(GROUP_KEY, entry) == ("discord", "group:42", "bot-1")


def test_target_from_delivery_context_and_last_fields() -> None:
    entry = {
        "deliveryContext": {"channel": "telegram", "to": "12345", "accountId": "a"},
        "lastTo": "zzz",
    }
    assert resolve_target(DM_KEY, entry) == ("telegram", "12345", "a")
    legacy = {"lastChannel": "whatsapp", "lastTo": "+1555", "lastAccountId": "w"}
    assert resolve_target(DM_KEY, legacy) == ("whatsapp", "+1555", "w")


def test_target_missing() -> None:
    assert resolve_target("agent:main:main", {}) == (None, None, None)
    assert resolve_target("agent:main:main", None) == (None, None, None)


# -- deliver -----------------------------------------------------------------------------------


def test_deliver_without_command_records_and_mirrors(state: Path, sessions: Path) -> None:
    paths = StatePaths(state)
    rec = deliver(
        paths,
        Config(raw={}),
        run_id="run-1",
        session_key=GROUP_KEY,
        mode="announce",
        text="Hello group",
    )
    assert rec["status"] == "outbox"
    assert "error" not in rec
    lines = outbox_lines(state)
    assert lines == [rec]
    assert set(rec) == RECORD_FIELDS
    assert rec["runId"] == "run-1"
    assert rec["sessionKey"] == GROUP_KEY
    assert rec["mode"] == "announce"
    assert (rec["channel"], rec["to"], rec["accountId"]) == ("discord", "group:42", "bot-1")
    assert rec["text"] == "Hello group"
    assert rec["ts"].endswith("Z") and "T" in rec["ts"]
    outbox = state / "sessiontool" / "deliveries.jsonl"
    assert stat.S_IMODE(outbox.stat().st_mode) == 0o600
    assert stat.S_IMODE(outbox.parent.stat().st_mode) == 0o700

    transcript = sessions / "group-sess.jsonl"
    header = json.loads(transcript.read_text().splitlines()[0])
    assert header["type"] == "session" and header["id"] == "group-sess"
    [msg] = transcript_messages(transcript)
    assert msg["role"] == "assistant"
    assert msg["content"] == [{"type": "text", "text": "Hello group"}]
    assert (msg["api"], msg["provider"], msg["model"]) == (
        "openai-responses",
        "openclaw",
        "delivery-mirror",
    )
    assert msg["stopReason"] == "stop"
    assert msg["usage"] == {
        "input": 0,
        "output": 0,
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": 0,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
    }
    assert isinstance(msg["timestamp"], int)


def test_deliver_without_mirror(state: Path, sessions: Path) -> None:
    rec = deliver(
        StatePaths(state),
        Config(raw={}),
        run_id="r",
        session_key=DM_KEY,
        mode="spawn-announce",
        text="x",
        mirror=False,
    )
    assert rec["status"] == "outbox"
    assert (rec["channel"], rec["to"], rec["accountId"]) == ("telegram", "12345", "acct-9")
    assert not (sessions / "dm-sess.jsonl").exists()


def test_deliver_without_target_is_undelivered(state: Path, sessions: Path) -> None:
    rec = deliver(
        StatePaths(state),
        Config(raw={}),
        run_id="r",
        session_key="agent:main:main",
        mode="deliver",
        text="t",
    )
    assert rec["status"] == "undelivered"
    assert rec["channel"] is None and rec["to"] is None
    assert outbox_lines(state) == [rec]
    assert not (sessions / "main-sess.jsonl").exists()


def test_deliver_denied_by_policy(state: Path, sessions: Path) -> None:
    cfg = Config(
        raw={
            "session": {
                "sendPolicy": {"rules": [{"match": {"channel": "discord"}, "action": "deny"}]}
            }
        }
    )
    rec = deliver(
        StatePaths(state), cfg, run_id="r", session_key=GROUP_KEY, mode="announce", text="no"
    )
    assert rec["status"] == "denied"
    assert "rule #1" in rec["error"]
    assert outbox_lines(state) == [rec]
    assert not (sessions / "group-sess.jsonl").exists()


def test_deliver_denied_by_session_override(state: Path) -> None:
    write_store(
        state,
        "main",
        {
            DM_KEY: {
                "sessionId": "s",
                "updatedAt": 1,
                "sendPolicy": "deny",
                "lastChannel": "x",
                "lastTo": "y",
            }
        },
    )
    rec = deliver(
        StatePaths(state), Config(raw={}), run_id="r", session_key=DM_KEY, mode="deliver", text="t"
    )
    assert rec["status"] == "denied"


def test_deliver_via_command_gets_record_on_stdin(
    state: Path, sessions: Path, tmp_path: Path
) -> None:
    got = tmp_path / "stdin.json"
    script = f"import sys; open({str(got)!r}, 'w').write(sys.stdin.read())"
    cfg = Config(raw={"sessiontool": {"delivery": {"command": [sys.executable, "-c", script]}}})
    rec = deliver(
        StatePaths(state), cfg, run_id="run-7", session_key=DM_KEY, mode="deliver", text="via cmd"
    )
    assert rec["status"] == "delivered"
    sent = json.loads(got.read_text())
    assert sent["runId"] == "run-7"
    assert sent["sessionKey"] == DM_KEY
    assert (sent["mode"], sent["channel"], sent["to"], sent["text"]) == (
        "deliver",
        "telegram",
        "12345",
        "via cmd",
    )
    assert sent["ts"] == rec["ts"]
    assert [m["model"] for m in transcript_messages(sessions / "dm-sess.jsonl")] == [
        "delivery-mirror"
    ]


def test_deliver_command_failure(state: Path, sessions: Path) -> None:
    script = (
        "import sys; sys.stdin.read(); "
        "sys.stderr.write('line one\\nchannel offline\\n'); sys.exit(1)"
    )
    cfg = Config(raw={"sessiontool": {"delivery": {"command": [sys.executable, "-c", script]}}})
    rec = deliver(StatePaths(state), cfg, run_id="r", session_key=DM_KEY, mode="deliver", text="t")
    assert rec["status"] == "failed"
    assert "status 1" in rec["error"]
    assert rec["error"].endswith("channel offline")
    assert outbox_lines(state) == [rec]
    assert not (sessions / "dm-sess.jsonl").exists()


def test_deliver_command_not_runnable(state: Path, sessions: Path, tmp_path: Path) -> None:
    cfg = Config(raw={"sessiontool": {"delivery": {"command": [str(tmp_path / "missing-prog")]}}})
    rec = deliver(StatePaths(state), cfg, run_id="r", session_key=DM_KEY, mode="deliver", text="t")
    assert rec["status"] == "failed"
    assert "cannot run delivery command" in rec["error"]


def test_deliver_to_session_without_entry_skips_mirror(state: Path) -> None:
    rec = deliver(
        StatePaths(state),
        Config(raw={}),
        run_id="r",
        session_key="agent:main:slack:channel:C1",
        mode="announce",
        text="t",
    )
    assert rec["status"] == "outbox"
    assert (rec["channel"], rec["to"]) == ("slack", "channel:C1")
    assert not (state / "agents").exists()


def test_deliver_with_unreadable_store_fails_without_delivering(state: Path) -> None:
    d = state / "agents" / "main" / "sessions"
    d.mkdir(parents=True)
    (d / "sessions.json").write_text("{broken")
    rec = deliver(
        StatePaths(state),
        Config(raw={}),
        run_id="r",
        session_key=GROUP_KEY,
        mode="announce",
        text="t",
    )
    assert rec["status"] == "failed"
    assert "unreadable session store" in rec["error"]
    assert outbox_lines(state) == [rec]
    assert (d / "sessions.json").read_text() == "{broken"


def test_deliver_appends_after_torn_line(state: Path, sessions: Path) -> None:
    outbox = state / "sessiontool" / "deliveries.jsonl"
    outbox.parent.mkdir(parents=True)
    outbox.write_text('{"ts": "2020-01-01T00:00:00.000Z"}\n{"torn')
    deliver(
        StatePaths(state),
        Config(raw={}),
        run_id="r",
        session_key=DM_KEY,
        mode="deliver",
        text="t",
        mirror=False,
    )
    assert [r.get("runId") for r in read_deliveries(StatePaths(state), None)] == [None, "r"]


def test_mirror_message_shape() -> None:
    m = mirror_message("hi", 5)
    assert m["timestamp"] == 5 and m["content"] == [{"type": "text", "text": "hi"}]


# -- reading and following -----------------------------------------------------------------------


def test_read_deliveries_filters_since_and_skips_bad_lines(state: Path) -> None:
    outbox = state / "sessiontool" / "deliveries.jsonl"
    outbox.parent.mkdir(parents=True)
    outbox.write_text(
        '{"ts":"2026-01-01T00:00:00.000Z","runId":"a"}\n'
        "not json\n"
        "\n"
        "[1,2]\n"
        '{"ts":"2026-01-02T00:00:00.000Z","runId":"b"}\n'
    )
    paths = StatePaths(state)
    assert [r["runId"] for r in read_deliveries(paths, None)] == ["a", "b"]
    since = 1767225600000 + 3600_000  # 2026-01-01T01:00Z
    assert [r["runId"] for r in read_deliveries(paths, since)] == ["b"]


def test_read_deliveries_without_outbox(state: Path) -> None:
    assert read_deliveries(StatePaths(state), None) == []


def test_follow_deliveries_waits_for_the_file(state: Path) -> None:
    import threading

    paths = StatePaths(state)
    it = follow_deliveries(paths, None, poll=0.02)

    def later() -> None:
        time.sleep(0.2)
        paths.deliveries.parent.mkdir(parents=True, exist_ok=True)
        with open(paths.deliveries, "a") as fh:
            fh.write('{"ts":"2026-01-01T00:00:00.000Z","runId":"late"}\n')

    t = threading.Thread(target=later)
    t.start()
    rec = next(it)
    t.join()
    assert rec["runId"] == "late"


def test_follow_deliveries_since_replays_then_follows(state: Path) -> None:
    paths = StatePaths(state)
    paths.deliveries.parent.mkdir(parents=True)
    paths.deliveries.write_text(
        '{"ts":"2026-01-01T00:00:00.000Z","runId":"old"}\n{"ts":"2026-01-03T00:00:00.000Z","runId":"kept"}\n'
    )
    it = follow_deliveries(paths, 1767312000000, poll=0.02)  # 2026-01-02
    assert next(it)["runId"] == "kept"
    with open(paths.deliveries, "a") as fh:
        fh.write('{"ts":"2026-01-04T00:00:00.000Z","runId":"new"}\n')
    assert next(it)["runId"] == "new"


# -- CLI -------------------------------------------------------------------------------------------


def test_cli_deliveries_json_and_since(
    state: Path, sessions: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = StatePaths(state)
    with monkeypatch.context() as m:
        m.setenv("SESSIONTOOL_NOW_MS", "1767225600000")  # 2026-01-01T00:00Z
        deliver(
            paths,
            Config(raw={}),
            run_id="old",
            session_key=GROUP_KEY,
            mode="announce",
            text="one",
            mirror=False,
        )
    deliver(
        paths,
        Config(raw={}),
        run_id="new",
        session_key="agent:main:main",
        mode="deliver",
        text="two",
    )

    rc, data = run_json("deliveries")
    assert rc == 0
    assert data["count"] == 2
    assert [d["runId"] for d in data["deliveries"]] == ["old", "new"]
    assert data["deliveries"][0]["sessionKey"] == GROUP_KEY
    assert data["deliveries"][1]["sessionKey"] == "main"  # display form, as in every result
    assert data["deliveries"][1]["status"] == "undelivered"

    rc, data = run_json("deliveries", "--since", "1d")
    assert rc == 0
    assert [d["runId"] for d in data["deliveries"]] == ["new"]

    rc, data = run_json("deliveries", "--since", "2025-12-31T00:00:00Z")
    assert data["count"] == 2

    proc = run_cli("deliveries")
    assert proc.returncode == 0
    rows = [line.split("\t") for line in proc.stdout.splitlines()]
    assert rows[0][1:] == ["announce", "outbox", GROUP_KEY, "discord", "group:42", "one"]


def test_cli_deliveries_bad_since(state: Path) -> None:
    rc, data = run_json("deliveries", "--since", "yesterday-ish")
    assert rc == 2
    assert data["status"] == "error"


def test_cli_deliveries_operator_only(state: Path) -> None:
    rc, data = run_json("--as", "main", "deliveries")
    assert rc == 4
    assert data["status"] == "forbidden"


def _start_follower(*extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "sessiontool", "deliveries", "--follow", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    finally:
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()
        proc.stderr.close()


def _first_line_while_appending(
    proc: subprocess.Popen[bytes], append: Callable[[int], None], timeout: float = 30.0
) -> str:
    """Append record n = 0, 1, ... every half second until the follower prints a line. Without
    --since the follower starts at the outbox's end, so a record appended before it is ready is
    never shown: retrying keeps the test independent of how fast the process starts."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    buf = b""
    n = 0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not buf:
            append(n)
            n += 1
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                assert proc.stderr is not None
                raise AssertionError(f"follower exited: {proc.stderr.read()!r}")
            buf += chunk
            if b"\n" in buf:
                return buf.split(b"\n", 1)[0].decode("utf-8") + "\n"
    raise AssertionError("no output from deliveries --follow")


@pytest.mark.parametrize("as_json", [True, False])
def test_cli_deliveries_follow_picks_up_new_line(
    state: Path, sessions: Path, as_json: bool
) -> None:
    paths = StatePaths(state)
    deliver(
        paths,
        Config(raw={}),
        run_id="before",
        session_key=DM_KEY,
        mode="deliver",
        text="x",
        mirror=False,
    )

    def append(n: int) -> None:
        deliver(
            paths,
            Config(raw={}),
            run_id=f"after-{n}",
            session_key=GROUP_KEY,
            mode="announce",
            text="hi\tthere",
            mirror=False,
        )

    proc = _start_follower(*(["--json"] if as_json else []))
    try:
        line = _first_line_while_appending(proc, append)
    finally:
        _stop(proc)
    if as_json:
        rec = json.loads(line)
        assert rec["runId"].startswith("after-")
        assert rec["sessionKey"] == GROUP_KEY
        assert rec["status"] == "outbox"
    else:
        cells = line.rstrip("\n").split("\t")
        # a tab inside a cell is shown escaped: one record, one row, the columns intact
        assert cells[1:] == [
            "announce",
            "outbox",
            GROUP_KEY,
            "discord",
            "group:42",
            "hi\\tthere",
        ]


def test_cli_deliveries_follow_since_replays_old_records(state: Path, sessions: Path) -> None:
    paths = StatePaths(state)
    deliver(
        paths,
        Config(raw={}),
        run_id="kept",
        session_key=DM_KEY,
        mode="deliver",
        text="x",
        mirror=False,
    )
    proc = _start_follower("--json", "--since", "1h")
    try:
        line = _first_line_while_appending(proc, lambda n: None)
    finally:
        _stop(proc)
    assert json.loads(line)["runId"] == "kept"


def test_cli_deliveries_follow_survives_missing_outbox(state: Path, sessions: Path) -> None:
    paths = StatePaths(state)

    def append(n: int) -> None:
        deliver(
            paths,
            Config(raw={}),
            run_id=f"first-{n}",
            session_key=DM_KEY,
            mode="deliver",
            text="x",
            mirror=False,
        )

    proc = _start_follower("--json")
    try:
        time.sleep(0.3)
        line = _first_line_while_appending(proc, append)
    finally:
        _stop(proc)
    assert json.loads(line)["runId"].startswith("first-")
