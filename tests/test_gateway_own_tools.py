"""OpenClaw's own session tools through the gateway's `tools.invoke` (openclaw/own_tools.py),
chosen per gateway, not configured: where the gateway allows `sessions_spawn`/`sessions_send`
(`gateway.tools.allow`), `spawn` and `send --as` run them for the requester session and the run
engine follows the tool's run; where it answers `not_found`, today's emulation runs (the other
gateway tests). The gateway is the scripted fake (tests/fakes/gateway.py) with `tools_allowed`;
OpenClaw's store stays byte-identical."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from .fakes import gateway as fake
from .test_gateway_runs import NO_OPENCLAW_PATH, FakeGateway
from .test_openclaw_sqlite import OC_STATE, tree_digest

TOOLS = ["sessions_spawn", "sessions_send"]


@pytest.fixture
def allowed(tmp_path: Path) -> Iterator[FakeGateway]:
    state = tmp_path / "state"
    shutil.copytree(OC_STATE, state)
    before = tree_digest(state / "agents")
    with fake.running(tmp_path / "gw", token="t0ken-fake", tools_allowed=TOOLS) as gw:
        (state / "openclaw.json").write_text(
            json.dumps({"gateway": {"port": gw.port, "auth": {"token": "t0ken-fake"}}})
        )
        yield FakeGateway(state, gw, {"SESSIONTOOL_OPENCLAW_BIN": "", "PATH": NO_OPENCLAW_PATH})
    assert tree_digest(state / "agents") == before


def done(rec: dict[str, object]) -> bool:
    follow = rec.get("followUp")
    return isinstance(follow, dict) and follow.get("next") == "done"


def test_spawn_runs_openclaws_sessions_spawn_and_follows_its_run(allowed: FakeGateway) -> None:
    proc = allowed.st(
        "--json",
        "spawn",
        "summarise Y",
        "--label",
        "own-child",
        "--run-timeout",
        "29.5",
        "--cleanup",
        "delete",
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert (out["via"], out["tool"]) == ("gateway", "sessions_spawn")
    (call,) = allowed.calls("tools.invoke")
    p = call["params"]
    # sessiontool's options as the tool's arguments; the run id as the call's idempotency key.
    assert p == {
        "name": "sessions_spawn",
        "sessionKey": "agent:main:main",
        "args": {
            "task": "summarise Y",
            "label": "own-child",
            "runTimeoutSeconds": 30,
            "cleanup": "delete",
        },
        "idempotencyKey": out["runId"],
    }
    rec = allowed.until(out["runId"], done, "its announce")
    finals = allowed.gw.finals()
    # The child is the tool's (its key and run), not one sessiontool made up.
    assert rec["sessionKey"] == out["childSessionKey"]
    assert finals[rec["gatewayRunId"]]["idempotencyKey"] == out["runId"]
    assert rec["tool"] == "sessions_spawn" and rec["status"] == "ok"
    assert rec["reply"] == "pong: summarise Y"
    # No emulation: no child created, no turn of sessiontool's; the run was followed with
    # agent.wait.
    methods = [c["method"] for c in allowed.calls()]
    assert "sessions.create" not in methods
    waits = allowed.calls("agent.wait")
    assert waits[0]["params"]["runId"] == rec["gatewayRunId"]
    # OpenClaw's own announce did not come (the fake, like 2026.9.6 after tools.invoke, has
    # none): handed over once, in OpenClaw's form and under OpenClaw's own key, and followed
    # to its end (agent.wait on the announce turn's run).
    key = f"announce:v1:{rec['sessionKey']}:{rec['gatewayRunId']}"
    assert waits[1]["params"]["runId"] == key
    (announce,) = allowed.calls("agent")
    assert announce["params"]["idempotencyKey"] == key
    assert announce["params"]["internalEvents"][0]["childSessionKey"] == rec["sessionKey"]
    assert waits[-1]["params"]["runId"] == rec["followUp"]["announceRunId"]
    assert rec["followUp"]["announceRunId"] in allowed.gw.finals()
    assert rec["followUp"]["announcedBy"] == "sessiontool"
    # OpenClaw's own clean-up went with its announce that did not come: the child is removed
    # by sessiontool once its announce landed.
    assert methods[-1] == "sessions.delete"
    assert allowed.calls("sessions.delete")[0]["params"]["key"] == rec["sessionKey"]


def test_the_worker_goes_on_with_the_commands_connection(allowed: FakeGateway) -> None:
    """One handshake for the spawn: the command's connection (its tools.invoke) is handed to
    the worker forked from it, which follows the run and announces on it (a `--cleanup
    delete` child's removal asks for operator.admin: a connection of its own then)."""
    proc = allowed.st("--json", "spawn", "summarise W")
    assert proc.returncode == 0, proc.stderr
    allowed.until(json.loads(proc.stdout)["runId"], done, "its announce")
    calls = allowed.calls()
    assert [c["method"] for c in calls] == [
        "tools.invoke",
        "agent.wait",
        "agent.wait",
        "agent",
        "agent.wait",
    ]
    assert len({c["conn"] for c in calls}) == 1
    assert len(allowed.gw.connects()) == 1


def test_openclaws_own_announce_under_way_stays_the_one(tmp_path: Path) -> None:
    """Where OpenClaw announces the child itself (2026.7.35) and its announce outlasts the
    grace sessiontool gives it, sessiontool's announce under OpenClaw's key finds that run
    (`in_flight`): the record names OpenClaw's announce, and no second one ran."""
    state = tmp_path / "state"
    shutil.copytree(OC_STATE, state)
    with fake.running(
        tmp_path / "gw", token="t0ken-fake", tools_allowed=TOOLS, own_announce_s=3
    ) as gw:
        (state / "openclaw.json").write_text(
            json.dumps({"gateway": {"port": gw.port, "auth": {"token": "t0ken-fake"}}})
        )
        it = FakeGateway(state, gw, {"SESSIONTOOL_OPENCLAW_BIN": "", "PATH": NO_OPENCLAW_PATH})
        proc = it.st("--json", "spawn", "summarise Z", "--cleanup", "delete")
        assert proc.returncode == 0, proc.stderr
        rec = it.until(json.loads(proc.stdout)["runId"], done, "its announce")
        key = f"announce:v1:{rec['sessionKey']}:{rec['gatewayRunId']}"
        assert rec["followUp"]["announceRunId"] == key
        assert rec["followUp"]["announcedBy"] == "openclaw"
        (announce,) = it.calls("agent")  # sent once, under OpenClaw's key, and not run again
        assert announce["params"]["idempotencyKey"] == key
        assert len(gw.finals()) == 1  # the child's turn; no announce turn of sessiontool's


def test_send_as_runs_openclaws_sessions_send(allowed: FakeGateway) -> None:
    proc = allowed.st("--as", "agent:main:main", "--json", "send", "discord:group:123", "hi")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == "ok" and out["reply"] == "pong: hi"
    assert out["delivery"] == {"status": "pending", "mode": "announce"}
    probe, call = allowed.calls("tools.invoke")
    # Asked once whether the gateway runs the tool (an argument-less call it refuses), then run
    # for the requester, answering at once; the worker follows the run.
    assert probe["params"]["args"] == {}
    assert call["params"] == {
        "name": "sessions_send",
        "sessionKey": "agent:main:main",
        "args": {
            "sessionKey": "agent:main:discord:group:123",
            "message": "hi",
            "timeoutSeconds": 0,
        },
        "idempotencyKey": out["runId"],
    }
    rec = allowed.record(out["runId"])
    assert rec["tool"] == "sessions_send" and rec["gatewayRunId"].startswith("gw-")
    # The reply-back turns and the announce step are OpenClaw's: sessiontool runs none.
    assert allowed.calls("agent") == []
    assert not (allowed.state / "sessiontool" / "deliveries.jsonl").exists()


def test_a_plain_send_is_not_a_tool_call(allowed: FakeGateway) -> None:
    """An operator's send is an `agent` turn whatever the gateway allows (sessions_send is one
    session's message to another)."""
    proc = allowed.st("--json", "send", "discord:group:123", "hello")
    assert proc.returncode == 0, proc.stderr
    assert allowed.calls("tools.invoke") == []
    (turn,) = allowed.calls("agent")
    assert "inputProvenance" not in turn["params"]


def test_a_run_timeout_is_openclaws_and_recorded(allowed: FakeGateway) -> None:
    proc = allowed.st("--json", "spawn", "sleep:30 too long", "--run-timeout", "1")
    assert proc.returncode == 0, proc.stderr
    run_id = json.loads(proc.stdout)["runId"]
    proc = allowed.st("--json", "wait", run_id, "--timeout", "60")
    assert proc.returncode == 1
    out = json.loads(proc.stdout)
    assert out["runStatus"] == "timeout" and "--run-timeout" in out["error"]
    (call,) = allowed.calls("tools.invoke")
    assert call["params"]["args"]["runTimeoutSeconds"] == 1


def test_doctor_names_the_path(allowed: FakeGateway, tmp_path: Path) -> None:
    proc = allowed.st("--json", "doctor")
    gw = json.loads(proc.stdout)["gateway"]
    assert gw["spawn"] == "OpenClaw's own sessions_spawn"
    proc = allowed.st("doctor")
    assert "spawn: OpenClaw's own sessions_spawn" in proc.stdout


BAD_CHILD_KEYS = [
    "",
    "agent:main:subagent:../../etc",
    "/etc/passwd",
    "agent:main:sub\x00agent",
    "agent:main:sub\x1b[31magent",
    "agent:main:sub\u202eagent",
    "agent:main:sub\x9bagent",
    "agent:other:subagent:3f1c",
    "subagent:3f1c",
    "agent:main:" + "x" * 100_000,
    17,
]


@pytest.mark.parametrize("bad", BAD_CHILD_KEYS, ids=lambda v: repr(v)[:24])
def test_a_child_key_the_gateway_answers_is_checked_before_any_record(
    tmp_path: Path, bad: object
) -> None:
    """A `childSessionKey` that no user could type (empty, a path, a control character,
    another agent's, 100,000 characters) is refused with one line, exit 1, and no run record
    is left behind for `runs` to choke on."""
    state = tmp_path / "state"
    shutil.copytree(OC_STATE, state)
    with fake.running(
        tmp_path / "gw", token="t0ken-fake", tools_allowed=TOOLS, child_key=bad
    ) as gw:
        (state / "openclaw.json").write_text(
            json.dumps({"gateway": {"port": gw.port, "auth": {"token": "t0ken-fake"}}})
        )
        it = FakeGateway(state, gw, {"SESSIONTOOL_OPENCLAW_BIN": "", "PATH": NO_OPENCLAW_PATH})
        proc = it.st("spawn", "summarise Q")
        assert proc.returncode == 1, proc.stderr
        (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("sessiontool: error")]
        assert "invalid sessions_spawn's childSessionKey" in line
        assert all(c == "\n" or c.isprintable() for c in proc.stderr)
        assert len(proc.stderr) < 2000
        runs_dir = state / "sessiontool" / "runs"
        assert not list(runs_dir.glob("*.json")) if runs_dir.exists() else True
        listed = it.st("--json", "runs")
        assert listed.returncode == 0, listed.stderr
        assert json.loads(listed.stdout)["runs"] == []


@pytest.mark.parametrize(
    ("answer", "rc", "status"),
    [
        (
            {
                "status": "forbidden",
                "error": "cwd override is not supported for sandboxed subagent runs; omit cwd "
                "or use the target agent workspace as cwd",
            },
            4,
            "forbidden",
        ),
        ({"status": "error", "error": 'mode="session" requires thread=true'}, 1, "error"),
    ],
)
def test_a_spawn_openclaws_tool_refuses_keeps_its_status(
    tmp_path: Path, answer: dict[str, str], rc: int, status: str
) -> None:
    """OpenClaw's sessions_spawn refusing the spawn (its answer's `status`, not an accepted
    child): its words, and a `forbidden` is exit 4 `status: forbidden` as the own store's
    refusal of a cwd on a sandboxed child is; any other refusal exit 1. No run is recorded."""
    state = tmp_path / "state"
    shutil.copytree(OC_STATE, state)
    with fake.running(
        tmp_path / "gw", token="t0ken-fake", tools_allowed=TOOLS, spawn_answer=answer
    ) as gw:
        (state / "openclaw.json").write_text(
            json.dumps({"gateway": {"port": gw.port, "auth": {"token": "t0ken-fake"}}})
        )
        it = FakeGateway(state, gw, {"SESSIONTOOL_OPENCLAW_BIN": "", "PATH": NO_OPENCLAW_PATH})
        proc = it.st("--json", "spawn", "in there", "--cwd", str(tmp_path))
        assert proc.returncode == rc, proc.stderr
        out = json.loads(proc.stdout)
        assert out["status"] == status and answer["error"] in out["error"], out
        (call,) = gw.calls("tools.invoke")
        assert call["params"]["args"]["cwd"] == str(tmp_path)
        assert json.loads(it.st("--json", "runs").stdout)["runs"] == []


def test_a_run_timeout_that_openclaw_ends_as_an_error_is_a_timeout(tmp_path: Path) -> None:
    """Under load 2026.9.6 ends a spawn its runTimeoutSeconds cut with `error` (the child's row
    `failed`) where a quiet machine says `ok` (the row `timeout`): either way sessiontool's
    record says `timeout`, naming --run-timeout, not "ended with status error"."""
    state = tmp_path / "state"
    shutil.copytree(OC_STATE, state)
    with fake.running(
        tmp_path / "gw", token="t0ken-fake", tools_allowed=TOOLS, timeout_as="error"
    ) as gw:
        (state / "openclaw.json").write_text(
            json.dumps({"gateway": {"port": gw.port, "auth": {"token": "t0ken-fake"}}})
        )
        gateway = FakeGateway(state, gw, {"SESSIONTOOL_OPENCLAW_BIN": "", "PATH": NO_OPENCLAW_PATH})
        proc = gateway.st("--json", "spawn", "sleep:30 too long", "--run-timeout", "1")
        assert proc.returncode == 0, proc.stderr
        run_id = json.loads(proc.stdout)["runId"]
        proc = gateway.st("--json", "wait", run_id, "--timeout", "60")
        out = json.loads(proc.stdout)
        assert out["runStatus"] == "timeout" and "--run-timeout" in out["error"], out
        assert "ended with status error" not in out["error"]
        until_done = gateway.until(run_id, done, "its follow-up's end")
        assert until_done["status"] == "timeout"
