"""Shell completion of session keys and run ids, straight from the state dir: this runs on every
Tab, so it reads the stores with the standard json module and never loads rich."""

from __future__ import annotations

import json
import os
from pathlib import Path


def _state_root() -> Path:
    from ..app import G
    from ..paths import resolve_state_dir

    return resolve_state_dir(G.state_dir)


def complete_keys(incomplete: str) -> list[str]:
    root = _state_root() / "agents"
    out: list[str] = []
    try:
        agents = os.listdir(root)
    except OSError:
        return out
    for agent in agents:
        try:
            with open(root / agent / "sessions" / "sessions.json", "rb") as fh:
                store = json.loads(fh.read())
        except (OSError, ValueError):
            continue
        if not isinstance(store, dict):
            continue
        for key in store:
            full = key if key.startswith("agent:") or key in ("global", "unknown") else f"agent:{agent}:{key}"
            if full in ("global", "unknown"):
                continue
            if full.startswith(incomplete) and full not in out:
                out.append(full)
    if "main".startswith(incomplete):
        out.insert(0, "main")
    return sorted(out)


def complete_run_ids(incomplete: str) -> list[str]:
    runs = _state_root() / "sessiontool" / "runs"
    try:
        names = os.listdir(runs)
    except OSError:
        return []
    return sorted(n[:-5] for n in names if n.endswith(".json") and n.startswith(incomplete))
