"""`deliveries` and `send --deliver`: a reply with no target or a failing delivery command is
reported, shown by doctor and retried."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .conftest import run_cli, run_json, write_config

GROUP = "agent:main:discord:group:42"


def test_send_deliver_without_a_target_says_so(state: Path) -> None:
    proc = run_cli("send", "main", "report", "--deliver")
    assert proc.returncode == 0  # the run worked; the delivery is its own step
    assert proc.stdout == "echo: report\n"
    assert (
        "sessiontool: warning: the reply was not delivered (undelivered): no delivery target"
        in proc.stderr
    )
    assert "deliveries retry" not in proc.stderr  # no target: final, retrying cannot help
    rc, data = run_json("send", "main", "report", "--deliver")
    assert rc == 0 and data["delivery"]["status"] == "undelivered"
    proc = run_cli("doctor")
    assert "undelivered-delivery" not in proc.stdout


def test_failing_delivery_command_then_retry(state: Path, tmp_path: Path) -> None:
    marker = tmp_path / "delivered.jsonl"
    fail = [sys.executable, "-c", "import sys; sys.stdin.read(); sys.exit('bridge down')"]
    write_config(state, {"sessiontool": {"delivery": {"command": fail}}})
    rc, data = run_json("send", GROUP, "news", "--deliver")
    assert rc == 0
    delivery = data["delivery"]
    assert delivery["status"] == "failed" and "bridge down" in delivery["error"]
    proc = run_cli("doctor")
    assert proc.returncode == 1 and "failed-delivery" in proc.stdout
    assert f"sessiontool deliveries retry {delivery['id']}" in proc.stdout
    ok = [
        sys.executable,
        "-c",
        f"import sys; open({str(marker)!r}, 'a').write(sys.stdin.read())",
    ]
    write_config(state, {"sessiontool": {"delivery": {"command": ok}}})
    rc, data = run_json("deliveries", "retry", delivery["id"][:12])
    assert rc == 0, data
    assert data["count"] == 1 and data["delivered"] == 1
    assert data["deliveries"][0]["previousStatus"] == "failed"
    sent = [json.loads(line) for line in marker.read_text().splitlines()]
    assert [s["text"] for s in sent] == ["echo: news"]
    # Delivered now: doctor is clean, and retrying it again is refused.
    assert run_cli("doctor").returncode == 0
    proc = run_cli("deliveries", "retry", delivery["id"])
    assert proc.returncode == 2 and "is delivered" in proc.stderr
    assert run_cli("deliveries", "retry").stderr == "Nothing to retry.\n"
    assert run_cli("deliveries", "retry", "nope").returncode == 3
