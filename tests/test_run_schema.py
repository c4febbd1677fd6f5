"""One schema for run records (runs/schema.py): a record whose fields have the wrong type is
skipped and reported, never reaches code that would die on it (issue 27, item 11)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import run_cli, run_json
from tests.runhelpers import records, runner_config

pytestmark = pytest.mark.usefixtures("reap_workers")

BAD = "5f0e6c1e-0000-4000-8000-0000000000b1"


def _plant(state: Path, **fields: object) -> Path:
    """A queued record for the main session with the given fields, and its lane marker."""
    rec = {
        "runId": BAD,
        "kind": "send",
        "status": "queued",
        "createdAt": 1_700_000_000_000,
        "sessionKey": "agent:main:main",
        "agentId": "main",
        "message": "x",
        "seq": 0,
    }
    rec.update(fields)
    runs = state / "sessiontool" / "runs"
    p = runs / f"{BAD}.json"
    p.write_text(json.dumps(rec))
    (lane,) = (state / "sessiontool" / "lanes").iterdir()
    (lane / f"{0:015d}-{BAD}").write_text("")
    return p


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({"status": {"a": 1}}, id="status"),
        pytest.param({"kind": {"a": 1}}, id="kind", marks=pytest.mark.slow),
        pytest.param({"outcome": ["ok"]}, id="outcome", marks=pytest.mark.slow),
        pytest.param({"seq": "1"}, id="seq", marks=pytest.mark.slow),
        pytest.param({"followUp": {"next": {"x": 1}}}, id="followUp", marks=pytest.mark.slow),
        pytest.param({"pid": "12"}, id="pid", marks=pytest.mark.slow),
        pytest.param({"runTimeoutSeconds": 1e308}, id="runTimeout", marks=pytest.mark.slow),
    ],
)
def test_a_record_with_a_wrong_type_never_kills_a_command_or_the_lane(
    state: Path, fields: dict[str, object]
) -> None:
    runner_config(state, {"type": "echo"})
    rc, out = run_json("send", "main", "first", "--timeout", "20")
    assert rc == 0, out
    bad = _plant(state, **fields)
    # Every listing skips it with one warning; naming it is exit 5.
    proc = run_cli("runs", "--json")
    assert proc.returncode == 0, proc.stderr
    assert [r["status"] for r in json.loads(proc.stdout)["runs"]] == ["ok"]
    assert "unreadable run record" in proc.stderr
    for cmd in (("runs", BAD), ("wait", BAD, "--timeout", "1"), ("abort", BAD)):
        proc = run_cli(*cmd)
        assert proc.returncode == 5, (cmd, proc.stderr)
        assert "run record" in proc.stderr
    # The lane goes on: the next send is answered.
    rc, out = run_json("send", "main", "second", "--timeout", "20")
    assert rc == 0 and out["reply"] == "echo: second", out
    for cmd in (("sweep",), ("prune", "--older-than", "30d", "--dry-run")):
        proc = run_cli(*cmd)
        assert proc.returncode == 0, (cmd, proc.stderr)
    rc, doc = run_json("doctor")
    assert rc == 1
    found = [p for p in doc["problems"] if p["path"] == str(bad)]
    assert found and "run record" in found[0]["detail"], doc
    # doctor --fix leaves it for --yes; --fix --yes removes it; then nothing is left to say.
    rc, fixed = run_json("doctor", "--fix")
    assert bad.exists()
    assert any(f["path"] == str(bad) for f in fixed["fix"]["needsYes"]), fixed
    rc, fixed = run_json("doctor", "--fix", "--yes")
    assert not bad.exists(), fixed
    assert sorted(r["status"] for r in records(state)) == ["ok", "ok"]
    rc, doc = run_json("doctor")
    assert doc["problems"] == [], doc
