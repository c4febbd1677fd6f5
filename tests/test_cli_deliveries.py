"""`deliveries` and `send --deliver`: a reply with no target is reported and final; a failing
delivery command is reported, shown by doctor and retried."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from tests.helpers import ROOT, run_cli, run_json, write_config

from .runhelpers import reap
from .test_delivery import outbox_lines

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
    proc = run_cli("deliveries", "retry", delivery["id"][:12])
    assert proc.returncode == 0, proc.stderr
    # One TSV line: a real tab between the id and the change (`cut -f1` gives the id).
    assert proc.stdout.split("\t") == [delivery["id"], "failed -> delivered\n"], proc.stdout
    sent = [json.loads(line) for line in marker.read_text().splitlines()]
    assert [s["text"] for s in sent] == ["echo: news"]
    # Delivered now: doctor is clean, and retrying it again is refused.
    assert run_cli("doctor").returncode == 0
    proc = run_cli("deliveries", "retry", delivery["id"])
    assert proc.returncode == 2 and "is delivered" in proc.stderr
    assert run_cli("deliveries", "retry").stderr == ""  # piped: nothing to say
    assert run_cli("deliveries", "retry", "nope").returncode == 3


def test_a_delivery_with_no_target_is_final(state: Path, reap_workers: None) -> None:
    """The quick start's operator `spawn` announces to a session with no channel: that delivery
    is `undelivered`, and final: the cron recipe's `deliveries retry` leaves it alone, `doctor`
    is clean, and `prune` drops it with its run."""
    proc = run_cli("spawn", "research X and report back", "--label", "research", "-q")
    assert proc.returncode == 0, proc.stderr
    outbox = state / "sessiontool" / "deliveries.jsonl"
    deadline = time.monotonic() + 60
    while not (outbox.exists() and outbox.read_text().endswith("\n")):
        assert time.monotonic() < deadline, "the spawn was not announced"
        time.sleep(0.1)
    reap(state)
    before = outbox_lines(state)
    assert [d["status"] for d in before] == ["undelivered"]
    for _ in range(3):
        proc = run_cli("deliveries", "retry")
        assert proc.returncode == 0, proc.stderr
    assert outbox_lines(state) == before
    proc = run_cli("deliveries", "retry", before[0]["runId"][:8])
    assert proc.returncode == 2 and "final" in proc.stderr
    doctor = run_cli("doctor")
    assert doctor.returncode == 0, doctor.stdout
    later = str(int(time.time() * 1000) + 40 * 86_400_000)
    pruned = run_cli("prune", "--older-than", "30d", env={"SESSIONTOOL_NOW_MS": later})
    assert pruned.returncode == 0, pruned.stderr
    assert outbox_lines(state) == []


def _cron(line: str, state: Path) -> subprocess.CompletedProcess[str]:
    """A crontab command as cron runs it: `sh -c`, no terminal, stdin from /dev/null, a bare
    PATH (the recipe sets its own: here the directory of the installed program), stdout and
    stderr kept apart (cron mails whatever either of them says)."""
    env = {
        "PATH": f"{os.path.dirname(sys.executable)}:/usr/bin:/bin",
        "HOME": os.environ["HOME"],
        "SESSIONTOOL_STATE_DIR": str(state),
        "LOGNAME": "cron",
    }
    return subprocess.run(
        ["sh", "-c", line],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def test_the_readme_retry_cron_line_mails_only_a_delivery_still_failing(
    state: Path, tmp_path: Path
) -> None:
    """The README's `deliveries retry` crontab line, taken from the README and run as cron
    runs it (issue 33, item 1): it mailed "Nothing to retry." every 15 minutes (stderr) and
    nothing when the bridge was down (the failure went to stdout, which the line discarded).
    Now: silent with nothing to retry and when all went through; a delivery still not
    delivered is one line on stderr, exit 1."""
    m = re.search(
        r"^\*/15 \* \* \* \*\s+(sessiontool deliveries retry.*)$",
        ROOT.joinpath("README.md").read_text(),
        re.M,
    )
    assert m, "the README has no deliveries retry cron line"
    line = m.group(1)
    first = _cron(line, state)
    assert (first.returncode, first.stdout, first.stderr) == (0, "", "")
    down = [sys.executable, "-c", "import sys; sys.stdin.read(); sys.exit('bridge down')"]
    write_config(state, {"sessiontool": {"delivery": {"command": down}}})
    rc, data = run_json("send", GROUP, "news", "--deliver")
    assert rc == 0 and data["delivery"]["status"] == "failed", data
    did = data["delivery"]["id"]
    still_down = _cron(line, state)
    assert still_down.returncode == 1 and still_down.stdout == ""
    assert still_down.stderr.splitlines() == [
        f"sessiontool: error: delivery {did} is still not delivered (failed): "
        "delivery command exited with status 1: bridge down"
    ], still_down.stderr
    marker = tmp_path / "delivered.jsonl"
    up = [sys.executable, "-c", f"import sys; open({str(marker)!r}, 'a').write(sys.stdin.read())"]
    write_config(state, {"sessiontool": {"delivery": {"command": up}}})
    back = _cron(line, state)
    assert (back.returncode, back.stdout, back.stderr) == (0, "", "")
    assert [json.loads(x)["text"] for x in marker.read_text().splitlines()] == ["echo: news"]
    again = _cron(line, state)
    assert (again.returncode, again.stdout, again.stderr) == (0, "", "")
    # Without -q a delivery that went through is a line on stdout; -q is for retry only.
    assert run_cli("deliveries", "-q").returncode == 2
