"""`send` end to end, with real detached workers: replies, shapes, lanes, failures, timeouts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import run_cli, run_json
from tests.runhelpers import (
    py_command,
    read_store,
    records,
    runner_config,
    sessiontool,
    text_of,
    transcript_messages,
    wait_until,
)

pytestmark = pytest.mark.usefixtures("reap_workers")


def test_send_on_fresh_state_replies_and_records(state: Path) -> None:
    proc = run_cli("send", "main", "hello", "--timeout", "30")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "echo: hello\n"
    rc, hist = run_json("history", "main")
    assert rc == 0
    roles = [(m["role"], text_of(m)) for m in hist["messages"]]
    assert roles == [("user", "hello"), ("assistant", "echo: hello")]
    assert hist["messages"][0]["provenance"] == {
        "kind": "external_user",
        "sourceTool": "sessiontool",
    }
    assistant = hist["messages"][1]
    assert assistant["usage"]["input"] == len("hello") // 4
    assert assistant["stopReason"] == "stop"
    rc, listing = run_json("list")
    (row,) = listing["sessions"]
    assert row["key"] == "main" and row["kind"] == "main"
    assert row["updatedAt"] >= hist["messages"][1]["timestamp"]
    # The transcript on disk is OpenClaw's format: header, then chained entries.
    lines = [json.loads(x) for x in Path(row["transcriptPath"]).read_text().splitlines()]
    assert (
        lines[0]["type"] == "session"
        and lines[0]["version"] == 3
        and lines[0]["id"] == row["sessionId"]
    )
    assert lines[1]["parentId"] is None and lines[2]["parentId"] == lines[1]["id"]
    assert oct(Path(row["transcriptPath"]).stat().st_mode & 0o777) == "0o600"


def test_send_json_shapes_and_accepted(state: Path) -> None:
    rc, out = run_json("send", "main", "one")
    assert rc == 0
    assert out["status"] == "ok" and out["reply"] == "echo: one" and out["sessionKey"] == "main"
    rc, out = run_json("send", "cron:nightly", "two", "--timeout", "0")
    assert (
        rc == 0 and out["status"] == "accepted" and out["sessionKey"] == "agent:main:cron:nightly"
    )
    rc, waited = run_json("wait", out["runId"], "--timeout", "20")
    assert rc == 0 and waited["reply"] == "echo: two"
    # Without --json, --timeout 0 prints the run id only.
    proc = run_cli("send", "main", "three", "--timeout", "0")
    assert proc.returncode == 0 and proc.stdout.strip() == proc.stdout.strip().split()[0]
    rc, rec = run_json("runs", proc.stdout.strip())
    assert rec["runId"] == proc.stdout.strip() and rec["kind"] == "send"


def test_message_from_stdin(state: Path) -> None:
    proc = run_cli("send", "main", "-", input="from stdin\n")
    assert proc.returncode == 0
    assert proc.stdout == "echo: from stdin\n\n" or proc.stdout.startswith("echo: from stdin")


def test_unknown_session_id_is_not_found(state: Path) -> None:
    rc, out = run_json("send", "0b3f1e57-8a43-4c1e-9f00-1234567890ab", "hi")
    assert rc == 3
    assert out["status"] == "error" and out["code"] == 3 and "Session not found" in out["error"]
    assert not records(state)


def test_runner_failure_is_error_with_stderr_tail(state: Path) -> None:
    runner_config(
        state, py_command("import sys; sys.stderr.write('model exploded\\n'); sys.exit(3)")
    )
    rc, out = run_json("send", "main", "boom", "--timeout", "20")
    assert rc == 1
    assert out["status"] == "error" and out["runStatus"] == "error"
    assert "model exploded" in out["error"]
    rc, hist = run_json("history", "main")
    assert hist["messages"][-1]["stopReason"] == "error"


def _wait_all(state: Path, ids: list[str], timeout: float = 60) -> None:
    """Wait for runs by reading their records (a hundred `wait` processes would be slow)."""
    deadline = time.monotonic() + timeout
    pending = set(ids)
    while pending and time.monotonic() < deadline:
        done = {
            r["runId"]
            for r in records(state)
            if r.get("status") in ("ok", "error", "timeout", "aborted", "lost")
        }
        pending -= done
        time.sleep(0.1)
    assert not pending, f"{len(pending)} runs did not finish"
    for r in records(state):
        if r["runId"] in ids:
            assert r["status"] == "ok", r


@pytest.mark.slow  # 100 Python processes at once: ~40 s on 2 cores
def test_fifty_concurrent_sends_one_lane_and_fifty_lanes(state: Path) -> None:
    procs = []
    for i in range(50):
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "sessiontool",
                    "send",
                    "main",
                    f"same-{i}",
                    "--timeout",
                    "0",
                    "--json",
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
        )
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "sessiontool",
                    "send",
                    f"lane-{i}",
                    f"own-{i}",
                    "--timeout",
                    "0",
                    "--json",
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
        )
    ids = []
    for p in procs:
        out, _ = p.communicate(timeout=60)
        assert p.returncode == 0
        ids.append(json.loads(out)["runId"])
    _wait_all(state, ids)
    store = json.loads((state / "agents" / "main" / "sessions" / "sessions.json").read_text())
    assert set(store) == {"agent:main:main", *{f"agent:main:lane-{i}" for i in range(50)}}
    msgs = transcript_messages(state)
    main = [text_of(m) for m in msgs["agent:main:main"]]
    assert len(main) == 100
    # Pairs never interleave: each user line is followed by its own reply.
    for user, reply in zip(main[::2], main[1::2], strict=True):
        assert reply == f"echo: {user}"
    assert sorted(main[::2]) == sorted(f"same-{i}" for i in range(50))
    for i in range(50):
        assert [text_of(m) for m in msgs[f"agent:main:lane-{i}"]] == [f"own-{i}", f"echo: own-{i}"]


def test_lane_runs_in_creation_order(state: Path) -> None:
    runner_config(
        state, py_command("import sys,time; m=sys.stdin.read(); time.sleep(0.3); print(m)")
    )
    ids = []
    for i in range(4):
        rc, out = run_json("send", "main", f"m{i}", "--timeout", "0")
        ids.append(out["runId"])
    _wait_all(state, ids)
    main = [text_of(m) for m in transcript_messages(state)["agent:main:main"]]
    assert main == ["m0", "m0", "m1", "m1", "m2", "m2", "m3", "m3"]


def test_timeout_parsing(state: Path) -> None:
    rc, out = run_json("send", "main", "x", "--timeout", "1m")
    assert rc == 0 and out["status"] == "ok"
    proc = run_cli("send", "main", "x", "--timeout", "soon")
    assert proc.returncode == 2 and "invalid --timeout" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) <= 2


def test_send_quiet_prints_only_the_run_id(state: Path) -> None:
    proc = run_cli("send", "cron:new", "hello", "-q")
    assert proc.returncode == 0 and proc.stderr == ""
    run_id = proc.stdout.strip()
    assert proc.stdout == run_id + "\n" and "echo" not in proc.stdout
    rc, rec = run_json("runs", run_id)
    assert rc == 0 and rec["status"] == "ok" and rec["reply"] == "echo: hello"


def test_send_timeout_prints_the_run_id_on_stdout_for_wait(state: Path) -> None:
    runner_config(state, py_command("import sys,time; m=sys.stdin.read(); time.sleep(3); print(m)"))
    script = 'id=$("$@" send main later --timeout 1) || "$@" wait "$id" --timeout 60'
    proc = subprocess.run(
        ["sh", "-c", script, "sh", sys.executable, "-m", "sessiontool"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "later\n"
    assert "still running" in proc.stderr


def test_ctrl_c_while_waiting_is_not_worded_as_an_error(state: Path) -> None:
    runner_config(state, py_command("import sys,time; sys.stdin.read(); time.sleep(30)"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "sessiontool", "send", "main", "slow", "--timeout", "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not [r for r in records(state) if r.get("status") == "running"]:
        assert time.monotonic() < deadline, "the run did not start"
        time.sleep(0.05)
    run_id = records(state)[0]["runId"]
    fifo = state / "sessiontool" / "runs" / f"{run_id}.fifo"
    while not fifo.exists():  # send is waiting on the run now
        assert time.monotonic() < deadline, "send did not wait"
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert "error" not in err and f"sessiontool wait {run_id}" in err
    assert run_cli("abort", run_id).returncode == 0


def test_a_typo_in_agent_does_not_create_an_agent(state: Path) -> None:
    assert run_cli("send", "main", "first").returncode == 0
    proc = run_cli("--agent", "mian", "send", "main", "hello")
    assert proc.returncode == 3
    assert "unknown agent 'mian': did you mean 'main'?" in proc.stderr
    assert "--create-agent" in proc.stderr
    assert not (state / "agents" / "mian").exists() and len(records(state)) == 1
    proc = run_cli("send", "main", "hello", "--agent", "ops", "--create-agent")
    assert proc.returncode == 0, proc.stderr
    assert (state / "agents" / "ops" / "sessions").is_dir()
    assert run_cli("--agent", "ops", "send", "main", "again").returncode == 0  # on disk now


def test_create_agent_on_a_read_is_not_refused_with_give_create_agent(state: Path) -> None:
    """`--agent ops --create-agent list` was refused, exit 3, with the hint "give
    --create-agent" (issue 33, item 5). A read creates nothing: with --create-agent the new
    agent reads empty (exit 0, nothing made on disk); without it the typo is still exit 3,
    and its hint says what starts an agent (a send or spawn with --create-agent)."""
    assert run_cli("send", "main", "first").returncode == 0
    rc, out = run_json("--agent", "ops", "--create-agent", "list")
    assert rc == 0 and out["count"] == 0 and out["sessions"] == [] and not out["hasMore"], out
    proc = run_cli("--agent", "ops", "--create-agent", "list")
    assert (proc.returncode, proc.stdout) == (0, ""), proc.stderr
    assert "--create-agent" not in proc.stderr
    assert not (state / "agents" / "ops").exists()
    proc = run_cli("--agent", "ops", "list")
    assert proc.returncode == 3
    assert "give --create-agent to a send or spawn to start a new one" in proc.stderr
    write = run_cli("--agent", "ops", "label", "main", "x")  # a write: the flag it needs
    assert write.returncode == 3 and "give --create-agent to start a new one" in write.stderr


def test_send_to_a_new_key_says_it_created_it(state: Path) -> None:
    assert run_cli("send", "main", "hi").stderr == ""  # the main session always exists
    proc = run_cli("send", "mian", "hello")
    assert proc.returncode == 0
    assert proc.stdout == "echo: hello\n"
    assert proc.stderr == "created session agent:main:mian\n"
    assert run_cli("send", "mian", "again").stderr == ""  # it exists now
    proc = run_cli("send", "other", "x", "-q")
    assert proc.returncode == 0 and proc.stderr == ""
    proc = run_cli("send", "nosuch", "x", "--no-create")
    assert proc.returncode == 3
    assert "Session not found: nosuch" in proc.stderr
    assert "agent:main:nosuch" not in read_store(state)
    assert not [r for r in records(state) if r.get("sessionKey") == "agent:main:nosuch"]


@pytest.mark.slow
@pytest.mark.parametrize("as_json", [False, True])
def test_ctrl_c_during_send_names_the_run(state: Path, reap_workers: None, as_json: bool) -> None:
    runner_config(state, py_command("import sys,time; sys.stdin.read(); time.sleep(20)"))
    proc = sessiontool("send", "main", "slow", "--timeout", "60", *(["--json"] if as_json else []))
    wait_until(lambda: bool(records(state)))
    run_id = records(state)[0]["runId"]
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 130
    assert f"sessiontool wait {run_id}" in err
    if as_json:
        data = json.loads(out)
        assert data["runId"] == run_id and data["status"] == "interrupted"
        assert data["code"] == 130
    else:
        assert out == ""
    assert run_cli("abort", run_id[:8]).returncode == 0


def test_ctrl_c_after_the_run_is_recorded_names_it_and_the_run_goes_on(
    state: Path, reap_workers: None
) -> None:
    """Ctrl-C between the run's record and its worker's start (under load that window is long)
    is held until the worker is started: the run is named and runs, not left queued unnamed."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "sessiontool", "send", "main", "hello", "--timeout", "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "SESSIONTOOL_TEST_PAUSE": "run-created:3"},
    )
    assert proc.stderr is not None
    line = proc.stderr.readline()
    assert line.startswith("sessiontool test pause: run-created"), line
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    run_id = records(state)[0]["runId"]
    assert proc.returncode == 130, err
    assert f"sessiontool wait {run_id}" in err and "error" not in err
    rc, waited = run_json("wait", run_id, "--timeout", "60")
    assert rc == 0 and waited["reply"] == "echo: hello"


def test_send_on_a_big_store_parses_it_once_and_writes_it_once(state: Path) -> None:
    """Issue 47 (the docs' promise, docs/decisions.md "One parse of a big store per run"): on a
    store of 1 MiB or more, `send` to an existing session parses sessions.json once (in the
    foreground; the worker forked from it inherits the parse) and writes it once, counted
    across the command and its worker (SESSIONTOOL_TEST_EVENTS, sessiontool/testhooks.py)."""
    from tests.runhelpers import settle, write_store

    store = {
        f"agent:main:dm:user-{i:05d}": {"sessionId": f"s-{i:05d}", "updatedAt": 1_000 + i}
        for i in range(14_000)
    }
    store["agent:main:main"] = {"sessionId": "s-main", "updatedAt": 1}
    path = write_store(state, store)
    assert path.stat().st_size >= 1 << 20
    events = state.parent / "events.txt"
    proc = run_cli(
        "send", "main", "hello", "--timeout", "30", env={"SESSIONTOOL_TEST_EVENTS": str(events)}
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "echo: hello\n"
    settle(state)
    seen = [line.split()[0] for line in events.read_text().splitlines()]
    assert seen.count("store-parse") == 1, seen
    assert seen.count("store-write") == 1, seen
    assert read_store(state)["agent:main:main"]["updatedAt"] > 1
