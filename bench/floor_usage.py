"""The floor under a cold `usage`: one pass of orjson over every transcript line that names a
message, summing each assistant message's usage fields (input, output, cacheRead, cacheWrite,
turns) — what any reader of the same totals must at least do, with nothing kept.

    python bench/floor_usage.py TRANSCRIPT.jsonl ...   (or a directory: its *.jsonl)

Prints one JSON object: the totals (the same keys as `usage --json`'s `total`, without cost and
runs) and the bytes read. Its totals must equal `usage --json`'s to the token."""

from __future__ import annotations

import sys
from pathlib import Path

import orjson


def main(args: list[str]) -> None:
    paths: list[Path] = []
    for a in args:
        p = Path(a)
        paths += sorted(p.glob("*.jsonl")) if p.is_dir() else [p]
    i = o = cr = cw = turns = size = 0
    for p in paths:
        with open(p, "rb") as fh:
            data = fh.read()
        size += len(data)
        for line in data.split(b"\n"):
            if b'"message"' not in line:
                continue
            try:
                obj = orjson.loads(line)
            except ValueError:
                continue
            msg = obj.get("message") if isinstance(obj, dict) else None
            if not isinstance(msg, dict) or msg.get("role") != "assistant":
                continue
            u = msg.get("usage")
            if isinstance(u, dict):
                turns += 1
                i += u.get("input") or 0
                o += u.get("output") or 0
                cr += u.get("cacheRead") or 0
                cw += u.get("cacheWrite") or 0
    total = {"input": i, "output": o, "cacheRead": cr, "cacheWrite": cw, "turns": turns}
    sys.stdout.write(orjson.dumps({"total": total, "bytes": size}).decode() + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
