"""OpenClaw 2026.8+'s SQLite store: `list --json` against the real `openclaw sessions --json` on
the real fixture, `list` over 10,000 SQLite sessions, and `history --limit 20` on a session of
100,000 events against one of 100 (side by side in one run)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

from harness import ROOT, Bench, Row, Sample, case, dataset, ms, ratio, ratio_spread

FIXTURE = ROOT / "tests" / "fixtures" / "openclaw-2026.9.6" / "state"
OPENCLAW_BIN = os.environ.get("OPENCLAW_BIN", "/opt/peers/openclaw-bin")


def spread(s: Sample) -> str:
    return f"min {ms(min(s.times))} / median {ms(s.median)} / max {ms(max(s.times))}"


def fixture_copy(bench: Bench) -> Path:
    dest = bench.data / "oc-fixture"
    if not dest.exists():
        shutil.copytree(FIXTURE, dest)
    return dest


@case
def oc_list_vs_openclaw(bench: Bench) -> list[Row]:
    """sessiontool list --json vs openclaw sessions --json on the same SQLite state dir."""
    state = fixture_copy(bench)
    ours_cmd = bench.sessiontool("--state-dir", str(state), "list", "--json")
    assert bench.json_output(ours_cmd)["count"] == 10
    label = "`list --json` vs `openclaw sessions --json`, OpenClaw 2026.9.6 fixture"
    if not os.access(OPENCLAW_BIN, os.X_OK):
        return [
            Row(
                label,
                f"not measured: no openclaw at {OPENCLAW_BIN} "
                "(tests/fixtures/tools/setup-openclaw.sh installs it)",
            )
        ]
    home = bench.data / "oc-home"
    home.mkdir(exist_ok=True)
    env = dict(bench.env)
    env.update(
        HOME=str(home),
        OPENCLAW_STATE_DIR=str(state),
        OPENCLAW_CONFIG_PATH=str(state / "openclaw.json"),
        OPENCLAW_GATEWAY_TOKEN="test-token-123",
    )
    theirs_cmd = [
        "env",
        *(f"{k}={v}" for k, v in env.items() if k.startswith(("OPENCLAW", "HOME"))),
        OPENCLAW_BIN,
        "sessions",
        "--json",
    ]
    real = bench.json_output(theirs_cmd)
    assert real["count"] == 10, real.get("count")
    runs = bench.n(7, 3)
    ours, theirs = bench.compare(ours_cmd, theirs_cmd, runs)
    r = ratio(theirs.median, ours.median)
    return [
        Row(
            f"{label} (median of {runs})",
            f"sessiontool {spread(ours)}; openclaw {spread(theirs)}: {r:.1f}× faster",
            "≥ 20×",
            r >= 20,
        )
    ]


# -- generated SQLite stores -------------------------------------------------------------------

SCHEMA = """
CREATE TABLE schema_meta (meta_key TEXT PRIMARY KEY, role TEXT NOT NULL,
  schema_version INTEGER NOT NULL, agent_id TEXT, app_version TEXT,
  created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL) STRICT;
CREATE TABLE session_nodes (session_key TEXT NOT NULL PRIMARY KEY,
  current_session_id TEXT NOT NULL, entry_json TEXT NOT NULL, updated_at INTEGER NOT NULL,
  label TEXT, display_name TEXT, archived_at INTEGER, spawned_by TEXT,
  parent_session_key TEXT) STRICT;
CREATE TABLE transcript_events (session_id TEXT NOT NULL, seq INTEGER NOT NULL,
  event_json TEXT, created_at INTEGER NOT NULL, event_zstd BLOB, event_utf8_bytes INTEGER,
  navigation_json TEXT, PRIMARY KEY (session_id, seq)) STRICT;
CREATE TABLE session_transcript_active_events (session_id TEXT NOT NULL,
  active_position INTEGER NOT NULL, event_seq INTEGER NOT NULL, message_position INTEGER,
  context_eligible INTEGER, PRIMARY KEY (session_id, active_position)) STRICT;
"""


def _entry_like_fixture() -> dict[str, object]:
    """One real entry of the fixture (skills snapshot and all, ~15 KB) as a template."""
    db = FIXTURE / "agents" / "main" / "agent" / "openclaw-agent.sqlite"
    conn = sqlite3.connect(f"file:{db}?mode=ro&readonly_shm=1", uri=True)
    raw = conn.execute(
        "SELECT entry_json FROM session_nodes WHERE session_key='agent:main:discord:group:123'"
    ).fetchone()[0]
    conn.close()
    entry: dict[str, object] = json.loads(raw)
    return entry


def _new_db(root: Path, agent: str) -> sqlite3.Connection:
    d = root / "agents" / agent / "agent"
    d.mkdir(parents=True)
    conn = sqlite3.connect(d / "openclaw-agent.sqlite")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.executescript(SCHEMA)
    conn.execute("INSERT INTO schema_meta VALUES ('primary','agent',23,?,'2026.9.6',0,0)", (agent,))
    return conn


def many_sqlite(bench: Bench) -> tuple[Path, int]:
    n = bench.n(10_000, 1_000) if bench.quick else 10_000

    def build(root: Path) -> None:
        template = _entry_like_fixture()
        conn = _new_db(root, "main")
        rows = []
        for i in range(n):
            key = f"agent:main:discord:group:{i}" if i % 3 else f"agent:main:cron:job-{i}"
            sid = str(uuid.UUID(int=i + 1))
            entry = dict(template, sessionId=sid, updatedAt=1795372900000 + i, totalTokens=i)
            rows.append((key, sid, json.dumps(entry), 1795372900000 + i))
        conn.executemany(
            "INSERT INTO session_nodes (session_key, current_session_id, entry_json, updated_at) "
            "VALUES (?,?,?,?)",
            rows,
        )
        conn.commit()
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()

    return dataset(bench.data, "oc-many", {"sessions": n, "v": 1}, build), n


@case
def oc_list_many(bench: Bench) -> list[Row]:
    """list --json --limit all over 10,000 SQLite sessions (entries of ~15 KB each, like the
    fixture's), against the naive read: every entry_json through json.loads."""
    state, n = many_sqlite(bench)
    db = state / "agents" / "main" / "agent" / "openclaw-agent.sqlite"
    cmd = bench.sessiontool("--state-dir", str(state), "list", "--json", "--limit", "all")
    assert bench.json_output(cmd)["count"] == n
    naive = bench.py(
        "import json, sqlite3; c = sqlite3.connect('file:' + "
        f"{str(db)!r} + '?mode=ro&immutable=1', uri=True); "
        "[json.loads(e) for (e,) in c.execute('SELECT entry_json FROM session_nodes')]"
    )
    runs = bench.n(7, 3)
    s, b = bench.compare(cmd, naive, runs)
    r = ratio(s.median, b.median)
    return [
        Row(
            f"`list --json --limit all`, {n:,} sessions in OpenClaw's SQLite (median of {runs})",
            f"{spread(s)}; peak RSS {s.peak_rss / 1e6:.0f} MB; = {r:.2f}× parsing every "
            f"entry_json with json.loads ({spread(b)})",
            "< 1× (reads only the fields it needs)",
            r < 1,
        )
    ]


def history_sqlite(bench: Bench) -> Path:
    big = 100_000

    def build(root: Path) -> None:
        conn = _new_db(root, "main")
        for key, count in (("agent:main:big", big), ("agent:main:small", 100)):
            sid = str(uuid.uuid5(uuid.NAMESPACE_URL, key))
            entry = {"sessionId": sid, "updatedAt": 1795372900000}
            conn.execute(
                "INSERT INTO session_nodes (session_key, current_session_id, entry_json, "
                "updated_at) VALUES (?,?,?,?)",
                (key, sid, json.dumps(entry), 1795372900000),
            )
            events = []
            active = []
            for seq in range(count):
                role = "user" if seq % 2 else "assistant"
                ev = {
                    "type": "message",
                    "id": f"e{seq}",
                    "parentId": f"e{seq - 1}" if seq else None,
                    "timestamp": "2026-11-22T18:42:13.444Z",
                    "message": {
                        "role": role,
                        "content": f"message {seq} " + "x" * 200,
                        "timestamp": 1795372900000 + seq,
                    },
                }
                events.append((sid, seq, json.dumps(ev), 0))
                active.append((sid, seq, seq, seq))
            conn.executemany(
                "INSERT INTO transcript_events (session_id, seq, event_json, "
                "created_at) VALUES (?,?,?,?)",
                events,
            )
            conn.executemany(
                "INSERT INTO session_transcript_active_events (session_id, "
                "active_position, event_seq, message_position) VALUES (?,?,?,?)",
                active,
            )
        conn.commit()
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()

    return dataset(bench.data, "oc-history", {"events": big, "v": 1}, build)


@case
def oc_history_big_vs_small(bench: Bench) -> list[Row]:
    """history --limit 20: a session of 100,000 events vs one of 100, alternately."""
    state = history_sqlite(bench)
    big = bench.sessiontool("--state-dir", str(state), "history", "big", "--limit", "20", "--json")
    small = bench.sessiontool(
        "--state-dir", str(state), "history", "small", "--limit", "20", "--json"
    )
    assert len(bench.json_output(big)["messages"]) == 20
    runs = bench.n(11, 5)
    b, s = bench.compare(big, small, runs)
    r = ratio(b.median, s.median)
    return [
        Row(
            f"`history --limit 20`, SQLite session of 100,000 events vs 100 (median of {runs})",
            f"100k: {spread(b)}; 100: {spread(s)}: {r:.2f}×",
            "≤ 1.3×",
            r <= 1.3,
        )
    ]


# -- writes through the real gateway -----------------------------------------------------------


def start_gateway(
    base: Path, env: dict[str, str], gw_port: int, llm_port: int
) -> tuple[list[subprocess.Popen[bytes]], Path]:
    """The fake model and the real gateway on loopback (its output in `base/gateway.log`, which
    says "listening" once it is up): [model, gateway] and the log, for a case to wait on."""
    procs = [
        subprocess.Popen(
            [sys.executable, str(_fake_llm()), str(llm_port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
        )
    ]
    log = base / "gateway.log"
    with open(log, "wb") as out:
        procs.append(
            subprocess.Popen(
                [OPENCLAW_BIN, "gateway", "--port", str(gw_port), "--bind", "loopback"],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=env,
            )
        )
    return procs, log


def _fake_llm() -> Path:
    sys.path.insert(0, str(ROOT))
    from tests.interop_openclaw.conftest import FAKE_LLM

    return Path(FAKE_LLM)


@contextlib.contextmanager
def live_gateway(
    bench: Bench, *, allow_own_tools: bool = False
) -> Iterator[tuple[Path, dict[str, str], int] | str]:
    """The real gateway on a fresh fixture copy, answered by the fake LLM; yields (state dir,
    environment, port), or why it could not be started. Both servers are stopped after.
    `allow_own_tools`: its config lets OpenClaw's own sessions_spawn / sessions_send through
    `tools.invoke` (`gateway.tools.allow`)."""
    import signal
    import sys
    import time

    if not os.access(OPENCLAW_BIN, os.X_OK):
        yield f"not measured: no openclaw at {OPENCLAW_BIN}"
        return
    sys.path.insert(0, str(ROOT))
    from tests.interop_openclaw.conftest import ALLOW_OWN_TOOLS, copy_fixture, free_port, oc_env

    base = bench.data / "oc-gateway"
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    gw_port, llm_port = free_port(), free_port()
    state = copy_fixture(base / "state", gw_port, llm_port)
    if allow_own_tools:
        cfg = state / "openclaw.json"
        cfg.write_text(cfg.read_text().replace("gateway: {", ALLOW_OWN_TOOLS, 1))
    home = base / "home"
    home.mkdir()
    os.environ["OPENCLAW_BIN"] = OPENCLAW_BIN
    env = oc_env(state, home)  # no `openclaw` on sessiontool's PATH
    procs, log = start_gateway(base, env, gw_port, llm_port)
    saved = bench.env
    try:
        deadline = time.monotonic() + 240
        while b"listening" not in log.read_bytes():
            if time.monotonic() > deadline or procs[1].poll() is not None:
                yield "not measured: the gateway did not start"
                return
            time.sleep(1)
        bench.env = {**bench.env, **env}
        yield state, env, gw_port
    finally:
        bench.env = saved
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            p.wait()


@case
def oc_send_through_gateway(bench: Bench) -> list[Row]:
    """Writes through the real gateway (started on a fixture copy, answered by the fake LLM),
    each alternately against the bare `openclaw gateway call` of the same method: `send` (a run
    record, its lane worker, the `agent` turn and its final answer over sessiontool's own
    WebSocket client) against `openclaw gateway call agent --expect-final`, and `label`
    against `openclaw gateway call sessions.patch`. sessiontool has no `openclaw` on its PATH.
    The ratio is taken run by run (theirs / ours); the target is on its median."""
    label = "`send` through the gateway vs `openclaw gateway call agent --expect-final`"
    with live_gateway(bench) as live:
        if isinstance(live, str):
            return [Row(label, live)]
        state, _env, gw_port = live
        rows: list[Row] = []
        key = "agent:main:discord:group:123"
        call = f"exec {OPENCLAW_BIN} gateway call %s --json --timeout 300000 --port {gw_port} "
        ours = bench.sessiontool(
            "--state-dir", str(state), "send", "discord:group:123", "bench", "--timeout", "300"
        )
        params = f'{{"sessionKey":"{key}","message":"bench",'
        theirs = [
            "sh",
            "-c",
            call % "agent" + f'--expect-final --params \'{params}"idempotencyKey":"\'$(cat '
            "/proc/sys/kernel/random/uuid)'\"}'",
        ]
        assert "ECHO" in bench.output(ours)
        assert json.loads(bench.output(theirs))["status"] == "ok"
        runs = bench.n(9, 3)
        rows.append(_faster(bench, label, ours, theirs, runs, 2.5))
        ours = bench.sessiontool("--state-dir", str(state), "label", key, "bench-label")
        patch = json.dumps({"key": key, "label": "bench-label"})
        theirs = ["sh", "-c", call % "sessions.patch" + f"--params '{patch}'"]
        bench.output(ours)
        assert json.loads(bench.output(theirs))["ok"] is True
        label = "`label` through the gateway vs `openclaw gateway call sessions.patch`"
        rows.append(_faster(bench, label, ours, theirs, runs, 5.0))
    return rows


def _faster(
    bench: Bench, label: str, ours: list[str], theirs: list[str], runs: int, target: float
) -> Row:
    """Alternate runs; the ratio theirs/ours run by run, its median against `target`."""
    a, b = bench.compare(ours, theirs, runs)
    rs = [t / o for o, t in zip(a.times, b.times, strict=True) if o > 0]
    r = statistics.median(rs)
    return Row(
        f"{label} (median of {runs})",
        f"sessiontool {spread(a)} (cpu {a.cpu_spread()}); openclaw {spread(b)} "
        f"(cpu {b.cpu_spread()}): {ratio_spread(rs)} faster",
        f"≥ {target:g}× faster",
        r >= target,
    )
