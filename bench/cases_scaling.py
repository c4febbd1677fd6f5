"""The scaling table (issue 47 item 9): `list`, `history --limit 20`, warm `search`, warm
`usage --by day`, `search` right after a store write (a full check) and `send` (echo) over
1,000 / 10,000 / 100,000 sessions of the same bytes, and the warm reads over 10 MB / 100 MB /
1 GB in 1,000 sessions; each as a ratio to its smallest case and to its floor.

Equal bytes across the session axis: the many-session corpus is generated first (each
session has a ~1.6 KB floor: 100 MB asked in 100,000 sessions is 159 MB), and the others with
the bytes it really has. The index is built while every transcript is fresh (as a state dir
just copied: every mtime is now) and measured three days later (SESSIONTOOL_NOW_MS, the one
clock): the hot set must have aged by itself (index/warm.py). The floors: one parse of
sessions.json with the standard library's json (bench/floor_store.py), with one stat of each
transcript for the full check. Each round runs every size once, the order rotated round by
round, each a fresh process; min / median / max CPU (user + system of the process and what
it reaped) beside wall; the targets are on the median CPU.

Sizes: `BENCH_SCALE_SESSIONS` (default "1000,10000,100000"; quick "100,1000,3000") at
`BENCH_SCALE_MB` MB for the largest (default 100; quick 4), `BENCH_SCALE_BYTES` (MB in 1,000
sessions, default "10,100,1000"; quick "2,8"; empty: no bytes axis), `BENCH_SCALE_ROUNDS`
(default 5; quick 3). Data under `BENCH_INDEX_DATA` (cases_index.py)."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import cases_index as ci
import cases_search as cs
from harness import Bench, Row, case, log, run_once, spread

Run = tuple[float, int, float]
DAYS_LATER_MS = 3 * 86_400_000
KEY = "agent:main:dm:user-000005"


def _ints(name: str, default: str, quick: str, bench: Bench) -> list[int]:
    spec = os.environ.get(name, quick if bench.quick else default)
    return [int(x) for x in spec.split(",") if x]


def _rounds(bench: Bench) -> int:
    return int(os.environ.get("BENCH_SCALE_ROUNDS", "3" if bench.quick else "5"))


def _sessions(state: Path) -> Path:
    return state / "agents" / "main" / "sessions"


def _bytes(src: Path) -> int:
    return sum(p.stat().st_size for p in _sessions(src).glob("*.jsonl"))


def _prepare(bench: Bench, src: Path, dst: Path) -> Path:
    """A copy of `src` (hard links) with fresh mtimes, its index built now (search, then usage:
    each keeps its snapshot); the store and main's transcript in files of their own (`send`
    writes them: the data set stays as generated)."""
    state = ci._fresh_copy(src, dst)
    store = _sessions(state) / "sessions.json"
    sid = json.loads(store.read_bytes())["agent:main:main"]["sessionId"]
    for own in (store, _sessions(state) / f"{sid}.jsonl"):
        data = own.read_bytes()
        own.unlink()
        own.write_bytes(data)
    now = time.time_ns()
    for p in _sessions(state).glob("*.jsonl"):
        os.utime(p, ns=(now, now))
    t0 = time.perf_counter()
    bench.output(bench.sessiontool("--state-dir", str(state), "search", "x", "--json"))
    bench.output(bench.sessiontool("--state-dir", str(state), "usage", "--json"))
    log(f"index of {dst.name} built in {time.perf_counter() - t0:.1f} s")
    return state


@dataclasses.dataclass
class Cmd:
    name: str
    args: Callable[[Path], list[str]]
    before: Callable[[Path], None] | None = None
    floor: Callable[[Path], list[str]] | None = None


def _floor(bench: Bench, stat: bool) -> Callable[[Path], list[str]]:
    script = str(Path(__file__).parent / "floor_store.py")

    def cmd(state: Path) -> list[str]:
        out = [bench.python, script, str(_sessions(state) / "sessions.json")]
        return out + (["--stat"] if stat else [])

    return cmd


def _cmds(bench: Bench) -> list[Cmd]:
    def st(*a: str) -> Callable[[Path], list[str]]:
        return lambda s: bench.sessiontool("--state-dir", str(s), *a)

    parse, full = _floor(bench, False), _floor(bench, True)
    return [
        Cmd("`list --limit 20 --json`", st("list", "--limit", "20", "--json"), floor=parse),
        Cmd("`list --limit all --json`", st("list", "--limit", "all", "--json"), floor=parse),
        Cmd(
            "`history KEY --limit 20 --json`",
            st("history", KEY, "--limit", "20", "--json"),
            floor=parse,
        ),
        Cmd("warm `search WORD --json`", st("search", cs.RARE, "--json")),
        Cmd("warm `usage --by day --json`", st("usage", "--by", "day", "--json")),
        Cmd(
            "`search WORD` after a store write (a full check)",
            st("search", cs.RARE, "--json"),
            before=ci._store_write,
            floor=full,
        ),
        Cmd(
            "`send main x --json` (echo runner; the foreground)",
            st("send", "main", "x", "--json"),
            floor=parse,
        ),
    ]


def _measure(
    bench: Bench, env: dict[str, str], cmd: Cmd, states: list[Path], rounds: int
) -> tuple[list[list[Run]], list[list[Run]]]:
    """Each state's runs of `cmd` and of its floor, the order rotated round by round."""
    runs: list[list[Run]] = [[] for _ in states]
    floors: list[list[Run]] = [[] for _ in states]
    for s in states:  # warm-up: bytecode, page cache, the snapshot of each scope
        if cmd.before is not None:
            cmd.before(s)
        run_once(cmd.args(s), env)
    for r in range(rounds):
        order = list(range(len(states)))
        order = order[r % len(order) :] + order[: r % len(order)]
        for i in order:
            if cmd.before is not None:
                cmd.before(states[i])
            runs[i].append(run_once(cmd.args(states[i]), env))
            if cmd.floor is not None:
                floors[i].append(run_once(cmd.floor(states[i]), env))
    return runs, floors


def _cpu(rs: list[Run]) -> float:
    return statistics.median(r[2] for r in rs)


def _rows(
    what: str,
    cmd: Cmd,
    labels: list[str],
    runs: list[list[Run]],
    floors: list[list[Run]],
    flat: bool,
) -> list[Row]:
    base = _cpu(runs[0])
    out = []
    for label, rs, fs in zip(labels, runs, floors, strict=True):
        r1 = _cpu(rs) / base
        value = f"CPU {spread([r[2] for r in rs])}, wall {spread([r[0] for r in rs])}; {r1:.2f}× the {labels[0]}"
        ok: bool | None = None
        target = "—"
        if fs:
            rf = _cpu(rs) / _cpu(fs)
            value += f"; {rf:.2f}× its floor (CPU {spread([r[2] for r in fs])})"
        if flat and label == labels[-1]:
            target, ok = "≤ 2× the smallest (CPU)", r1 <= 2
        out.append(Row(f"{cmd.name}, {what}{label}", value, target, ok))
    return out


def _later(bench: Bench) -> dict[str, str]:
    return bench.env | {"SESSIONTOOL_NOW_MS": str(time.time_ns() // 1_000_000 + DAYS_LATER_MS)}


@case
def index_scaling(bench: Bench) -> list[Row]:
    """the scaling table: 1k/10k/100k sessions of equal bytes, 10 MB/100 MB/1 GB."""
    ns = _ints("BENCH_SCALE_SESSIONS", "1000,10000,100000", "100,1000,3000", bench)
    mb = int(os.environ.get("BENCH_SCALE_MB", "4" if bench.quick else "100"))
    srcs = {ns[-1]: ci.small_sessions(mb, ns[-1])}
    total = _bytes(srcs[ns[-1]])
    for n in ns[:-1]:
        srcs[n] = ci.small_sessions_bytes(total, n)
    rows: list[Row] = []
    tmp = Path(tempfile.mkdtemp(prefix="index-scale-", dir=ci._base()))
    try:
        states = [_prepare(bench, srcs[n], tmp / f"n{n}") for n in ns]
        env = _later(bench)
        labels = [
            f"{n:,} sessions ({_bytes(s) / 1e6:.0f} MB)" for n, s in zip(ns, states, strict=True)
        ]
        log(f"sessions axis: {labels}")
        flat = {
            "`list --limit 20 --json`",
            "warm `search WORD --json`",
            "warm `usage --by day --json`",
        }
        for cmd in _cmds(bench):
            log(f"{cmd.name} ...")
            runs, floors = _measure(bench, env, cmd, states, _rounds(bench))
            rows += _rows("", cmd, labels, runs, floors, cmd.name in flat)
        # The real clock: under a pinned one the entry's updatedAt would not move, and a write
        # that changes no byte is not made.
        rows.append(_send_events(bench, bench.env, states[-1], tmp / "events.txt"))
        for s in states:
            shutil.rmtree(s, ignore_errors=True)
        rows += _bytes_axis(bench, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return rows


def _send_events(bench: Bench, env: dict[str, str], state: Path, events: Path) -> Row:
    """How often one `send` parses and writes sessions.json, its worker included (the worker
    writes the store's entry after the foreground returned: waited for, up to 30 s)."""
    store = _sessions(state) / "sessions.json"
    send = bench.sessiontool("--state-dir", str(state), "send", "main", "x", "--json")
    run_once(send, env | {"SESSIONTOOL_TEST_EVENTS": str(events)})
    deadline = time.monotonic() + 30
    seen: list[str] = []

    def seen_now() -> list[str]:  # no file: a sessiontool without the hook (an older one)
        text = events.read_text() if events.exists() else ""
        return [line.split()[0] for line in text.splitlines()]

    while time.monotonic() < deadline and "store-write" not in seen:
        time.sleep(0.1)
        seen = seen_now()
    time.sleep(1)  # nothing more comes
    seen = seen_now()
    parses, writes = seen.count("store-parse"), seen.count("store-write")
    big = store.stat().st_size >= 1 << 20  # smaller stores are parsed at every read
    return Row(
        f"`send` on a {store.stat().st_size / 1e6:.1f} MB sessions.json: its parses and writes "
        "(SESSIONTOOL_TEST_EVENTS, foreground and worker)",
        f"{parses} parse(s), {writes} write(s)",
        "1 and 1" if big else "— (under 1 MiB: not kept)",
        (parses == 1 and writes == 1) if big else None,
    )


def _bytes_axis(bench: Bench, tmp: Path) -> list[Row]:
    mbs = _ints("BENCH_SCALE_BYTES", "10,100,1000", "2,8", bench)
    if not mbs:
        return []
    states = [_prepare(bench, ci.small_sessions(mb, 1000), tmp / f"mb{mb}") for mb in mbs]
    env = _later(bench)
    labels = [f"{mb:,} MB" for mb in mbs]
    rows: list[Row] = []
    for cmd in _cmds(bench)[:5]:
        log(f"{cmd.name} (bytes) ...")
        runs, floors = _measure(bench, env, cmd, states, _rounds(bench))
        rows += _rows("1,000 sessions, ", cmd, labels, runs, floors, cmd.name.startswith("warm"))
    return rows
