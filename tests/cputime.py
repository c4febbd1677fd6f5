"""Per-test CPU time, for judging the suite's cost on a shared machine, where `--durations`
(wall time) mostly measures the other jobs: `python -m pytest -p tests.cputime
--cpu-durations=FILE` appends one line per test to FILE (CPU seconds of the test process and of
the processes it waited for, its own share, the children's, wall seconds, the test id) and the
run ends with the costliest. A detached worker is not counted (nobody waits for it), so runs
that go on in the background are under-counted."""

from __future__ import annotations

import resource
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

SHOWN = 15


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--cpu-durations",
        metavar="FILE",
        default=None,
        help="append each test's CPU time to FILE and show the costliest (tests/cputime.py)",
    )


def _cpu() -> tuple[float, float]:
    from tests.forkserver import CHILD_CPU  # the commands forked for run_cli: not our children

    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime + CHILD_CPU[0]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    out = item.config.getoption("cpu_durations")
    if not out:
        return (yield)
    own0, kids0 = _cpu()
    wall0 = time.perf_counter()
    try:
        return (yield)
    finally:
        own1, kids1 = _cpu()
        own, kids = own1 - own0, kids1 - kids0
        wall = time.perf_counter() - wall0
        with open(out, "a", encoding="utf-8") as fh:  # one short line: appends do not interleave
            fh.write(f"{own + kids:.3f} {own:.3f} {kids:.3f} {wall:.2f} {item.nodeid}\n")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    out = terminalreporter.config.getoption("cpu_durations")
    if not out or hasattr(terminalreporter.config, "workerinput") or not Path(out).exists():
        return
    rows = []
    for line in Path(out).read_text(encoding="utf-8").splitlines():
        parts = line.split(" ", 4)
        if len(parts) == 5:
            rows.append((float(parts[0]), float(parts[3]), parts[4]))
    rows.sort(reverse=True)
    total = sum(r[0] for r in rows)
    terminalreporter.write_sep("=", f"CPU time: {total:.1f} s in {len(rows)} tests ({out})")
    for cpu, wall, nodeid in rows[:SHOWN]:
        terminalreporter.write_line(f"{cpu:7.2f}s cpu {wall:7.2f}s wall  {nodeid}")
