"""A session's life (issue 43): `fork --at` and `rewind` of a 100 MB transcript against a `cp`
of it (target: at most 1.5x), and `compact` of a 10,000-message session against the runner's
own time (a `send` round trip with the same echo runner) plus one pass over the transcript (a
`python -c` that parses every line): target at most 1.2x.

Each run starts from the same state (the transcript and store put back, what the last run
wrote removed, the copy written out to disk as a real transcript is), outside the timing; the
commands of a case take turns, in an order rotated round by round. A command's fixed cost is
the same command on a 4-message session of the same store; wall and CPU are both shown.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
from pathlib import Path

from harness import Bench, Row, case, dataset, mb, ms, run_once, spread

SID = "99999999-9999-4999-8999-999999999999"
KEY = "agent:main:big"
# A 4-message session in the same store: the same command on it is the command's fixed cost
# (Python's start-up, its own imports, the store read and write) without the 100 MB.
SMALL_SID, SMALL_KEY = "88888888-8888-4888-8888-888888888888", "agent:main:small"


def _line(i: int, pad: int) -> bytes:
    role = "user" if i % 2 == 0 else "assistant"
    text = f"message {i} " + "lorem ipsum dolor sit amet " * pad
    msg: dict[str, object] = {"role": role, "content": [{"type": "text", "text": text}]}
    if role == "assistant":
        msg.update(model="echo", usage={"input": 100, "output": 20, "totalTokens": 120})
    entry = {
        "type": "message",
        "id": f"{i:08x}",
        "parentId": f"{i - 1:08x}" if i else None,
        "timestamp": "2026-11-21T20:22:00.000Z",
        "message": msg,
    }
    return json.dumps(entry, separators=(",", ":")).encode() + b"\n"


def _build(size: int, messages: int | None) -> object:
    def build(d: Path) -> None:
        sessions = d / "agents" / "main" / "sessions"
        sessions.mkdir(parents=True)
        store = {
            KEY: {"sessionId": SID, "updatedAt": 1_790_000_000_000},
            SMALL_KEY: {"sessionId": SMALL_SID, "updatedAt": 1_790_000_000_000},
        }
        (sessions / "sessions.json").write_text(json.dumps(store))
        small = {"type": "session", "version": 3, "id": SMALL_SID, "timestamp": "x", "cwd": "/"}
        (sessions / f"{SMALL_SID}.jsonl").write_bytes(
            json.dumps(small, separators=(",", ":")).encode()
            + b"\n"
            + b"".join(_line(i, 30) for i in range(4))
        )
        header = {"type": "session", "version": 3, "id": SID, "timestamp": "x", "cwd": "/"}
        with open(sessions / f"{SID}.jsonl", "wb") as fh:
            fh.write(json.dumps(header, separators=(",", ":")).encode() + b"\n")
            written, i = 0, 0
            while (messages is None and written < size) or (messages is not None and i < messages):
                line = _line(i, 30)
                fh.write(line)
                written += len(line)
                i += 1
        (d / "count").write_text(str(i))

    return build


def _fresh(data: Path, work: Path) -> Path:
    """The data set's state copied to `work` and written out to disk (`sync`), as a real
    transcript is: its bytes written over hours, not a moment ago. A copy still in the page
    cache as dirty pages would put the kernel's writeback of it into whichever command's
    fsync comes next (in every round: rewind's old code paid it in its store write)."""
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(data, work, ignore=shutil.ignore_patterns(".params.json", "count"))
    for f in work.rglob("*"):
        if f.is_file():  # these files alone: a `sync` would flush the whole machine's
            fd = os.open(f, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    return work


Times = list[tuple[float, float]]  # (wall, CPU) per command, in the order given


def _rounds(b: Bench, work: Path, data: Path, cmds: list[list[str]], runs: int) -> list[Times]:
    """(wall, CPU) of each command per round, each run from the same fresh state, the
    commands in an order rotated round by round (so none is always first after the copy);
    the first round warms the cache and is not recorded."""
    out: list[Times] = []
    for i in range(runs + 1):
        got: dict[int, tuple[float, float]] = {}
        for j in range(len(cmds)):
            k = (i + j) % len(cmds)
            _fresh(data, work)
            wall, _rss, cpu = run_once(cmds[k], b.env)
            got[k] = (wall, cpu)
        if i:
            out.append([got[k] for k in range(len(cmds))])
    return out


def _rows(what: str, t: list[Times], limit: float) -> list[Row]:
    """t: per round, (the command, `cp` of the transcript, the same command on the 4-message
    session, `session KEY`). The target is on the work past the command's fixed cost (the
    same command on the small session of the same store, measured in the same round) against
    `cp`; beside it the same past `session KEY` (start-up and the store read only: the
    figure of 2026-12-02's first rows), the raw ratio, and each in CPU time (user + system:
    the steadier figure on a shared machine; a wait for the disk is in wall time only)."""

    def past(base: int, x: int) -> float:
        return statistics.median(max(0.0, r[0][x] - r[base][x]) / r[1][x] for r in t)

    def col(k: int) -> str:
        return f"{spread([r[k][0] for r in t])} / {spread([r[k][1] for r in t])}"

    raw = statistics.median(r[0][0] / r[1][0] for r in t)
    work = past(2, 0)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return [
        Row(f"{what}: wall / CPU (min / median / max)", col(0)),
        Row("cp of the transcript: wall / CPU", col(1)),
        Row("the same command on a 4-message session (its fixed cost): wall / CPU", col(2)),
        Row("`session KEY` (start-up, the store read): wall / CPU", col(3)),
        Row(f"{what} / cp, raw wall (median of the rounds)", f"{raw:.2f}x"),
        Row(
            f"{what} past `session KEY` / cp: wall, CPU (medians)",
            f"{past(3, 0):.2f}x, {past(3, 1):.2f}x",
        ),
        Row(f"{what} past its fixed cost / cp, CPU (median; load {load})", f"{past(2, 1):.2f}x"),
        Row(
            f"{what} past its fixed cost / cp, wall (median)",
            f"{work:.2f}x",
            f"<= {limit}x",
            work <= limit,
        ),
    ]


@case
def fork_and_rewind_100mb(b: Bench) -> list[Row]:
    size = (20 if b.quick else 100) << 20
    data = dataset(b.data, "life-100mb", {"size": size, "v": 2}, _build(size, None))
    count = int((data / "count").read_text())
    late = f"{(count - 2) - (count % 2):08x}"  # a user message near the end: the most to copy
    runs = b.n(5, 3)
    tmp = Path(tempfile.mkdtemp(prefix="life-bench."))
    try:
        work = tmp / "state"
        _fresh(data, work)
        src = work / "agents" / "main" / "sessions" / f"{SID}.jsonl"
        cp = ["cp", str(src), str(tmp / "copy.jsonl")]
        st = ["--state-dir", str(work)]
        fixed = b.sessiontool(*st, "session", KEY, "-q")
        small_at = f"{2:08x}"  # the small session's second user message
        rows = [Row("transcript", mb(src.stat().st_size))]
        fork = b.sessiontool(*st, "fork", KEY, "--at", late, "-q")
        fork_small = b.sessiontool(*st, "fork", SMALL_KEY, "--at", small_at, "-q")
        got = _rounds(b, work, data, [fork, cp, fork_small, fixed], runs)
        rows += _rows("fork --at (late message)", got, 1.5)
        rewind = b.sessiontool(*st, "rewind", KEY, late, "-q")
        rewind_small = b.sessiontool(*st, "rewind", SMALL_KEY, small_at, "-q")
        got = _rounds(b, work, data, [rewind, cp, rewind_small, fixed], runs)
        rows += _rows("rewind (late message)", got, 1.5)
        return rows
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


ONE_PASS = (
    "import json, sys\n"
    "n = 0\n"
    "with open(sys.argv[1], 'rb') as fh:\n"
    "    for line in fh:\n"
    "        n += isinstance(json.loads(line), dict)\n"
)


@case
def compact_10000_messages(b: Bench) -> list[Row]:
    n = 2_000 if b.quick else 10_000
    data = dataset(b.data, "life-compact", {"messages": n, "v": 2}, _build(0, n))
    runs = b.n(5, 3)
    tmp = Path(tempfile.mkdtemp(prefix="life-bench."))
    try:
        work = tmp / "state"
        src = data / "agents" / "main" / "sessions" / f"{SID}.jsonl"  # read only: the pass's
        st = ["--state-dir", str(work)]
        compact = b.sessiontool(*st, "compact", KEY, "--keep", "2", "-q")
        send = b.sessiontool(*st, "send", "other", "x", "-q")
        one_pass = [b.python, "-c", ONE_PASS, str(src)]
        tc, base = [], []
        for i in range(runs + 1):
            walls: dict[str, float] = {}
            order = ["compact", "send", "pass"]
            for name in order[i % 3 :] + order[: i % 3]:  # rotated round by round
                if name != "pass":
                    _fresh(data, work)
                cmd = {"compact": compact, "send": send, "pass": one_pass}[name]
                walls[name] = run_once(cmd, b.env)[0]
            wp = walls["pass"]
            if i:
                tc.append(walls["compact"])
                base.append(walls["send"] + wp)
        rows = [Row("messages", str(n))]
        ratios = [x / y for x, y in zip(tc, base, strict=True)]
        r = statistics.median(ratios)
        rows += [
            Row("compact --keep 2: wall (min / median / max)", spread(tc)),
            Row("send round trip + one pass: wall (min / median / max)", spread(base)),
            Row(
                "compact / (send + one pass), median of the rounds (load "
                + ", ".join(f"{x:.1f}" for x in os.getloadavg())
                + "; wall: the run is in a detached worker)",
                f"{r:.2f}x",
                "<= 1.2x",
                r <= 1.2,
            ),
        ]
        rows.insert(1, Row("one pass alone (last run)", ms(wp)))
        return rows
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
