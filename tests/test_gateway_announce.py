"""A spawn's announce through the gateway's `agent` method is followed to its end
(runs/gateway_announce.py): a gateway that answers `accepted` and then fails the turn (2026.9.6:
"worker task timed out") does not make the record say `announced`; the failed turn is made again
under the next attempt's key, a `--cleanup delete` child is removed only after the announce
landed, and `wait`/`runs`/`deliveries retry` say and cover the announce that did not land."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .fakes import gateway as fake
from .test_gateway_runs import NO_OPENCLAW_PATH, FakeGateway
from .test_openclaw_sqlite import OC_STATE

TOOLS = ["sessions_spawn", "sessions_send"]


def _gateway(tmp_path: Path, **cfg: Any) -> Iterator[FakeGateway]:
    state = tmp_path / "state"
    shutil.copytree(OC_STATE, state)
    with fake.running(tmp_path / "gw", token="t0ken-fake", **cfg) as gw:
        (state / "openclaw.json").write_text(
            json.dumps({"gateway": {"port": gw.port, "auth": {"token": "t0ken-fake"}}})
        )
        yield FakeGateway(state, gw, {"SESSIONTOOL_OPENCLAW_BIN": "", "PATH": NO_OPENCLAW_PATH})


@pytest.fixture
def fails_once(tmp_path: Path) -> Iterator[FakeGateway]:
    yield from _gateway(tmp_path, tools_allowed=TOOLS, announce_fail=1)


@pytest.fixture
def fails_always(tmp_path: Path) -> Iterator[FakeGateway]:
    yield from _gateway(tmp_path, tools_allowed=TOOLS, announce_fail=3)


def settled(rec: dict[str, Any]) -> bool:
    fu = rec.get("followUp") or {}
    return fu.get("next") == "done" or (
        fu.get("next", "").endswith("-announce") and fu.get("announceAttempt", 1) > 3
    )


def announces(gw: FakeGateway) -> list[dict[str, Any]]:
    return [c for c in gw.calls("agent") if c["params"].get("internalEvents")]


def test_a_failed_announce_turn_is_made_again_and_recorded_only_when_it_landed(
    fails_once: FakeGateway,
) -> None:
    proc = fails_once.st("--json", "spawn", "summarise Y", "--cleanup", "delete")
    assert proc.returncode == 0, proc.stderr
    run_id = json.loads(proc.stdout)["runId"]
    rec = fails_once.until(run_id, settled, "its announce")
    fu = rec["followUp"]
    assert fu["next"] == "done" and "error" not in fu
    first, second = announces(fails_once)
    key = f"announce:v1:{rec['sessionKey']}:{rec['gatewayRunId']}"
    # The first turn (OpenClaw's key) was accepted and failed; the second under the next
    # attempt's key landed, and is the one the record names.
    assert first["params"]["idempotencyKey"] == key
    assert second["params"]["idempotencyKey"] == key + ":retry:2"
    finals = fails_once.gw.finals()
    assert finals[fu["announceRunId"]]["idempotencyKey"] == key + ":retry:2"
    assert [f.get("status") for f in finals.values() if f["idempotencyKey"] == key] == ["error"]
    assert fu["announcedBy"] == "sessiontool" and fu["announceAttempt"] == 2
    assert isinstance(rec["announcedAt"], int)
    # The child is removed once, after the announce landed (not after the failed one).
    methods = [c["method"] for c in fails_once.calls()]
    assert methods.count("sessions.delete") == 1
    assert methods.index("sessions.delete") > methods.index("agent") + 1
    assert fails_once.calls("sessions.delete")[0]["params"]["key"] == rec["sessionKey"]


def test_an_announce_that_never_lands_is_said_and_retried_by_deliveries_retry(
    fails_always: FakeGateway,
) -> None:
    gw = fails_always
    proc = gw.st("--json", "spawn", "summarise Z", "--cleanup", "delete")
    assert proc.returncode == 0, proc.stderr
    run_id = json.loads(proc.stdout)["runId"]
    rec = gw.until(run_id, settled, "its announce attempts")
    fu = rec["followUp"]
    # Three turns accepted and failed: nothing recorded as announced, the child kept.
    assert fu["next"] == "openclaw-announce" and "worker task timed out" in fu["error"]
    assert "announcedAt" not in rec and "announcedBy" not in fu
    assert len(announces(gw)) == 3
    assert gw.calls("sessions.delete") == []
    # `wait` says the result did not reach the requester (its exit the run's, as for a
    # failed delivery) and names the retry.
    proc = gw.st("wait", run_id, "--timeout", "30")
    assert proc.returncode == 0
    assert "not announced to the requester" in proc.stderr
    assert f"deliveries retry {run_id}:spawn-announce" in proc.stderr
    # Not retried on its own any more: another look at the runs makes no fourth turn.
    gw.st("--json", "runs")
    assert len(announces(gw)) == 3
    # doctor names it and the retry.
    proc = gw.st("doctor")
    assert f"deliveries retry {run_id}:spawn-announce" in proc.stdout, proc.stdout
    # `deliveries retry` makes it once more; the gateway now lets it through.
    proc = gw.st("--json", "deliveries", "retry", f"{run_id}:spawn")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["count"] == 1 and out["delivered"] == 1
    (item,) = out["deliveries"]
    assert (item["id"], item["status"], item["previousStatus"]) == (
        f"{run_id}:spawn-announce",
        "delivered",
        "failed",
    )
    rec = gw.record(run_id)
    assert rec["followUp"]["next"] == "done" and rec["followUp"]["announceAttempt"] == 4
    assert len(announces(gw)) == 4
    assert len(gw.calls("sessions.delete")) == 1
    # Nothing left to retry.
    proc = gw.st("--json", "deliveries", "retry")
    assert json.loads(proc.stdout)["count"] == 0


def test_a_worker_killed_while_it_follows_the_announce_makes_no_second_turn(
    tmp_path: Path,
) -> None:
    """kill -9 of the worker while its announce turn runs: the next worker asks again under the
    same key, the gateway answers with that turn (in flight, then its end), and the announce
    is made exactly once more only because that turn failed."""
    import os
    import signal
    import time

    for gw in _gateway(tmp_path, tools_allowed=TOOLS, announce_fail=1, announce_fail_s=3):
        proc = gw.st("--json", "spawn", "summarise K")
        assert proc.returncode == 0, proc.stderr
        run_id = json.loads(proc.stdout)["runId"]
        deadline = time.monotonic() + 60
        while not announces(gw):
            assert time.monotonic() < deadline, "no announce turn reached the gateway"
            time.sleep(0.05)
        path = gw.state / "sessiontool" / "runs" / f"{run_id}.json"
        worker = json.loads(path.read_text())["pid"]
        os.kill(worker, signal.SIGKILL)
        rec = gw.until(run_id, settled, "its announce after the kill")
        keys = [c["params"]["idempotencyKey"] for c in announces(gw)]
        key = keys[0]
        # The resumed worker met the first turn again (a call under its key, not a new turn),
        # then made the next attempt once.
        assert keys == [key, key, key + ":retry:2"]
        finals = [f for f in gw.gw.finals().values() if f["idempotencyKey"].startswith(key)]
        assert len(finals) == 2
        assert rec["followUp"]["next"] == "done" and rec["followUp"]["announceAttempt"] == 2


def test_the_emulated_spawns_announce_is_followed_too(tmp_path: Path) -> None:
    """Where the gateway offers no sessions_spawn, sessiontool's own gateway spawn announces
    the same way: a failed turn is not `announced`."""
    for gw in _gateway(tmp_path, announce_fail=1):
        proc = gw.st("--json", "spawn", "summarise E")
        assert proc.returncode == 0, proc.stderr
        run_id = json.loads(proc.stdout)["runId"]
        rec = gw.until(run_id, settled, "its announce")
        assert rec["followUp"]["next"] == "done"
        assert rec["followUp"]["announceAttempt"] == 2
        first, second = announces(gw)
        assert second["params"]["idempotencyKey"] == first["params"]["idempotencyKey"] + (
            ":retry:2"
        )
