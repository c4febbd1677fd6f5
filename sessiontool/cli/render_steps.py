"""The terminal tables and TSV rows of `usage --by tool` and `usage --by turn KEY` (beside
render.py, which is full)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sessiontool.cli.render import Look, bar, compact_count, console, table

TOOL_COLUMNS = ("calls", "errors", "turns", "input", "output", "cacheRead", "cacheWrite", "cost")
TURN_COLUMNS = ("input", "output", "cacheRead", "cacheWrite", "cost")


def _iso(ms: Any) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(int(ms) / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _usd(v: Any) -> str:
    return f"{float(v):.4f}"


def tool_cells(result: Mapping[str, Any]) -> list[list[Any]]:
    """No header: tool, calls, errors, turns, input, output, cacheRead, cacheWrite, cost;
    TOTAL last."""
    out = []
    for r in [*result["rows"], {"tool": "TOTAL", **result["total"]}]:
        out.append([r["tool"], *(r[c] for c in TOOL_COLUMNS[:-1]), _usd(r["cost"])])
    return out


def turn_cells(result: Mapping[str, Any]) -> list[list[Any]]:
    """No header: turn, time (ISO, UTC), model, input, output, cacheRead, cacheWrite, cost,
    tools (comma-separated); TOTAL last."""
    out = []
    for r in result["rows"]:
        nums = [r[c] for c in TURN_COLUMNS[:-1]]
        out.append(
            [r["turn"], _iso(r["time"]), r["model"], *nums, _usd(r["cost"]), ",".join(r["tools"])]
        )
    t = result["total"]
    out.append(["TOTAL", "", "", *(t[c] for c in TURN_COLUMNS[:-1]), _usd(t["cost"]), ""])
    return out


def tool_table(look: Look, result: Mapping[str, Any]) -> None:
    rows = [
        [r["tool"], r["calls"], r["errors"], f"{r['turns']:g}"]
        + [compact_count(r[c]) for c in ("input", "output", "cacheRead", "cacheWrite")]
        + ["$" + _usd(r["cost"])]
        for r in [*result["rows"], {"tool": "TOTAL", **result["total"]}]
    ]
    columns = ["TOOL", "CALLS", "ERRORS", "TURNS", "INPUT", "OUTPUT", "CACHE READ", "CACHE WRITE"]
    table(look, [*columns, "COST"], rows, {"TOOL": "whole", "COST": "whole"})


def turn_table(look: Look, result: Mapping[str, Any]) -> None:
    """One line per turn with a bar of its cost (of tokens where nothing was priced)."""
    t = result["total"]

    def measure(r: Mapping[str, Any]) -> float:
        if t["cost"] > 0:
            return float(r["cost"])
        return float(r["input"] + r["output"] + r["cacheRead"] + r["cacheWrite"])

    top = max((measure(r) for r in result["rows"]), default=0)
    width = max(8, min(24, console(look).width - 110))
    rows = [
        [r["turn"], _iso(r["time"]), r["model"]]
        + [compact_count(r[c]) for c in ("input", "output", "cacheRead", "cacheWrite")]
        + ["$" + _usd(r["cost"]), bar(measure(r), top, width), ", ".join(r["tools"])]
        for r in result["rows"]
    ]
    rows.append(
        ["TOTAL", "", ""]
        + [compact_count(t[c]) for c in ("input", "output", "cacheRead", "cacheWrite")]
        + ["$" + _usd(t["cost"]), "", ""]
    )
    columns = ["TURN", "TIME (UTC)", "MODEL", "INPUT", "OUTPUT", "CACHE READ", "CACHE WRITE"]
    table(look, [*columns, "COST", "BAR", "TOOLS"], rows, {"TIME (UTC)": "whole", "COST": "whole"})
