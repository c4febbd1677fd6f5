"""Sends and spawns on a SQLite-era agent run as ordinary sessiontool runs whose worker hands the
turn to OpenClaw's gateway: `--timeout` (exit 124) then `wait RUN_ID`, `--timeout 0`, `abort`
(which also asks the gateway to stop the turn), `runs`; a spawn creates its child through the
gateway and announces back to the requester through it. The gateway is the scripted fake
(tests/fakes/gateway.py, a real WebSocket server) that logs every frame; no `openclaw` CLI is
involved; the state dir's `agents/` must stay byte-identical (sessiontool never writes
OpenClaw's store)."""

from __future__ import annotations

import json
import shutil
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import generous, run_cli

from .fakes import gateway as fake
from .test_openclaw_sqlite import OC_STATE, tree_digest

NO_OPENCLAW_PATH = "/usr/bin:/bin"


@dataclass
class FakeGateway:
    state: Path
    gw: fake.FakeGateway
    env: dict[str, str]

    def st(self, *args: str) -> Any:
        return run_cli("--state-dir", str(self.state), *args, env=self.env, timeout=120)

    def calls(self, method: str | None = None) -> list[dict[str, Any]]:
        return self.gw.calls(method)

    def record(self, run_id: str) -> dict[str, Any]:
        """The run's record file once `runs` has reconciled it (a dead worker's run is `lost`
        then): the file, since the tests read the worker's pids, which `runs` keeps to itself."""
        proc = self.st("--json", "runs", run_id)
        assert proc.returncode == 0, proc.stderr
        path = self.state / "sessiontool" / "runs" / f"{run_id}.json"
        data: dict[str, Any] = json.loads(path.read_text())
        return data

    def until(self, run_id: str, done: Any, what: str) -> dict[str, Any]:
        """Poll the run record until `done(record)` (the worker is a separate process)."""
        deadline = time.monotonic() + 60
        while True:
            rec = self.record(run_id)
            if done(rec):
                return rec
            if time.monotonic() > deadline:
                raise AssertionError(f"run {run_id} never got {what}: {rec}")
            time.sleep(0.1)

    def until_called(self, method: str, run_id: str) -> None:
        """Until the gateway got this run's turn (the worker is a separate process)."""
        deadline = time.monotonic() + 60
        while not any(c["params"].get("idempotencyKey") == run_id for c in self.calls(method)):
            assert time.monotonic() < deadline, f"{method} of {run_id} never reached the gateway"
            time.sleep(0.1)


def is_announce(call: dict[str, Any]) -> bool:
    """A spawn's announce turn: under OpenClaw's own key `announce:v1:<child>:<child's run>`."""
    return str(call["params"].get("idempotencyKey", "")).startswith("announce:v1:")


@pytest.fixture
def fake_gateway(tmp_path: Path) -> Iterator[FakeGateway]:
    state = tmp_path / "state"
    shutil.copytree(OC_STATE, state)
    before = tree_digest(state / "agents")
    with fake.running(tmp_path / "gw", token="t0ken-fake") as gw:
        (state / "openclaw.json").write_text(
            json.dumps({"gateway": {"port": gw.port, "auth": {"token": "t0ken-fake"}}})
        )
        # No `openclaw` anywhere: the gateway is reached by sessiontool's own client.
        env = {"SESSIONTOOL_OPENCLAW_BIN": "", "PATH": NO_OPENCLAW_PATH}
        yield FakeGateway(state, gw, env)
    # The gateway writes OpenClaw's store; sessiontool never does (no sessions.json, no lock).
    assert tree_digest(state / "agents") == before


def test_send_waits_for_the_gateway_turn_and_records_a_run(fake_gateway: FakeGateway) -> None:
    proc = fake_gateway.st("--json", "send", "discord:group:123", "ping")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == "ok" and out["reply"] == "pong: ping" and out["via"] == "gateway"
    (call,) = fake_gateway.calls("agent")
    assert call["params"]["sessionKey"] == "agent:main:discord:group:123"
    assert call["params"]["idempotencyKey"] == out["runId"]  # the run id is the turn's key
    rec = fake_gateway.record(out["runId"])
    assert rec["status"] == "ok" and rec["kind"] == "send" and rec["via"] == "gateway"
    assert rec["sessionId"] == "sid-" + out["runId"][:8]
    assert rec["usage"]["totalTokens"] == 1234


def test_send_timeout_exits_124_and_wait_returns_the_reply(fake_gateway: FakeGateway) -> None:
    proc = fake_gateway.st("--json", "send", "main", "sleep:2 slow one", "--timeout", "0.2")
    assert proc.returncode == 124, proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == "timeout" and out["via"] == "gateway"
    run_id = out["runId"]
    assert f"sessiontool wait {run_id}" in out["error"]
    proc = fake_gateway.st("--json", "wait", run_id)
    assert proc.returncode == 0, proc.stderr
    done = json.loads(proc.stdout)
    assert done == {
        "runId": run_id,
        "status": "ok",
        "reply": "pong: sleep:2 slow one",
        "sessionKey": "main",
        "via": "gateway",
    }


def test_send_timeout_zero_returns_a_run_id_at_once(fake_gateway: FakeGateway) -> None:
    proc = fake_gateway.st("send", "main", "hello", "--timeout", "0")
    assert proc.returncode == 0, proc.stderr
    run_id = proc.stdout.strip()
    proc = fake_gateway.st("--json", "wait", run_id, "--timeout", "60")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["reply"] == "pong: hello"
    proc = fake_gateway.st("runs", "-q", "--kind", "send")
    assert run_id in proc.stdout.split()


def test_a_refused_turn_is_a_failed_run(fake_gateway: FakeGateway) -> None:
    proc = fake_gateway.st("--json", "send", "main", "fail now")
    assert proc.returncode == 1
    out = json.loads(proc.stdout)
    assert out["status"] == "error" and out["runStatus"] == "error"
    assert "agent refused: fail now" in out["error"]


def test_abort_ends_the_run_and_asks_the_gateway_to_stop(fake_gateway: FakeGateway) -> None:
    proc = fake_gateway.st("send", "main", "sleep:120 never ends", "--timeout", "0")
    run_id = proc.stdout.strip()
    fake_gateway.until_called("agent", run_id)
    gw_run = fake_gateway.until(run_id, lambda r: r.get("gatewayRunId"), "accepted")
    proc = fake_gateway.st("--json", "abort", run_id)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out == {"runId": run_id, "status": "aborted", "gatewayAborted": True}
    # Stopped by the connection that owns the turn (the worker's), by the gateway's own run id:
    # OpenClaw refuses it from any other operator.write connection.
    (call,) = fake_gateway.calls("chat.abort")
    (turn,) = fake_gateway.calls("agent")
    assert call["params"] == {"sessionKey": "agent:main:main", "runId": gw_run["gatewayRunId"]}
    assert call["conn"] == turn["conn"]
    proc = fake_gateway.st("--json", "wait", run_id)
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["runStatus"] == "aborted"
    rec = fake_gateway.until(run_id, lambda r: r.get("outcome") == "aborted", "its end")
    assert rec["status"] == "aborted"


def test_spawn_creates_the_child_and_announces_back_through_the_gateway(
    fake_gateway: FakeGateway,
) -> None:
    proc = fake_gateway.st(
        "--json", "spawn", "summarise X", "--label", "gw-child", "--run-timeout", "30"
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == "accepted" and out["via"] == "gateway"
    run_id, child = out["runId"], out["childSessionKey"]
    assert child.startswith("agent:main:subagent:")
    rec = fake_gateway.until(
        run_id, lambda r: (r.get("followUp") or {}).get("next") == "done", "its announce"
    )
    assert rec["status"] == "ok" and rec["reply"] == "pong: summarise X"
    # The gateway's own time for the turn, and the gateway's id of the announce turn (not our
    # idempotency key) that `agent.wait` knows it by, are kept in the record.
    finals = fake_gateway.gw.finals()
    assert rec["gatewayDurationMs"] == finals[rec["gatewayRunId"]]["durationMs"]
    announce_run = rec["followUp"]["announceRunId"]
    deadline = time.monotonic() + 60
    while announce_run not in finals and time.monotonic() < deadline:  # runs after accept
        time.sleep(0.1)
        finals = fake_gateway.gw.finals()
    key = f"announce:v1:{child}:{rec['gatewayRunId']}"
    assert finals[announce_run]["idempotencyKey"] == key
    create, turn, announce = [
        c for c in fake_gateway.calls() if c["method"] in ("sessions.create", "agent")
    ]
    # Linked to its requester as OpenClaw's sessions_spawn links a child.
    assert create["params"] == {
        "key": child,
        "parentSessionKey": "agent:main:main",
        "spawnDepth": 1,
        "label": "gw-child",
    }
    p = turn["params"]
    assert (p["sessionKey"], p["idempotencyKey"], p["lane"], p["timeout"]) == (
        child,
        run_id,
        "subagent",
        30,
    )
    assert "Your task:\nsummarise X" in p["extraSystemPrompt"]
    assert p["inputProvenance"]["sourceTool"] == "sessions_spawn"
    a = announce["params"]
    assert is_announce(announce) and a["sessionKey"] == "agent:main:main"
    assert a["idempotencyKey"] == key
    # OpenClaw's own announce form: the completion event as internalEvents (OpenClaw keeps no
    # user message for it), the prompt OpenClaw builds from it, the Stats line inside.
    from sessiontool.flow.announce import completion_event, completion_prompt, stats_line

    stats = stats_line(
        started_at=rec["startedAt"],
        ended_at=rec["endedAt"],
        usage=rec["usage"],
        cost=None,
        child_key=child,
        session_id=rec["sessionId"],
        transcript=None,
    )
    event = completion_event(rec, stats)
    assert (event["taskLabel"], event["result"], event["status"]) == (
        "gw-child",
        "pong: summarise X",
        "ok",
    )
    assert event["childSessionKey"] == child and event["childSessionId"] == rec["sessionId"]
    assert a["internalEvents"] == [event] and a["message"] == completion_prompt(event)
    assert event["statsLine"] == stats and "tokens 1.2k (in 1.2k / out 34)" in stats
    assert a["inputProvenance"] == {
        "kind": "inter_session",
        "sourceSessionKey": child,
        "sourceChannel": "internal",
        "sourceTool": "subagent_announce",
    }


def test_spawn_run_timeout_and_cleanup_delete(fake_gateway: FakeGateway) -> None:
    proc = fake_gateway.st(
        "--json", "spawn", "sleep:30 too long", "--run-timeout", "1", "--cleanup", "delete"
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    rec = fake_gateway.until(
        out["runId"], lambda r: (r.get("followUp") or {}).get("next") == "done", "its cleanup"
    )
    assert rec["status"] == "timeout"
    announce = [c for c in fake_gateway.calls("agent") if is_announce(c)]
    (event,) = announce[0]["params"]["internalEvents"]
    assert (event["status"], event["result"], event.get("noVisibleResult")) == ("timeout", "", True)
    assert event["statusLabel"].startswith("timed out: run timed out after 1s")
    (delete,) = fake_gateway.calls("sessions.delete")
    assert delete["params"] == {"key": out["childSessionKey"], "deleteTranscript": True}


def test_spawn_label_in_use_is_refused_before_any_call(fake_gateway: FakeGateway) -> None:
    proc = fake_gateway.st("spawn", "x", "--label", "weather-fixture")
    assert proc.returncode == 2
    assert "label already in use: weather-fixture" in proc.stderr
    assert [c["method"] for c in fake_gateway.calls()] in ([], ["status"])


def test_no_gateway_spawn_exits_4(tmp_path: Path) -> None:
    state = tmp_path / "state"
    shutil.copytree(OC_STATE, state)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (state / "openclaw.json").write_text(json.dumps({"gateway": {"port": port}}))
    before = tree_digest(state)
    proc = run_cli("--state-dir", str(state), "spawn", "a task")
    assert proc.returncode == 4
    assert "start it with `openclaw gateway" in proc.stderr
    assert tree_digest(state) == before


def test_deliver_and_requester_go_to_the_gateway_turn(fake_gateway: FakeGateway) -> None:
    """--deliver is the gateway's `deliver` (its delivery, not sessiontool's outbox); a send made
    as another session carries it as the turn's inputProvenance."""
    t0 = time.monotonic()
    wait = generous(6)
    proc = fake_gateway.st(
        "--json", "send", "discord:group:123", "hi", "--deliver", "--timeout", str(wait)
    )
    assert proc.returncode == 0, proc.stderr
    assert "delivery" not in json.loads(proc.stdout)
    # The gateway's turn delivered it: no waiting for an outbox line that never comes (that
    # wait took the whole --timeout).
    assert time.monotonic() - t0 < wait * 0.9
    assert not (fake_gateway.state / "sessiontool" / "deliveries.jsonl").exists()
    proc = fake_gateway.st(
        "--as", "agent:main:main", "--json", "send", "discord:group:123", "from main"
    )
    assert proc.returncode == 0, proc.stderr
    first, second = (c["params"] for c in fake_gateway.calls("agent")[:2])
    assert first["deliver"] is True
    # An operator's message carries no provenance, as OpenClaw's own operator clients send it.
    assert "inputProvenance" not in first
    assert "deliver" not in second
    assert second["inputProvenance"]["kind"] == "inter_session"
    assert second["inputProvenance"]["sourceSessionKey"] == "agent:main:main"


def test_send_as_runs_the_reply_back_turns_and_the_announce(fake_gateway: FakeGateway) -> None:
    """A send between two sessions through the gateway gets the file path's agent-to-agent
    flow: reply-back turns alternating sessions (each an `agent` turn with the reply prompt and
    inter-session provenance), then the announce step in the target, whose reply is delivered
    through sessiontool's outbox (not mirrored into OpenClaw's transcript)."""
    proc = fake_gateway.st(
        "--as", "agent:main:main", "--json", "send", "discord:group:123", "from main"
    )
    assert proc.returncode == 0, proc.stderr
    run_id = json.loads(proc.stdout)["runId"]
    fake_gateway.until(run_id, lambda r: (r.get("followUp") or {}).get("next") == "done", "done")
    turns = [c["params"] for c in fake_gateway.calls("agent")]
    assert [t["sessionKey"] for t in turns] == [
        "agent:main:discord:group:123",  # the send
        "agent:main:main",  # reply:1, in the requester (skips)
        "agent:main:discord:group:123",  # the announce step, in the target
    ]
    reply1, announce = turns[1], turns[2]
    assert "Agent-to-agent reply step:" in reply1["extraSystemPrompt"]
    assert reply1["message"] == "pong: from main"
    assert reply1["inputProvenance"]["sourceSessionKey"] == "agent:main:discord:group:123"
    assert "Agent-to-agent announce step:" in announce["extraSystemPrompt"]
    assert announce["inputProvenance"]["sourceSessionKey"] == "agent:main:main"
    lines = (fake_gateway.state / "sessiontool" / "deliveries.jsonl").read_text().splitlines()
    (d,) = [json.loads(x) for x in lines]
    assert d["mode"] == "announce" and d["text"].startswith("announced: ")


def test_a_worker_killed_mid_turn_is_lost_and_still_announced(fake_gateway: FakeGateway) -> None:
    """The worker dies while the gateway runs the child: the run is `lost` (never a write to
    OpenClaw's store to flag it), and the requester still gets its announce."""
    import os
    import signal

    proc = fake_gateway.st("--json", "spawn", "sleep:120 long child")
    out = json.loads(proc.stdout)
    fake_gateway.until_called("agent", out["runId"])
    rec = fake_gateway.record(out["runId"])
    os.kill(rec["pid"], signal.SIGKILL)
    rec = fake_gateway.until(
        out["runId"],
        lambda r: (r.get("followUp") or {}).get("next") == "done",
        "its announce after the loss",
    )
    assert rec["status"] == "lost"
    announce = [c for c in fake_gateway.calls("agent") if is_announce(c)]
    (event,) = announce[0]["params"]["internalEvents"]
    assert event["status"] == "error" and event["statusLabel"].startswith("failed: ")


def test_no_file_write_lands_beside_openclaws_database(tmp_path: Path) -> None:
    """Belt and braces under every caller: a sessions.json update or a transcript append for an
    agent whose store is OpenClaw's SQLite database is refused (exit 4) and creates nothing."""
    from sessiontool.errors import ForbiddenError
    from sessiontool.state import transcript
    from sessiontool.state.sessions_json import update_store

    state = tmp_path / "state"
    shutil.copytree(OC_STATE, state)
    sessions = state / "agents" / "main" / "sessions"
    before = tree_digest(state)
    with pytest.raises(ForbiddenError) as err:
        update_store(sessions / "sessions.json", lambda s: s.update({"agent:main:x": {}}))
    assert int(err.value.code) == 4
    with pytest.raises(ForbiddenError):
        transcript.append_message(sessions / "x.jsonl", "x", {"role": "user", "content": "hi"})
    assert tree_digest(state) == before


def test_emulated_spawn_hands_its_options_to_sessions_create(
    fake_gateway: FakeGateway, tmp_path: Path
) -> None:
    """Through the emulation a spawn's thinking, cwd and fork go to OpenClaw's sessions.create
    (its names: thinkingLevel, cwd, fork) with the child's depth; a quiet spawn announces
    nothing (issue 41 item 3)."""
    work = tmp_path / "work"
    work.mkdir()
    args = ["--thinking", "low", "--cwd", str(work), "--context", "fork", "--quiet-completion"]
    proc = fake_gateway.st("--json", "spawn", "with options", *args)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    rec = fake_gateway.until(
        out["runId"], lambda r: (r.get("followUp") or {}).get("next") == "done", "its end"
    )
    assert rec["status"] == "ok" and rec["spawnDepth"] == 1 and rec["maxSpawnDepth"] == 5
    (create,) = fake_gateway.calls("sessions.create")
    assert create["params"] == {
        "key": out["childSessionKey"],
        "parentSessionKey": "agent:main:main",
        "spawnDepth": 1,
        "thinkingLevel": "low",
        "cwd": str(work),
        "fork": True,
    }
    assert not [c for c in fake_gateway.calls("agent") if is_announce(c)]


def test_a_gateway_turn_over_its_max_cost_ends_aborted_for_the_budget(
    fake_gateway: FakeGateway,
) -> None:
    """The gateway's turn tells its usage at its end (1,200 input tokens of fake/fake-model at
    1 USD per million: 0.0012 USD): over --max-cost 0.001, the run ends aborted, reason
    budget, its reply kept; send exits 6."""
    prices = {"fake": {"models": [{"id": "fake-model", "cost": {"input": 1, "output": 0}}]}}
    (fake_gateway.state / "sessiontool.json5").write_text(
        json.dumps({"models": {"providers": prices}})
    )
    proc = fake_gateway.st("--json", "send", "discord:group:123", "ping", "--max-cost", "0.001")
    assert proc.returncode == 6, proc.stderr
    out = json.loads(proc.stdout)
    assert out["reason"] == "budget" and out["via"] == "gateway"
    rec = fake_gateway.record(out["runId"])
    assert rec["status"] == "aborted" and rec["abortReason"] == "budget"
    assert rec["reply"] == "pong: ping" and "0.0012 USD" in rec["error"]
