"""The read side: `list` and `history` start-up, scale and memory."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import datagen
from harness import (
    Bench,
    Row,
    Sample,
    case,
    dataset,
    pair_ratios,
    ratio,
    ratio_spread,
)

# full size, --quick size
MANY_SESSIONS = (10_000, 1_000)
HUGE_SESSIONS = (100_000, 10_000)
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


def many_state(bench: Bench, *, huge: bool = False) -> Path:
    """10,000 real-sized entries (the fixtures' skillsSnapshot and all, ~5.7 KB each) across
    three agents; or (`huge`) 100,000 entries without the snapshot in one agent."""
    n = size(bench, HUGE_SESSIONS if huge else MANY_SESSIONS)
    agents = AGENTS[:1] if huge else AGENTS

    def build(root: Path) -> None:
        per = math.ceil(n / len(agents))
        left = n
        for i, agent in enumerate(agents):
            k = min(per, left)
            datagen.write_store(
                root, agent, datagen.make_entries(agent, k, snapshot=not huge, seed=10 + i)
            )
            left -= k

    name = "huge" if huge else "many"
    params = {"sessions": n, "agents": list(agents), "snapshot": not huge, "v": 2}
    return dataset(bench.data, name, params, build)


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
        bench.data, "transcripts", {"big": big, "small": SMALL_TRANSCRIPT_BYTES, "v": 3}, build
    )


def human_bytes(n: int) -> str:
    return f"{n / (1 << 30):.0f} GB" if n >= 1 << 30 else f"{n / (1 << 20):.0f} MB"


def median_ratio(a: Sample, b: Sample, what: str = "times") -> float:
    return statistics.median(pair_ratios(a, b, what))


def side_by_side(a: Sample, b: Sample) -> str:
    """Wall and CPU of two commands measured alternately, and their run-by-run ratios."""
    return (
        f"wall {a.spread()} vs {b.spread()} (min / median / max), ratio "
        f"{ratio_spread(pair_ratios(a, b))}; CPU {a.cpu_spread()} vs {b.cpu_spread()}, "
        f"ratio {ratio_spread(pair_ratios(a, b, 'cpu'))}"
    )


@case
def list_startup(bench: Bench) -> list[Row]:
    """list --json on 10 sessions vs python -c 'import typer' (start-up cost)."""
    state = small_state(bench)
    cmd = bench.sessiontool("--state-dir", str(state), "list", "--json")
    assert bench.json_output(cmd)["count"] == 10
    runs = bench.n(21, 7)
    ours, typer = bench.compare(cmd, bench.py("import typer"), runs)
    r = median_ratio(ours, typer)
    return [
        Row(
            f"`list --json`, 10 sessions vs `import typer` ({runs} runs each)",
            side_by_side(ours, typer),
            "≤ 1.2× (median)",
            r <= 1.2,
        )
    ]


# What a list row holds, for the floor below: read the stores, build the rows, encode them.
LIST_FLOOR = r"""
import json, os, sys, orjson
F = ("label", "displayName", "updatedAt", "sessionId", "model", "contextTokens", "totalTokens",
     "thinkingLevel", "verboseLevel", "systemSent", "abortedLastRun", "sendPolicy",
     "lastChannel", "lastTo", "deliveryContext")
rows = []
for p in sys.argv[1:]:
    with open(p, "rb") as fh:
        store = json.loads(fh.read())
    d = os.path.dirname(p)
    for k, e in store.items():
        r = {"key": k}
        for f in F:
            if f in e:
                r[f] = e[f]
        r["transcriptPath"] = os.path.join(d, e["sessionId"] + ".jsonl")
        rows.append(r)
rows.sort(key=lambda r: r.get("updatedAt") or 0, reverse=True)
os.write(1, orjson.dumps({"count": len(rows), "sessions": rows}))
"""


def _list_vs_floor(bench: Bench, state: Path, n: int, label: str, runs: int) -> list[Row]:
    stores = sorted(str(p) for p in state.glob("agents/*/sessions/sessions.json"))
    cmd = bench.sessiontool(
        "--state-dir", str(state), "list", "--json", "--all-agents", "--limit", "all"
    )
    assert bench.json_output(cmd)["count"] == n
    assert bench.json_output([bench.python, "-c", LIST_FLOOR, *stores])["count"] == n
    ours, floor = bench.compare(cmd, [bench.python, "-c", LIST_FLOOR, *stores], runs)
    r = median_ratio(ours, floor)
    r_rss = ratio(ours.median_rss, floor.median_rss)
    return [
        Row(
            f"{label} vs its floor (json.loads + rows + orjson.dumps) ({runs} runs each)",
            side_by_side(ours, floor),
            "≤ 1.3× (median)",
            r <= 1.3,
        ),
        Row(
            f"{label}: peak RSS vs the floor",
            f"{ours.rss_spread()} vs {floor.rss_spread()} = {r_rss:.2f}× (medians)",
            "≤ 1.3×",
            r_rss <= 1.3,
        ),
    ]


@case
def list_many(bench: Bench) -> list[Row]:
    """list --json --all-agents --limit all: 10,000 real-sized sessions vs the floor."""
    n = size(bench, MANY_SESSIONS)
    label = f"`list --json --all-agents --limit all`, {n:,} real-sized sessions in 3 agents"
    return _list_vs_floor(bench, many_state(bench), n, label, bench.n(9, 3))


@case
def list_huge(bench: Bench) -> list[Row]:
    """list --json --limit all over 100,000 sessions (streamed) vs the floor."""
    n = size(bench, HUGE_SESSIONS)
    label = f"`list --json --limit all`, {n:,} sessions (no skillsSnapshot), one store"
    return _list_vs_floor(bench, many_state(bench, huge=True), n, label, bench.n(5, 3))


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
    r = median_ratio(ours, base)
    label = f"`list --json`, {human_bytes(store.stat().st_size)} sessions.json ({n:,} entries)"
    # At --quick size, start-up outweighs parsing and the ratio says little: reported only.
    return [
        Row(
            f"{label} vs `json.load` ({runs} runs each)",
            side_by_side(ours, base),
            "≤ 1.5× (at 100 MB)",
            None if bench.quick else r <= 1.5,
        ),
        Row(f"{label}: peak RSS", f"{ours.rss_spread()} (json.load: {base.rss_spread()})"),
    ]


def _tail_since(path: Path, back: int) -> str:
    """An ISO time that keeps the last `back` messages of `path` (their own timestamps)."""
    stamps = []
    with open(path, "rb") as fh:
        fh.seek(max(0, path.stat().st_size - 200_000))
        for line in fh.read().splitlines()[1:]:
            try:
                ts = json.loads(line)["message"]["timestamp"]
            except (ValueError, KeyError, TypeError):
                continue
            if isinstance(ts, int):
                stamps.append(ts)
    from datetime import UTC, datetime

    ts = stamps[-back]
    return datetime.fromtimestamp(ts / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.") + (
        f"{ts % 1000:03d}Z"
    )


@case
def history_big_transcript(bench: Bench) -> list[Row]:
    """history --limit 20 and --since on a 1 GB vs a 1 MB transcript: reads only the tail."""
    state = transcript_state(bench)
    sd = ("--state-dir", str(state))
    d = state / "agents" / "main" / "sessions"
    size_big = (d / "big-transcript.jsonl").stat().st_size
    size_small = (d / "small-transcript.jsonl").stat().st_size
    since = _tail_since(d / "small-transcript.jsonl", 6)
    rows: list[Row] = []
    for what, extra in (
        ("--limit 20", ("--limit", "20")),
        (f"--since {since}", ("--since", since)),
    ):
        big = bench.sessiontool(*sd, "history", "agent:main:big", "--json", *extra)
        small = bench.sessiontool(*sd, "history", "agent:main:small", "--json", *extra)
        got = bench.json_output(big)["messages"]
        assert got and got == bench.json_output(small)["messages"], what
        runs = bench.n(15, 5)
        s_big, s_small = bench.compare(big, small, runs)
        r = median_ratio(s_big, s_small)
        label = (
            f"`history --json {what}` ({len(got)} messages), {human_bytes(size_big)} vs "
            f"{size_small / (1 << 20):.2f} MB transcript"
        )
        rows += [
            Row(
                f"{label} ({runs} runs each)",
                side_by_side(s_big, s_small),
                "≤ 1.3× (median)",
                r <= 1.3,
            ),
            Row(
                f"{label}: peak RSS ({human_bytes(size_big)})",
                s_big.rss_spread(),
                "< 60 MB",
                s_big.peak_rss < 60e6,
            ),
        ]
    return rows


# -- JSON5 -------------------------------------------------------------------------------------


def _json5_text(value: object, indent: int = 0) -> str:
    """JSON5 as people write it: unquoted keys, a comment over each section, trailing commas."""
    pad = "  " * (indent + 1)
    if isinstance(value, dict):
        if not value:
            return "{}"
        out = ["{"]
        for k, v in value.items():
            key = k if k.isidentifier() else json.dumps(k)
            if isinstance(v, dict | list) and v:
                out.append(f"{pad}// {k}: see the docs for every setting")
            out.append(f"{pad}{key}: {_json5_text(v, indent + 1)},")
        return "\n".join(out) + "\n" + "  " * indent + "}"
    if isinstance(value, list):
        if not value:
            return "[]"
        items = [f"{pad}{_json5_text(v, indent + 1)}," for v in value]
        return "[\n" + "\n".join(items) + "\n" + "  " * indent + "]"
    return json.dumps(value)


def openclaw_config(target: int = 10_000) -> dict[str, object]:
    """An openclaw.json of about `target` bytes as JSON5: agents, providers, models, channels."""
    models = [
        {
            "id": f"model-{i}",
            "name": f"Model {i}",
            "contextWindow": 128000,
            "maxTokens": 8192,
            "cost": {"input": 0.5 + i / 10, "output": 1.5 + i / 10},
        }
        for i in range(40)
    ]
    cfg: dict[str, object] = {
        "gateway": {"mode": "local", "bind": "loopback", "port": 18789},
        "agents": {
            "defaults": {
                "workspace": "/srv/openclaw/workspace",
                "model": {"primary": "fake/model-0", "fallbacks": ["fake/model-1"]},
                "subagents": {"archiveAfterMinutes": 60},
            },
            "list": [{"id": "main", "default": True}],
        },
        "session": {"scope": "per-sender", "agentToAgent": {"maxPingPongTurns": 3}},
        "models": {"mode": "merge", "providers": {"fake": {"baseUrl": "http://127.0.0.1:1/v1"}}},
        "channels": {},
    }
    agents = cfg["agents"]["list"]  # type: ignore[index]
    providers = cfg["models"]["providers"]["fake"]  # type: ignore[index]
    providers["models"] = []
    i = 0
    while len(_json5_text(cfg)) < target:
        if i < len(models):
            providers["models"].append(models[i])
        agents.append(
            {"id": f"agent-{i}", "name": f"Helper {i}", "workspace": f"/srv/openclaw/ws-{i}"}
        )
        i += 1
    return cfg


def json5_states(bench: Bench) -> tuple[Path, Path]:
    """The 10-session state twice: with a 10 KB JSON5 openclaw.json, and the same as JSON."""
    cfg = openclaw_config()

    def build(as_json5: bool) -> object:
        def go(root: Path) -> None:
            store = datagen.make_entries("main", 10, snapshot=True, seed=1)
            datagen.write_store(root, "main", store)
            text = _json5_text(cfg) if as_json5 else json.dumps(cfg, indent=2)
            (root / "openclaw.json").write_text(text + "\n")

        return go

    params = {"bytes": len(_json5_text(cfg)), "v": 1}
    return (
        dataset(bench.data, "config-json5", params, build(True)),  # type: ignore[arg-type]
        dataset(bench.data, "config-json", params, build(False)),  # type: ignore[arg-type]
    )


@case
def json5_config(bench: Bench) -> list[Row]:
    """list --json with a 10 KB JSON5 openclaw.json vs the same config as plain JSON."""
    j5, js = json5_states(bench)
    a = bench.sessiontool("--state-dir", str(j5), "list", "--json")
    b = bench.sessiontool("--state-dir", str(js), "list", "--json")
    assert bench.output(a) == bench.output(b).replace(str(js), str(j5))
    runs = bench.n(21, 7)
    s5, sj = bench.compare(a, b, runs)
    r = median_ratio(s5, sj)
    kb = (j5 / "openclaw.json").stat().st_size / 1000
    return [
        Row(
            f"`list --json`, {kb:.0f} KB JSON5 openclaw.json vs the same as JSON ({runs} runs each)",
            side_by_side(s5, sj),
            "≤ 1.1× (median)",
            r <= 1.1,
        )
    ]


def trailing_comma_states(bench: Bench) -> tuple[Path, Path]:
    """A ~445 KB store (77 real-sized entries), and the same with one trailing comma (after
    the last field of the middle entry, so half the file follows it)."""

    def build(comma: bool) -> object:
        def go(root: Path) -> None:
            store = datagen.make_entries("main", 77, snapshot=True, seed=5)
            p = datagen.write_store(root, "main", store)
            if comma:
                text = p.read_text()
                mid = list(store)[len(store) // 2]
                at = text.index(json.dumps(mid))
                end = text.index("\n  },\n", at)  # the end of that entry's last field
                p.write_text(text[:end] + "," + text[end:])

        return go

    return (
        dataset(bench.data, "store-comma", {"n": 77, "v": 1}, build(True)),  # type: ignore[arg-type]
        dataset(bench.data, "store-plain", {"n": 77, "v": 1}, build(False)),  # type: ignore[arg-type]
    )


@case
def trailing_comma_store(bench: Bench) -> list[Row]:
    """list --json on a 445 KB store with one trailing comma vs the same store without it."""
    comma, plain = trailing_comma_states(bench)
    a = bench.sessiontool("--state-dir", str(comma), "list", "--json")
    b = bench.sessiontool("--state-dir", str(plain), "list", "--json")
    assert bench.output(a) == bench.output(b).replace(str(plain), str(comma))
    runs = bench.n(21, 7)
    sc, sp = bench.compare(a, b, runs)
    r = median_ratio(sc, sp)
    kb = (comma / "agents/main/sessions/sessions.json").stat().st_size / 1000
    return [
        Row(
            f"`list --json`, {kb:.0f} KB store with one trailing comma vs without ({runs} runs each)",
            side_by_side(sc, sp),
            "≤ 1.5× (median)",
            r <= 1.5,
        )
    ]
