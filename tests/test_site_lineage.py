"""The HTML site links a child to its requester by either lineage field: `spawnedBy` (files,
OpenClaw's own spawn tool) or only `parentSessionKey` (a child sessiontool's emulation made
through OpenClaw's gateway: `sessions.create` sets no spawnedBy)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import run_cli

from . import htmlcheck
from .test_cli_html import _index

CHILD = "agent:main:subagent:7b1c0e0e-0000-4000-8000-000000000001"


def _line(role: str, text: str, ts: int) -> str:
    msg = {"role": role, "content": [{"type": "text", "text": text}], "timestamp": ts}
    return json.dumps({"type": "message", "id": f"m{ts}", "timestamp": ts, "message": msg})


def test_a_child_with_only_parent_session_key_is_linked(tmp_path: Path) -> None:
    state = tmp_path / "state"
    sessions = state / "agents" / "main" / "sessions"
    sessions.mkdir(parents=True)
    store = {
        "agent:main:main": {"sessionId": "s-main", "updatedAt": 1_700_000_000_000},
        CHILD: {
            "sessionId": "s-child",
            "updatedAt": 1_700_000_001_000,
            "parentSessionKey": "agent:main:main",
            "spawnDepth": 1,
        },
    }
    (sessions / "sessions.json").write_text(json.dumps(store))
    for sid, ts in (("s-main", 1_700_000_000_000), ("s-child", 1_700_000_001_000)):
        (sessions / f"{sid}.jsonl").write_text(_line("user", "hello", ts) + "\n")
    site = tmp_path / "site"
    proc = run_cli("--state-dir", str(state), "export", "--html", str(site), "--json")
    assert proc.returncode == 0, proc.stderr
    pages = _index(site)
    parent, kid = htmlcheck.read(pages["agent:main:main"]), htmlcheck.read(pages[CHILD])
    assert pages[CHILD].name in parent.hrefs
    assert pages["agent:main:main"].name in kid.hrefs
    assert "Spawned by agent:main:main" in kid.text
