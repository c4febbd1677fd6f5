"""The read side: `list` and `history` start-up, scale and memory."""

from __future__ import annotations

import json
import math
from pathlib import Path

import datagen
from harness import Bench, Row, case, dataset, mb, ms, ratio

# full size, --quick size
MANY_SESSIONS = (10_000, 1_000)
BIG_STORE_BYTES = (100_000_000, 10_000_000)
BIG_TRANSCRIPT_BYTES = (1 << 30, 100 << 20)
SMALL_TRANSCRIPT_BYTES = 1 << 20
AGENTS = ("main", "research", "ops")


def size(bench: Bench, pair: tuple[int, int]) -> int:
    return pair[1] if bench.quick else pair[0]


def small_state(bench: Bench) -> Path:
    """10 sessions like the fixtures' (skillsSnapshot and all), each with a short transcript."""

    def build(root: Path) -> None:
        store = datagen.make_entries("main", 10, snapshot=True, seed=1)
        d = datagen.write_store(root, "main", store).parent
        for entry in store.values():
            datagen.write_transcript(d / f"{entry['sessionId']}.jsonl", entry["sessionId"], 20_000)

    return dataset(bench.data, "small", {"sessions": 10, "v": 1}, build)


def many_state(bench: Bench) -> Path:
    """10,000 entries like the fixtures' but without skillsSnapshot, across three agents."""
    n = size(bench, MANY_SESSIONS)

    def build(root: Path) -> None:
        per = math.ceil(n / len(AGENTS))
        left = n
        for i, agent in enumerate(AGENTS):
            k = min(per, left)
            datagen.write_store(
                root, agent, datagen.make_entries(agent, k, snapshot=False, seed=10 + i)
            )
            left -= k

    return dataset(bench.data, "many", {"sessions": n, "agents": list(AGENTS), "v": 1}, build)


def big_store_state(bench: Bench) -> tuple[Path, int]:
    """A ~100 MB sessions.json: every entry carries the fixture's real skillsSnapshot."""
    target = size(bench, BIG_STORE_BYTES)
    entry = datagen.template_entry()
    per_entry = len(json.dumps({"agent:main:dm:user-00000": entry}, indent=2)) - 2
    n = max(1, target // per_entry)

    def build(root: Path) -> None:
        datagen.write_store(root, "main", datagen.make_entries("main", n, snapshot=True, seed=3))

    return dataset(bench.data, "bigstore", {"bytes": target, "entries": n, "v": 1}, build), n


def transcript_state(bench: Bench) -> Path:
    """One store, two sessions: a 1 GB and a 1 MB transcript ending in the same messages."""
    big = size(bench, BIG_TRANSCRIPT_BYTES)

    def build(root: Path) -> None:
        store = {
            "agent:main:big": {"sessionId": "big-transcript", "updatedAt": datagen.BASE_MS},
            "agent:main:small": {"sessionId": "small-transcript", "updatedAt": datagen.BASE_MS - 1},
        }
        d = datagen.write_store(root, "main", store).parent
        datagen.write_transcript(d / "big-transcript.jsonl", "big-transcript", big)
        datagen.write_transcript(
            d / "small-transcript.jsonl", "small-transcript", SMALL_TRANSCRIPT_BYTES
        )

    return dataset(
        bench.data, "transcripts", {"big": big, "small": SMALL_TRANSCRIPT_BYTES, "v": 2}, build
    )


def human_bytes(n: int) -> str:
    return f"{n / (1 << 30):.0f} GB" if n >= 1 << 30 else f"{n / (1 << 20):.0f} MB"


@case
def list_startup(bench: Bench) -> list[Row]:
    """list --json on 10 sessions vs python -c 'import typer' (start-up cost)."""
    state = small_state(bench)
    cmd = bench.sessiontool("--state-dir", str(state), "list", "--json")
    assert bench.json_output(cmd)["count"] == 10
    runs = bench.n(21, 7)
    ours, typer = bench.compare(cmd, bench.py("import typer"), runs)
    r = ratio(ours.median, typer.median)
    return [
        Row(
            f"`list --json`, 10 sessions (median of {runs})",
            f"{ms(ours.median)} = {r:.2f}× `import typer` ({ms(typer.median)}); "
            f"CPU {ms(ours.median_cpu)} vs {ms(typer.median_cpu)}",
            "≤ 1.5×",
            r <= 1.5,
        )
    ]


@case
def list_many(bench: Bench) -> list[Row]:
    """list --json --all-agents --limit all over 10,000 sessions: time and memory."""
    state = many_state(bench)
    n = size(bench, MANY_SESSIONS)
    cmd = bench.sessiontool(
        "--state-dir", str(state), "list", "--json", "--all-agents", "--limit", "all"
    )
    assert bench.json_output(cmd)["count"] == n
    runs = bench.n(9, 3)
    s = bench.measure(cmd, runs)
    label = f"`list --json --all-agents --limit all`, {n:,} sessions in {len(AGENTS)} agents"
    return [
        Row(
            f"{label} (median of {runs})",
            f"{ms(s.median)} (CPU {ms(s.median_cpu)})",
            "< 0.5 s",
            s.median < 0.5,
        ),
        Row(f"{label}: peak RSS", mb(s.peak_rss), "< 150 MB", s.peak_rss < 150e6),
    ]


@case
def list_big_store(bench: Bench) -> list[Row]:
    """list --json on a ~100 MB sessions.json vs json.load of the same file."""
    state, n = big_store_state(bench)
    store = state / "agents" / "main" / "sessions" / "sessions.json"
    cmd = bench.sessiontool("--state-dir", str(state), "list", "--json")
    assert bench.json_output(cmd)["count"] == min(200, n)
    baseline = bench.py(f"import json; json.load(open({str(store)!r}))")
    runs = bench.n(5, 3)
    ours, base = bench.compare(cmd, baseline, runs)
    r = ratio(ours.median, base.median)
    label = f"`list --json`, {human_bytes(store.stat().st_size)} sessions.json ({n:,} entries)"
    # At --quick size, start-up outweighs parsing and the ratio says little: reported only.
    return [
        Row(
            f"{label} (median of {runs})",
            f"{ms(ours.median)} = {r:.2f}× `json.load` ({ms(base.median)}); "
            f"CPU {ms(ours.median_cpu)} vs {ms(base.median_cpu)}",
            "≤ 1.5× (at 100 MB)",
            None if bench.quick else r <= 1.5,
        ),
        Row(f"{label}: peak RSS", f"{mb(ours.peak_rss)} (json.load: {mb(base.peak_rss)})"),
    ]


@case
def history_big_transcript(bench: Bench) -> list[Row]:
    """history --json --limit 20 on a 1 GB vs a 1 MB transcript: reads only the tail."""
    state = transcript_state(bench)
    sd = ("--state-dir", str(state))
    big = bench.sessiontool(*sd, "history", "agent:main:big", "--json", "--limit", "20")
    small = bench.sessiontool(*sd, "history", "agent:main:small", "--json", "--limit", "20")
    assert len(bench.json_output(big)["messages"]) == 20
    assert bench.json_output(big)["messages"] == bench.json_output(small)["messages"]
    runs = bench.n(15, 5)
    s_big, s_small = bench.compare(big, small, runs)
    r = ratio(s_big.median, s_small.median)
    size_big = (state / "agents" / "main" / "sessions" / "big-transcript.jsonl").stat().st_size
    label = f"`history --json --limit 20`, {human_bytes(size_big)} vs 1 MB transcript"
    return [
        Row(
            f"{label} (median of {runs})",
            f"{ms(s_big.median)} vs {ms(s_small.median)} = {r:.2f}×; "
            f"CPU {ms(s_big.median_cpu)} vs {ms(s_small.median_cpu)}",
            "≤ 1.3×",
            r <= 1.3,
        ),
        Row(
            f"{label}: peak RSS ({human_bytes(size_big)})",
            mb(s_big.peak_rss),
            "< 60 MB",
            s_big.peak_rss < 60e6,
        ),
    ]
