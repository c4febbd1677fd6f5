"""The index at its floor (issue 34): a cold `usage` against one orjson pass over the same
transcripts (bench/floor_usage.py), a first `search` against FTS5 alone (bench/floor_search.py),
warm `search`/`usage` over 100,000 small sessions against 1,000 of the same total size, the
incremental update after one appended message, and the index's size.

Each comparison runs its two commands as pairs, side by side in one run, the order swapped
every pair (a, b, b, a, ...), each a fresh process (bench/spawn_child.py: wall, CPU = user +
system of the process and the workers it reaped); min / median / max of each side and of the
pairwise ratios, CPU beside wall. The target is on the median CPU ratio (the machine is shared:
wall depends on what else runs).

Sizes: `BENCH_INDEX_USAGE` (default "50:500" — MB:sessions, comma-separated for several;
quick "16:100"), `BENCH_INDEX_SEARCH` (default "100:1000"; quick "32:100"), `BENCH_INDEX_FLAT`
(default "100:1000:100000": MB, few sessions, many sessions; quick "8:100:10000"),
`BENCH_INDEX_PAIRS` (default 5; quick 3). The corpora are cases_search.py's (real message lines,
varied text), generated once under `BENCH_INDEX_DATA` (default /tmp/sessiontool-bench/index)."""

from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import cases_search as cs
import datagen
from harness import Bench, Row, case, dataset, log, ratio_spread, run_once, spread

Run = tuple[float, int, float]  # wall s, peak RSS, CPU s


def _base() -> Path:
    env = os.environ.get("BENCH_INDEX_DATA")
    return Path(env) if env else Path(tempfile.gettempdir()) / "sessiontool-bench" / "index"


def _sizes(name: str, default: str, quick: str, bench: Bench) -> list[list[int]]:
    spec = os.environ.get(name) or (quick if bench.quick else default)
    return [[int(x) for x in part.split(":")] for part in spec.split(",") if part]


def _pairs(bench: Bench) -> int:
    return int(os.environ.get("BENCH_INDEX_PAIRS", "3" if bench.quick else "5"))


def corpus(mb: int, n: int) -> Path:
    """cases_search's corpus of `mb` MB in `n` sessions (real-sized store entries)."""
    saved = {k: os.environ.get(k) for k in ("BENCH_SEARCH_MB", "BENCH_SEARCH_SESSIONS")}
    os.environ["BENCH_SEARCH_MB"], os.environ["BENCH_SEARCH_SESSIONS"] = str(mb), str(n)
    try:
        bench = Bench(quick=False, runs=0, data=_base() / f"{mb}mb-{n}")
        os.environ["BENCH_SEARCH_DATA"] = str(_base() / f"{mb}mb-{n}")
        return cs.search_state(bench)
    finally:
        os.environ.pop("BENCH_SEARCH_DATA", None)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def small_sessions(mb: int, n: int) -> Path:
    """`mb` MB in `n` sessions with small store entries (sessionId, updatedAt): what a store of
    100,000 short sessions looks like; the same lines as the corpus. Each session holds at
    least its header and one line (~1.6 KB): 100 MB in 100,000 sessions is 159 MB."""
    return _small(f"small-{mb}mb-{n}", {"mb": mb, "sessions": n, "v": 1}, mb << 20, n)


def small_sessions_bytes(total: int, n: int) -> Path:
    """`total` bytes (to about a line per session) in `n` sessions, as `small_sessions`: the
    few-session side of a comparison made with the bytes the many-session side really has."""
    name = f"small-{total // 1_000_000}mb-{n}-bytes"
    return _small(name, {"bytes": total, "sessions": n, "v": 1}, total, n)


def _small(name: str, params: dict[str, Any], total: int, n: int) -> Path:
    def build(root: Path) -> None:
        rng = random.Random(34)
        templates = cs._templates(rng)
        d = root / "agents" / "main" / "sessions"
        d.mkdir(parents=True)
        per = total // n
        store: dict[str, Any] = {}
        for i in range(n):
            sid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
            start = datagen.BASE_MS - 60 * 86_400_000 + rng.randrange(0, 30 * 86_400_000)
            cs._write_session(d / f"{sid}.jsonl", sid, per, templates, rng, start)
            key = "agent:main:main" if i == 0 else f"agent:main:dm:user-{i:06d}"
            store[key] = {"sessionId": sid, "updatedAt": datagen.BASE_MS - i * 1000}
        datagen.write_store(root, "main", store)

    return dataset(_base(), name, params, build)


def _transcripts(state: Path) -> Path:
    return state / "agents" / "main" / "sessions"


def side_by_side(
    bench: Bench,
    a: Sequence[str],
    b: Sequence[str],
    pairs: int,
    before_a: Callable[[], None] | None = None,
    before_b: Callable[[], None] | None = None,
) -> tuple[list[Run], list[Run]]:
    """`pairs` runs of each, in pairs whose order alternates (a b, b a, ...); `before_*` runs
    untimed before each run of that side (e.g. deleting the index for a cold run)."""
    ra: list[Run] = []
    rb: list[Run] = []
    for i in range(pairs):
        order = [(a, before_a, ra), (b, before_b, rb)]
        if i % 2:
            order.reverse()
        for cmd, before, out in order:
            if before is not None:
                before()
            out.append(run_once(cmd, bench.env))
    return ra, rb


def _cmp_rows(what: str, a_name: str, b_name: str, ra: list[Run], rb: list[Run]) -> str:
    wall = [x[0] / y[0] for x, y in zip(ra, rb, strict=True)]
    cpu = [x[2] / y[2] for x, y in zip(ra, rb, strict=True)]
    return (
        f"{what}: CPU ratio {ratio_spread(cpu)} (min / median / max), wall ratio "
        f"{ratio_spread(wall)}; {a_name} CPU {spread([x[2] for x in ra])}, wall "
        f"{spread([x[0] for x in ra])}; {b_name} CPU {spread([x[2] for x in rb])}, wall "
        f"{spread([x[0] for x in rb])}"
    )


def _median_cpu_ratio(ra: list[Run], rb: list[Run]) -> float:
    return statistics.median(x[2] / y[2] for x, y in zip(ra, rb, strict=True))


def _fresh_copy(src: Path, dst: Path) -> Path:
    """A state dir whose transcripts are `src`'s (hard links: no copy) without an index."""
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst, copy_function=os.link, ignore=shutil.ignore_patterns("sessiontool"))
    return dst


@case
def index_usage_floor(bench: Bench) -> list[Row]:
    """cold `usage --json` vs one orjson pass summing the same usage fields."""
    rows: list[Row] = []
    for mb, n in _sizes("BENCH_INDEX_USAGE", "50:500", "16:100", bench):
        src = corpus(mb, n)
        with tempfile.TemporaryDirectory(prefix="index-usage-") as tmp:
            state = _fresh_copy(src, Path(tmp) / "state")
            index = state / "sessiontool"
            usage = bench.sessiontool("--state-dir", str(state), "usage", "--json")
            floor = [bench.python, str(Path(__file__).parent / "floor_usage.py")]
            floor.append(str(_transcripts(state)))
            got = bench.json_output(usage)["total"]
            want = bench.json_output(floor)["total"]
            same = all(got[k] == want[k] for k in want)
            run_once(usage, bench.env)  # warm-up: bytecode, page cache
            log(f"cold usage vs its floor, {mb} MB in {n} sessions ...")
            ra, rb = side_by_side(
                bench,
                usage,
                floor,
                _pairs(bench),
                before_a=lambda index=index: shutil.rmtree(index, ignore_errors=True),
            )
        r = _median_cpu_ratio(ra, rb)
        rows.append(
            Row(
                _cmp_rows(
                    f"cold `usage --json` vs one orjson pass (bench/floor_usage.py), {mb} MB in "
                    f"{n} sessions ({len(ra)} pairs)",
                    "usage",
                    "floor",
                    ra,
                    rb,
                ),
                f"{r:.2f}× CPU; totals {'equal to the token' if same else 'DIFFER'}",
                "≤ 1.5× (CPU)",
                r <= 1.5 and same,
            )
        )
    return rows


@case
def index_search_floor(bench: Bench) -> list[Row]:
    """first `search` vs FTS5 alone; the incremental update; the index's size."""
    rows: list[Row] = []
    for mb, n in _sizes("BENCH_INDEX_SEARCH", "100:1000", "32:100", bench):
        src = corpus(mb, n)
        with tempfile.TemporaryDirectory(prefix="index-search-") as tmp:
            state = _fresh_copy(src, Path(tmp) / "state")
            index = state / "sessiontool"
            db = Path(tmp) / "floor.sqlite"
            search = bench.sessiontool("--state-dir", str(state), "search", cs.RARE, "--json")
            floor = [bench.python, str(Path(__file__).parent / "floor_search.py"), str(db)]
            floor.append(str(_transcripts(state)))

            def no_floor_db() -> None:
                for p in Path(tmp).glob("floor.sqlite*"):
                    p.unlink()

            run_once(search, bench.env)
            assert bench.json_output(search)["count"] == 3
            no_floor_db()
            run_once(floor, bench.env)
            log(f"first search vs FTS5 alone, {mb} MB in {n} sessions ...")
            ra, rb = side_by_side(
                bench,
                search,
                floor,
                _pairs(bench),
                before_a=lambda index=index: shutil.rmtree(index, ignore_errors=True),
                before_b=no_floor_db,
            )
            r = _median_cpu_ratio(ra, rb)
            rows.append(
                Row(
                    _cmp_rows(
                        f"first `search WORD` vs FTS5 alone (bench/floor_search.py), {mb} MB in "
                        f"{n} sessions ({len(ra)} pairs)",
                        "search",
                        "floor",
                        ra,
                        rb,
                    ),
                    f"{r:.2f}× CPU",
                    "≤ 1.5× (CPU)",
                    r <= 1.5,
                )
            )
            total = sum(p.stat().st_size for p in _transcripts(state).glob("*.jsonl"))
            size = sum(p.stat().st_size for p in index.glob("index.sqlite*"))
            rows.append(
                Row(
                    f"index size / transcripts size, {mb} MB in {n} sessions",
                    f"{size / total * 100:.0f}% ({size / 1e6:.0f} MB / {total / 1e6:.0f} MB)",
                    "≤ 40%",
                    size / total <= 0.40,
                )
            )
            rows.append(_incremental(bench, state, n))
    return rows


_APPEND = """
import json, sys, time
from pathlib import Path
from sessiontool.index.sync import Index
root, n = Path(sys.argv[1]), int(sys.argv[2])
paths = sorted(Path(sys.argv[3]).glob("*.jsonl"))
line = {"type": "message", "id": "x", "parentId": None, "timestamp": "2026-11-21T20:00:00.000Z",
        "message": {"role": "user", "content": [{"type": "text", "text": "one new message"}],
                    "timestamp": 1795292567264}}
out = []
for _ in range(n):
    with open(paths[0], "a") as fh:
        fh.write(json.dumps(line) + "\\n")
    t0 = time.perf_counter()
    with Index(root) as idx:
        idx.sync(paths)
    out.append(time.perf_counter() - t0)
print(json.dumps(out))
"""


def _incremental(bench: Bench, state: Path, n: int) -> Row:
    """Open, sync and close of the index after one appended message (every transcript
    checked; the transcript is a hard link: its copy is made first, and the data set kept)."""
    first = sorted(_transcripts(state).glob("*.jsonl"))[0]
    data = first.read_bytes()
    first.unlink()
    first.write_bytes(data)  # its own inode now: appends do not reach the shared data set
    import subprocess

    proc = subprocess.run(
        [bench.python, "-c", _APPEND, str(state / "sessiontool"), "9", str(first.parent)],
        capture_output=True,
        text=True,
        check=True,
        env=bench.env,
    )
    times = json.loads(proc.stdout)
    med = statistics.median(times)
    return Row(
        f"incremental update after one appended message ({n} transcripts checked; open, sync "
        "and close of the index, in-process, 9 runs)",
        spread(times),
        "≤ 20 ms",
        med <= 0.020,
    )


def _fresh(state: Path) -> None:
    """Every transcript written now, as in a state dir just copied (`cp -r`) or after a busy
    day: the index is built while all of them are hot (index/warm.py), and measured
    three days later (`_later`), when the hot set must have aged by itself (issue 47). The
    transcripts are hard links: the data set is touched too (harmless)."""
    now = time.time_ns()
    for path in _transcripts(state).glob("*.jsonl"):
        os.utime(path, ns=(now, now))


def _later(bench: Bench) -> Bench:
    """`bench` with the one clock three days on (SESSIONTOOL_NOW_MS)."""
    import dataclasses

    later = time.time_ns() // 1_000_000 + 3 * 86_400_000
    return dataclasses.replace(bench, env=bench.env | {"SESSIONTOOL_NOW_MS": str(later)})


def _store_write(state: Path) -> None:
    """A store write that changes no session (same bytes, a new file renamed over the old,
    as OpenClaw writes): the markers move, the next command checks in full."""
    path = _transcripts(state) / "sessions.json"
    tmp = path.with_name("sessions.json.bench")
    tmp.write_bytes(path.read_bytes())
    os.replace(tmp, path)


def _full_check(bench: Bench, states: list[Path], sizes: tuple[int, int, int]) -> Row:
    """warm `search` right after a store write (a full check: every session listed, every
    transcript stat'ed, the snapshot kept again): for the record, no target."""
    mb, few, many = sizes
    a = bench.sessiontool("--state-dir", str(states[1]), "search", cs.RARE, "--json")
    b = bench.sessiontool("--state-dir", str(states[0]), "search", cs.RARE, "--json")
    ra, rb = side_by_side(
        bench,
        a,
        b,
        3,
        before_a=lambda: _store_write(states[1]),
        before_b=lambda: _store_write(states[0]),
    )
    return Row(
        _cmp_rows(
            f"`search` after a store write (a full check), {many:,} vs {few:,} sessions, "
            f"{mb} MB each ({len(ra)} pairs)",
            f"{many:,}",
            f"{few:,}",
            ra,
            rb,
        ),
        f"{_median_cpu_ratio(ra, rb):.1f}× CPU",
        "— (for the record)",
        True,
    )


@case
def index_flat_sessions(bench: Bench) -> list[Row]:
    """warm `search`/`usage` over many small sessions vs few, built fresh, three days on."""
    rows: list[Row] = []
    for mb, few, many in _sizes("BENCH_INDEX_FLAT", "100:1000:100000", "8:100:10000", bench):
        states = []
        tmp = Path(tempfile.mkdtemp(prefix="index-flat-"))
        try:
            big = small_sessions(mb, many)  # the bytes it really has: the few get as many
            total = sum(p.stat().st_size for p in _transcripts(big).glob("*.jsonl"))
            srcs = {few: small_sessions_bytes(total, few), many: big}
            mb = round(total / 1e6)
            for n in (few, many):
                state = _fresh_copy(srcs[n], tmp / f"s{n}")
                _fresh(state)
                log(f"building the index of {n} sessions ...")
                t0 = time.perf_counter()
                bench.output(bench.sessiontool("--state-dir", str(state), "search", "x", "--json"))
                log(f"built in {time.perf_counter() - t0:.1f} s")
                states.append(state)
            bench = _later(bench)
            # `usage --by day`: its output is the same size for both (by session, it would
            # print 100 times the rows).
            for what in (["search", cs.RARE, "--json"], ["usage", "--by", "day", "--json"]):
                a = bench.sessiontool("--state-dir", str(states[1]), *what)
                b = bench.sessiontool("--state-dir", str(states[0]), *what)
                run_once(a, bench.env)
                run_once(b, bench.env)
                ra, rb = side_by_side(bench, a, b, max(_pairs(bench), 5))
                r = _median_cpu_ratio(ra, rb)
                rows.append(
                    Row(
                        _cmp_rows(
                            f"warm `{what[0]}`, {many:,} vs {few:,} sessions, {mb} MB each "
                            f"({len(ra)} pairs)",
                            f"{many:,}",
                            f"{few:,}",
                            ra,
                            rb,
                        ),
                        f"{r:.2f}× CPU",
                        "≤ 2× (CPU)",
                        r <= 2,
                    )
                )
            rows.append(_full_check(bench, states, (mb, few, many)))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"bench: index data under {_base()}", file=sys.stderr)
    return rows
