"""sessiontool against a real JSON-era OpenClaw gateway: openclaw@2026.7.35 (the last release
with sessions.json + JSONL, whose gateway no longer takes `sessions.json.lock`), installed by
`tests/fixtures/tools/setup-openclaw-json.sh` (env `OPENCLAW_JSON_BIN`, else
`$PEERS_DIR/openclaw-2026.7.35-bin`), on a JSON-era state (the 2026.9.6 fixture exported by
`sessiontool export`) with the deterministic fake model.

With no sessiontool runner configured, a `send` must be answered by OpenClaw's agent (never the
built-in echo demo agent), and sessiontool must not write `sessions.json` (or anything else under
`agents/`) itself while the gateway runs: every process of the command (and its detached worker)
records its writes under `agents/` through an audit hook (`sitecustomize` on PYTHONPATH)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from .conftest import FAKE_LLM, OC_FIXTURE, START_TIMEOUT, _stop, free_port, oc_env, unavailable

ROOT = Path(__file__).resolve().parent.parent.parent

# Loaded by every Python process of the command (PYTHONPATH): logs each open-for-writing,
# rename/replace, unlink and mkdir under the state dir's agents/ to ST_WRITE_AUDIT.
SITECUSTOMIZE = r"""
import os, sys
_log = os.environ.get("ST_WRITE_AUDIT")
_agents = os.environ.get("ST_WRITE_AUDIT_AGENTS", "")
_busy = []
_W = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
def _note(what, path):
    _busy.append(1)
    try:
        with open(_log, "a") as f:
            f.write(f"{os.getpid()} {what} {path}\n")
    finally:
        _busy.pop()
def _hook(event, args):
    if _busy or not _log or not _agents:
        return
    try:
        if event == "open":
            path, mode, flags = args
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & _W)
            if writing and isinstance(path, (str, bytes, os.PathLike)) and str(os.fsdecode(path)).startswith(_agents):
                _note("open", os.fsdecode(path))
        elif event in ("os.rename", "os.replace", "os.link", "os.symlink"):
            dst = os.fsdecode(args[1])
            if str(dst).startswith(_agents):
                _note(event, dst)
        elif event in ("os.remove", "os.rmdir", "os.mkdir"):
            p = os.fsdecode(args[0])
            if str(p).startswith(_agents):
                _note(event, p)
    except Exception:
        pass
if _log:
    sys.addaudithook(_hook)
"""


def openclaw_json_bin() -> str:
    peers = os.environ.get("PEERS_DIR", "/opt/peers")
    return os.environ.get("OPENCLAW_JSON_BIN") or os.path.join(peers, "openclaw-2026.7.35-bin")


@dataclass
class JsonLive:
    state: Path
    env: dict[str, str]
    audit: Path


@pytest.fixture(scope="module")
def json_live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JsonLive]:
    if not os.access(openclaw_json_bin(), os.X_OK):
        unavailable(
            f"no openclaw 2026.7.35 at {openclaw_json_bin()} "
            "(tests/fixtures/tools/setup-openclaw-json.sh)"
        )
    base = tmp_path_factory.mktemp("oc-json")
    state = base / "state"
    gw_port, llm_port = free_port(), free_port()
    home = base / "home"
    home.mkdir()
    env = oc_env(state, home)
    env["SESSIONTOOL_OPENCLAW_BIN"] = openclaw_json_bin()
    # A JSON-era state: the 2026.9.6 fixture's sessions, as sessions.json + JSONL.
    proc = subprocess.run(
        [sys.executable, "-m", "sessiontool", "--state-dir", str(OC_FIXTURE), "export"]
        + ["--to", str(state), "--all-agents"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    cfg = (OC_FIXTURE / "openclaw.json").read_text()
    (state / "openclaw.json").write_text(
        cfg.replace("port: 18893", f"port: {gw_port}").replace(
            "127.0.0.1:18890", f"127.0.0.1:{llm_port}"
        )
    )
    with open(base / "llm.log", "wb") as out:
        llm = subprocess.Popen(
            [sys.executable, str(FAKE_LLM), str(llm_port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )
    log = base / "gateway.log"
    with open(log, "wb") as out:
        gw = subprocess.Popen(
            [openclaw_json_bin(), "gateway", "--port", str(gw_port), "--bind", "loopback"],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )
    site = base / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    audit = base / "writes.log"
    st_env = dict(env)
    st_env.update(
        PYTHONPATH=os.pathsep.join([str(site), str(ROOT)]),
        ST_WRITE_AUDIT=str(audit),
        ST_WRITE_AUDIT_AGENTS=str(state / "agents"),
        SESSIONTOOL_EXEC_WORKER="1",  # the worker is a fresh interpreter: the hook loads there too
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while b"listening" not in log.read_bytes():
            if gw.poll() is not None:
                pytest.fail(f"openclaw 2026.7.35 gateway exited: {log.read_text()[-2000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"openclaw 2026.7.35 gateway did not start in {START_TIMEOUT:.0f}s")
            time.sleep(1)
        yield JsonLive(state, st_env, audit)
    finally:
        _stop(gw)
        _stop(llm)


def _st(live: JsonLive, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sessiontool", "--state-dir", str(live.state), *args],
        env=live.env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_send_is_answered_by_openclaws_agent_and_sessiontool_writes_no_store(
    json_live: JsonLive,
) -> None:
    proc = _st(
        json_live, "--json", "send", "discord:group:123", "json era hello", "--timeout", "300"
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == "ok" and out.get("via") == "gateway", out
    # The fake model behind OpenClaw's agent answers "ECHO#<n>: <message>"; the demo agent
    # would have said "echo: json era hello".
    assert not out["reply"].startswith("echo:") and "json era hello" in out["reply"]
    assert out["reply"].startswith("ECHO#")
    # The turn is in OpenClaw's own transcript (written by the gateway) ...
    hist = json.loads(
        _st(json_live, "--json", "history", "discord:group:123", "--limit", "2").stdout
    )
    assert [m["role"] for m in hist["messages"]] == ["user", "assistant"]
    assert out["reply"] in json.dumps(hist["messages"][1]["content"])
    # ... and sessiontool (command and worker) wrote nothing under agents/.
    time.sleep(1)
    writes = json_live.audit.read_text() if json_live.audit.exists() else ""
    assert writes == "", writes


def test_spawn_and_send_as_go_through_the_gateway(json_live: JsonLive) -> None:
    """2026.7.35 without `gateway.tools.allow`: `tools.invoke` answers not_found for
    sessions_spawn / sessions_send, so both are emulated with the gateway's public methods;
    either way nothing of OpenClaw's is written by sessiontool."""
    proc = _st(json_live, "--json", "spawn", "json era spawn task", "--label", "je-child")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["via"] == "gateway" and "tool" not in out
    proc = _st(json_live, "--json", "wait", out["runId"], "--timeout", "300")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["reply"].startswith("ECHO#")  # OpenClaw's agent answered
    proc = _st(
        json_live,
        "--as",
        "main",
        "--json",
        "send",
        "discord:group:123",
        "je a2a",
        "--timeout",
        "300",
    )
    assert proc.returncode == 0, proc.stderr
    sent = json.loads(proc.stdout)
    assert sent["status"] == "ok" and sent["reply"].startswith("ECHO#")
    rec = json.loads(_st(json_live, "--json", "runs", sent["runId"]).stdout)
    assert rec["via"] == "gateway" and "tool" not in rec
    deadline = time.monotonic() + 300
    while True:  # the spawn's announce and the send's reply-back turns, after their runs
        recs = [json.loads(_st(json_live, "--json", "runs", r).stdout) for r in (out["runId"],)]
        if all((r.get("followUp") or {}).get("next") == "done" for r in recs):
            break
        assert time.monotonic() < deadline, recs
        time.sleep(1)
    writes = json_live.audit.read_text() if json_live.audit.exists() else ""
    assert writes == "", writes


def test_doctor_knows_the_files_openclaw_writes_beside_the_transcripts(json_live: JsonLive) -> None:
    """A turn on 2026.7.35 leaves `<sessionId>.trajectory.jsonl` (and its `.trajectory-path.json`
    pointer) beside the transcript; doctor told the user to `mv` it as an orphan transcript
    (issue 42 item 11). The release table (`openclaw_releases.SESSION_DIR_FILES`) knows it."""
    proc = _st(json_live, "--json", "send", "discord:group:777", "trajectory", "--timeout", "300")
    assert proc.returncode == 0, proc.stderr
    trajectories = sorted(json_live.state.glob("agents/*/sessions/*.trajectory.jsonl"))
    assert trajectories, "2026.7.35 wrote no trajectory: the fixture no longer shows the case"
    proc = _st(json_live, "--json", "doctor")
    problems = json.loads(proc.stdout)["problems"]
    named = [p for p in problems if "trajectory" in p["path"] or "trajectory" in p.get("hint", "")]
    assert named == [], named


GATEWAY_CALL = """
import json, sys
from pathlib import Path
from sessiontool.openclaw import gateway
from sessiontool.state.paths import StatePaths
print(json.dumps(gateway.call(StatePaths(Path(sys.argv[1])), sys.argv[2], json.loads(sys.argv[3]),
                              timeout_s=120)))
"""


def _gateway(live: JsonLive, method: str, params: dict[str, object]) -> dict[str, object]:
    """One call to the live 2026.7.35 gateway (through sessiontool's own client)."""
    proc = subprocess.run(
        [sys.executable, "-c", GATEWAY_CALL, str(live.state), method, json.dumps(params)],
        env=live.env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    out: dict[str, object] = json.loads(proc.stdout)
    return out


def _text(msg: dict[str, object]) -> str:
    c = msg.get("content")
    if isinstance(c, str):
        return c
    blocks = c if isinstance(c, list) else []
    return "\n".join(b["text"] for b in blocks if isinstance(b, dict) and b.get("type") == "text")


def test_list_and_history_read_from_files_are_what_the_735_gateway_shows(
    json_live: JsonLive,
) -> None:
    """Issue 45 item 2, against the real program: after an agent-to-agent send (the fake model
    answers the reply step REPLY_SKIP and the announce step ANNOUNCE_SKIP), `history` read from
    the files is chat.history's view (the control replies hidden), and `list --json` carries the
    tokens and windows sessions.list shows."""
    key = "agent:main:telegram:group:-100555"
    proc = _st(json_live, "--as", "main", "--json", "send", key, "json era a2a", "--timeout", "300")
    assert proc.returncode == 0, proc.stderr
    run_id = json.loads(proc.stdout)["runId"]
    deadline = time.monotonic() + 300
    while (json.loads(_st(json_live, "--json", "runs", run_id).stdout).get("followUp") or {}).get(
        "next"
    ) != "done":
        assert time.monotonic() < deadline
        time.sleep(1)
    (sid,) = {
        json.loads(line)["id"]
        for p in json_live.state.glob("agents/main/sessions/*.jsonl")
        if "json era a2a" in p.read_text() and not p.name.endswith("trajectory.jsonl")
        for line in p.read_text().splitlines()[:1]
    }
    stored = (json_live.state / "agents/main/sessions" / f"{sid}.jsonl").read_text()
    assert '"REPLY_SKIP"' in stored and '"ANNOUNCE_SKIP"' in stored  # the case is there
    page = _gateway(json_live, "chat.history", {"sessionKey": key, "limit": 1000})
    theirs = page["messages"]
    assert isinstance(theirs, list)
    mine = json.loads(_st(json_live, "--json", "history", key, "--limit", "all").stdout)
    assert [(m["role"], _text(m)) for m in mine["messages"]] == [
        (m["role"], _text(m)) for m in theirs
    ]
    rows = _gateway(json_live, "sessions.list", {"limit": 1000})["sessions"]
    assert isinstance(rows, list)
    listed = json.loads(_st(json_live, "--json", "list", "--all-agents", "--limit", "all").stdout)
    by_id = {r["sessionId"]: r for r in listed["sessions"]}
    for g in rows:
        r = by_id[g["sessionId"]]
        assert (r.get("inputTokens"), r.get("outputTokens")) == (
            g.get("inputTokens"),
            g.get("outputTokens"),
        ), g["key"]
        if "model" in r:
            assert r.get("contextTokens") == g.get("contextTokens"), g["key"]
