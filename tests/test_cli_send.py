"""`send`, `wait`, `runs`, `abort` end to end, with real detached workers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import run_cli, run_json
from tests.runhelpers import (
    alive,
    py_command,
    records,
    runner_config,
    text_of,
    transcript_messages,
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


def test_timeout_then_wait_returns_reply(state: Path) -> None:
    runner_config(
        state, py_command("import sys,time; m=sys.stdin.read(); time.sleep(4); print('late: '+m)")
    )
    rc, out = run_json("send", "main", "slow", "--timeout", "1")
    assert rc == 124, out
    assert out["status"] == "timeout"  # 124 and timeout: it returned before the run ended
    proc = run_cli("send", "main", "slow", "--timeout", "1")
    assert proc.returncode == 124 and proc.stdout == ""
    assert "still running: sessiontool wait" in proc.stderr
    rc, done = run_json("wait", out["runId"], "--timeout", "30")
    assert rc == 0 and done["status"] == "ok" and done["reply"] == "late: slow"
    msgs = transcript_messages(state)["agent:main:main"]
    assert [text_of(m) for m in msgs][:2] == ["slow", "late: slow"]


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


def test_kill_9_worker_is_lost_and_session_recovers(state: Path) -> None:
    runner_config(state, py_command("import sys,time; sys.stdin.read(); time.sleep(30)"))
    rc, out = run_json("send", "main", "doomed", "--timeout", "0")
    rid = out["runId"]
    deadline = time.monotonic() + 15
    rec = {}
    while time.monotonic() < deadline:
        rec = next(r for r in records(state) if r["runId"] == rid)
        if rec.get("agentPid"):
            break
        time.sleep(0.05)
    assert rec.get("agentPid") and rec.get("pid")
    os.kill(rec["pid"], signal.SIGKILL)
    os.killpg(rec["agentPid"], signal.SIGKILL)
    while alive(rec["pid"]):
        time.sleep(0.02)
    # A worker killed inside its transcript append leaves the lock with its (now dead) pid; a
    # live holder's lock (OpenClaw's run in another session) must survive the reconcile.
    sdir = state / "agents" / "main" / "sessions"
    dead_lock = sdir / f"{rec['sessionId']}.jsonl.lock"
    live_lock = sdir / "someone-else.jsonl.lock"
    stamp = "2026-01-01T00:00:00.000Z"
    dead_lock.write_text(json.dumps({"pid": rec["pid"], "createdAt": stamp}))
    live_lock.write_text(json.dumps({"pid": os.getpid(), "createdAt": stamp}))
    rc, listing = run_json("runs")
    assert [r["status"] for r in listing["runs"] if r["runId"] == rid] == ["lost"]
    assert not dead_lock.exists() and live_lock.exists()
    live_lock.unlink()
    rc, waited = run_json("wait", rid)
    assert rc == 1
    assert (
        waited["status"] == "error"
        and waited["runStatus"] == "lost"
        and waited["error"] == "worker died"
    )
    store = json.loads((state / "agents" / "main" / "sessions" / "sessions.json").read_text())
    assert store["agent:main:main"]["abortedLastRun"] is True
    assert not (state / "sessiontool" / "runs" / f"{rid}.lock").exists()
    runner_config(state, {"type": "echo"})
    t0 = time.monotonic()
    rc, again = run_json("send", "main", "after", "--timeout", "20")
    assert rc == 0 and again["reply"] == "echo: after"
    assert time.monotonic() - t0 < 5
    texts = [text_of(m) for m in transcript_messages(state)["agent:main:main"]]
    assert texts[0] == "doomed" and texts[-2:] == ["after", "echo: after"]


def test_abort_kills_the_agent_process_group(state: Path, tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    code = (
        "import subprocess,sys,time; sys.stdin.read(); "
        f"p=subprocess.Popen(['sleep','60']); open({str(pidfile)!r},'w').write(str(p.pid)); time.sleep(60)"
    )
    runner_config(state, py_command(code))
    rc, out = run_json("send", "main", "long", "--timeout", "0")
    deadline = time.monotonic() + 15
    while not pidfile.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    grandchild = int(pidfile.read_text())
    rc, aborted = run_json("abort", out["runId"])
    assert rc == 0 and aborted == {"runId": out["runId"], "status": "aborted"}
    rc, waited = run_json("wait", out["runId"], "--timeout", "10")
    assert rc == 1 and waited["runStatus"] == "aborted"
    deadline = time.monotonic() + 5
    while alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(grandchild)


def test_runs_filters(state: Path) -> None:
    run_json("send", "main", "a")
    run_json("send", "cron:x", "b")
    rc, listing = run_json("runs", "--session", "cron:x")
    assert [r["sessionKey"] for r in listing["runs"]] == ["agent:main:cron:x"]
    rc, listing = run_json("runs", "--status", "ok", "--kind", "send")
    assert listing["count"] == 2
    assert listing["runs"][0]["createdAt"] >= listing["runs"][1]["createdAt"]
    rc, bad = run_json("runs", "--status", "weird")
    assert rc == 2
    rc, missing = run_json("wait", "nope")
    assert rc == 3


def test_timeout_parsing(state: Path) -> None:
    rc, out = run_json("send", "main", "x", "--timeout", "1m")
    assert rc == 0 and out["status"] == "ok"
    proc = run_cli("send", "main", "x", "--timeout", "soon")
    assert proc.returncode == 2 and "invalid --timeout" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) <= 2
