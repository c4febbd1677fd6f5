"""What grows is one table (issue 36 item 3, pre-commit's `all_languages.py`): a new runner,
`history` format or OpenClaw schema is one row plus its module. Each test adds a fake one
through its table alone (patched in-process) and sees every consumer of the table take it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sessiontool.errors import ConfigError
from sessiontool.runs.runners import RunnerError, get_runner
from sessiontool.state import runnertable
from sessiontool.state.config import check_runner
from tests.helpers import run_cli, run_json

from .test_fixtures import copy_state

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def shout_row(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.fakes import shout_runner

    row = ("tests.fakes.shout_runner", "ShoutRunner", shout_runner.FIELDS)
    monkeypatch.setitem(runnertable.RUNNERS, "shout", row)


def test_a_new_runner_is_one_row_plus_its_module(shout_row: None) -> None:
    runner = get_runner({"type": "shout", "volume": 3})
    result = runner.run({"message": "hi"}, env={}, on_agent_pid=print, deadline=None)
    assert (result.reply, result.model) == ("HI!!!", "shout")
    # The config check reads the same row: the type is known, its own check runs.
    check_runner({"type": "shout"}, "agents.defaults.runner", str)
    with pytest.raises(ConfigError, match=r"agents\.defaults\.runner\.volume: expected a whole"):
        check_runner({"type": "shout", "volume": "loud"}, "agents.defaults.runner", str)


def test_an_unknown_runner_names_every_row(shout_row: None) -> None:
    """The refusal names the table's rows, whatever they are today: the new one among them
    (a runner added for real changes nothing here)."""
    names = list(runnertable.RUNNERS)
    assert names[-1] == "shout" and len(names) > 1
    valid = re.escape(f"expected one of {', '.join(names)}")
    with pytest.raises(RunnerError, match=valid):
        get_runner({"type": "whisper"})
    with pytest.raises(ConfigError, match=valid):
        check_runner({"type": "whisper"}, "agents.defaults.runner", str)


def test_a_new_config_key_is_one_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A config key is a row of `state/config_keys.py`: the load-time check, the unknown-key
    warning and `config schema` read it, nothing else is touched."""
    from sessiontool.state import config_keys
    from sessiontool.state.config import load_config
    from sessiontool.state.config_schema import schema
    from sessiontool.state.paths import StatePaths

    row = config_keys.Key(
        "sessiontool.volume",
        {"type": "integer", "minimum": 0, "maximum": 11},
        "a whole number from 0 to 11",
        "how loud",
        ours=True,
    )
    monkeypatch.setattr(config_keys, "KEYS", (*config_keys.KEYS, row))
    root = tmp_path / "state"
    root.mkdir()
    own = root / "sessiontool.json5"
    own.write_text("{sessiontool: {volume: 12}}")
    with pytest.raises(ConfigError, match=r"sessiontool\.volume: expected a whole number from 0"):
        load_config(StatePaths(root))
    own.write_text("{sessiontool: {volume: 11}}")
    assert load_config(StatePaths(root)).warnings == []  # no longer an unknown key
    assert schema()["properties"]["sessiontool"]["properties"]["volume"]["maximum"] == 11


def test_every_row_names_a_class_that_loads() -> None:
    import importlib

    for name, (module, cls, _fields) in runnertable.RUNNERS.items():
        assert callable(getattr(importlib.import_module(module), cls)), name


def test_a_new_history_format_is_one_row_plus_its_renderer(tmp_path: Path) -> None:
    state = copy_state(tmp_path / "state")
    rc, data = run_json("--state-dir", str(state), "history", "main")
    assert rc == 0 and data["messages"], data
    roles = "".join(f"{m['role'].upper()}\n" for m in data["messages"])
    fake = [sys.executable, "-m", "tests.fakes.roles_format", "--state-dir", str(state)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [*fake, "history", "main", "--format", "roles"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=60,
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, roles, "")
    # The table's names are the valid ones: without the row, the word is refused.
    proc = run_cli("--state-dir", str(state), "history", "main", "--format", "roles")
    assert proc.returncode == 2 and "unknown format 'roles'" in proc.stderr


def test_the_format_help_names_every_row() -> None:
    from sessiontool.cli.historyformats import FORMATS

    out = run_cli("history", "--help", env={"COLUMNS": "400"}).stdout
    line = next(x for x in out.splitlines() if "--format" in x)
    for name in FORMATS:
        assert name in line, (name, line)


def test_a_new_openclaw_schema_is_one_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sqlite3

    from sessiontool.openclaw_releases import SQLITE_SCHEMAS
    from sessiontool.state.openclaw_sqlite import UnsupportedStoreError, check_schema

    from .test_schema_fallback import MAIN_DB, alter
    from .test_schema_fallback import copy_state as copy_openclaw_state

    state = copy_openclaw_state(tmp_path / "state")
    alter(state, "UPDATE schema_meta SET schema_version = 24", "PRAGMA user_version = 24")
    db = state / MAIN_DB
    with sqlite3.connect(db) as conn:
        with pytest.raises(UnsupportedStoreError, match="24 is newer than .* reads \\(23\\)"):
            check_schema(conn, db)
        # OpenClaw's schema 24, say, adds a column sessiontool reads: one row.
        row = {**SQLITE_SCHEMAS[23], "session_nodes": ("session_key", "entry_json", "st_new")}
        monkeypatch.setitem(SQLITE_SCHEMAS, 24, row)
        with pytest.raises(UnsupportedStoreError, match="24 lacks session_nodes.st_new"):
            check_schema(conn, db)
        conn.execute("ALTER TABLE session_nodes ADD COLUMN st_new TEXT")
        version, columns = check_schema(conn, db)
        assert version == 24 and "st_new" in columns["session_nodes"]
    # The real command with the row in place reads it as it reads schema 23.
    plain = copy_openclaw_state(tmp_path / "plain")
    rc, want = run_json("--state-dir", str(plain), "list", "--all-agents")
    code = (
        "from sessiontool.openclaw_releases import SQLITE_SCHEMAS as S; S[24] = S[23]; "
        "from sessiontool.cli.main import main; main()"
    )
    args = ["--state-dir", str(state), "list", "--all-agents", "--json"]
    proc = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == rc == 0, proc.stderr
    assert json.loads(proc.stdout)["count"] == want["count"] > 0


def test_a_new_output_format_is_one_row_plus_its_writer(tmp_path: Path) -> None:
    """cli/output.py's FORMATS: one row (tests/fakes/csv_format.py, named as no real row
    will be) and every listing writes it, `--fields` included; a result that is no listing
    (a transcript, `paths`) falls back to its text."""
    from sessiontool.cli.output import FORMATS
    from tests.fakes.csv_format import NAME

    assert NAME not in FORMATS
    state = copy_state(tmp_path / "state")
    base = ("--state-dir", str(state))
    rc, data = run_json(*base, "list")
    assert rc == 0 and data["count"] > 1, data
    fake = [sys.executable, "-m", "tests.fakes.csv_format", "--state-dir", str(state)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SESSIONTOOL_OUTPUT_FORMAT": NAME}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*fake, *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60
        )

    proc = run("list", "--fields", "key,kind")
    assert (proc.returncode, proc.stderr) == (0, ""), proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "key,kind"
    assert lines[1:] == [f"{r['key']},{r['kind']}" for r in data["sessions"]]
    rc, hits = run_json("--state-dir", str(state), "search", "the")
    proc = run("search", "the", "--fields", "sessionId,role")
    assert proc.returncode == 0, proc.stderr
    want = ["sessionId,role", *(f"{h['sessionId']},{h['role']}" for h in hits["hits"])]
    assert proc.stdout.splitlines() == want
    proc = run("paths")  # no listing: its lines as ever
    assert proc.returncode == 0 and proc.stdout.startswith("state dir\t"), proc.stdout
    proc = run("history", "main")  # a transcript: its text, as piped
    assert (proc.returncode, proc.stdout) == (0, run_cli(*base, "history", "main").stdout)
    # --json still means JSON, whatever the format.
    assert json.loads(run("list", "--json").stdout) == data
    # The table's names are the valid ones: without the row, the word is refused, and the
    # refusal names the rows there are (a real format added changes nothing here).
    proc = run_cli(*base, "list", env={"SESSIONTOOL_OUTPUT_FORMAT": NAME})
    assert proc.returncode == 2 and f"unknown output format {NAME!r}" in proc.stderr
    assert f"(valid: auto, {', '.join(FORMATS)})" in proc.stderr
