"""The write side on a real-sized big store: `send` and spawn → announce on a 57.6 MB
sessions.json (10,000 entries with the fixtures' skillsSnapshot), each against `json.load` of
the same file. Every send rewrites the store (the entry's creation or update, its end), so
these rows measure the store writes and how many of them a run makes."""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import datagen
from harness import Bench, Row, Sample, case, dataset, pair_ratios, ratio_spread, run_once

BIG_ENTRIES = (10_000, 1_000)  # full, --quick

# Runs `spawn` and waits until its run record says the announce was delivered (announcedAt),
# polling every 5 ms; prints the seconds from the spawn's start. Its own start-up is not
# counted: the clock starts right before the spawn process is started.
SPAWN_DRIVER = r"""
import json, os, subprocess, sys, time
cmd = json.loads(sys.argv[1]); runs = sys.argv[2]; deadline = float(sys.argv[3])
t0 = time.perf_counter()
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
    if rec.get("announcedAt") or rec.get("status") in ("error", "timeout", "aborted", "lost"):
        break
    if time.perf_counter() - t0 > deadline:
        sys.exit("no announce after %.0f s" % deadline)
    time.sleep(0.005)
print(json.dumps({"total": time.perf_counter() - t0, "spawn": t_spawn,
                  "status": rec.get("status"), "announced": bool(rec.get("announcedAt"))}))
"""


def big_store(bench: Bench) -> Path:
    n = BIG_ENTRIES[1] if bench.quick else BIG_ENTRIES[0]

    def build(root: Path) -> None:
        datagen.write_store(root, "main", datagen.make_entries("main", n, snapshot=True, seed=3))

    return dataset(bench.data, "store57", {"entries": n, "v": 1}, build)


def scratch(bench: Bench, src: Path, tag: str) -> tuple[Path, Path]:
    bench.data.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{tag}.", dir=bench.data))
    state = tmp / "state"
    shutil.copytree(src, state, ignore=shutil.ignore_patterns(".params.json"))
    return tmp, state


def mb_of(path: Path) -> str:
    return f"{path.stat().st_size / 1e6:.1f} MB"


def spread(xs: list[float]) -> str:
    def f(x: float) -> str:
        return f"{x * 1000:.0f} ms" if x < 10 else f"{x:.1f} s"

    return f"{f(min(xs))} / {f(statistics.median(xs))} / {f(max(xs))}"


@case
def send_big_store(bench: Bench) -> list[Row]:
    """send main "x" --timeout 30 --json on the 57.6 MB store vs json.load of it."""
    tmp, state = scratch(bench, big_store(bench), "send57")
    try:
        store = state / "agents" / "main" / "sessions" / "sessions.json"
        send = bench.sessiontool(
            "--state-dir", str(state), "send", "main", "x", "--timeout", "60", "--json"
        )
        first = bench.json_output(send)
        assert first["status"] == "ok", first
        load = bench.py(f"import json; json.load(open({str(store)!r}))")
        runs = bench.n(7, 3)
        ours, base = bench.compare(send, load, runs)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    r = statistics.median(pair_ratios(ours, base))
    label = f'`send main "x" --timeout 60 --json`, {mb_of_path(bench)} store, echo runner'
    return [
        Row(
            f"{label} vs `json.load` of the store ({runs} runs each)",
            f"wall {ours.spread()} vs {base.spread()} (min / median / max), ratio "
            f"{ratio_spread(pair_ratios(ours, base))}; CPU (foreground only) "
            f"{ours.cpu_spread()} vs {base.cpu_spread()}",
            "≤ 2× (median)",
            r <= 2,
        )
    ]


def mb_of_path(bench: Bench) -> str:
    return mb_of(big_store(bench) / "agents" / "main" / "sessions" / "sessions.json")


@case
def spawn_announce_big_store(bench: Bench) -> list[Row]:
    """spawn → announce delivered, on the 57.6 MB store, vs json.load of it."""
    tmp, state = scratch(bench, big_store(bench), "spawn57")
    try:
        store = state / "agents" / "main" / "sessions" / "sessions.json"
        spawn = bench.sessiontool("--state-dir", str(state), "--as", "main", "spawn", "x", "--json")
        runs_dir = state / "sessiontool" / "runs"
        driver = [sys.executable, "-c", SPAWN_DRIVER, json.dumps(spawn), str(runs_dir), "300"]
        load = bench.py(f"import json; json.load(open({str(store)!r}))")

        def once() -> dict[str, float]:
            proc = subprocess.run(driver, capture_output=True, text=True, env=bench.env)
            if proc.returncode != 0:
                raise RuntimeError(f"spawn driver failed: {proc.stderr[-500:]}")
            rep: dict[str, float] = json.loads(proc.stdout)
            if not rep["announced"]:
                raise RuntimeError(f"spawn ended without an announce: {rep}")
            return rep

        once()  # warm-up
        run_once(load, bench.env)
        runs = bench.n(5, 3)
        totals, spawns, base = [], [], Sample([], [])
        for _ in range(runs):
            rep = once()
            totals.append(rep["total"])
            spawns.append(rep["spawn"])
            base.add(*run_once(load, bench.env))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rs = [t / b for t, b in zip(totals, base.times, strict=True)]
    r = statistics.median(rs)
    return [
        Row(
            f"spawn → announce delivered, {mb_of_path(bench)} store, echo runner, vs `json.load` "
            f"({runs} runs each)",
            f"wall {spread(totals)} (the spawn command alone {spread(spawns)}) vs "
            f"{base.spread()} (min / median / max), ratio {ratio_spread(rs)}",
            "≤ 4× (median)",
            r <= 4,
        )
    ]
