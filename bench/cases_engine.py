"""The run engine (issue 11): memory and CPU while a long queue drains, the latency from a
run's end to `send` returning, and the CPU that runs queued behind a stalled one cost.

Background processes are found as in cases_runs: the launcher is a child subreaper, so the
detached lane workers (and the agents they run) are re-parented to it and sampled from /proc.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import time
from pathlib import Path

from cases_read import small_state
from cases_runs import WORKER_MARKER, launch, scratch_copy
from harness import Bench, Row, case, mb, ms

QUEUED = (500, 100)  # full, --quick
IN_FLIGHT = 16  # foreground sends at once while the queue is fed


def _write_config(state: Path, runner: dict[str, object]) -> None:
    cfg = {"agents": {"defaults": {"runner": runner}}}
    (state / "sessiontool.json5").write_text(json.dumps(cfg))


@case(after="parallel_sends")
def queued_drain(bench: Bench) -> list[Row]:
    """N sends to one session (16 in flight at a time, `--timeout 0`): background memory summed
    over every background process, sampled every 50 ms, and the CPU per run, all of it."""
    n = QUEUED[1] if bench.quick else QUEUED[0]
    tmp, state = scratch_copy(bench, small_state(bench), "drain")
    try:
        sd = ("--state-dir", str(state))
        _write_config(state, {"type": "echo", "delaySeconds": 0.01})
        bench.output(bench.sessiontool(*sd, "send", "main", "warm-up", "--timeout", "30"))
        rec_dir = state / "sessiontool" / "runs"
        for p in rec_dir.glob("*.json"):
            p.unlink()
        cmds = [
            bench.sessiontool(*sd, "send", "main", f"q-{i:04d}", "--timeout", "0", "--json")
            for i in range(n)
        ]
        rep = launch(
            bench,
            cmds,
            runs_dir=str(rec_dir),
            expect=n,
            sample_interval=0.05,
            worker_marker=WORKER_MARKER,
            deadline=900.0,
            concurrency=IN_FLIGHT,
        )
        recs = [json.loads(p.read_text()) for p in rec_dir.glob("*.json")]
        ok = sum(1 for r in recs if r.get("status") == "ok")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    fg_cpu = sum(r["cpu"] for r in rep["fg"])
    w_cpu = sum(r["cpu"] for r in rep["workers"])
    per_run = (fg_cpu + w_cpu) / n
    bg = rep["peak"]["bg_rss"]
    label = f"{n} queued `send --timeout 0` to one session draining"
    return [
        Row(
            f"{label}: background RSS, all processes summed (peak, /proc every 50 ms)",
            f"{mb(bg)} in {rep['peak']['bg_procs']} process(es); {ok}/{n} runs ok; "
            f"{len(rep['workers'])} worker(s) in all",
            "≤ 150 MB",
            bg <= 150 * 1024 * 1024 and ok == n,
        ),
        Row(
            f"{label}: CPU per run, foreground + background",
            f"{ms(per_run)} ({fg_cpu:.1f} s foreground + {w_cpu:.1f} s workers over {n} runs)",
            "≤ 120 ms",
            per_run <= 0.120,
        ),
    ]


@case(after="queued_drain")
def end_to_return(bench: Bench) -> list[Row]:
    """`send --timeout 30`: from the run's end (its record's endedAt, the worker's clock) to the
    send process having exited (the bench's clock, read as soon as wait() returns)."""
    tmp, state = scratch_copy(bench, small_state(bench), "latency")
    lat: list[float] = []
    try:
        sd = ("--state-dir", str(state))
        # The agent takes a moment, so the waiter is surely blocked when the run ends.
        _write_config(state, {"type": "echo", "delaySeconds": 0.2})
        runs = bench.n(21, 7)
        for i in range(runs + 1):
            proc = subprocess.Popen(
                bench.sessiontool(*sd, "send", "main", f"l{i}", "--timeout", "30", "--json"),
                stdout=subprocess.PIPE,
                env=bench.env,
            )
            out, _ = proc.communicate()
            returned = time.time() * 1000
            res = json.loads(out)
            rec = json.loads((state / "sessiontool/runs" / f"{res['runId']}.json").read_text())
            if i:  # the first is a warm-up
                lat.append(returned - rec["endedAt"])
            while list((state / "sessiontool/lanes").glob("*/.worker")) and _lane_busy(state):
                time.sleep(0.01)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    med = statistics.median(lat)
    return [
        Row(
            f"end of a run → `send` returned (median of {len(lat)})",
            f"{med:.1f} ms (min {min(lat):.1f}, max {max(lat):.1f})",
            "median ≤ 15 ms",
            med <= 15,
        )
    ]


def _lane_busy(state: Path) -> bool:
    import fcntl

    for p in (state / "sessiontool/lanes").glob("*/.worker"):
        fd = os.open(p, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        finally:
            os.close(fd)
    return False


def _cpu_of(pids: list[int]) -> float:
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                f = fh.read().rsplit(b")", 1)[1].split()
            total += (int(f[11]) + int(f[12])) / tick
        except (OSError, IndexError, ValueError):
            continue
    return total


def _session_pids(sid_of: int) -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                f = fh.read().rsplit(b")", 1)[1].split()
            if int(f[3]) == sid_of:
                out.append(int(name))
        except (OSError, IndexError, ValueError):
            continue
    return out


@case(after="end_to_return")
def stalled_queue(bench: Bench) -> list[Row]:
    """One run stalls (its agent sleeps); 10 `send --timeout 0` queue behind it. CPU of every
    background process (the lane worker and the stalled agent) over a 5 s window while they
    wait; then the same with 10 `wait` commands blocked on the queued runs."""
    tmp, state = scratch_copy(bench, small_state(bench), "stall")
    window = 5.0 if not bench.quick else 3.0
    try:
        sd = ("--state-dir", str(state))
        stall = [bench.python, "-c", "import sys,time; sys.stdin.read(); time.sleep(120)"]
        _write_config(state, {"type": "command", "command": stall})
        first = json.loads(
            bench.output(
                bench.sessiontool(*sd, "send", "main", "stall", "--timeout", "0", "--json")
            )
        )
        queued = [
            json.loads(
                bench.output(
                    bench.sessiontool(*sd, "send", "main", f"w{i}", "--timeout", "0", "--json")
                )
            )["runId"]
            for i in range(10)
        ]
        time.sleep(0.5)
        rec = json.loads((state / "sessiontool/runs" / f"{first['runId']}.json").read_text())
        worker = int(rec["pid"])
        with open(f"/proc/{worker}/stat", "rb") as fh:
            wsid = int(fh.read().rsplit(b")", 1)[1].split()[3])
        bg = _session_pids(wsid) + _session_pids(int(rec.get("agentPid") or -1))
        c0 = _cpu_of(bg)
        time.sleep(window)
        bg_cpu = _cpu_of(bg) - c0
        waiters = [
            subprocess.Popen(
                bench.sessiontool(*sd, "wait", rid, "--timeout", "60"),
                stdout=subprocess.DEVNULL,
                env=bench.env,
            )
            for rid in queued
        ]
        # Let them start up and block: until their CPU time stops growing (start-up is not
        # what is measured here).
        settle_deadline = time.monotonic() + 30
        last = -1.0
        while time.monotonic() < settle_deadline:
            now_cpu = _cpu_of([p.pid for p in waiters])
            if now_cpu == last:
                break
            last = now_cpu
            time.sleep(0.5)
        w0 = _cpu_of([p.pid for p in waiters]) + _cpu_of(bg)
        time.sleep(window)
        w_cpu = _cpu_of([p.pid for p in waiters]) + _cpu_of(bg) - w0
        for p in waiters:
            p.kill()
            p.wait()
        bench.output(bench.sessiontool(*sd, "abort", first["runId"]))
        for rid in queued:
            bench.output(bench.sessiontool(*sd, "abort", rid))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    share = bg_cpu / window * 100
    wshare = w_cpu / window * 100
    return [
        Row(
            "10 runs queued behind a stalled run: background CPU while they wait",
            f"{share:.2f}% of a core ({bg_cpu * 1000:.0f} ms over {window:g} s, "
            f"{len(bg)} background processes)",
            "≤ 1%",
            share <= 1.0,
        ),
        Row(
            "… the same with 10 `wait` commands blocked on the queued runs",
            f"{wshare:.2f}% of a core ({w_cpu * 1000:.0f} ms over {window:g} s)",
        ),
    ]
