"""The benchmark harness: run commands as fresh processes, take the median wall time and the
peak RSS of each, and print one markdown table (measurement, value, target, result).

Measurements live in `bench/cases_*.py`; each module registers functions with `@case`. A case
gets a `Bench` (interpreter, data dir, run counts, quick mode) and returns `Row`s. To add a row
for another feature (send round trip, parallel sends), add a `cases_<topic>.py` with its own
`@case` functions: the runner imports every such module in name order.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, overload

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
DATA_DIR = BENCH_DIR / ".data"


@dataclass
class Row:
    """One line of the table. `ok` None means informational (no target)."""

    measurement: str
    value: str
    target: str = "—"
    ok: bool | None = None

    @property
    def result(self) -> str:
        return "—" if self.ok is None else ("pass" if self.ok else "**FAIL**")


@dataclass
class Sample:
    """Repeated runs of one command."""

    times: list[float]  # wall seconds of each run
    rss: list[int]  # peak resident set size of each run, bytes
    cpu: list[float] = field(default_factory=list)  # user + system seconds of each run

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def median_cpu(self) -> float:
        return statistics.median(self.cpu) if self.cpu else float("nan")

    @property
    def peak_rss(self) -> int:
        return max(self.rss)

    @property
    def median_rss(self) -> float:
        return statistics.median(self.rss)

    def spread(self) -> str:
        """Wall time as `min / median / max`."""
        return spread(self.times)

    def cpu_spread(self) -> str:
        return spread(self.cpu) if self.cpu else "n/a"

    def rss_spread(self) -> str:
        return f"{mb(min(self.rss))} / {mb(int(self.median_rss))} / {mb(max(self.rss))}"

    def add(self, wall: float, rss: int, cpu: float) -> None:
        self.times.append(wall)
        self.rss.append(rss)
        self.cpu.append(cpu)


@dataclass
class Bench:
    quick: bool
    runs: int
    data: Path
    python: str = sys.executable
    env: dict[str, str] = field(default_factory=dict)

    def sessiontool(self, *args: str) -> list[str]:
        return [self.python, "-m", "sessiontool", *args]

    def py(self, code: str) -> list[str]:
        return [self.python, "-c", code]

    def n(self, full: int, quick: int | None = None) -> int:
        """A run count: `full` normally, fewer with --quick, never more than --runs allows."""
        want = (quick if quick is not None else max(3, full // 3)) if self.quick else full
        return max(1, min(want, self.runs)) if self.runs else max(1, want)

    def measure(self, cmd: Sequence[str], runs: int, warmup: int = 1) -> Sample:
        """Median wall time and peak RSS of `cmd` over `runs` fresh processes (after `warmup`
        unrecorded runs, so the page cache and bytecode caches are warm for every run)."""
        for _ in range(warmup):
            run_once(cmd, self.env)
        sample = Sample([], [])
        for _ in range(runs):
            sample.add(*run_once(cmd, self.env))
        return sample

    def compare(
        self, a: Sequence[str], b: Sequence[str], runs: int, warmup: int = 1
    ) -> tuple[Sample, Sample]:
        """Two commands measured alternately (a, b, a, b, ...), so that a busy machine slows
        both alike and their ratio stays meaningful."""
        for _ in range(warmup):
            run_once(a, self.env)
            run_once(b, self.env)
        sa, sb = Sample([], []), Sample([], [])
        for _ in range(runs):
            sa.add(*run_once(a, self.env))
            sb.add(*run_once(b, self.env))
        return sa, sb

    def output(self, cmd: Sequence[str]) -> str:
        """Run once and return stdout; fail loudly if the command fails (a benchmark of a
        failing command would measure nothing)."""
        proc = subprocess.run(cmd, capture_output=True, text=True, env=self.env, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr[-1000:]}")
        return proc.stdout

    def json_output(self, cmd: Sequence[str]) -> Any:
        return json.loads(self.output(cmd))


def tail(data: bytes) -> str:
    return data[-1000:].decode(errors="replace")


def run_once(cmd: Sequence[str], env: dict[str, str]) -> tuple[float, int, float]:
    """Wall seconds, peak RSS (bytes) and CPU seconds of one run of `cmd`, its stdout thrown
    away. Timed
    and measured by a small fresh wrapper process (see spawn_child.py), whose own start-up is
    not counted."""
    wrapper = [sys.executable, "-I", "-S", str(BENCH_DIR / "spawn_child.py"), *cmd]
    proc = subprocess.run(wrapper, capture_output=True, env=env, check=False)
    try:
        report = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise RuntimeError(f"measuring {' '.join(cmd)} failed: {tail(proc.stderr)}") from None
    if report["code"] != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {report['code']}: {tail(proc.stderr)}")
    return float(report["elapsed"]), int(report["maxrss"]), float(report["cpu"])


# -- formatting ------------------------------------------------------------------------------


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 10 else f"{seconds:.1f} s"


def mb(n: int) -> str:
    return f"{n / 1e6:.0f} MB"


def ratio(a: float, b: float) -> float:
    return a / b if b > 0 else float("inf")


def spread(values: Sequence[float]) -> str:
    """`min / median / max` of wall or CPU seconds."""
    return f"{ms(min(values))} / {ms(statistics.median(values))} / {ms(max(values))}"


def pair_ratios(a: Sample, b: Sample, what: str = "times") -> list[float]:
    """a/b run by run (the samples of `Bench.compare` alternate a, b, a, b, ...)."""
    xs, ys = getattr(a, what), getattr(b, what)
    return [ratio(x, y) for x, y in zip(xs, ys, strict=True)]


def ratio_spread(rs: Sequence[float]) -> str:
    return f"{min(rs):.2f} / {statistics.median(rs):.2f} / {max(rs):.2f}×"


def table(rows: Sequence[Row]) -> str:
    head = ["measurement", "value", "target", "result"]
    body = [[r.measurement, r.value, r.target, r.result] for r in rows]
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in body]
    return "\n".join(lines) + "\n"


# -- data sets -------------------------------------------------------------------------------


def log(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def dataset(base: Path, name: str, params: dict[str, Any], build: Callable[[Path], object]) -> Path:
    """`base/name`, built by `build(dir)` only when missing or made with other parameters.
    It is built in a temp dir and moved into place, so an interrupted build leaves nothing
    half-made behind."""
    final = base / name
    stamp = final / ".params.json"
    want = json.dumps(params, sort_keys=True)
    if stamp.is_file() and stamp.read_text() == want:
        return final
    base.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=base))
    try:
        log(f"generating {name} {params} ...")
        t0 = time.perf_counter()
        build(tmp)
        (tmp / ".params.json").write_text(want)
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        log(f"generated {name} in {time.perf_counter() - t0:.1f} s")
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final


# -- registry and main -----------------------------------------------------------------------

Case = Callable[[Bench], list[Row]]
CASES: list[tuple[str, Case]] = []
_AFTER: dict[str, str] = {}  # case name -> the case it is listed right after


@overload
def case(fn: Case) -> Case: ...
@overload
def case(fn: None = None, *, after: str | None = None) -> Callable[[Case], Case]: ...
def case(fn: Case | None = None, *, after: str | None = None) -> Case | Callable[[Case], Case]:
    """Register a case: `@case`, or `@case(after="other_case")` to list its rows right after
    another module's case (e.g. a start-up row next to `list_startup`)."""

    def register(f: Case) -> Case:
        CASES.append((f.__name__, f))
        if after:
            _AFTER[f.__name__] = after
        return f

    return register(fn) if fn is not None else register


def load_cases() -> None:
    sys.path.insert(0, str(BENCH_DIR))
    for path in sorted(BENCH_DIR.glob("cases_*.py")):
        importlib.import_module(path.stem)
    for name, target in _AFTER.items():
        names = [n for n, _ in CASES]
        if name in names and target in names and name != target:
            item = CASES.pop(names.index(name))
            CASES.insert([n for n, _ in CASES].index(target) + 1, item)


def child_env() -> dict[str, str]:
    """The environment of every measured process: this one's, minus what would change what is
    measured (a requester session, a config file, a pinned bytecode policy)."""
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("SESSIONTOOL_"):
            del env[k]
    # An installed package has compiled bytecode; let the first (warm-up) run write it.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["NO_COLOR"] = "1"
    return env


def machine_row() -> Row:
    """Context for every other number: a loaded machine makes wall times longer."""
    try:
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        load = "n/a"
    return Row(
        "machine",
        f"{os.cpu_count()} CPUs, load average {load}; Python {sys.version.split()[0]}",
    )


def main(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(prog="bench/run", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller data sets and fewer runs")
    ap.add_argument("--runs", type=int, default=0, help="at most this many timed runs per command")
    ap.add_argument(
        "-k",
        dest="only",
        default=None,
        help="only cases whose name contains this (several: comma-separated, one run, one table)",
    )
    ap.add_argument("--data-dir", type=Path, default=DATA_DIR, help="where generated data lives")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    args = ap.parse_args(argv)
    load_cases()
    if args.list:
        for name, fn in CASES:
            print(f"{name}: {(fn.__doc__ or '').strip().splitlines()[0] if fn.__doc__ else ''}")
        return 0
    env = child_env()
    probe = subprocess.run(
        [sys.executable, "-c", "import sessiontool, typer"], env=env, capture_output=True
    )
    if probe.returncode != 0:
        print(
            f"bench: {sys.executable} cannot import sessiontool; run with the project's "
            "interpreter, e.g. .venv/bin/python bench/run",
            file=sys.stderr,
        )
        return 2
    bench = Bench(
        quick=args.quick,
        runs=args.runs,
        data=args.data_dir / ("quick" if args.quick else "full"),
        env=env,
    )
    rows: list[Row] = [machine_row()]
    for name, fn in CASES:
        if args.only and not any(part and part in name for part in args.only.split(",")):
            continue
        log(f"running {name}")
        try:
            rows.extend(fn(bench))
        except Exception as exc:  # one broken case must not hide the others' results
            rows.append(Row(name, f"error: {type(exc).__name__}: {exc}"[:200], "runs", False))
    sys.stdout.write(table(rows))
    return 0 if all(r.ok is not False for r in rows) else 1
