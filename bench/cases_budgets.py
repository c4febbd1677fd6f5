"""Budgets, `diff` and cost per tool (issue 44):

- `send-budget`: what a day budget's check (its spend read from the warm index) adds to a
  `send`, timed in fresh processes around the gate alone (imports included), on the search
  data set (64 MB with --quick, 1 GB in full);
- `diff-10k`: `diff A B --json` of two 10,000-message sessions against `history --json
  --limit all` of each, run alternately;
- `usage-by-tool`: warm `usage --by tool --json` against warm `usage --by model --json` on the
  search data set."""

from __future__ import annotations

import json
import os
import statistics
import uuid
from pathlib import Path

from cases_search import data_dir, search_state
from harness import Bench, Row, case, dataset, ms, pair_ratios, ratio_spread

_GATE = """
import sys, time
from sessiontool.context import build_context
import sessiontool.cli.commands.runcmd, sessiontool.runs.submit, sessiontool.runs.files_writer
from sessiontool.sessions.resolve import resolve
ctx = build_context(sys.argv[1], sys.argv[2])
r = resolve(ctx, "main")  # what `send` has done before it asks the gate
t1, c1 = time.perf_counter(), time.process_time()
from sessiontool.reports.budgets import BudgetGate
limit = BudgetGate(ctx).allow(r.agent_id, r.key, r.entry, None)
t2, c2 = time.perf_counter(), time.process_time()
assert limit is not None and limit["budget"] == "day", limit
print(t2 - t1, c2 - c1)
"""


def _turn_line(i: int) -> bytes:
    """One priced assistant turn dated now, as another program (OpenClaw) appends it."""
    import time

    now = int(time.time() * 1000)
    msg = {
        "role": "assistant",
        "content": [{"type": "text", "text": f"turn {i}"}],
        "provider": "p",
        "model": "m1",
        "usage": {"input": 10, "output": 1},
        "timestamp": now,
    }
    entry = {"type": "message", "id": f"bb{i:06d}", "parentId": None, "message": msg}
    entry["timestamp"] = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(now / 1000))
    return json.dumps(entry).encode() + b"\n"


def _gate_rows(times: list[float], cpu: list[float], what: str) -> Row:
    med = statistics.median(times)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return Row(
        f"budget check added to a warm `send` (day budget, spend from the index, its imports "
        f"included), {what}; {len(times)} fresh processes, wall min / median / max, load {load}",
        f"{ms(min(times))} / {ms(med)} / {ms(max(times))} (CPU {min(cpu) * 1000:.1f} / "
        f"{statistics.median(cpu) * 1000:.1f} / {max(cpu) * 1000:.1f} ms)",
        "≤ 10 ms",
        med <= 0.010,
    )


@case
def send_budget(bench: Bench) -> list[Row]:
    """The budget check of a warm `send`: the gate's time in a fresh process, with nothing
    changed since the index caught up, and with one transcript grown by a turn since (as
    another program's append leaves it: read on from the spend record, not the index)."""
    state = search_state(bench)
    cfg = state.parent / "budget-config.json5"
    cfg.write_text(json.dumps({"sessiontool": {"budgets": [{"window": "day", "limit": 1e9}]}}))
    cmd = [bench.python, "-c", _GATE, str(state), str(cfg)]
    bench.output(bench.sessiontool("--state-dir", str(state), "usage", "--json"))  # warm index
    runs = bench.n(15, 7)
    got = [bench.output(cmd).split() for _ in range(runs)]
    rows = [_gate_rows([float(w) for w, _ in got], [float(c) for _, c in got], "nothing new")]
    # One transcript (an orphan, not in the store: today's spend counts every transcript)
    # grown by one turn before each process; removed afterwards.
    grown = state / "agents" / "main" / "sessions" / f"{uuid.uuid4()}.jsonl"
    try:
        head = {"type": "session", "version": 3, "id": grown.stem, "timestamp": "x"}
        grown.write_bytes(json.dumps(head).encode() + b"\n" + _turn_line(0))
        bench.output(cmd)  # its first catch-up: a new file
        got = []
        for i in range(runs):
            with open(grown, "ab") as fh:
                fh.write(_turn_line(i + 1))
            got.append(bench.output(cmd).split())
        rows.append(
            _gate_rows([float(w) for w, _ in got], [float(c) for _, c in got], "one turn new")
        )
    finally:
        grown.unlink(missing_ok=True)
    bench.output(bench.sessiontool("--state-dir", str(state), "usage", "--json"))  # drops it
    return rows


def _session_lines(sid: str, n: int, variant: int) -> bytes:
    head = {"type": "session", "version": 3, "id": sid, "timestamp": "2026-11-01T00:00:00.000Z"}
    out = [json.dumps(head)]
    ts = 1_795_000_000_000
    i = 0
    while len(out) <= n:
        ts += 1000
        k = len(out)
        if k % 4 == 1:
            msg = {"role": "user", "content": [{"type": "text", "text": f"step {i} please"}]}
        elif k % 4 == 2:
            call = {
                "type": "toolCall",
                "id": f"c{i}",
                "name": "read",
                "arguments": {"path": f"f{i}"},
            }
            msg = {"role": "assistant", "content": [call], "usage": {"input": 900, "output": 40}}
        elif k % 4 == 3:
            msg = {
                "role": "toolResult",
                "toolCallId": f"c{i}",
                "toolName": "read",
                "content": [{"type": "text", "text": "x" * 200}],
            }
        else:
            text = f"done {i}" if i < n // 8 or variant == 0 else f"other {i}"
            msg = {
                "role": "assistant",
                "content": [{"type": "text", "text": text}],
                "usage": {"input": 1000, "output": 60},
            }
            i += 1
        msg["timestamp"] = ts
        out.append(json.dumps({"type": "message", "message": msg}))
    return ("\n".join(out) + "\n").encode()


def _diff_state(bench: Bench) -> Path:
    def build(root: Path) -> None:
        d = root / "agents" / "main" / "sessions"
        d.mkdir(parents=True)
        store = {}
        for v, key in enumerate(("agent:main:a", "agent:main:b")):
            sid = f"0000000{v}-0000-4000-8000-000000000000"
            (d / f"{sid}.jsonl").write_bytes(_session_lines(sid, 10_000, v))
            store[key] = {"sessionId": sid, "updatedAt": 1_795_000_000_000}
        (d / "sessions.json").write_text(json.dumps(store))

    return dataset(data_dir(bench), "diff10k", {"messages": 10_000, "v": 1}, build)


@case
def diff_10k(bench: Bench) -> list[Row]:
    state = _diff_state(bench)
    st = ["--state-dir", str(state)]
    diff = bench.sessiontool(*st, "diff", "agent:main:a", "agent:main:b", "--json")
    hist = " && ".join(
        " ".join(
            [
                *bench.sessiontool(
                    *st, "history", k, "--json", "--limit", "all", "--include-tools"
                ),
                ">/dev/null",
            ]
        )
        for k in ("agent:main:a", "agent:main:b")
    )
    a, b = bench.compare(diff, ["sh", "-c", hist], bench.n(7, 5))
    rs = pair_ratios(a, b)
    return [
        Row(
            "`diff A B --json` of two 10,000-message sessions / two `history --json` of them",
            f"{ratio_spread(rs)} ({a.spread()} vs {b.spread()}; CPU "
            f"{ratio_spread(pair_ratios(a, b, 'cpu'))})",
            "≤ 1.5×",
            statistics.median(rs) <= 1.5,
        )
    ]


@case
def usage_by_tool(bench: Bench) -> list[Row]:
    state = search_state(bench)
    mb = sum(p.stat().st_size for p in (state / "agents").rglob("*.jsonl")) >> 20
    st = ["--state-dir", str(state)]
    tool = bench.sessiontool(*st, "usage", "--by", "tool", "--json")
    model = bench.sessiontool(*st, "usage", "--by", "model", "--json")
    a, b = bench.compare(tool, model, bench.n(9, 5))
    rs = pair_ratios(a, b)
    return [
        Row(
            f"warm `usage --by tool` / warm `usage --by model`, {mb} MB of transcripts",
            f"{ratio_spread(rs)} ({a.spread()} vs {b.spread()}; CPU "
            f"{ratio_spread(pair_ratios(a, b, 'cpu'))})",
            "≤ 1.2×",
            statistics.median(rs) <= 1.2,
        )
    ]
