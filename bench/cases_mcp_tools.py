"""`sessiontool mcp`'s newer tools (issue 41) against the CLI command doing the same work: each
call's answer time through the MCP SDK's own client over stdio (one server, warmed up: a client
keeps its server) beside the command as a fresh process (what a script pays), on one state dir
of 300 sessions with 20-message transcripts and a few finished spawn runs. Target: every tool
within 1.2x its command."""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

from harness import BENCH_DIR, Bench, Row, case, ms

ME = "agent:main:bench"
TARGET = 1.2
SESSIONS = 300

CLIENT = r"""
import json, os, sys, time
import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

state, runs, calls = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])


async def main():
    env = dict(os.environ, SESSIONTOOL_STATE_DIR=state)
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "sessiontool", "mcp", "--as", sys.argv[4]], env=env
    )
    out = {}
    async with Client(params, read_timeout_seconds=120) as c:
        await c.list_tools()
        for name, tool, args in calls:
            await c.call_tool(tool, args)  # warm-up
            times = []
            for _ in range(runs):
                t = time.perf_counter()
                r = await c.call_tool(tool, args)
                times.append(time.perf_counter() - t)
                assert r.structured_content is not None, (name, r)
            out[name] = times
    print(json.dumps(out))


anyio.run(main)
"""


def _state(root: Path) -> None:
    """SESSIONS sessions of 20 messages each (every tenth says "aardvark")."""
    sdir = root / "agents" / "main" / "sessions"
    sdir.mkdir(parents=True)
    store = {}
    for i in range(SESSIONS):
        sid = f"sid{i:05d}"
        store[f"agent:main:s{i}"] = {
            "sessionId": sid,
            "updatedAt": 1_700_000_000_000 + i,
            "label": f"job {i}",
        }
        lines = [{"type": "session", "version": 3, "id": sid, "timestamp": "2027-01-01T00:00:00Z"}]
        parent = None
        for j in range(20):
            word = "aardvark" if (i % 10 == 0 and j == 5) else f"word{j}"
            role = "user" if j % 2 == 0 else "assistant"
            content = f"message {j} of {i} with {word}"
            lines.append(
                {
                    "type": "message",
                    "id": f"{i:04x}{j:04x}",
                    "parentId": parent,
                    "timestamp": "2027-01-01T00:00:00Z",
                    "message": {
                        "role": role,
                        "content": content
                        if role == "user"
                        else [{"type": "text", "text": content}],
                        "timestamp": 1_700_000_000_000 + j,
                    },
                }
            )
            parent = f"{i:04x}{j:04x}"
        (sdir / f"{sid}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (sdir / "sessions.json").write_text(json.dumps(store))


@case
def mcp_tools_vs_cli(bench: Bench) -> list[Row]:
    """sessions_search / sessions_list / sessions_history / subagents / sessions_yield over
    MCP, each beside its CLI command (fresh process)."""
    probe = subprocess.run([bench.python, "-c", "import mcp"], capture_output=True, env=bench.env)
    if probe.returncode != 0:
        return [Row("mcp tools vs CLI", "skipped: the `mcp` extra is not installed")]
    tmp = Path(tempfile.mkdtemp(prefix="bench-mcptools-", dir=BENCH_DIR))
    try:
        state = tmp / "state"
        _state(state)
        env = dict(bench.env, SESSIONTOOL_STATE_DIR=str(state))
        run = Bench(bench.quick, bench.runs, bench.data, bench.python, env)
        spawned = [
            run.json_output(run.sessiontool("--as", ME, "spawn", f"task {i}", "--json"))["runId"]
            for i in range(3)
        ]
        run.output(run.sessiontool("--as", ME, "wait", *spawned, "--timeout", "60"))
        run.output(run.sessiontool("search", "aardvark", "--json"))  # the index, built once
        pairs = [
            (
                "sessions_search",
                "sessions_search",
                {"query": "aardvark"},
                ["search", "aardvark", "--limit", "10"],
            ),
            (
                "sessions_list (search, page 2)",
                "sessions_list",
                {"search": "job 1", "limit": 50, "offset": 50},
                ["list", "--search", "job 1", "--limit", "50", "--offset", "50"],
            ),
            (
                "sessions_history (offset)",
                "sessions_history",
                {"sessionKey": "s7", "offset": 4, "limit": 10},
                ["history", "s7", "--offset", "4", "--limit", "10"],
            ),
            ("subagents list", "subagents", {}, ["--as", ME, "runs"]),
            (
                "subagents wait (ended runs)",
                "subagents",
                {"action": "wait", "taskIds": spawned},
                ["--as", ME, "wait", *spawned],
            ),
            (
                "sessions_yield (none pending)",
                "sessions_yield",
                {},
                ["--as", ME, "wait", spawned[0]],
            ),
        ]
        runs = bench.n(15, 5)
        calls = [[name, tool, args] for name, tool, args, _ in pairs]
        mcp = json.loads(
            run.output([bench.python, "-c", CLIENT, str(state), str(runs), json.dumps(calls), ME])
        )
        rows = []
        for name, _tool, _args, cli in pairs:
            sample = run.measure(run.sessiontool(*cli, "--json"), runs)
            m = statistics.median(mcp[name])
            ratio = m / sample.median
            rows.append(
                Row(
                    f"mcp {name} vs `{' '.join(cli[:3])} …` (median)",
                    f"{ms(m)} vs {ms(sample.median)} ({ratio:.2f}x)",
                    f"<= {TARGET:g}x",
                    ratio <= TARGET,
                )
            )
        return rows
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
