"""An OpenClaw database whose schema moved: one that only adds columns or tables is read
directly as before; a renamed column or a newer schema version is refused (exit 5) when no
gateway runs to read it through (the through-the-gateway half is in
tests/interop_openclaw/test_remote_reads.py)."""

from __future__ import annotations

import shutil
import socket
import sqlite3
from pathlib import Path

from tests.helpers import run_cli, run_json

OC_STATE = Path(__file__).resolve().parent / "fixtures" / "openclaw-2026.9.6" / "state"
MAIN_DB = Path("agents") / "main" / "agent" / "openclaw-agent.sqlite"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def copy_state(dest: Path) -> Path:
    """The fixture, its gateway port pointed at a port where nothing listens."""
    shutil.copytree(OC_STATE, dest)
    cfg = dest / "openclaw.json"
    cfg.write_text(cfg.read_text().replace("port: 18893", f"port: {_closed_port()}"))
    return dest


def alter(state: Path, *sql: str) -> None:
    conn = sqlite3.connect(state / MAIN_DB)
    for statement in sql:
        conn.execute(statement)
    conn.commit()
    conn.close()


def test_added_columns_and_tables_are_read_directly(tmp_path: Path) -> None:
    plain = copy_state(tmp_path / "plain")
    state = copy_state(tmp_path / "state")
    alter(
        state,
        "ALTER TABLE session_nodes ADD COLUMN st_test_extra INTEGER",
        "ALTER TABLE transcript_events ADD COLUMN st_test_shard TEXT DEFAULT 'a'",
        "CREATE TABLE session_tags (session_key TEXT, tag TEXT)",
    )
    for args in (["list", "--all-agents"], ["history", "main", "--include-tools"]):
        rc, got = run_json("--state-dir", str(state), *args)
        rc0, want = run_json("--state-dir", str(plain), *args)
        assert rc == rc0 == 0
        assert got == want and got  # the same rows, not an empty answer
    proc = run_cli("--state-dir", str(state), "list")
    assert proc.stderr == ""  # no warning: nothing unknown was met


def test_a_renamed_column_without_a_gateway_is_exit_5_naming_the_schema(tmp_path: Path) -> None:
    state = copy_state(tmp_path / "state")
    alter(state, "ALTER TABLE session_nodes RENAME COLUMN entry_json TO entry")
    for args in (["list"], ["history", "main"], ["search", "hello"], ["usage"]):
        proc = run_cli("--state-dir", str(state), *args)
        assert proc.returncode == 5, (args, proc.stderr)
        assert "schema version 23" in proc.stderr and "session_nodes.entry_json" in proc.stderr
        assert "start OpenClaw's gateway (sessiontool then reads through it)" in proc.stderr


def test_a_newer_schema_version_without_a_gateway_is_exit_5(tmp_path: Path) -> None:
    """Its columns are all there, but a later schema may change what one of them holds."""
    state = copy_state(tmp_path / "state")
    alter(state, "UPDATE schema_meta SET schema_version = 24", "PRAGMA user_version = 24")
    proc = run_cli("--state-dir", str(state), "list")
    assert proc.returncode == 5
    assert "schema version 24 is newer than the schema sessiontool reads (23)" in proc.stderr
    assert "gateway" in proc.stderr  # the hint: start it, and it is read through it
    # The other agent's database is still schema 23: read as before.
    rc, got = run_json("--state-dir", str(state), "--agent", "ops", "list")
    assert rc == 0 and got["count"] == 2
