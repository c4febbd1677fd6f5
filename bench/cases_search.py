"""`search` and `usage` over many transcripts: first index build vs `grep -rc`, a warm search vs
`list --json` and `grep -r`, the incremental update after one new message, the index's size,
and `usage --by day` with a warm index.

Size: `BENCH_SEARCH_MB` (default 1024, 64 with --quick) of transcripts in `BENCH_SEARCH_SESSIONS`
sessions (default 1000, 100 with --quick), `BENCH_SEARCH_BUILDS` first builds (default 3). Lines are the fixtures' real message lines with their
text replaced by sentences over a 20,000-word vocabulary (so the index sees varied text, as a
real one would), and one rare word in a few lines of one session."""

from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import datagen
from harness import Bench, Row, case, dataset, log, ms, ratio

RARE = "zyzzogeton"
TEXT_POOL = 4000


def _params(bench: Bench) -> tuple[int, int]:
    mb = int(os.environ.get("BENCH_SEARCH_MB", "64" if bench.quick else "1024"))
    n = int(os.environ.get("BENCH_SEARCH_SESSIONS", "100" if bench.quick else "1000"))
    return mb, n


def _vocab(rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = set()
    while len(words) < 20_000:
        words.add("".join(rng.choice(letters) for _ in range(rng.randint(3, 10))))
    return sorted(words)


def _templates(rng: random.Random) -> list[bytes]:
    """Message lines with `@TS@`/`@ISO@` placeholders and varied text."""
    vocab = _vocab(rng)
    weights = [1 / (i + 1) for i in range(len(vocab))]  # Zipf-like
    real = [json.loads(x) for x in datagen.transcript_lines()]
    out: list[bytes] = []
    for i in range(TEXT_POOL):
        line = real[i % len(real)]
        msg = dict(line["message"])
        words = rng.choices(vocab, weights, k=rng.randint(8, 120))
        text = " ".join(words).capitalize() + "."
        if msg.get("role") in ("user", "assistant", "toolResult") and isinstance(
            msg.get("content"), list
        ):
            blocks = []
            for b in msg["content"]:
                if isinstance(b, dict) and b.get("type") == "text":
                    b = dict(b, text=text)
                blocks.append(b)
            msg["content"] = blocks
        msg["timestamp"] = "@TS@"
        obj = dict(line, id="@ID@", parentId=None, timestamp="@ISO@", message=msg)
        raw = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
        raw = raw.replace('"@TS@"', "@TS@")
        out.append(raw.encode() + b"\n")
    return out


def _write_session(
    path: Path, sid: str, size: int, templates: list[bytes], rng: random.Random, start_ms: int
) -> int:
    from datetime import UTC, datetime

    head = json.dumps(
        {"type": "session", "version": 3, "id": sid, "timestamp": "2026-11-01T00:00:00.000Z"},
        separators=(",", ":"),
    ).encode()
    parts = [head + b"\n"]
    written = len(parts[0])
    ts = start_ms
    n = 0
    while written < size:
        t = templates[rng.randrange(len(templates))]
        ts += rng.randrange(1_000, 400_000)
        iso = datetime.fromtimestamp(ts / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
        line = (
            t.replace(b"@TS@", str(ts).encode())
            .replace(b"@ISO@", iso.encode())
            .replace(b"@ID@", f"{n:08x}".encode())
        )
        parts.append(line)
        written += len(line)
        n += 1
    path.write_bytes(b"".join(parts))
    return written


def search_state(bench: Bench) -> Path:
    mb, n = _params(bench)

    def build(root: Path) -> None:
        rng = random.Random(19)
        templates = _templates(rng)
        entry = datagen.template_entry()
        store: dict[str, Any] = {}
        d = root / "agents" / "main" / "sessions"
        d.mkdir(parents=True)
        per = (mb << 20) // n
        for i in range(n):
            sid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
            key = "agent:main:main" if i == 0 else f"agent:main:dm:user-{i:05d}"
            start = datagen.BASE_MS - 60 * 86_400_000 + rng.randrange(0, 30 * 86_400_000)
            _write_session(d / f"{sid}.jsonl", sid, per, templates, rng, start)
            # Real-sized entries (the fixtures' main entry, skillsSnapshot and all).
            store[key] = dict(entry, sessionId=sid, updatedAt=datagen.BASE_MS - i * 1000)
            if i == n // 2:  # the rare word, in a few user lines of one session
                with open(d / f"{sid}.jsonl", "ab") as fh:
                    for k in range(3):
                        line = {
                            "type": "message",
                            "id": f"rare{k}",
                            "parentId": None,
                            "timestamp": "2026-11-21T20:00:00.000Z",
                            "message": {
                                "role": "user",
                                "content": [{"type": "text", "text": f"remember the {RARE} {k}"}],
                                "timestamp": datagen.BASE_MS - k,
                            },
                        }
                        fh.write(json.dumps(line).encode() + b"\n")
        datagen.write_store(root, "main", store)

    return dataset(data_dir(bench), "search", {"mb": mb, "sessions": n, "v": 2}, build)


def data_dir(bench: Bench) -> Path:
    """1 GB is generated once, outside the repository (a worktree's `bench/.data` would copy it
    per checkout), and reused by every later run: `BENCH_SEARCH_DATA`, default
    `/tmp/sessiontool-bench/full` (or `quick`)."""
    base = os.environ.get("BENCH_SEARCH_DATA")
    if base:
        return Path(base)
    return Path(tempfile.gettempdir()) / "sessiontool-bench" / bench.data.name


def _transcripts(state: Path) -> list[Path]:
    return sorted((state / "agents" / "main" / "sessions").glob("*.jsonl"))


def _spread(s: list[float]) -> str:
    return f"min {ms(min(s))} / median {ms(statistics.median(s))} / max {ms(max(s))}"


CPU: list[float] = []  # CPU seconds of each _timed run, in order


def _timed(cmd: list[str], env: dict[str, str] | None = None) -> float:
    """Wall seconds of one run; its CPU seconds (user + system) are appended to CPU."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return wall


_FTS_ALONE = """
import json, os, sys, time, sqlite3
from sessiontool.index import db as index_db, scan as si
paths = sys.argv[2:]
texts = []
for i, p in enumerate(paths):
    got = si.read_job(si.Job(i + 1, p, 0, os.path.getsize(p), None, os.stat(p)))
    texts += [r[6] for r in got.rows]
db = sys.argv[1]
c = sqlite3.connect(db, isolation_level=None)
c.execute("PRAGMA journal_mode=WAL")
c.execute("PRAGMA synchronous=NORMAL")
c.execute(index_db._FTS)
c.execute("INSERT INTO fts(fts, rank) VALUES ('hashsize', ?)", (index_db.FTS_HASHSIZE,))
t0, c0 = time.perf_counter(), time.process_time()
c.execute("BEGIN")
c.executemany("INSERT INTO fts(rowid, text) VALUES (?, ?)", enumerate(texts, 1))
c.execute("COMMIT")
print(json.dumps([time.perf_counter() - t0, time.process_time() - c0, sum(map(len, texts))]))
"""


def _fts_alone(bench: Bench, files: list[Path], grep_s: float) -> Row:
    """The floor under a first build: SQLite's FTS5 (C) inserting the same message text into
    the same contentless table, nothing else timed (the text is extracted first, untimed)."""
    with tempfile.TemporaryDirectory(prefix="fts-alone-") as tmp:
        proc = subprocess.run(
            [bench.python, "-c", _FTS_ALONE, str(Path(tmp) / "fts.sqlite"), *map(str, files)],
            capture_output=True,
            text=True,
            check=True,
        )
    wall, cpu, chars = json.loads(proc.stdout)
    return Row(
        f"FTS5 inserts alone: the same {chars / 1e6:.0f} M characters of message text into the "
        "same contentless table, one transaction (a first build's floor)",
        f"wall {ms(wall)}, CPU {ms(cpu)} = {ratio(wall, grep_s):.1f}× `grep -rc WORD` wall",
    )


@case
def search_index(bench: Bench) -> list[Row]:
    """search/usage: first build, warm search, incremental update, index size, usage --by day."""
    state = search_state(bench)
    mb, n = _params(bench)
    files = _transcripts(state)
    total = sum(p.stat().st_size for p in files)
    sdir = str(state / "agents" / "main" / "sessions")
    index_dir = state / "sessiontool"
    search = bench.sessiontool("--state-dir", str(state), "search", RARE, "--json")
    rows: list[Row] = []
    what = f"{total / (1 << 20):.0f} MB in {n} sessions"

    # 1. first build vs grep -rc (runs alternate so load hits both alike)
    builds: list[float] = []
    greps: list[float] = []
    build_cpu: list[float] = []
    grep_cpu: list[float] = []
    for _ in range(int(os.environ.get("BENCH_SEARCH_BUILDS", "3"))):
        shutil.rmtree(index_dir, ignore_errors=True)
        greps.append(_timed(["grep", "-rc", RARE, sdir]))
        grep_cpu.append(CPU[-1])
        log("building the search index ...")
        builds.append(_timed(search))
        build_cpu.append(CPU[-1])
    r = ratio(statistics.median(builds), statistics.median(greps))
    rows.append(
        Row(
            f"first index build, {what} ({_spread(builds)}; CPU {_spread(build_cpu)})",
            f"{r:.1f}× `grep -rc WORD` ({_spread(greps)}; CPU {_spread(grep_cpu)})",
            "≤ 30×",
            r <= 30,
        )
    )
    hits = bench.json_output(search)
    assert hits["count"] == 3, hits
    rows.append(_fts_alone(bench, files, statistics.median(greps)))

    # 2. warm search vs list --json, and vs grep -r
    runs = bench.n(9, 5)
    listing = bench.sessiontool("--state-dir", str(state), "list", "--json")
    s, lst = bench.compare(search, listing, runs)
    r = ratio(s.median, lst.median)
    rows.append(
        Row(
            f"warm `search WORD` vs `list --json`, {what} (median of {runs})",
            f"{r:.2f}× (search {_spread(s.times)}; list {_spread(lst.times)}; "
            f"CPU {ms(s.median_cpu)} vs {ms(lst.median_cpu)})",
            "≤ 1.2×",
            r <= 1.2,
        )
    )
    g = [_timed(["grep", "-r", RARE, sdir]) for _ in range(bench.n(3, 2))]
    r = ratio(statistics.median(g), s.median)
    rows.append(
        Row(
            "warm `search WORD` vs `grep -r WORD`",
            f"{r:.1f}× faster (grep {_spread(g)}; CPU {ms(statistics.median(CPU[-len(g) :]))})",
            "≥ 10× faster",
            r >= 10,
        )
    )

    # 3. the incremental update after one new message (in-process: the sync alone)
    code = (
        "import sys, time, json\n"
        "from pathlib import Path\n"
        "from sessiontool.index.sync import Index\n"
        "root, n = Path(sys.argv[1]), int(sys.argv[2])\n"
        "paths = [Path(p) for p in sys.argv[3:]]\n"
        "line = {'type':'message','id':'x','parentId':None,'timestamp':'2026-11-21T20:00:00.000Z',"
        "'message':{'role':'user','content':[{'type':'text','text':'one new message'}],"
        "'timestamp':1795292567264}}\n"
        "out, whole = [], []\n"
        "for _ in range(n):\n"
        "    with open(paths[0], 'a') as fh: fh.write(json.dumps(line) + '\\n')\n"
        "    t0 = time.perf_counter()\n"
        "    with Index(root) as idx:\n"
        "        t1 = time.perf_counter(); idx.sync(paths); out.append(time.perf_counter() - t1)\n"
        "    whole.append(time.perf_counter() - t0)\n"
        "print(json.dumps([out, whole]))\n"
    )
    size0 = files[0].stat().st_size
    try:
        proc = subprocess.run(
            [bench.python, "-c", code, str(index_dir), str(bench.n(9, 5)), *map(str, files)],
            capture_output=True,
            text=True,
            check=True,
        )
        after = bench.measure(search, bench.n(5, 3), warmup=0)
    finally:  # the data set is reused by later runs: leave it as generated
        os.truncate(files[0], size0)
    inc, whole = json.loads(proc.stdout)
    rows.append(
        Row(
            f"incremental update after one new message ({n} transcripts checked: one stat "
            "each, the new line read and indexed; open, sync and close of the index)",
            f"{_spread(whole)} (the sync alone {_spread(inc)})",
            "≤ 20 ms",
            statistics.median(whole) <= 0.020,
        )
    )
    rows.append(Row("`search` right after one new message", _spread(after.times)))

    # 4. index size
    size = sum(p.stat().st_size for p in index_dir.glob("index.sqlite*"))
    r = size / total
    rows.append(
        Row(
            "index size / transcripts size",
            f"{r * 100:.0f}% ({size / (1 << 20):.0f} MB / {total / (1 << 20):.0f} MB)",
            "≤ 60%",
            r <= 0.6,
        )
    )

    # 5. usage --by day, warm
    usage = bench.sessiontool("--state-dir", str(state), "usage", "--by", "day", "--json")
    u = bench.measure(usage, bench.n(5, 3))
    rows.append(
        Row(
            f"warm `usage --by day`, {what}",
            f"{_spread(u.times)} (CPU {ms(u.median_cpu)})",
            "≤ 2 s",
            u.median <= 2.0,
        )
    )
    print(f"bench: search data {state} ({total} bytes)", file=sys.stderr)
    return rows
