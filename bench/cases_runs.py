"""Start-up and the run side: `--version`, the `send` round trip with the echo runner, and 100
sends started at once, with the peak memory of the foreground and of the detached workers.

The workers are double-forked (not children of the command), so `getrusage` of the command
never sees them. The commands here are therefore started by a small launcher (LAUNCHER below,
run fresh as `python -I -S -c`) that makes itself a child subreaper (prctl
PR_SET_CHILD_SUBREAPER): the orphaned workers are re-parented to it, and `wait4` gives it each
process's own CPU time, and the foreground's peak RSS. A worker's ru_maxrss is useless: it
starts from the foreground's RSS when the foreground forked it (Linux keeps the high-water mark
across exec), so a worker's peak is its VmHWM, read from /proc while it lives (sampled every
1 ms for the round trip, every 50 ms for the 100 sends, so it may miss a last few ms).
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cases_read import small_state
from harness import Bench, Row, case, mb, ms, ratio, run_once, spread, tail

PARALLEL_SENDS = (100, 25)  # full, --quick
PARALLEL_DEADLINE_S = 240.0
# Workers are forked from the foreground without exec (no argv of their own): every process
# re-parented to the launcher that is not a foreground command is a worker.
WORKER_MARKER = ""
FINISHED = ("ok", "error", "timeout", "aborted", "lost")

LAUNCHER = r"""
import ctypes, json, os, sys, time

spec = json.loads(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
    sys.exit("prctl(PR_SET_CHILD_SUBREAPER) failed: errno %d" % ctypes.get_errno())
devnull = os.open(os.devnull, os.O_WRONLY)
cmds = spec["cmds"]
runs_dir = spec.get("runs_dir")
expect = spec.get("expect", 0)
interval = spec.get("sample_interval")
deadline = spec.get("deadline", 600.0)
finished = set(spec.get("finished", ()))
fg, fg_out, workers = {}, [None] * len(cmds), []
me = os.getpid()


def usage(ru, status, now):
    # Linux reports ru_maxrss in KiB, macOS in bytes.
    rss = ru.ru_maxrss if sys.platform == "darwin" else ru.ru_maxrss * 1024
    return {"elapsed": now, "maxrss": rss, "cpu": ru.ru_utime + ru.ru_stime,
            "code": os.waitstatus_to_exitcode(status)}


def reap(block):
    # Collect exited processes; False once none is left (nothing but us re-parents here).
    while True:
        try:
            pid, status, ru = os.wait4(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True
        rec = usage(ru, status, time.perf_counter() - t0)
        if pid in fg:
            fg_out[fg.pop(pid)] = rec
        else:
            workers.append(rec)


done = set()


def runs_finished():
    try:
        names = os.listdir(runs_dir)
    except OSError:
        return False
    for name in names:
        if name.endswith(".json") and name not in done:
            try:
                with open(os.path.join(runs_dir, name), "rb") as fh:
                    if json.loads(fh.read()).get("status") in finished:
                        done.add(name)
            except (OSError, ValueError):
                pass
    return len(done) >= expect


peak = {"rss": 0, "anon": 0, "procs": 0, "bg_rss": 0, "bg_procs": 0}
marker = spec.get("worker_marker", "")
confirmed, worker_hwm = set(), {}


def sample():
    # Our direct children: the foregrounds and the re-parented workers (the short-lived middle
    # process of each double fork stays the foreground's child and is left out: it is a
    # copy-on-write twin of the foreground). A worker counts only once its cmdline shows it has
    # exec'd: before that its memory is the foreground's.
    try:
        with open("/proc/%d/task/%d/children" % (me, me)) as fh:
            kids = [int(k) for k in fh.read().split()]
    except OSError:
        return
    rss = anon = n = bg = bg_n = 0
    for p in kids:
        worker = p not in fg
        try:
            if worker and p not in confirmed:
                with open("/proc/%d/cmdline" % p, "rb") as fh:
                    if marker.encode() not in fh.read():
                        continue
                confirmed.add(p)
            with open("/proc/%d/status" % p) as fh:
                lines = fh.read().splitlines()
        except OSError:
            continue
        vals = {}
        for line in lines:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "RssAnon", "VmHWM"):
                vals[k] = int(v.split()[0]) * 1024
        if "VmRSS" not in vals:  # a zombie
            continue
        rss += vals["VmRSS"]
        anon += vals.get("RssAnon", 0)
        n += 1
        if worker:
            worker_hwm[p] = max(worker_hwm.get(p, 0), vals.get("VmHWM", 0))
            bg += vals["VmRSS"] + _descendants_rss(p)
            bg_n += 1
    if rss > peak["rss"]:
        peak.update(rss=rss, anon=anon, procs=n)
    if bg > peak["bg_rss"]:
        peak.update(bg_rss=bg, bg_procs=bg_n)


def _descendants_rss(pid):
    # The agents a worker runs (a command runner's processes) count as background too.
    total = 0
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as fh:
            kids = [int(k) for k in fh.read().split()]
    except OSError:
        return 0
    for k in kids:
        try:
            with open("/proc/%d/status" % k) as fh:
                for line in fh:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
        except OSError:
            continue
        total += _descendants_rss(k)
    return total


t0 = time.perf_counter()
limit = spec.get("concurrency") or len(cmds)


def start(i):
    argv = cmds[i]
    pid = os.fork()
    if pid == 0:
        try:
            os.dup2(devnull, 1)
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    fg[pid] = i


todo = list(range(len(cmds)))
while todo and len(fg) < limit:
    start(todo.pop(0))
while todo:  # a limited number in flight: start the next as one ends
    pid, status, ru = os.wait4(-1, 0)
    rec = usage(ru, status, time.perf_counter() - t0)
    if pid in fg:
        fg_out[fg.pop(pid)] = rec
        start(todo.pop(0))
    else:
        workers.append(rec)
    if interval:
        sample()
t_fg = t_runs = None
timed_out = False
if not runs_dir and not interval:
    reap(True)  # exact exit times: block in wait4 until every process is gone
else:
    next_sample = 0.0
    while True:
        alive = reap(False)
        now = time.perf_counter() - t0
        if t_fg is None and not fg:
            t_fg = max(r["elapsed"] for r in fg_out)
        if runs_dir and t_runs is None and runs_finished():
            t_runs = time.perf_counter() - t0
        if interval and now >= next_sample:
            sample()
            next_sample = now + interval
        if not alive and (t_runs is not None or not runs_dir):
            break
        if not alive and runs_dir:  # everything exited: one last look at the records
            if runs_finished():
                t_runs = time.perf_counter() - t0
            break
        if now > deadline:
            timed_out = True
            break
        time.sleep(min(0.01, interval or 0.01))
if t_fg is None and not fg:
    t_fg = max(r["elapsed"] for r in fg_out)
print(json.dumps({
    "fg": fg_out, "workers": workers, "t_fg": t_fg, "t_runs": t_runs, "runs_done": len(done),
    "peak": peak, "worker_hwm": max(worker_hwm.values(), default=0),
    "workers_seen": len(worker_hwm), "timed_out": timed_out, "t_end": time.perf_counter() - t0,
}))
"""


def launch(bench: Bench, cmds: Sequence[Sequence[str]], **spec: Any) -> dict[str, Any]:
    """Start `cmds` at once under the subreaper launcher; return its report."""
    spec = {"cmds": [list(c) for c in cmds], "finished": list(FINISHED), **spec}
    proc = subprocess.run(
        [sys.executable, "-I", "-S", "-c", LAUNCHER, json.dumps(spec)],
        capture_output=True,
        env=bench.env,
        check=False,
    )
    try:
        report: dict[str, Any] = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise RuntimeError(f"launcher failed: {tail(proc.stderr)}") from None
    bad = [r for r in report["fg"] if r is None or r["code"] != 0]
    if bad:
        raise RuntimeError(f"{len(bad)} of {len(cmds)} commands failed: {tail(proc.stderr)}")
    return report


def scratch_copy(bench: Bench, src: Path, tag: str) -> tuple[Path, Path]:
    """A throwaway copy of `src` next to the generated data (sends write to their state)."""
    bench.data.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{tag}.", dir=bench.data))
    state = tmp / "state"
    shutil.copytree(src, state, ignore=shutil.ignore_patterns(".params.json"))
    return tmp, state


def messages(transcript: Path) -> list[tuple[str, str]]:
    """(role, text) of every message line of a transcript."""
    out = []
    for line in transcript.read_text().splitlines():
        obj = json.loads(line)
        if obj.get("type") != "message":
            continue
        msg = obj.get("message") or {}
        text = "".join(c.get("text", "") for c in msg.get("content") or [] if isinstance(c, dict))
        out.append((msg.get("role", ""), text))
    return out


@case(after="list_startup")
def version_startup(bench: Bench) -> list[Row]:
    """--version vs list --json on 10 sessions: wall, CPU and peak RSS of each."""
    state = small_state(bench)
    version = bench.sessiontool("--version")
    listing = bench.sessiontool("--state-dir", str(state), "list", "--json")
    assert bench.output(version).startswith("sessiontool ")
    runs = bench.n(21, 7)
    v, lst = bench.compare(version, listing, runs)
    return [
        Row(
            f"start-up: `--version` ({runs} runs)",
            f"wall {v.spread()} (min / median / max), CPU {v.cpu_spread()}; `list --json` "
            f"alongside: wall {lst.spread()}, CPU {lst.cpu_spread()}",
        ),
        Row(
            "start-up: peak RSS, `--version` / `list --json` (10 sessions)",
            f"{v.rss_spread()} / {lst.rss_spread()}",
        ),
    ]


@case
def send_roundtrip(bench: Bench) -> list[Row]:
    """send main "x" --timeout 30 --json (echo runner) vs list --json on the same 10 sessions."""
    tmp, state = scratch_copy(bench, small_state(bench), "send")
    try:
        sd = ("--state-dir", str(state))
        send = bench.sessiontool(*sd, "send", "main", "x", "--timeout", "30", "--json")
        listing = bench.sessiontool(*sd, "list", "--json")
        first = bench.json_output(send)
        assert first["status"] == "ok" and first["reply"] == "echo: x", first
        runs = bench.n(15, 5)
        launch(bench, [send])  # warm-up
        run_once(listing, bench.env)
        fg_t, fg_cpu, fg_rss, w_cpu = [], [], [], []
        lst_t, lst_cpu, lst_rss = [], [], []
        for _ in range(runs):  # timed: the launcher blocks in wait4, nothing else runs
            rep = launch(bench, [send])
            fg = rep["fg"][0]
            fg_t.append(fg["elapsed"])
            fg_cpu.append(fg["cpu"])
            fg_rss.append(fg["maxrss"])
            if len(rep["workers"]) != 1:
                raise RuntimeError(f"expected one worker per send, saw {len(rep['workers'])}")
            w_cpu.append(rep["workers"][0]["cpu"])
            wall, rss, cpu = run_once(listing, bench.env)
            lst_t.append(wall)
            lst_cpu.append(cpu)
            lst_rss.append(rss)
        # Untimed: the worker's VmHWM, sampled every millisecond while it lives.
        hwm_runs = bench.n(5, 3)
        w_rss = []
        for _ in range(hwm_runs):
            rep = launch(bench, [send], sample_interval=0.001, worker_marker=WORKER_MARKER)
            if rep["workers_seen"]:
                w_rss.append(rep["worker_hwm"])
        # Every send of this bench ran (warm-ups included): 1 + 1 + runs replies in order.
        rec_dir = state / "sessiontool" / "runs"
        recs = [json.loads(p.read_text()) for p in rec_dir.glob("*.json")]
        assert len(recs) == runs + hwm_runs + 2 and all(r["status"] == "ok" for r in recs)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    med, lmed = statistics.median(fg_t), statistics.median(lst_t)
    r = ratio(med, lmed)
    label = '`send main "x" --timeout 30 --json`, echo runner, 10 sessions'
    return [
        Row(
            f"{label} ({runs} runs each)",
            f"wall {spread(fg_t)} vs `list --json` {spread(lst_t)} (min / median / max) = "
            f"{r:.2f}× (medians); CPU {spread(fg_cpu)} foreground + {spread(w_cpu)} worker vs "
            f"{spread(lst_cpu)}",
            "≤ 1.5×",
            r <= 1.5,
        ),
        Row(
            f"{label}: peak RSS",
            f"foreground {mb(max(fg_rss))}, worker {mb(max(w_rss)) if w_rss else 'not seen'} "
            f"(VmHWM sampled every 1 ms, {len(w_rss)} of {hwm_runs} runs) "
            f"(`list --json`: {mb(max(lst_rss))})",
        ),
    ]


@case
def parallel_sends(bench: Bench) -> list[Row]:
    """100 send --timeout 0 to one session started at once; run records polled until all end."""
    n = PARALLEL_SENDS[1] if bench.quick else PARALLEL_SENDS[0]
    tmp, state = scratch_copy(bench, small_state(bench), "parallel")
    try:
        sd = ("--state-dir", str(state))
        # Make sure the session and the run dirs exist, so only the sends below are counted.
        bench.output(bench.sessiontool(*sd, "send", "main", "warm-up", "--timeout", "30"))
        rec_dir = state / "sessiontool" / "runs"
        for p in rec_dir.iterdir():
            if p.is_file():
                p.unlink()
        cmds = [
            bench.sessiontool(*sd, "send", "main", f"par-{i:03d}", "--timeout", "0", "--json")
            for i in range(n)
        ]
        rep = launch(
            bench,
            cmds,
            runs_dir=str(rec_dir),
            expect=n,
            sample_interval=0.05,
            worker_marker=WORKER_MARKER,
            deadline=PARALLEL_DEADLINE_S,
        )
        recs = [json.loads(p.read_text()) for p in rec_dir.glob("*.json")]
        ok = sum(1 for r in recs if r.get("status") == "ok")
        # The transcript of main: every par-i once, each followed by its own echo, and in the
        # lane's order (the position each record got when it was created).
        main_store = json.loads((state / "agents/main/sessions/sessions.json").read_text())
        sid = main_store["agent:main:main"]["sessionId"]
        msgs = messages(state / "agents/main/sessions" / f"{sid}.jsonl")
        pairs, seen = 0, []
        for (role, text), (role2, text2) in zip(msgs, msgs[1:], strict=False):
            if role == "user" and text.startswith("par-"):
                seen.append(text)
                if role2 == "assistant" and text2 == f"echo: {text}":
                    pairs += 1
        lane = [r["message"] for r in sorted(recs, key=lambda r: r["seq"])]
        in_order = seen == lane
        correct = (
            ok == n
            and len(recs) == n
            and pairs == n
            and in_order
            and sorted(seen) == sorted(f"par-{i:03d}" for i in range(n))
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    fg_rss = max(r["maxrss"] for r in rep["fg"])
    w_rss = rep["worker_hwm"]
    fg_cpu = sum(r["cpu"] for r in rep["fg"])
    w_cpu = sum(r["cpu"] for r in rep["workers"])
    peak = rep["peak"]
    label = f"{n} × `send main … --timeout 0 --json`, all started at once"
    t_runs = rep["t_runs"]
    return [
        Row(
            f"{label} (one run); run records polled until all ended",
            (
                f"all accepted after {ms(rep['t_fg'])}; all {n} runs ended "
                + (f"{ms(t_runs)} after the first start" if t_runs is not None else "— never")
                + f"; CPU {fg_cpu:.1f} s foreground + {w_cpu:.1f} s workers"
            ),
        ),
        Row(
            f"{label}: correctness",
            f"{ok}/{n} runs ok, {pairs} user/assistant pairs in `main`, "
            f"{'in' if in_order else 'NOT in'} lane order"
            + (" (timed out)" if rep["timed_out"] else ""),
            f"{n} ok, {n} pairs, lane order",
            correct and not rep["timed_out"],
        ),
        Row(
            f"{label}: peak RSS",
            f"largest process: foreground {mb(fg_rss)}, worker {mb(w_rss)} (VmHWM of "
            f"{rep['workers_seen']} workers seen); all at once (/proc sampled every 50 ms): "
            f"{mb(peak['rss'])} RSS summed over {peak['procs']} processes, "
            f"{mb(peak['anon'])} of it anonymous",
        ),
    ]
