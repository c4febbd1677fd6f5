"""The built-in echo demo agent never answers on a real install: on a state dir that belongs to
OpenClaw or Clawdbot (its config file is there) with no sessiontool runner configured, a
`send`/`spawn` goes to the running gateway, or exits 4 saying that no gateway runs and how to
configure a runner, leaving the state dir as it was. A runner configured in sessiontool's own
config (even an explicit echo) is used as before, and sessiontool's own state dirs keep the
demo agent as their default."""

from __future__ import annotations

import json
import shutil
import socket
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import FIXTURE_STATE, run_cli, write_config

from .fakes import gateway as fake
from .runhelpers import reap
from .test_openclaw_sqlite import tree_digest

# A stand-in for the gateway's client (`openclaw gateway call METHOD --params JSON --json`):
# a lock-honouring 2026.4.29 gateway whose agent answers "pong: <message>".
FAKE_CLI = r"""#!PYTHON
import json, os, sys
args = sys.argv[1:]
method, params = args[2], json.loads(args[args.index("--params") + 1])
with open(os.environ["FAKE_GATEWAY_LOG"], "a") as log:
    log.write(json.dumps({"method": method, "params": params}) + "\n")
if method == "status":
    print(json.dumps({"runtimeVersion": "2026.4.29"}))
elif method == "agent":
    print(json.dumps({"runId": params["idempotencyKey"], "status": "ok",
                      "result": {"payloads": [{"text": "pong: " + params["message"]}]}}))
else:
    print(json.dumps({"ok": False, "error": {"message": "unsupported " + method}}))
    sys.exit(1)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def clawdbot_state(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """A copy of the real Clawdbot fixture (clawdbot.json, sessions.json + JSONL); its gateway
    port moved to one where nothing listens."""
    state = tmp_path / "cb-state"
    shutil.copytree(FIXTURE_STATE, state)
    env = {"OPENCLAW_GATEWAY_PORT": str(_free_port())}
    yield state, env
    reap(state)


@pytest.mark.parametrize(
    "argv",
    [["send", "main", "hello from a cron job"], ["spawn", "summarise the day"]],
    ids=["send", "spawn"],
)
def test_no_runner_and_no_gateway_exits_4_and_writes_nothing(
    clawdbot_state: tuple[Path, dict[str, str]], argv: list[str]
) -> None:
    state, env = clawdbot_state
    before = tree_digest(state)
    proc = run_cli("--state-dir", str(state), *argv, env=env)
    assert proc.returncode == 4, proc.stderr
    err = proc.stderr
    assert "belongs to OpenClaw (clawdbot.json)" in err and "no gateway answers" in err
    assert "agents.defaults.runner" in err and "openclaw gateway" in err
    assert len(err.strip().splitlines()) == 2  # the error line and its hint
    assert tree_digest(state) == before  # no echo reply, no run record, no entry


def test_a_configured_runner_still_answers(clawdbot_state: tuple[Path, dict[str, str]]) -> None:
    """The demo agent asked for by name is honoured (the operator chose it)."""
    state, env = clawdbot_state
    write_config(state, {"agents": {"defaults": {"runner": {"type": "echo"}}}})
    proc = run_cli("--state-dir", str(state), "--json", "send", "main", "ping", env=env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["reply"] == "echo: ping"


def test_own_state_dir_keeps_the_demo_agent(state: Path) -> None:
    proc = run_cli("--json", "send", "main", "ping")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["reply"] == "echo: ping"


def test_no_runner_goes_to_the_running_gateway(tmp_path: Path) -> None:
    """A gateway that honours the store lock (2026.4.29) answers: the send is its `agent` turn,
    not the echo agent's, and sessiontool writes nothing of OpenClaw's store."""
    state = tmp_path / "cb-state"
    shutil.copytree(FIXTURE_STATE, state)
    # A 2026.4.29 gateway speaks protocol 3: sessiontool's own client learns that from the
    # handshake and reaches it through the gateway's own CLI.
    gw = fake.running(tmp_path / "gw", protocol=3, version="2026.4.29", token=None)
    listener = gw.__enter__()
    cli = tmp_path / "openclaw"
    cli.write_text(FAKE_CLI.replace("PYTHON", sys.executable))
    cli.chmod(cli.stat().st_mode | stat.S_IXUSR)
    log = tmp_path / "calls.jsonl"
    env = {
        "OPENCLAW_GATEWAY_PORT": str(listener.port),
        "SESSIONTOOL_OPENCLAW_BIN": str(cli),
        "FAKE_GATEWAY_LOG": str(log),
    }
    before = tree_digest(state / "agents")
    try:
        proc = run_cli("--state-dir", str(state), "--json", "send", "main", "hi", env=env)
        assert proc.returncode == 0, proc.stderr
        out = json.loads(proc.stdout)
        assert out["via"] == "gateway" and out["reply"] == "pong: hi"
        calls = [json.loads(x) for x in log.read_text().splitlines()]
        assert [c["params"]["sessionKey"] for c in calls if c["method"] == "agent"] == [
            "agent:main:main"
        ]
        assert [c["params"]["maxProtocol"] for c in listener.connects()][0] == 4
    finally:
        gw.__exit__(None, None, None)
        reap(state)
    assert tree_digest(state / "agents") == before
