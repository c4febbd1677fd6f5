"""`--json --fields` is gh's `--json FIELDS` (issue 45 item 10): any key the JSON rows have, not
only the TSV columns; `history --fields` picks the keys of each message (JSON or TSV); and
FORCE_COLOR / CLICOLOR_FORCE mean `--color always`. Run as a user runs it, on the real fixture."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.helpers import FIXTURE_STATE, run_cli, run_json


@pytest.fixture(scope="module")
def cb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("fields") / "state"
    shutil.copytree(FIXTURE_STATE, dest)
    return dest


def test_list_json_fields_takes_any_key_a_row_has(cb: Path) -> None:
    rc, data = run_json("--state-dir", str(cb), "list", "--fields", "key,contextTokens")
    assert rc == 0, data
    rows = data["sessions"]
    assert rows and all(list(r) == ["key", "contextTokens"] for r in rows)
    assert any(isinstance(r["contextTokens"], int) for r in rows)
    # inputTokens is a key a row may have: accepted (null where a session has none)
    rc, data = run_json("--state-dir", str(cb), "list", "--fields", "transcriptPath,inputTokens")
    assert rc == 0 and all(set(r) == {"transcriptPath", "inputTokens"} for r in data["sessions"])


def test_a_typo_is_still_a_usage_error_naming_the_json_keys(cb: Path) -> None:
    p = run_cli("--state-dir", str(cb), "list", "--json", "--fields", "key,contxtTokens")
    assert p.returncode == 2
    err = json.loads(p.stdout)  # with --json the error is a JSON object, as every error
    assert err["code"] == 2 and "unknown field 'contxtTokens'" in err["error"]
    assert "contextTokens" in err["error"] and "sessions" not in err
    # without --json the columns are still the TSV's: contextTokens is no column
    p = run_cli("--state-dir", str(cb), "list", "--fields", "key,contextTokens")
    assert p.returncode == 2 and "unknown field 'contextTokens'" in p.stderr


def test_search_json_fields_takes_a_hit_key(cb: Path) -> None:
    rc, data = run_json("--state-dir", str(cb), "search", "the", "--fields", "key,score")
    assert rc == 0, data
    assert data["hits"] and all(list(h) == ["key", "score"] for h in data["hits"])


def test_history_fields_json_and_tsv(cb: Path) -> None:
    key = run_json("--state-dir", str(cb), "list")[1]["sessions"][0]["key"]
    rc, data = run_json("--state-dir", str(cb), "history", key, "--fields", "role,timestamp")
    assert rc == 0, data
    assert data["messages"] and all(list(m) == ["role", "timestamp"] for m in data["messages"])
    p = run_cli("--state-dir", str(cb), "history", key, "--fields", "role,content")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == len(data["messages"])
    assert all(line.split("\t")[0] in ("user", "assistant") for line in lines)
    assert all(line.count("\t") == 1 for line in lines)
    jl = run_cli("--state-dir", str(cb), "history", key, "--format", "jsonl", "--fields", "role")
    assert [json.loads(x) for x in jl.stdout.splitlines()] == [
        {"role": m["role"]} for m in data["messages"]
    ]


def test_history_fields_refuses_a_typo_and_html(cb: Path) -> None:
    key = run_json("--state-dir", str(cb), "list")[1]["sessions"][0]["key"]
    p = run_cli("--state-dir", str(cb), "history", key, "--fields", "rol")
    assert p.returncode == 2 and "unknown field 'rol'" in p.stderr and p.stdout == ""
    p = run_cli("--state-dir", str(cb), "history", key, "--format", "html", "--fields", "role")
    assert p.returncode == 2 and "--fields" in p.stderr and p.stdout == ""


@pytest.mark.parametrize(
    "env", [{"FORCE_COLOR": "1"}, {"CLICOLOR_FORCE": "1"}, {"FORCE_COLOR": "true"}]
)
def test_force_color_is_color_always(cb: Path, env: dict[str, str]) -> None:
    """Piped (as CI's log is), NO_COLOR unset: the colour escapes of `--color always`."""
    args = ("--state-dir", str(cb), "list")
    forced = run_cli(*args, env={**env, "NO_COLOR": ""})
    always = run_cli("--color", "always", *args, env={"NO_COLOR": ""})
    assert forced.returncode == 0 and "\x1b[" in forced.stdout
    assert forced.stdout == always.stdout
    # an explicit --color never still wins; CLICOLOR_FORCE=0 forces nothing
    never = run_cli("--color", "never", *args, env={**env, "NO_COLOR": ""})
    assert "\x1b[" not in never.stdout
    plain = run_cli(*args, env={"CLICOLOR_FORCE": "0", "NO_COLOR": ""})
    assert "\x1b[" not in plain.stdout
