"""Writing sessions out: `export` (a state dir as sessions.json + JSONL, re-runs add only what
changed) and `history -o` (one whole transcript)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from sessiontool.sessions.listing import OPENCLAW_ROW_FIELDS
from tests.helpers import run_cli, run_json

from .test_openclaw_sqlite import LIMIT_KEYS, MAIN_DB, copy_oc, tree_digest


def test_export_reads_back_the_same_and_reruns_add_only_changes(tmp_path: Path) -> None:
    state = copy_oc(tmp_path / "state")
    dest = tmp_path / "export"
    before = tree_digest(state / "agents")
    rc, out = run_json("--state-dir", str(state), "export", "--to", str(dest), "--all-agents")
    assert rc == 0 and out["sessions"] == 12 and out["written"] == 12
    assert tree_digest(state / "agents") == before
    assert (dest / "agents" / "main" / "sessions" / "sessions.json").is_file()
    for args in (["list", "--all-agents", "--limit", "all"], ["--agent", "ops", "list"]):
        _, a = run_json("--state-dir", str(state), *args)
        _, b = run_json("--state-dir", str(dest), *args)
        for row in b["sessions"]:
            assert row.pop("transcriptPath").endswith(row["sessionId"] + ".jsonl")
        for row in a["sessions"]:  # shown for OpenClaw's SQLite store only (docs/openclaw.md)
            assert row.pop("agentId") in ("main", "ops")
            for name in OPENCLAW_ROW_FIELDS:
                row.pop(name, None)
        assert a == b
    for key in LIMIT_KEYS + ("agent:ops:telegram:group:-100555",):
        _, a = run_json("--state-dir", str(state), "history", key, "--include-tools")
        _, b = run_json("--state-dir", str(dest), "history", key, "--include-tools")
        # The export writes its own line ids (8 hex digits, how a re-run knows its files): the
        # messages are the same, each with an id `fork --at` and `rewind` take there.
        ids_a, ids_b = a.pop("messageIds", None), b.pop("messageIds")
        assert ids_a is None or len(ids_a) == len(ids_b)
        assert ids_b == [f"{i:08x}" for i in range(len(b["messages"]))]
        assert a == b and a["messages"]
    rc, again = run_json("--state-dir", str(state), "export", "--to", str(dest), "--all-agents")
    assert (again["written"], again["unchanged"]) == (0, 12)
    conn = sqlite3.connect(state / MAIN_DB)
    conn.execute(
        "UPDATE session_nodes SET entry_json = json_set(entry_json, '$.label', 'relabelled') "
        "WHERE session_key = 'agent:main:custom-other'"
    )
    conn.commit()
    conn.close()
    rc, third = run_json("--state-dir", str(state), "export", "--to", str(dest), "--all-agents")
    assert (third["written"], third["unchanged"]) == (1, 11)
    _, b = run_json("--state-dir", str(dest), "history", "--label", "relabelled")
    assert b["sessionKey"] == "agent:main:custom-other"


def _long_transcript(state: Path, n: int) -> None:
    sdir = state / "agents" / "main" / "sessions"
    sdir.mkdir(parents=True)
    sid = "11111111-1111-4111-8111-111111111111"
    (sdir / "sessions.json").write_text(
        json.dumps({"agent:main:main": {"sessionId": sid, "updatedAt": 1}})
    )
    lines = [json.dumps({"type": "session", "version": 3, "id": sid})]
    for i in range(n):
        lines.append(
            json.dumps(
                {
                    "type": "message",
                    "message": {"role": "user", "content": f"message {i}", "timestamp": i + 1},
                }
            )
        )
    (sdir / f"{sid}.jsonl").write_text("\n".join(lines) + "\n")


def test_history_export_is_whole_and_limit_all(state: Path, tmp_path: Path) -> None:
    _long_transcript(state, 250)
    out = tmp_path / "all.jsonl"
    proc = run_cli("history", "main", "--format", "jsonl", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert len(out.read_text().splitlines()) == 250
    rc, data = run_json("history", "main")
    assert rc == 0 and len(data["messages"]) == 200  # the screen default stays 200
    rc, data = run_json("history", "main", "--limit", "all")
    assert rc == 0 and len(data["messages"]) == 250
    proc = run_cli("history", "main", "-o", str(out), "--limit", "5")
    assert proc.returncode == 0 and out.read_text().count("user:") == 5
    assert run_cli("history", "main", "--limit", "some").returncode == 2


def test_a_remote_export_names_each_session_it_skips(state: Path, tmp_path: Path) -> None:
    """A gateway's store may hold session ids that are no file name (`../x`, `a/b`): a remote
    `export --to` writes the others, warns once per skipped session (its key named) and counts
    them (`skipped`), never "sessions 3, written 1" in silence (issue 37, item 8)."""
    from .fakes import gateway as fake

    secret = "export-token-123"
    rows = [
        {"key": "agent:main:good", "agentId": "main", "sessionId": "sid-good", "updatedAt": 1},
        {"key": "agent:main:up", "agentId": "main", "sessionId": "../escape", "updatedAt": 2},
        {"key": "agent:main:slash", "agentId": "main", "sessionId": "a/b", "updatedAt": 3},
    ]
    dest = tmp_path / "dest"
    env = {"OPENCLAW_GATEWAY_TOKEN": secret}
    with fake.running(tmp_path / "gw", token=secret, sessions=rows) as gw:
        url = f"ws://127.0.0.1:{gw.port}"
        proc = run_cli("--gateway", url, "export", "--to", str(dest), "--json", env=env)
        text = run_cli("--gateway", url, "export", "--to", str(dest), env=env)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert (out["sessions"], out["written"], out["skipped"]) == (3, 1, 2), out
    assert set(out) == {"to", "agents", "sessions", "written", "unchanged", "skipped"}
    warnings = [ln for ln in proc.stderr.splitlines() if ln.startswith("sessiontool: warning:")]
    assert len(warnings) == 2, proc.stderr
    assert "agent:main:up" in warnings[0] + warnings[1] and "agent:main:slash" in "".join(warnings)
    assert "not a plain file name" in warnings[0]
    sessions = dest / "agents" / "main" / "sessions"
    assert sorted(p.name for p in sessions.iterdir()) == ["sessions.json", "sid-good.jsonl"]
    assert not (dest / "agents" / "main" / "escape.jsonl").exists()
    assert text.returncode == 0 and "2 skipped" in text.stdout, text.stdout + text.stderr
    assert text.stderr.count("sessiontool: warning:") == 2
