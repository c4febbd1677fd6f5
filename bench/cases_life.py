"""A session's life (issue 43): `fork --at` and `rewind` of a 100 MB transcript against a `cp`
of it (target: at most 1.5x), and `compact` of a 10,000-message session against the runner's
own time (a `send` round trip with the same echo runner) plus one pass over the transcript (a
`python -c` that parses every line): target at most 1.2x.

Each run starts from the same state (the transcript and store put back, what the last run
wrote removed), outside the timing; the pair is measured alternately, as `Bench.compare` does.
"""

from __future__ import annotations

import json
import shutil
import statistics
import tempfile
from pathlib import Path

from harness import Bench, Row, case, dataset, mb, ms, run_once, spread

SID = "99999999-9999-4999-8999-999999999999"
KEY = "agent:main:big"


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
        store = {KEY: {"sessionId": SID, "updatedAt": 1_790_000_000_000}}
        (sessions / "sessions.json").write_text(json.dumps(store))
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
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(data, work, ignore=shutil.ignore_patterns(".params.json", "count"))
    return work


def _triples(
    b: Bench, work: Path, data: Path, cmds: tuple[list[str], list[str], list[str]], runs: int
) -> list[tuple[float, float, float]]:
    """(the command, `cp` of the transcript, the same command's fixed cost) per round, each from
    the same fresh state; the first round warms the cache and is not recorded."""
    out = []
    for i in range(runs + 1):
        walls = []
        for cmd in cmds:
            _fresh(data, work)
            walls.append(run_once(cmd, b.env)[0])
        if i:
            out.append((walls[0], walls[1], walls[2]))
    return out


def _rows(what: str, t: list[tuple[float, float, float]], limit: float) -> list[Row]:
    """The target is on the work past a command's fixed cost (start-up, the store read: the
    `session KEY` of the same session, measured in the same round) against `cp`; the raw
    ratio is shown beside it."""
    raw = statistics.median(a / c for a, c, _ in t)
    work = statistics.median(max(0.0, a - f) / c for a, c, f in t)
    return [
        Row(f"{what}: wall (min / median / max)", spread([x[0] for x in t])),
        Row("cp of the transcript: wall", spread([x[1] for x in t])),
        Row("the command's fixed cost (`session KEY`): wall", spread([x[2] for x in t])),
        Row(f"{what} / cp, raw (median of the rounds)", f"{raw:.2f}x"),
        Row(
            f"{what} past its fixed cost / cp (median)",
            f"{work:.2f}x",
            f"<= {limit}x",
            work <= limit,
        ),
    ]


@case
def fork_and_rewind_100mb(b: Bench) -> list[Row]:
    size = (20 if b.quick else 100) << 20
    data = dataset(b.data, "life-100mb", {"size": size, "v": 1}, _build(size, None))
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
        rows = [Row("transcript", mb(src.stat().st_size))]
        fork = b.sessiontool(*st, "fork", KEY, "--at", late, "-q")
        rows += _rows(
            "fork --at (late message)", _triples(b, work, data, (fork, cp, fixed), runs), 1.5
        )
        rewind = b.sessiontool(*st, "rewind", KEY, late, "-q")
        rows += _rows(
            "rewind (late message)", _triples(b, work, data, (rewind, cp, fixed), runs), 1.5
        )
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
    data = dataset(b.data, "life-compact", {"messages": n, "v": 1}, _build(0, n))
    runs = b.n(5, 3)
    tmp = Path(tempfile.mkdtemp(prefix="life-bench."))
    try:
        work = tmp / "state"
        src = work / "agents" / "main" / "sessions" / f"{SID}.jsonl"
        st = ["--state-dir", str(work)]
        compact = b.sessiontool(*st, "compact", KEY, "--keep", "2", "-q")
        send = b.sessiontool(*st, "send", "other", "x", "-q")
        one_pass = [b.python, "-c", ONE_PASS, str(src)]
        tc, base = [], []
        for i in range(runs + 1):
            _fresh(data, work)
            wc = run_once(compact, b.env)[0]
            _fresh(data, work)
            ws = run_once(send, b.env)[0]
            wp = run_once(one_pass, b.env)[0]
            if i:
                tc.append(wc)
                base.append(ws + wp)
        rows = [Row("messages", str(n))]
        ratios = [x / y for x, y in zip(tc, base, strict=True)]
        r = statistics.median(ratios)
        rows += [
            Row("compact --keep 2: wall (min / median / max)", spread(tc)),
            Row("send round trip + one pass: wall (min / median / max)", spread(base)),
            Row(
                "compact / (send + one pass), median of the rounds",
                f"{r:.2f}x",
                "<= 1.2x",
                r <= 1.2,
            ),
        ]
        rows.insert(1, Row("one pass alone (last run)", ms(wp)))
        return rows
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
