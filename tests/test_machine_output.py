"""Output that scripts read is TSV and JSON spelled one way (issue 33 item 16): `paths` piped
is TSV (its names hold spaces), `gateway show` says true/false as JSON does, `runs ID` piped has
no ages and escapes newlines as `deliveries` does, `usage --by day` has one COST column, and
doctor marks problems `problem:` as it marks warnings `warning:`, each finding once."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.helpers import run_cli, run_json, write_config

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def test_paths_and_gateway_show_piped_are_tsv(state: Path) -> None:
    assert run_cli("send", "main", "hi").returncode == 0
    paths = run_cli("paths")
    rows = [ln.split("\t") for ln in paths.stdout.splitlines()]
    assert rows[0] == ["state dir", str(state)] and all(len(r) == 2 for r in rows), rows
    assert ["agent main store", str(state / "agents/main/sessions/sessions.json")] in rows
    show = run_cli("gateway", "show")
    fields = dict(ln.split("\t", 1) for ln in show.stdout.splitlines())
    assert fields["remote"] == "false" and fields["reachable"] == "false", fields
    assert "True" not in show.stdout and "False" not in show.stdout


def test_one_run_piped_has_whole_values_and_no_ages(state: Path) -> None:
    assert run_cli("send", "main", "line one\nline two").returncode == 0
    rc, runs = run_json("runs")
    run_id = runs["runs"][0]["runId"]
    proc = run_cli("runs", run_id)
    fields = dict(ln.split("\t", 1) for ln in proc.stdout.splitlines())
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", fields["createdAt"]), fields
    assert fields["message"] == "line one\\nline two"  # escaped as deliveries escapes it
    assert fields["reply"] == "echo: line one\\nline two"
    assert all(len(ln.split("\t")) == 2 for ln in proc.stdout.splitlines())


def test_usage_by_day_has_one_cost_column(state: Path) -> None:
    price = {"input": 1000.0, "output": 1000.0}  # per million tokens: the echo turns cost
    models = [{"id": "echo", "cost": price}]
    write_config(state, {"models": {"providers": {"sessiontool": {"models": models}}}})
    assert run_cli("send", "main", "hello there").returncode == 0
    rc, usage = run_json("usage", "--by", "day")
    assert rc == 0 and usage["total"]["cost"] > 0, usage
    proc = run_cli("--color", "always", "usage", "--by", "day")
    head = "\n".join(ANSI.sub("", ln) for ln in proc.stdout.splitlines()[:2])
    assert head.count("COST BAR") == 1 and head.count("COST") == 2, head  # COST, COST BAR


def test_doctor_marks_problems_and_says_each_once(state: Path) -> None:
    assert run_cli("send", "main", "hi").returncode == 0
    transcript = next((state / "agents" / "main" / "sessions").glob("*.jsonl"))
    with transcript.open("a") as fh:
        fh.write("this is not json\n")
    outbox = state / "sessiontool" / "deliveries.jsonl"
    outbox.parent.mkdir(parents=True, exist_ok=True)
    with outbox.open("a") as fh:
        fh.write("not json either\n")
    proc = run_cli("doctor")
    data = json.loads(run_cli("doctor", "--json").stdout)
    kinds = [(p["severity"], p["kind"]) for p in data["problems"]]
    assert ("problem", "bad-lines") in kinds or any(s == "problem" for s, _ in kinds), kinds
    for severity, kind in kinds:
        head = f"{severity}: {kind}: "
        assert (proc.stdout + proc.stderr).count(head) == 1, (head, proc.stdout, proc.stderr)
    # The malformed outbox line is said once: by the finding, not again on stderr.
    both = proc.stdout + proc.stderr
    assert both.count("malformed line") == 1, both
