"""doctor on OpenClaw's SQLite store with no gateway running (issue 33 item 12): not "no
problems found" but a warning that writes are impossible now and how to start the gateway
(with the gateway up, test_gateway_client's doctor test finds nothing)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import run_cli
from tests.test_cli_html import OC_STATE, _copy


def test_doctor_says_writes_need_the_gateway(tmp_path: Path) -> None:
    state = _copy(OC_STATE, tmp_path / "state")
    port = 18893  # the fixture's openclaw.json (JSON5)
    assert "port: 18893," in (state / "openclaw.json").read_text()
    proc = run_cli("--state-dir", str(state), "doctor", "--json")
    assert proc.returncode == 2, proc.stdout  # warnings only
    data = json.loads(proc.stdout)
    (w,) = [p for p in data["problems"] if p["kind"] == "gateway-not-running"]
    assert w["severity"] == "warning" and w["path"] == f"ws://127.0.0.1:{port}"
    assert w["detail"].startswith("writes are impossible now: agents main, ops keep sessions")
    assert (
        w["hint"] == f"start it with `openclaw gateway --port {port}` (or `openclaw gateway start`)"
    )
    text = run_cli("--state-dir", str(state), "doctor")
    assert text.returncode == 2 and "no problems found" not in text.stdout
    assert "warning: gateway-not-running: " in text.stdout and "1 warning found" in text.stdout
    # What it warns about is so: a write is refused, a read works.
    assert run_cli("--state-dir", str(state), "label", "main", "x").returncode != 0
    assert run_cli("--state-dir", str(state), "list").returncode == 0
