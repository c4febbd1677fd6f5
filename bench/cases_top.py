"""`top` (issue 35), run as a person runs it: in a tmux pane (a real terminal), over 1,000
real-sized sessions (the fixtures' entry, ~5.7 KB each, each with a short transcript) with 3 runs
running (a `command` agent that sleeps).

- idle CPU: the `top` process's user + system time (/proc/PID/stat) over 30 s (10 with
  --quick) once the screen is up and settled, as a share of one core (target ≤ 2%);
- a new session's latency: a session added to sessions.json (replaced whole, as every writer
  does) until the pane shows it (tmux capture-pane polled every 20 ms), median of 9 (target
  ≤ 1 s). The poll adds up to 20 ms and the capture's own time.
Skipped without tmux or Textual."""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import datagen
from harness import Bench, Row, case, dataset, log, spread

SESSIONS = 1000
RUNNING = 3
SOCKET = f"sessiontool-bench-top-{os.getpid()}"


def top_state(bench: Bench) -> Path:
    def build(root: Path) -> None:
        store = datagen.make_entries("main", SESSIONS, snapshot=True, seed=35)
        d = datagen.write_store(root, "main", store).parent
        for entry in store.values():
            datagen.write_transcript(d / f"{entry['sessionId']}.jsonl", entry["sessionId"], 2_000)

    return dataset(bench.data, "top", {"sessions": SESSIONS, "v": 1}, build)


def _tmux(*args: str) -> str:
    return subprocess.run(
        ["tmux", "-L", SOCKET, *args], capture_output=True, text=True, check=True, timeout=30
    ).stdout


def _screen() -> str:
    return _tmux("capture-pane", "-p", "-t", "top")


def _wait_screen(text: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while text not in _screen():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{text!r} not on top's screen after {timeout}s:\n{_screen()}")
        time.sleep(0.1)


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat", "rb") as fh:
        fields = fh.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _add_session(state: Path, n: int) -> str:
    path = state / "agents" / "main" / "sessions" / "sessions.json"
    store = json.loads(path.read_text())
    key = f"agent:main:bench:new-{n}"
    store[key] = dict(
        store["agent:main:main"], sessionId=f"bench-new-{n}", updatedAt=int(time.time() * 1000)
    )
    tmp = path.with_suffix(".bench.tmp")
    tmp.write_text(json.dumps(store, indent=2))
    os.replace(tmp, path)
    return key


def _remove(tmp: Path, timeout: float = 60.0) -> None:
    """The state dir removed once the aborted runs' workers are done writing in it (an abort
    returns when the record says so; its worker goes on a moment: the lane, its log)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            shutil.rmtree(tmp)
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@case
def top_live(bench: Bench) -> list[Row]:
    """`top`: idle CPU with 1,000 sessions and 3 running runs; a new session's latency."""
    if shutil.which("tmux") is None or importlib.util.find_spec("textual") is None:
        return [Row("top (issue 35)", "skipped: needs tmux and textual (pip install '.[tui]')")]
    seconds = 10.0 if bench.quick else 30.0
    latency_runs = 3 if bench.quick else 9
    tmp = tempfile.mkdtemp(prefix="bench-top-")
    try:
        state = Path(tmp) / "state"
        shutil.copytree(top_state(bench), state)
        agent = [sys.executable, "-c", "import sys,time; sys.stdin.read(); time.sleep(600)"]
        (state / "sessiontool.json5").write_text(
            json.dumps({"agents": {"defaults": {"runner": {"type": "command", "command": agent}}}})
        )
        run_ids = []
        for i in range(RUNNING):
            out = bench.json_output(
                bench.sessiontool(
                    "--state-dir",
                    str(state),
                    "send",
                    f"bench:busy-{i}",
                    "x",
                    "--timeout",
                    "0",
                    "--json",
                )
            )
            run_ids.append(out["runId"])
        env = {k: v for k, v in bench.env.items() if not k.startswith("TMUX")}
        env["TERM"] = "xterm-256color"
        cmd = "exec " + shlex.join(bench.sessiontool("--state-dir", str(state), "top"))
        subprocess.run(
            ["tmux", "-L", SOCKET, "-f", "/dev/null", "new-session", "-d", "-s", "top",
             "-x", "160", "-y", "48", cmd],
            check=True, env=env, timeout=30,
        )  # fmt: skip
        try:
            pid = int(_tmux("display-message", "-p", "-t", "top", "#{pane_pid}").strip())
            _wait_screen(f"Sessions ({SESSIONS + RUNNING},")
            _wait_screen(f"runs: {RUNNING} running")
            _wait_screen("today: ")  # the cost (the index built once) is in
            time.sleep(3.0)
            log(f"top idle for {seconds:.0f} s ...")
            c0, t0 = _cpu_s(pid), time.monotonic()
            time.sleep(seconds)
            share = (_cpu_s(pid) - c0) / (time.monotonic() - t0)
            latencies = []
            for n in range(latency_runs):
                time.sleep(1.3)  # not in step with top's tick
                key = _add_session(state, n)
                start = time.monotonic()
                while key not in _screen():
                    if time.monotonic() - start > 30:
                        raise RuntimeError(f"{key} not shown after 30 s")
                    time.sleep(0.02)
                latencies.append(time.monotonic() - start)
        finally:
            subprocess.run(["tmux", "-L", SOCKET, "kill-server"], capture_output=True, timeout=30)
            for rid in run_ids:
                subprocess.run(
                    bench.sessiontool("--state-dir", str(state), "abort", rid),
                    capture_output=True,
                    env=bench.env,
                    timeout=60,
                )
    finally:
        _remove(Path(tmp))
    median = statistics.median(latencies)
    what = f"{SESSIONS:,} sessions, {RUNNING} running runs"
    return [
        Row(
            f"`top` idle CPU, {what}, over {seconds:.0f} s (in tmux)",
            f"{share * 100:.2f}% of a core",
            "≤ 2%",
            share <= 0.02,
        ),
        Row(
            f"`top`: a new session on screen after sessions.json is replaced ({what}; "
            f"min / median / max of {latency_runs}: {spread(latencies)})",
            f"{median * 1000:.0f} ms",
            "≤ 1 s",
            median <= 1.0,
        ),
    ]
