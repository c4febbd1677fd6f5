"""The run record format: records of today's format and of the format before it (checked in
under tests/fixtures/run-records/) read through the real CLI, new records carry the format
version, and the schema checked at read time agrees with the record's declared type."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, get_args

import pytest

from sessiontool.runs import schema
from sessiontool.runs.record_types import FollowUp, RunKind, RunRecord, RunStatus
from sessiontool.runs.submit import PUBLIC_RUN_FIELDS
from tests.helpers import run_cli, run_json
from tests.runhelpers import py_command, runner_config

FIXTURES = Path(__file__).parent / "fixtures" / "run-records"
SEND_OK = "e7c54cdc-b98d-4145-a424-87ced7f246a7"  # v2
SPAWN_OK = "2aab0725-1380-49cb-bbea-c4e5cc14e688"  # v2, with its announce step
STEP = "8d914494-ac6e-5839-9f84-60605d5a51ce"  # v2
SEND_ERROR_V1 = "1742d25a-f06b-4792-9f8b-addb31018746"  # v1: no `version`


def _fixture_records() -> dict[str, dict[str, Any]]:
    return {p.stem: json.loads(p.read_text()) for p in sorted(FIXTURES.glob("v*/*.json"))}


def _install(state: Path) -> Path:
    runs = state / "sessiontool" / "runs"
    runs.mkdir(parents=True)
    for p in FIXTURES.glob("v*/*.json"):
        shutil.copy(p, runs / p.name)
    return runs


def test_the_fixtures_are_of_the_formats_their_folders_name() -> None:
    recs = _fixture_records()
    assert recs[SEND_ERROR_V1].get("version") is None
    assert {recs[r]["version"] for r in (SEND_OK, SPAWN_OK, STEP)} == {schema.RECORD_VERSION}


@pytest.mark.usefixtures("reap_workers")
def test_records_of_today_and_of_version_1_read_wait_and_rerun(state: Path) -> None:
    runs = _install(state)
    rc, listed = run_json("runs")
    assert rc == 0
    assert [(r["runId"], r["status"]) for r in listed["runs"]] == [
        (SPAWN_OK, "ok"),  # newest first
        (SEND_ERROR_V1, "error"),
        (SEND_OK, "ok"),
    ]
    rc, with_steps = run_json("runs", "--steps")
    assert [r["runId"] for r in with_steps["runs"]][:2] == [SPAWN_OK, STEP]
    rc, one = run_json("runs", SPAWN_OK[:8])
    assert rc == 0 and one["label"] == "counter" and one["followUp"]["next"] == "done"
    assert one["sessionKey"].startswith("agent:main:subagent:")

    rc, done = run_json("wait", SEND_OK)
    assert (rc, done["status"], done["reply"]) == (0, "ok", "got: summarise the logs")
    rc, failed = run_json("wait", SEND_ERROR_V1)
    assert rc == 1 and failed["error"] == "runner exited with code 1: flaky backend"

    # The old record is rerun; the new one is written in today's format.
    runner_config(state, py_command("import sys; print('got: ' + sys.stdin.read())"))
    proc = run_cli("rerun", SEND_ERROR_V1)
    assert proc.returncode == 0, proc.stderr
    new = proc.stdout.strip()
    rc, again = run_json("wait", new, "--timeout", "60")
    assert (rc, again["reply"]) == (0, "got: retry me"), again
    rec = json.loads((runs / f"{new}.json").read_text())
    assert rec["version"] == schema.RECORD_VERSION
    assert rec["rerunOf"] == SEND_ERROR_V1
    # Reading never rewrites a finished record: the old ones are as they were checked in.
    assert json.loads((runs / f"{SEND_ERROR_V1}.json").read_text()).get("version") is None


def test_a_record_whose_version_is_not_a_count_is_malformed(state: Path) -> None:
    runs = _install(state)
    rec = json.loads((runs / f"{SEND_OK}.json").read_text())
    rec["version"] = "two"
    (runs / f"{SEND_OK}.json").write_text(json.dumps(rec))
    proc = run_cli("runs", SEND_OK)
    assert proc.returncode == 5
    assert "version 'two' is not a count" in proc.stderr


def test_the_schema_and_the_declared_type_agree() -> None:
    declared = set(RunRecord.__annotations__)
    assert set(schema.FIELDS) <= declared, set(schema.FIELDS) - declared
    assert set(PUBLIC_RUN_FIELDS) <= declared, set(PUBLIC_RUN_FIELDS) - declared
    assert set(get_args(RunStatus)) == schema.STATUSES
    assert set(get_args(RunKind)) == schema.KINDS
    assert RunRecord.__required_keys__ == {"runId", "kind", "status", "createdAt", "sessionKey"}
    # Every field today's records hold is declared, their follow-ups' too.
    for rec in _fixture_records().values():
        assert set(rec) <= declared, set(rec) - declared
        assert set(rec.get("followUp") or {}) <= set(FollowUp.__annotations__)
