"""`runs`: listing and filtering run records, one run in full, short ids and prefixes, a dead
worker found `lost` when runs are read; the user's runs by default, internal steps under their
run with --steps, --kind as a list, and a repeated single-valued option refused."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import generous, run_cli, run_json, write_config

from .runhelpers import (
    alive,
    py_command,
    reap,
    records,
    runner_config,
    text_of,
    transcript_messages,
)

pytestmark = pytest.mark.usefixtures("reap_workers")


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
    # Not held up by the dead worker's lock: a worker waits up to 60 s for a transcript lock,
    # which would outlast this --timeout (rc 124, no reply).
    rc, again = run_json("send", "main", "after", "--timeout", str(min(generous(3), 45)))
    assert rc == 0 and again["reply"] == "echo: after"
    texts = [text_of(m) for m in transcript_messages(state)["agent:main:main"]]
    assert texts[0] == "doomed" and texts[-2:] == ["after", "echo: after"]


@pytest.mark.slow
def test_runs_table_short_ids_and_prefixes(state: Path, reap_workers: None) -> None:
    ids = []
    for i in range(3):
        rc, data = run_json("send", "main", f"m{i}")
        assert rc == 0
        ids.append(data["runId"])
    # A terminal table (forced): an id column that never folds, 8 characters.
    proc = run_cli("runs", "--color", "always", env={"COLUMNS": "60"})
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    for rid in ids:
        assert any(rid[:8] in line for line in lines)
        assert not any(rid[8:16] in line for line in lines)
    # Prefixes are accepted by runs, wait and abort.
    rc, data = run_json("runs", ids[0][:8])
    assert rc == 0 and data["runId"] == ids[0]
    rc, data = run_json("wait", ids[1][:10])
    assert rc == 0 and data["runId"] == ids[1]
    rc, data = run_json("abort", ids[2][:8])
    assert rc == 0 and data["runId"] == ids[2]
    # An ambiguous prefix is a clear error: write two records sharing one.
    runs = state / "sessiontool" / "runs"
    for suffix in ("a", "b"):
        rec = json.loads((runs / f"{ids[0]}.json").read_text())
        rec["runId"] = "feedface-" + suffix
        (runs / f"feedface-{suffix}.json").write_text(json.dumps(rec))
    proc = run_cli("wait", "feedface")
    assert proc.returncode == 2
    assert "ambiguous" in proc.stderr and "feedface-a" in proc.stderr
    assert run_cli("runs", "0000zzzz").returncode == 3


@pytest.mark.slow
def test_runs_limit_and_one_run_in_human_form(state: Path) -> None:
    for i in range(3):
        assert run_cli("send", "main", f"m{i}").returncode == 0
    rc, data = run_json("runs", "--limit", "2")
    assert rc == 0 and data["count"] == 2 and len(data["runs"]) == 2
    assert len(run_cli("runs", "--limit", "all", "-q").stdout.split()) == 3
    assert run_cli("runs", "--limit", "0").returncode == 2
    long_message = "word " * 40
    rc, data = run_json("send", "main", long_message)
    proc = run_cli("runs", data["runId"])
    assert proc.returncode == 0
    fields = dict(line.split("\t", 1) for line in proc.stdout.splitlines() if "\t" in line)
    assert fields["message"] == long_message  # whole, not cut at 60 characters
    # Piped: the time as ISO 8601 and nothing else (no "(5s ago)", issue 33 item 16).
    assert fields["createdAt"].startswith("20") and fields["createdAt"].endswith("Z")
    assert fields["createdAt"][:4].isdigit() and "T" in fields["createdAt"]
    assert "ago" not in fields["createdAt"]


REQUESTER = "agent:main:dm:alice"
TARGET = "agent:main:telegram:group:7"


def _a2a_send(state: Path) -> str:
    """An agent-to-agent send: one run of the user's and its internal steps."""
    assert run_json("send", REQUESTER, "hello")[0] == 0
    rc, out = run_json("--as", REQUESTER, "send", TARGET, "ping", "--timeout", "30")
    assert rc == 0, out
    run_id: str = out["runId"]
    reap(state)  # its steps (reply turns, announce) are done
    assert [r for r in records(state) if r.get("parentRunId") == run_id], "no steps recorded"
    return run_id


def test_runs_hides_steps_unless_asked_and_lists_them_under_their_run(state: Path) -> None:
    run_id = _a2a_send(state)
    rc, listing = run_json("runs")
    assert rc == 0
    assert {r["kind"] for r in listing["runs"]} == {"send"}
    rc, full = run_json("runs", "--steps")
    ids = [r["runId"] for r in full["runs"]]
    steps = [r for r in full["runs"] if r["kind"] == "step"]
    assert steps and all(r["parentRunId"] == run_id for r in steps)
    at = ids.index(run_id)
    assert ids[at + 1 : at + 1 + len(steps)] == [r["runId"] for r in steps]
    # Piped TSV: the same rows as --json, the step name in the third column.
    tsv = [line.split("\t") for line in run_cli("runs", "--steps").stdout.splitlines()]
    assert [row[0] for row in tsv] == ids
    assert all(row[2] for row in tsv if row[1] == "step")


def test_runs_kind_takes_a_list(state: Path) -> None:
    _a2a_send(state)
    rc, both = run_json("runs", "--kind", "send,step")
    assert rc == 0 and {r["kind"] for r in both["runs"]} == {"send", "step"}
    rc, bad = run_json("runs", "--kind", "send,nope")
    assert rc == 2 and "nope" in bad["error"]


def test_a_repeated_single_valued_option_is_a_usage_error(state: Path) -> None:
    proc = run_cli("runs", "--status", "ok", "--status", "error")
    assert proc.returncode == 2
    assert "--status was given twice" in proc.stderr
    assert "sessiontool runs --help" in proc.stderr
    proc = run_cli("--agent", "main", "list", "--agent", "ops")
    assert proc.returncode == 2 and "--agent was given twice" in proc.stderr


def test_runs_log_keeps_a_failing_runners_stderr(state: Path) -> None:
    lines = "".join(f"trace line {i}\n" for i in range(40))
    runner_config(
        state,
        py_command(f"import sys; sys.stdin.read(); sys.stderr.write({lines!r}); sys.exit(3)"),
    )
    rc, out = run_json("send", "main", "boom", "--timeout", "30")
    assert rc == 1 and out["runStatus"] == "error"
    proc = run_cli("runs", out["runId"], "--log")
    assert proc.returncode == 0
    log = proc.stdout.split("--- log ---\n", 1)[1]
    assert "trace line 0\n" in log and "trace line 39\n" in log  # all of it, not only the tail


def test_command_runner_model_placeholder_passes_a_model_named_echo(state: Path) -> None:
    """`echo` is a real model id (llm-echo's); only the runner's own type name is the
    placeholder for "no model configured", so `llm -m {model}` gets `echo`, not ``."""
    code = "import sys; sys.stdin.read(); print('model=[' + sys.argv[1] + ']')"
    runner = {"type": "command", "command": [sys.executable, "-c", code, "{model}"]}
    write_config(state, {"agents": {"defaults": {"model": "echo", "runner": runner}}})
    proc = run_cli("send", "main", "which model?")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "model=[echo]\n"
    write_config(state, {"agents": {"defaults": {"runner": runner}}})
    proc = run_cli("send", "main", "and now?")
    assert proc.stdout == "model=[]\n"  # nothing configured: empty, not "command"


def test_runs_fields_picks_columns_without_a_header(state: Path) -> None:
    rc, sent = run_json("send", "main", "hello")
    assert rc == 0
    proc = run_cli("runs", "--fields", "status,runId")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"ok\t{sent['runId']}\n"
    # On a terminal too: --fields is for scripts and `cut`.
    shown = run_cli("--color", "always", "runs", "--fields", "runId")
    assert shown.stdout == sent["runId"] + "\n"


def test_a_session_that_does_not_exist_is_exit_3_with_the_nearest_key(state: Path) -> None:
    """`wait --session <typo>` exited 0 at once (a cron script read "all done") and `runs
    --session <typo>` was silently empty (issue 33, item 4). Now exit 3 naming the nearest
    key, as `search --session` says it; a session with runs (deleted since, or named by its
    session id) still lists them."""
    rc, sent = run_json("send", "cron:nightly", "hello")
    assert rc == 0, sent
    for args in (
        ["wait", "--session", "cron:nighly"],
        ["wait", "--session", "cron:nighly", "--timeout", "5"],
        ["runs", "--session", "cron:nighly"],
        ["search", "hello", "--session", "cron:nighly"],
    ):
        proc = run_cli(*args)
        assert proc.returncode == 3, (args, proc.stdout, proc.stderr)
        assert proc.stdout == ""
        assert proc.stderr.splitlines()[0] == (
            "sessiontool: error: Session not found: cron:nighly "
            "(did you mean 'agent:main:cron:nightly'?)"
        ), proc.stderr
    rc, out = run_json("wait", "--session", "agent:main:cron:nightyl")
    near = "Session not found: agent:main:cron:nightyl (did you mean 'agent:main:cron:nightly'?)"
    assert (rc, out["error"]) == (3, near), out
    # What exists still answers: by key, by session id, and a deleted session's runs.
    rc, runs = run_json("runs", "--session", "cron:nightly")
    assert rc == 0 and [r["runId"] for r in runs["runs"]] == [sent["runId"]]
    sid = run_json("list")[1]["sessions"]
    sid = next(s["sessionId"] for s in sid if s["key"].endswith("cron:nightly"))
    rc, by_id = run_json("runs", "--session", sid)
    assert rc == 0 and [r["runId"] for r in by_id["runs"]] == [sent["runId"]]
    assert run_cli("wait", "--session", "cron:nightly").returncode == 0  # nothing open
    assert run_cli("delete", "cron:nightly").returncode == 0
    rc, kept = run_json("runs", "--session", "cron:nightly")
    assert rc == 0 and [r["runId"] for r in kept["runs"]] == [sent["runId"]]
