"""A budget stopping a turn of the real OpenClaw 2026.9.6 gateway mid-turn: the gateway tells the
turn's owner connection the run's output tokens after each model call (`agent` events, stream
`usage`); priced over the run's `--max-cost`, the worker stops the turn with `chat.abort` and
records it `aborted` for the budget (`gatewayAborted`: whether the gateway stopped it, set only
on that path). The fake model's reply is a few tokens, so its output is priced high here."""

from __future__ import annotations

import json

from .conftest import Live
from .test_openclaw_gateway import st

GROUP = "agent:main:discord:group:123"
# 10 USD per output token of the fake model (sessiontool's price table, not OpenClaw's).
PRICES = {"fake": {"models": [{"id": "fake-model", "cost": {"input": 0, "output": 10_000_000}}]}}


def test_a_gateway_turn_over_its_max_cost_is_stopped_on_its_usage_event(live: Live) -> None:
    (live.state / "sessiontool.json5").write_text(json.dumps({"models": {"providers": PRICES}}))
    try:
        proc = st(
            live.env,
            live.state,
            "--json",
            "send",
            GROUP,
            "a costly turn",
            "--max-cost",
            "1",
            "--timeout",
            "300",
        )
    finally:
        (live.state / "sessiontool.json5").unlink()
    assert proc.returncode == 6, (proc.stdout, proc.stderr)
    out = json.loads(proc.stdout)
    assert out["reason"] == "budget" and out["via"] == "gateway", out
    path = live.state / "sessiontool" / "runs" / f"{out['runId']}.json"
    rec = json.loads(path.read_text())
    assert rec["status"] == "aborted" and rec["abortReason"] == "budget"
    assert "--max-cost: the run spent" in rec["error"]
    # The mid-turn path: the usage event's watch raised, chat.abort went to the gateway (only
    # that path records the gateway's answer), the reply so far kept from its `assistant`
    # events (the fake model echoes the message).
    assert "gatewayAborted" in rec, rec
    assert "a costly turn" in rec.get("reply", "")
