"""The floor under a command that lists a store: one parse of sessions.json with the standard
library's json (what sessiontool parses it with), and with `--stat` one stat of each listed
session's transcript (what a full check of the search index must at least do).

    python bench/floor_store.py SESSIONS.json [--stat]

Prints one JSON object: the entries parsed and the transcripts stat'ed."""

from __future__ import annotations

import gc
import json
import os
import sys
from pathlib import Path


def main(args: list[str]) -> None:
    path = Path(args[0])
    gc.disable()  # as sessiontool parses a store: JSON holds no cycles
    store = json.loads(path.read_bytes())
    stated = 0
    if "--stat" in args:
        d = os.fspath(path.parent)
        for entry in store.values():
            sid = entry.get("sessionId") if isinstance(entry, dict) else None
            if isinstance(sid, str):
                try:
                    os.stat(f"{d}/{sid}.jsonl")
                except OSError:
                    pass
                stated += 1
    print(json.dumps({"entries": len(store), "stated": stated}))


if __name__ == "__main__":
    main(sys.argv[1:])
