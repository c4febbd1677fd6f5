"""sessiontool against the real OpenClaw 2026.9.6 gateway, on a copy of the real fixture:
sends go through the gateway and come back, `history` (read side, straight from the database)
shows them, a label set by sessiontool is in the program's own sessions.list; and with no
gateway a send exits 4 and leaves the state dir byte-identical."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ..test_openclaw_sqlite import tree_digest
from .conftest import Live, copy_fixture, free_port, oc_env


def st(live_env: dict[str, str], state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sessiontool", "--state-dir", str(state), *args],
        env=live_env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_send_to_a_group_returns_the_reply_and_history_shows_it(live: Live) -> None:
    proc = st(
        live.env,
        live.state,
        "--json",
        "send",
        "discord:group:123",
        "interop hello",
        "--timeout",
        "300",
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == "ok" and "interop hello" in out["reply"]
    proc = st(live.env, live.state, "--json", "history", "discord:group:123", "--limit", "2")
    msgs = json.loads(proc.stdout)["messages"]
    assert msgs[0]["role"] == "user" and msgs[0]["content"] == "interop hello"
    assert msgs[1]["role"] == "assistant"
    assert out["reply"] in json.dumps(msgs[1]["content"])


def test_label_is_in_the_programs_own_sessions_list(live: Live) -> None:
    proc = st(live.env, live.state, "label", "telegram:group:-100555", "interop-label")
    assert proc.returncode == 0, proc.stderr
    real = live.oc("gateway", "call", "sessions.list", "--json", "--port", str(live.port))
    assert real.returncode == 0, real.stderr
    rows = {s["key"]: s for s in json.loads(real.stdout)["sessions"]}
    assert rows["agent:main:telegram:group:-100555"]["label"] == "interop-label"


def test_without_a_gateway_send_exits_4_and_changes_nothing(tmp_path: Path) -> None:
    state = copy_fixture(tmp_path / "state", free_port(), free_port())
    home = tmp_path / "oc-home"
    home.mkdir()
    before = tree_digest(state)
    proc = st(oc_env(state, home), state, "send", "discord:group:123", "anyone there?")
    assert proc.returncode == 4
    assert "start it with `openclaw gateway" in proc.stderr
    assert tree_digest(state) == before
