"""The CLI against hostile arguments and a hostile state dir: what the red team's fuzzer found
(time bounds past 64 bits, non-UTF-8 bytes in a query or a command word) as fixed examples, and
a slow, time-bounded fuzz of random commands over state dirs with planted links, corrupt or
wrong-typed run records, stores, configs, transcripts and index files, and of the commands
that write beside it (`export --to`, `export --html`, `gateway forget`) over export DIRs and
gateways' parts holding links out, foreign files and dead temp files, and of remote reads
(`--gateway URL`) from a scripted hostile gateway (tests/fakes/rawgateway.py `hostile`: broken
frames, floods, nesting, a 300 MB answer, junk answers and controls in what it says).

The contract: an exit code the README documents, one clear line (never a traceback or an
`internal error`), and nothing written outside the state dir; against a hostile gateway also no
C1 control or bidi override on stderr and an end within the documented deadlines.

The slow fuzz runs `SESSIONTOOL_FUZZ_CASES` cases (default 60; CI's landing gate sets a fixed
larger count) from `SESSIONTOOL_FUZZ_SEED` (default: a fixed seed), so the same commit always
passes or always fails it; every failing case prints its seed, mutations and command, and a seed
found once joins FOUND_SEEDS, run in the default suite. `SESSIONTOOL_FUZZ_SECONDS` runs as many
cases as fit instead, to hunt fresh seeds (`SESSIONTOOL_FUZZ_SEED=$RANDOM`)."""

from __future__ import annotations

import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import closing, nullcontext
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import rawgateway
from tests.helpers import FIXTURE_STATE, run_cli
from tests.reliability.util import snapshot, worker_pids
from tests.test_openclaw_sqlite import MAIN_DB, OC_STATE

DOCUMENTED = {0, 1, 2, 3, 4, 5, 6, 75, 124, 130, 143}
# Case seeds the slow fuzz failed on once, run in the default suite (each ~0.5 s).
FOUND_SEEDS = [20261185789195, 20261185785990]


def _raw(*args: bytes, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    full = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable.encode(), b"-m", b"sessiontool", *args],
        capture_output=True,
        env={k.encode(): v.encode() for k, v in full.items()},
        timeout=60,
    )


# -- what the fuzzer found ---------------------------------------------------------------------


@pytest.mark.parametrize("cmd", [["search", "book"], ["usage"]])
@pytest.mark.parametrize("flag", ["--since", "--until"])
def test_time_bounds_past_64_bits_are_answered(state: Path, cmd: list[str], flag: str) -> None:
    shutil.copytree(FIXTURE_STATE, state)
    proc = run_cli(*cmd, flag, "99999999999999d", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    # Further back than any clock: --since keeps everything, --until nothing.
    if cmd[0] == "search":
        assert (out["count"] > 0) == (flag == "--since")
    else:
        assert (out["total"]["turns"] > 0) == (flag == "--since")


def test_a_non_utf8_byte_in_a_query_is_a_usage_error(state: Path) -> None:
    shutil.copytree(FIXTURE_STATE, state)
    proc = _raw(b"search", b"bo\xffok")
    err = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == 2, err
    assert "not valid UTF-8" in err and "internal error" not in err
    assert len(err.strip().splitlines()) == 2  # the error and its hint


@pytest.mark.parametrize("word", [b"\xff", b"li\xffst", b"\xc3\x28"])
def test_a_non_utf8_command_word_is_a_usage_error(state: Path, word: bytes) -> None:
    proc = _raw(word)
    err = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == 2, err
    assert "Traceback" not in err and "No such command" in err
    proc = _raw(word, b"--json")
    assert proc.returncode == 2
    assert json.loads(proc.stdout)["code"] == 2


def _rename_in_schema(db: Path, table: str) -> None:
    """Give `table` a name that is not UTF-8 and a definition SQLite cannot parse: SQLite's
    error then quotes the name, and Python's sqlite3 fails decoding the message."""
    with closing(sqlite3.connect(db)) as c:
        c.execute("PRAGMA writable_schema=ON")
        c.execute(
            "UPDATE sqlite_master SET name = CAST(x'736388ff' AS TEXT), sql = 'CREATE TABLE'"
            " WHERE name = ?",
            (table,),
        )
        c.commit()


@pytest.mark.parametrize("cmd", [["list"], ["search", "x", "--session", "main"], ["doctor"]])
def test_a_non_utf8_schema_name_in_openclaws_database_is_a_corrupt_store(
    state: Path, cmd: list[str]
) -> None:
    """Seed 20261185789195 of CI's fuzz (a corrupt page of OpenClaw's database): 'internal
    error: UnicodeDecodeError' from reading sqlite_master; exit 5 like every corrupt store."""
    shutil.copytree(OC_STATE, state)
    _rename_in_schema(state / MAIN_DB, "schema_meta")
    proc = run_cli(*cmd)
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr
    if cmd[0] == "doctor":  # reports it and goes on
        assert proc.returncode != 0 and "not UTF-8" in proc.stdout + proc.stderr
        return
    assert proc.returncode == 5, proc.stderr
    assert "unreadable OpenClaw database" in proc.stderr and "not UTF-8" in proc.stderr


def test_a_non_utf8_schema_name_in_the_search_index_rebuilds_it(state: Path) -> None:
    shutil.copytree(FIXTURE_STATE, state)
    assert run_cli("search", "book").returncode == 0
    _rename_in_schema(state / "sessiontool" / "index.sqlite", "meta")
    proc = run_cli("search", "book", "--json")
    assert proc.returncode == 0, proc.stderr
    assert "was unreadable (malformed database schema" in proc.stderr
    assert json.loads(proc.stdout)["count"] > 0


@pytest.mark.parametrize("updated", ["x", [], {"a": 1}, True, "9" * 50])
def test_export_html_of_a_store_whose_updated_at_is_not_a_number(
    tmp_path: Path, updated: Any
) -> None:
    """Found by the fuzz once it drove `export --html` (issue 37): the index page sorted by a
    store's `updatedAt` as it stood ('internal error: TypeError: bad operand type for unary
    -: str'); such a value is no time, the page is written."""
    state = tmp_path / "state"
    shutil.copytree(FIXTURE_STATE, state)
    proc = run_cli("--state-dir", str(state), "export", "--html", str(tmp_path / "a"), "--json")
    assert proc.returncode == 0, proc.stderr
    sessions = json.loads(proc.stdout)["sessions"]
    store_path = state / "agents" / "main" / "sessions" / "sessions.json"
    store = json.loads(store_path.read_text())
    for entry in store.values():
        entry["updatedAt"] = updated
    store_path.write_text(json.dumps(store))
    site = tmp_path / "site"
    proc = run_cli("--state-dir", str(state), "export", "--html", str(site), "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["sessions"] == sessions
    assert (site / "index.html").is_file()


@pytest.mark.parametrize("case_seed", FOUND_SEEDS)
def test_cases_the_fuzz_found_stay_fixed(tmp_path: Path, case_seed: int) -> None:
    names, argv, code, problem = _one_case(random.Random(case_seed), tmp_path)
    assert not problem, f"seed {case_seed}: {names} {argv} -> {problem}"
    assert code in DOCUMENTED


# -- the slow fuzz -----------------------------------------------------------------------------

Mutation = Callable[[random.Random, Path, Path], None]  # rng, state, outside
JUNK_JSON: list[Any] = [
    None,
    0,
    -1,
    1e308,
    "x",
    [],
    {},
    [1, 2],
    {"a": {"b": []}},
    True,
    "\ud800",
    "../../etc",
    "9" * 50,
]


def _junk(rng: random.Random) -> Any:
    return rng.choice(JUNK_JSON)


def _junk_bytes(rng: random.Random) -> bytes:
    return rng.choice(
        [
            b"",
            b"\x00" * 10,
            b"{",
            b"\xff\xfe garbage",
            b"SQLite format 3\x00" + bytes(rng.randrange(256) for _ in range(200)),
            json.dumps(_junk(rng)).encode(),
            b"[" * 5000,
        ]
    )


def _sessions_dir(state: Path) -> Path:
    return state / "agents" / "main" / "sessions"


def _transcripts(state: Path) -> list[Path]:
    return sorted(_sessions_dir(state).glob("*.jsonl"))


def m_index_junk(rng: random.Random, state: Path, outside: Path) -> None:
    d = state / "sessiontool"
    d.mkdir(exist_ok=True)
    name = rng.choice(
        ["index.sqlite", "index.sqlite-wal", "index.sqlite-shm", "index.sqlite-journal"]
    )
    (d / name).write_bytes(_junk_bytes(rng))


def m_index_link(rng: random.Random, state: Path, outside: Path) -> None:
    d = state / "sessiontool"
    d.mkdir(exist_ok=True)
    name = rng.choice(
        ["index.sqlite", "index.sqlite-wal", "index.sqlite-shm", "index.sqlite-journal"]
    )
    target = rng.choice([outside / "victim.sqlite", outside / "nothing-here.sqlite", d])
    p = d / name
    if p.exists() or p.is_symlink():
        p.unlink()
    p.symlink_to(target)


def m_index_dir(rng: random.Random, state: Path, outside: Path) -> None:
    (state / "sessiontool" / "index.sqlite").mkdir(parents=True, exist_ok=True)


def m_index_tampered(rng: random.Random, state: Path, outside: Path) -> None:
    """A real index (built by a search first), then rows changed by hand."""
    subprocess.run(
        [sys.executable, "-m", "sessiontool", "search", "book"],
        env={**os.environ, "SESSIONTOOL_STATE_DIR": str(state)},
        capture_output=True,
        timeout=60,
    )
    db = state / "sessiontool" / "index.sqlite"
    if not db.is_file():
        return
    con = sqlite3.connect(db)
    try:
        stmt = rng.choice(
            [
                "UPDATE files SET off = 999999999, digest = x'00'",
                "UPDATE files SET ino = -1",
                "UPDATE scopes SET rows = x'5b7b7d5d'",
                "UPDATE scopes SET rows = 'not json'",
                "UPDATE msgs SET off = -5, part = 99",
                "UPDATE meta SET v = 'x'",
                "DELETE FROM sqlite_sequence",
                "DROP TABLE turns",
                "PRAGMA user_version = 99",
            ]
        )
        con.execute(stmt)
        con.commit()
    except sqlite3.Error:
        pass
    finally:
        con.close()


def m_run_record(rng: random.Random, state: Path, outside: Path) -> None:
    runs = state / "sessiontool" / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    rid = f"0b0e5c52-4a59-4c3e-9d0e-{rng.randrange(10**12):012d}"
    rec: dict[str, Any] = {
        "runId": rid,
        "kind": "send",
        "status": rng.choice(["ok", "queued", "running", "error", "lost"]),
        "createdAt": 1795630005191,
        "sessionKey": "agent:main:main",
        "agentId": "main",
        "message": "hello",
    }
    fields = [*rec, "pid", "endedAt", "reply", "usage", "delaySeconds"]  # status, kind too
    for _ in range(rng.randint(1, 3)):
        rec[rng.choice(fields)] = _junk(rng)
    data = json.dumps(rec).encode() if rng.random() < 0.8 else _junk_bytes(rng)
    (runs / f"{rid}.json").write_bytes(data)


def m_store(rng: random.Random, state: Path, outside: Path) -> None:
    store = _sessions_dir(state) / "sessions.json"
    if not store.exists() or rng.random() < 0.3:
        store.write_bytes(_junk_bytes(rng))
        return
    data = json.loads(store.read_text())
    key = rng.choice(list(data)) if data else "agent:main:main"
    if rng.random() < 0.5:
        data[key] = _junk(rng)
    elif isinstance(data.get(key), dict):
        field = rng.choice(["sessionId", "updatedAt", "label", "sessionFile", "spawnedBy", "model"])
        data[key][field] = _junk(rng)
    store.write_text(json.dumps(data))


def m_config(rng: random.Random, state: Path, outside: Path) -> None:
    cfg: Any = rng.choice(
        [
            _junk(rng),
            {"agents": _junk(rng)},
            {"models": {"providers": _junk(rng)}},
            {"models": {"providers": {"p": {"models": [{"id": "m", "cost": _junk(rng)}]}}}},
            {"session": {"mainKey": _junk(rng)}},
        ]
    )
    name = rng.choice(["sessiontool.json5", "clawdbot.json", "openclaw.json"])
    (state / name).write_text(json.dumps(cfg) if rng.random() < 0.8 else "{,,")


def m_transcript(rng: random.Random, state: Path, outside: Path) -> None:
    paths = _transcripts(state)
    if not paths:
        return
    p = rng.choice(paths)
    how = rng.randrange(5)
    if how == 0:
        p.unlink()
        p.mkdir()
    elif how == 1:
        p.unlink()
        p.symlink_to(outside / "victim.jsonl")
    elif how == 2:
        with open(p, "ab") as fh:
            fh.write(
                _junk_bytes(rng)
                + b"\n"
                + json.dumps({"type": "message", "message": _junk(rng)}).encode()
                + b"\n"
            )
    elif how == 3:
        data = bytearray(p.read_bytes())
        for _ in range(5):
            if data:
                data[rng.randrange(len(data))] = rng.randrange(256)
        st = p.stat()
        p.write_bytes(bytes(data))
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    else:
        p.write_bytes(b"")


def m_sqlite_page(rng: random.Random, state: Path, outside: Path) -> None:
    db = state / MAIN_DB
    if not db.is_file():
        return
    size = db.stat().st_size
    with open(db, "r+b") as fh:
        fh.seek(rng.randrange(4096, max(4097, size - 600)))
        fh.write(bytes(rng.randrange(256) for _ in range(rng.choice([8, 200, 600]))))


MUTATIONS: list[Mutation] = [
    m_index_junk,
    m_index_link,
    m_index_dir,
    m_index_tampered,
    m_run_record,
    m_store,
    m_config,
    m_transcript,
    m_sqlite_page,
]

# -- the directories an export writes and the gateways' parts (issue 37) --------------------
# `@OUT@` (export --to) and `@SITE@` (export --html) are beside the state dir; `outside` is the
# victim every planted link points into.
FORGET_URL = "ws://10.0.0.5:18789"


def _plant(p: Path, target: Path) -> None:
    if p.is_symlink() or p.is_file():
        p.unlink()
    elif p.is_dir():
        shutil.rmtree(p)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.symlink_to(target)


def _victim_dir(outside: Path) -> Path:
    d = outside / "dir"
    (d / "sessiontool").mkdir(parents=True, exist_ok=True)
    (d / "sessiontool" / "gateway-device.json").write_text('{"publicKey": "not yours"}')
    (d / "index.html").write_text("<p>not yours</p>")
    return d


def m_site_dir(rng: random.Random, state: Path, outside: Path) -> None:
    """The --html DIR: a user's own files, links out at `s`, a page or the manifest, a dead
    export's temp files, a manifest that is junk or lists what the export never wrote."""
    site = state.parent / "site"
    (site / "s").mkdir(parents=True, exist_ok=True)
    victim = _victim_dir(outside)
    how = rng.randrange(7)
    if how == 0:
        (site / rng.choice(["index.html", "usage.html", "notes.txt"])).write_text("mine")
    elif how == 1:
        _plant(site / "s", rng.choice([victim, outside / "no-such-dir"]))
    elif how == 2:
        name = rng.choice(["index.html", ".sessiontool-html.json", "s/x.html"])
        _plant(site / name, rng.choice([victim / "index.html", outside / "new.html"]))
    elif how == 3:
        (site / f"index.html.{2**22 + rng.randrange(1000)}.0badf00d.tmp").write_text("half")
    elif how == 4:
        (site / ".sessiontool-html.json").write_bytes(_junk_bytes(rng))
    elif how == 5:
        pages = {"s/x.html": {"fp": ""}, "../../outside/dir/index.html": {"fp": ""}}
        (site / ".sessiontool-html.json").write_text(json.dumps({"format": 1, "pages": pages}))
        (site / "s" / "x.html").write_text("listed")
    else:  # DIR itself a link (the user's to name), here into the state dir
        _plant(site, rng.choice([state, state / "agents"]))


def m_export_dir(rng: random.Random, state: Path, outside: Path) -> None:
    """The --to DIR: links out at its agents or sessions dir, a transcript or the store; a
    live transcript; a dead export's temp files."""
    sessions = state.parent / "export" / "agents" / "main" / "sessions"
    sessions.mkdir(parents=True, exist_ok=True)
    victim = _victim_dir(outside)
    sid = rng.choice(["792f111c-3bb9-4b35-afcd-c0f4605431d4", "x"])
    how = rng.randrange(5)
    if how == 0:
        _plant(rng.choice([sessions, sessions.parent, sessions.parent.parent]), victim)
    elif how == 1:
        name = rng.choice([f"{sid}.jsonl", "sessions.json", "sessions.json.lock"])
        _plant(sessions / name, rng.choice([outside / "victim.jsonl", outside / "new.jsonl"]))
    elif how == 2:
        (sessions / f"{sid}.jsonl").write_text('{"type":"session","version":3,"id":"x"}\n')
    elif how == 3:
        (sessions / f"{sid}.jsonl.{2**22 + rng.randrange(1000)}.0badf00d.tmp").write_text("h")
    else:
        (sessions / "sessions.json").write_bytes(_junk_bytes(rng))


def m_gateways(rng: random.Random, state: Path, outside: Path) -> None:
    """A link at a gateway's part of the state dir (`gateways/<hash>`, its `sessiontool/`), at
    `gateways` itself or at the kept device tokens, all leading out."""
    import hashlib

    digest = hashlib.sha256(FORGET_URL.encode()).hexdigest()[:16]
    victim = _victim_dir(outside)
    where = rng.choice(
        [
            f"gateways/{digest}",
            f"gateways/{digest}/sessiontool",
            "gateways",
            "sessiontool/gateway",
            f"sessiontool/gateway/{digest}.json",
        ]
    )
    if where.endswith(".json"):
        target = victim / "sessiontool" / "gateway-device.json"
    elif where.endswith("sessiontool"):
        target = victim / "sessiontool"
    else:
        target = victim
    _plant(state / where, target)


OUTPUT_MUTATIONS: list[Mutation] = [m_site_dir, m_export_dir, m_gateways]
OUTPUT_COMMANDS: list[list[str]] = [
    ["export", "--html", "@SITE@", "--all-agents"],
    ["export", "--html", "@SITE@", "--json"],
    ["export", "--to", "@OUT@", "--all-agents", "--json"],
    ["export", "--html", ""],
    ["gateway", "forget", FORGET_URL],
    ["gateway", "forget", FORGET_URL, "--json"],
    ["doctor", "--fix", "--yes"],
]
# A case is one of these with this probability, drawn from a second stream of its seed after
# the first stream's draws: a case of MUTATIONS and COMMANDS (a seed in FOUND_SEEDS) stays the
# case it was whatever is added here.
OUTPUT_SHARE = 0.3
# Remote reads from a scripted hostile gateway (issue 37), drawn from a third stream after the
# second's draws (so the cases above stay the cases they were), with this probability.
GATEWAY_COMMANDS: list[list[str]] = [
    ["list", "--json"],
    ["list", "--all-agents"],
    ["history", "main"],
    ["history", "main", "--json"],
    ["usage", "--by", "model"],
    ["search", "hi", "--json"],
]
GATEWAY_SHARE = 0.2
GATEWAY_ENV = {
    "OPENCLAW_GATEWAY_TOKEN": "fuzz-token",
    "SESSIONTOOL_OPENCLAW_BIN": "",
    "OPENCLAW_HANDSHAKE_TIMEOUT_MS": "2000",  # a flood waits out 2 s, not 15
}
GATEWAY_WALL_S = 30.0  # the 2 s handshake, a call's own deadline is never reached: far under it
RAW_ON_A_TERMINAL = set(
    "\x85\x9b\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)


COMMANDS: list[list[str]] = [
    ["search", "book"],
    ["search", "book", "--include-archived", "--json"],
    ["search", "✓ OR fixture", "--all-agents"],
    ["search", "x", "--session", "main"],
    ["search", "東京"],
    ["usage", "--json"],
    ["usage", "--by", "day", "--since", "30d"],
    ["list", "--json", "--all-agents"],
    ["list", "--message-limit", "2"],
    ["history", "main", "--json"],
    ["runs", "--json"],
    ["runs"],
    ["doctor", "--json"],
    ["paths", "--json"],
    ["prune", "--older-than", "0s", "--dry-run"],
    ["export", "--to", "@OUT@", "--all-agents"],
    ["label", "main", "renamed"],
]


def _reap(state: Path) -> None:
    """Wait for (then kill) any worker the command left; reliability.util's reap_state reads
    the run records, which here are hostile."""
    import signal

    deadline = time.monotonic() + 10
    while worker_pids(state) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in worker_pids(state):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _one_case(rng: random.Random, base: Path) -> tuple[list[str], list[str], int, str]:
    state, outside = base / "state", base / "outside"
    outside.mkdir()
    (outside / "victim.sqlite").write_bytes(b"SQLite format 3\x00 not yours")
    (outside / "victim.jsonl").write_text('{"type":"session"}\n')
    template = OC_STATE if rng.random() < 0.35 else FIXTURE_STATE
    shutil.copytree(template, state)
    names = []
    for m in rng.sample(MUTATIONS, rng.randint(1, 3)):
        try:
            m(rng, state, outside)
        except (OSError, ValueError):  # an earlier mutation left no room for this one
            continue
        names.append(m.__name__)
    command = rng.choice(COMMANDS)
    extra = random.Random(rng.random())
    if extra.random() < OUTPUT_SHARE:
        for m in extra.sample(OUTPUT_MUTATIONS, extra.randint(1, 2)):
            try:
                m(extra, state, outside)
            except (OSError, ValueError):
                continue
            names.append(m.__name__)
        command = extra.choice(OUTPUT_COMMANDS)
    third = random.Random(extra.random())
    served = None
    if third.random() < GATEWAY_SHARE:
        what, served = rawgateway.hostile(third, _junk)
        names.append(f"gateway: {what}")
        command = ["--gateway", "@GW@", *third.choice(GATEWAY_COMMANDS)]
    # Taken after the mutations: one of them may write through a link another planted (junk
    # into an index name that is a link to outside); only what sessiontool writes counts.
    before = snapshot(outside)
    problems = []
    started = time.monotonic()
    proc: subprocess.CompletedProcess[bytes] | None = None
    try:
        with rawgateway.serving(served) if served else nullcontext(0) as port:
            argv = [
                a.replace("@OUT@", str(base / "export"))
                .replace("@SITE@", str(base / "site"))
                .replace("@GW@", f"ws://127.0.0.1:{port}")
                for a in command
            ]
            try:
                proc = subprocess.run(
                    [sys.executable, "-m", "sessiontool", *argv],
                    capture_output=True,
                    env={
                        **os.environ,
                        "SESSIONTOOL_STATE_DIR": str(state),
                        "SESSIONTOOL_LOCK_TIMEOUT": "2",
                        **(GATEWAY_ENV if served else {}),
                    },
                    timeout=120,
                )
            finally:
                _reap(state)
    except Exception as exc:  # noqa: BLE001 - the hostile gateway's own failure, reported
        if proc is None:
            raise
        problems.append(f"the scripted gateway failed: {type(exc).__name__}: {exc}")
    wall = time.monotonic() - started
    err = proc.stderr.decode("utf-8", "replace")
    if served and RAW_ON_A_TERMINAL & set(err):
        problems.append(f"raw controls on stderr: {sorted(RAW_ON_A_TERMINAL & set(err))}")
    if served and wall > GATEWAY_WALL_S:
        problems.append(f"took {wall:.0f}s against a hostile gateway")
    if proc.returncode not in DOCUMENTED:
        problems.append(f"exit {proc.returncode}")
    if "Traceback" in err or "internal error" in err:
        problems.append("internal error")
    if snapshot(outside) != before:
        problems.append("wrote outside the state dir")
    return (
        names,
        argv,
        proc.returncode,
        "; ".join(problems) + (f": {err[-600:]}" if problems else ""),
    )


@pytest.mark.slow
def test_hostile_state_dir_fuzz() -> None:
    """The landing gate runs a fixed number of cases (`SESSIONTOOL_FUZZ_CASES`) from a fixed
    seed, so one commit always passes or always fails it, on a quiet machine or a busy one
    (a time budget let a quiet machine reach cases a busy one never ran).
    `SESSIONTOOL_FUZZ_SECONDS` instead runs as many cases as fit, for hunting fresh seeds."""
    seconds = os.environ.get("SESSIONTOOL_FUZZ_SECONDS")
    count = int(os.environ.get("SESSIONTOOL_FUZZ_CASES", "60"))
    seed = int(os.environ.get("SESSIONTOOL_FUZZ_SEED", "20261125"))
    deadline = time.monotonic() + float(seconds) if seconds else None
    failures: list[str] = []
    cases = 0
    started = time.monotonic()
    while time.monotonic() < deadline if deadline is not None else cases < count:
        case_seed = seed * 1_000_003 + cases
        rng = random.Random(case_seed)
        with tempfile.TemporaryDirectory(prefix="st-fuzz-") as tmp:
            names, argv, code, problem = _one_case(rng, Path(tmp))
        cases += 1
        if problem:
            failures.append(f"seed {case_seed}: {names} {argv} -> {problem}")
    took = time.monotonic() - started
    print(
        f"hostile-state fuzz: {cases} cases (seed {seed}) in {took:.0f}s, {len(failures)} failures"
    )
    assert cases >= 5
    assert not failures, "\n".join(failures[:10])
