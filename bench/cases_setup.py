"""Set-up (issue 45 item 17): README line 1 as a new user runs it, verbatim, in a fresh clone
of this checkout's HEAD with an empty HOME (so an empty pip cache): `python3 -m venv`, `pip
install .` from the machine's package index, the first `send`. The target is 1.5x the 0.2
release's 15.5 s wall / 7.2 s CPU; CPU is the steadier number on a shared machine."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from harness import ROOT, Bench, Row, case, run_once

WALL_LIMIT = 1.5 * 15.5
CPU_LIMIT = 1.5 * 7.2


def readme_line_one() -> str:
    """The first line of the README's first code block: the command the user copies."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("```"))
    return lines[start + 1]


def _one_run(bench: Bench, line: str) -> tuple[float, float]:
    work = Path(tempfile.mkdtemp(prefix="bench-setup-"))
    try:
        repo, home = work / "repo", work / "home"
        home.mkdir()
        subprocess.run(["git", "clone", "-q", str(ROOT), str(repo)], check=True)
        env = {k: v for k, v in bench.env.items() if not k.startswith(("PIP_CACHE", "VIRTUAL_ENV"))}
        env["HOME"] = str(home)
        env["PATH"] = os.pathsep.join(
            p for p in env.get("PATH", "").split(os.pathsep) if "venv" not in p
        )
        cmd = ["bash", "-c", f"cd {repo} && {line} >/dev/null"]
        wall, _rss, cpu = run_once(cmd, env)
        return wall, cpu
    finally:
        shutil.rmtree(work, ignore_errors=True)


@case
def setup_readme_line1(bench: Bench) -> list[Row]:
    """README line 1 from a fresh clone with an empty HOME: wall and CPU."""
    line = readme_line_one()
    runs = bench.n(3, 1)
    got = [_one_run(bench, line) for _ in range(runs)]
    walls = sorted(w for w, _ in got)
    cpus = sorted(c for _, c in got)
    wall, cpu = walls[len(walls) // 2], cpus[len(cpus) // 2]
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    spread = " / ".join(f"{w:.1f}" for w in (walls[0], wall, walls[-1]))
    cpu_spread = " / ".join(f"{c:.1f}" for c in (cpus[0], cpu, cpus[-1]))
    return [
        Row(
            f"README line 1 (fresh clone, empty HOME and pip cache), {runs} runs, load {load}: "
            "wall min / median / max",
            f"{spread} s",
            f"≤ {WALL_LIMIT:.1f} s",
            wall <= WALL_LIMIT,
        ),
        Row(
            "README line 1: CPU (user + system, the venv, pip and the send) min / median / max",
            f"{cpu_spread} s",
            f"≤ {CPU_LIMIT:.1f} s",
            cpu <= CPU_LIMIT,
        ),
    ]
