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
from typing import Any

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
def live_gateway(bench: Bench) -> Iterator[tuple[Path, dict[str, str], int] | str]:
    """The real gateway on a fresh fixture copy, answered by the fake LLM; yields (state dir,
    environment, port), or why it could not be started. Both servers are stopped after."""
    import signal
    import sys
    import time

    if not os.access(OPENCLAW_BIN, os.X_OK):
        yield f"not measured: no openclaw at {OPENCLAW_BIN}"
        return
    sys.path.insert(0, str(ROOT))
    from tests.interop_openclaw.conftest import copy_fixture, free_port, oc_env

    base = bench.data / "oc-gateway"
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    gw_port, llm_port = free_port(), free_port()
    state = copy_fixture(base / "state", gw_port, llm_port)
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


# Runs `spawn` (with a fresh label) and polls its run record every 5 ms until its follow-up
# (announce, cleanup) is done; prints the seconds from the spawn's start and the record. Its own
# start-up is not counted: the clock starts right before the spawn process is started.
SPAWN_DRIVER = r"""
import json, os, subprocess, sys, time, uuid
cmd = json.loads(sys.argv[1]) + ["--label", "bench-" + uuid.uuid4().hex[:8]]
runs = sys.argv[2]; deadline = float(sys.argv[3])
t0 = time.perf_counter(); t0_ms = time.time() * 1000
out = subprocess.run(cmd, capture_output=True, text=True)
if out.returncode != 0:
    sys.exit("spawn failed: " + out.stderr[-500:])
t_spawn = time.perf_counter() - t0
run_id = json.loads(out.stdout)["runId"]
path = os.path.join(runs, run_id + ".json")
while True:
    try:
        with open(path, "rb") as fh:
            rec = json.loads(fh.read())
    except (OSError, ValueError):
        rec = {}
    if (rec.get("followUp") or {}).get("next") == "done":
        break
    if rec.get("status") in ("error", "timeout", "aborted", "lost"):
        sys.exit("spawn ended %s: %s" % (rec.get("status"), rec.get("error")))
    if time.perf_counter() - t0 > deadline:
        sys.exit("no announce after %.0f s" % deadline)
    time.sleep(0.005)
print(json.dumps({"total": time.perf_counter() - t0, "spawn": t_spawn, "t0": t0_ms,
                  "record": rec}))
"""

# The floor: the same gateway calls the spawn's worker makes (sessions.create, the child's
# `agent` turn to its final answer with the same params (system prompt, provenance, lane,
# timeout: argv[2]), the announce turn accepted, sessions.delete), made by one
# warm Python process on a connection opened before the clock starts: what the gateway itself
# takes for them, with no sessiontool process, worker, record or lane in the time. Only the
# handshake comes before the clock, as in the worker: the `sessions.list` this floor made
# there until 2026-11-25 (2-7 s of the gateway's work at load 15-25) took work out of the turn
# that follows it (gateway CPU during the turn, 6 alternated pairs: median 1.9 s after it,
# 3.1 s without it, as in the worker's turn), so the floor's turns reported a smaller
# durationMs than the worker's same turn.
FLOOR_DRIVER = r"""
import json, os, sys, time, uuid
from pathlib import Path
os.environ["SESSIONTOOL_WORKER"] = "1"
from sessiontool.openclaw import gateway
from sessiontool.state.paths import StatePaths
p = StatePaths(Path(sys.argv[1]))
key = "agent:main:subagent:" + str(uuid.uuid4()); rid = str(uuid.uuid4())
gateway.expect(p, "sessions.delete", {"key": key})
gateway.find(p).handshake(p)  # connected, with the scopes of every call, and nothing else
t0 = time.perf_counter()
gateway.call(p, "sessions.create", {"key": key, "parentSessionKey": "agent:main:main",
             "spawnDepth": 1, "label": "floor-" + rid[:8]})
turn = dict(json.loads(sys.argv[2]), sessionKey=key, idempotencyKey=rid)
r = gateway.call(p, "agent", turn, timeout_s=330, expect_final=True)
a = gateway.call(p, "agent", {"sessionKey": "agent:main:main", "message": "Status: ok",
                 "idempotencyKey": rid + ":announce", "inputProvenance": {
                 "kind": "inter_session", "sourceSessionKey": key,
                 "sourceTool": "sessions_spawn"}}, timeout_s=60)
gateway.call(p, "sessions.delete", {"key": key, "deleteTranscript": True})
total = time.perf_counter() - t0
print(json.dumps({"total": total, "record": {"status": r.get("status"),
    "gatewayDurationMs": r["result"]["meta"]["durationMs"],
    "followUp": {"announceRunId": a["runId"]}}}))
"""


def _settle(bench: Bench, state: Path, rec: dict[str, Any]) -> None:
    """Waits (untimed) for the announce turn the gateway runs after accepting it, so the next
    run does not share the gateway with it."""
    import subprocess
    import sys

    run_id = (rec.get("followUp") or {}).get("announceRunId")
    if not isinstance(run_id, str):
        raise RuntimeError(f"no announce run id in the record: {rec}")
    code = (
        "import sys; from pathlib import Path; from sessiontool.openclaw import gateway; "
        "from sessiontool.state.paths import StatePaths; "
        "gateway.call(StatePaths(Path(sys.argv[1])), 'agent.wait', "
        "{'runId': sys.argv[2], 'timeoutMs': 120000}, timeout_s=150)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(state), run_id],
        capture_output=True,
        text=True,
        env=bench.env,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"agent.wait failed: {proc.stderr[-500:]}")


@case
def oc_spawn_through_gateway(bench: Bench) -> list[Row]:
    """spawn with label + announce + cleanup through the real gateway: the wall time from the
    spawn's start to its follow-up done (announce accepted, child deleted), against the sum of
    the gateway's own `durationMs` of the turn it waits for (the child's, from its final
    answer), run by run; and the same gateway calls made bare on an open connection (the floor),
    alternately. The announce turn is accepted, not waited for (the gateway runs it after), and
    its durationMs reaches no caller: it is waited for, untimed, before the next run."""
    import subprocess
    import sys

    label = "spawn with label + announce + cleanup through the gateway"
    with live_gateway(bench) as live:
        if isinstance(live, str):
            return [Row(label, live)]
        state, _env, _port = live
        spawn = bench.sessiontool(
            "--state-dir",
            str(state),
            "--json",
            "spawn",
            "bench spawn task",
            "--cleanup",
            "delete",
            "--run-timeout",
            "300",
        )
        driver = [
            sys.executable,
            "-c",
            SPAWN_DRIVER,
            json.dumps(spawn),
            str(state / "sessiontool" / "runs"),
            "300",
        ]

        def once() -> dict[str, Any]:
            proc = subprocess.run(driver, capture_output=True, text=True, env=bench.env)
            if proc.returncode != 0:
                raise RuntimeError(f"spawn driver failed: {proc.stderr[-500:]}")
            rep: dict[str, Any] = json.loads(proc.stdout)
            rec = rep["record"]
            if rec.get("status") != "ok" or "gatewayDurationMs" not in rec:
                raise RuntimeError(f"spawn did not end ok with the turn's durationMs: {rec}")
            _settle(bench, state, rec)
            # The params the worker sent: `model`/`modelProvider` are what the turn's answer
            # reported, recorded after it (the spawn asked for no model). Sent by the floor,
            # the model is an override the worker's turn never had.
            sent = {k: v for k, v in rec.items() if k not in ("model", "modelProvider")}
            same_turn.append(json.dumps(turn_params(sent)))
            return rep

        from sessiontool.runs.gateway_run import turn_params

        same_turn: list[str] = []  # the child's turn exactly as the worker sent it

        def bare() -> dict[str, Any]:
            floor = [sys.executable, "-c", FLOOR_DRIVER, str(state), same_turn[-1]]
            proc = subprocess.run(floor, capture_output=True, text=True, env=bench.env)
            if proc.returncode != 0:
                raise RuntimeError(f"floor driver failed: {proc.stderr[-500:]}")
            rep: dict[str, Any] = json.loads(proc.stdout)
            _settle(bench, state, rep["record"])
            return rep

        once()  # warm-up
        bare()
        runs = bench.n(9, 3)
        reps, floors = [], []
        for _ in range(runs):  # alternately, so a busy spell slows both
            reps.append(once())
            floors.append(bare())
    return _spawn_rows(label, runs, reps, floors)


def _walls_turns(reps: list[dict[str, Any]]) -> tuple[list[float], list[float]]:
    """Per run: the wall time and the child's turn as the gateway timed it (`durationMs`), s."""
    return [r["total"] for r in reps], [r["record"]["gatewayDurationMs"] / 1000 for r in reps]


def _spawn_rows(
    label: str, runs: int, reps: list[dict[str, Any]], floors: list[dict[str, Any]]
) -> list[Row]:
    """The target row (wall / the turns' `durationMs`, run by run), the same for the floor (the
    gateway calls alone), ours against the floor, and where the rest of our time went, from the
    run record's own timestamps (ms since the epoch, so only their differences)."""
    walls, turns = _walls_turns(reps)
    rs = [w / t for w, t in zip(walls, turns, strict=True)]
    r = statistics.median(rs)
    f_walls, f_turns = _walls_turns(floors)
    f_rs = [w / t for w, t in zip(f_walls, f_turns, strict=True)]
    vs_floor = [w / f for w, f in zip(walls, f_walls, strict=True)]
    extra = [w - f for w, f in zip(walls, f_walls, strict=True)]

    def part(a: str, b: str) -> list[float]:
        return [(x["record"][b] - x["record"][a]) / 1000 for x in reps]

    fg = [x["spawn"] for x in reps]
    to_record = [(x["record"]["createdAt"] - x["t0"]) / 1000 for x in reps]
    queued = part("createdAt", "startedAt")
    turn_extra = [t - c for t, c in zip(part("startedAt", "endedAt"), turns, strict=True)]
    follow = part("endedAt", "announcedAt")
    return [
        Row(
            f"{label}: wall from `spawn` to announce + cleanup done vs its turns' `durationMs` "
            f"(median of {runs}, per-run ratio)",
            f"wall {_sp(walls)} vs child turn's durationMs {_sp(turns)} (min / median / max): "
            f"ratio {ratio_spread(rs)}",
            "≤ 1.3× (median)",
            r <= 1.3,
        ),
        Row(
            "… the floor: the same gateway calls (sessions.create, the child's `agent` turn "
            "to its final answer, the announce accepted, sessions.delete) from one process on "
            "a connection already open, alternately with the above",
            f"wall {_sp(f_walls)} vs durationMs {_sp(f_turns)}: ratio {ratio_spread(f_rs)}",
        ),
        Row(
            f"{label} vs the floor (run by run)",
            f"ratio {ratio_spread(vs_floor)}; sessiontool's own share (ours − floor) {_sp(extra)}",
        ),
        Row(
            f"{label}: where the time went (min / median / max)",
            f"`spawn` command {_sp(fg)} (its start → the run record created {_sp(to_record)}); "
            f"record created → worker started the turn "
            f"{_sp(queued)}; the run's wall beyond the turn's `durationMs` (connect, "
            f"sessions.create, the gateway's work outside durationMs) {_sp(turn_extra)}; run's "
            f"end → announce accepted + child deleted {_sp(follow)}",
        ),
    ]


def _sp(xs: list[float]) -> str:
    return " / ".join(ms(x) for x in (min(xs), statistics.median(xs), max(xs)))
