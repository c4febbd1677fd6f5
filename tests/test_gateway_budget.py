"""A gateway turn stopped mid-turn by its budget (issue 44): OpenClaw 2026.9.6 tells the turn's
owner connection the run's output tokens after each model call (`agent` events, stream
`usage`); once their price reaches the run's cost limit the worker stops the turn with
`chat.abort` (the owner's right) and records it `aborted` for the budget, the reply so far
kept; `send` exits 6. The gateway is the scripted fake (tests/fakes/gateway.py), set to send
those events while a `sleep:` turn lasts."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from .fakes import gateway as fake
from .test_gateway_runs import NO_OPENCLAW_PATH, FakeGateway
from .test_openclaw_sqlite import OC_STATE, tree_digest

# 1 USD per million output tokens: 100 tokens cost 0.0001, 5,000 cost 0.005.
PRICES = {"fake": {"models": [{"id": "fake-model", "cost": {"input": 0, "output": 1}}]}}


@pytest.fixture
def streaming_gateway(tmp_path: Path) -> Iterator[FakeGateway]:
    state = tmp_path / "state"
    shutil.copytree(OC_STATE, state)
    before = tree_digest(state / "agents")
    with fake.running(
        tmp_path / "gw", token="t0ken-fake", usage_events=[100, 5000, 9000], usage_event_s=0.3
    ) as gw:
        (state / "openclaw.json").write_text(
            json.dumps({"gateway": {"port": gw.port, "auth": {"token": "t0ken-fake"}}})
        )
        (state / "sessiontool.json5").write_text(json.dumps({"models": {"providers": PRICES}}))
        env = {"SESSIONTOOL_OPENCLAW_BIN": "", "PATH": NO_OPENCLAW_PATH}
        yield FakeGateway(state, gw, env)
    assert tree_digest(state / "agents") == before


def test_a_gateway_turn_crossing_its_cost_limit_is_stopped_with_chat_abort(
    streaming_gateway: FakeGateway,
) -> None:
    gw = streaming_gateway
    proc = gw.st(
        "--json", "send", "discord:group:123", "sleep:60 think long", "--max-cost", "0.001"
    )
    assert proc.returncode == 6, proc.stderr
    out = json.loads(proc.stdout)
    assert out["runStatus"] == "aborted" and out["reason"] == "budget", out
    rec = gw.record(out["runId"])
    assert rec["status"] == "aborted" and rec["abortReason"] == "budget"
    # Stopped at the second usage event (5,000 output tokens: 0.0050 USD), not at the end.
    assert "the run spent 0.0050 USD" in rec["error"], rec["error"]
    assert rec["reply"] == "partial reply 2"
    (abort,) = gw.calls("chat.abort")
    assert abort["params"]["runId"] == rec["gatewayRunId"]
    assert rec["gatewayAborted"] is True  # the gateway said it stopped the turn
    assert not [c for c in gw.calls(fake.FINAL) if c["params"].get("status") == "ok"]


def test_a_turn_under_its_limit_runs_to_its_end(streaming_gateway: FakeGateway) -> None:
    """The same events under a wider limit stop nothing: the turn ends as the gateway says."""
    gw = streaming_gateway
    proc = gw.st("--json", "send", "discord:group:123", "sleep:2 short", "--max-cost", "1")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == "ok" and out["reply"] == "pong: sleep:2 short"
    assert gw.calls("chat.abort") == []
