"""Reading a config's files: each parsed (JSON5, every error naming the file and where in it),
the two layers merged (agents by id), and what is said of a file before any value is checked:
its unknown keys, its near misses of sessiontool's own keys, a second agent of one id.

Apart from config.py, which holds the merged config and checks its values, because this part
knows nothing of what a value means."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sessiontool.errors import ConfigError
from sessiontool.state.jsonio import loads_tolerant
from sessiontool.state.keys import normalize_agent_id


def load_file(path: Path) -> dict[str, Any]:
    try:
        data = path.read_bytes()
    except FileNotFoundError as exc:
        raise ConfigError(f"config file not found: {path}") from exc
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
    if not data.strip():
        return {}
    try:
        parsed = loads_tolerant(data)
    except (ValueError, RecursionError) as exc:
        raise ConfigError(
            f"config file {path} is not valid JSON5: {_json5_error(data, exc)}"
        ) from exc
    if not isinstance(parsed, dict):
        raise ConfigError(f"config file {path}: expected an object at the top level")
    return parsed


def _json5_error(data: bytes, exc: BaseException) -> str:
    """Where a config file stops being JSON5. The fast path's error is the strict JSON
    parser's (it fails at the first comment or unquoted key, usually line 1), so the file is
    parsed again with json5 alone to name the real line and column."""
    try:
        import json5

        json5.loads(data.decode("utf-8", errors="replace"))
    except RecursionError:
        return "nested too deeply"
    except ValueError as j5:
        text = str(j5)
        m = re.match(r"^<string>:(\d+) (.*) at column (\d+)$", text)
        if m:
            return f"line {m.group(1)} column {m.group(3)}: {m.group(2)}"
        return text.removeprefix("<string>:")
    except Exception:  # noqa: BLE001 - json5 failing in another way: keep the first error
        pass
    return str(exc)


def merge(base: Any, over: Any, path: str = "") -> Any:
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, v in over.items():
            out[k] = merge(base.get(k), v, f"{path}.{k}" if path else k) if k in base else v
        return out
    if path == "agents.list" and isinstance(base, list) and isinstance(over, list):
        return merge_agent_list(base, over)
    return over


def merge_agent_list(base: list[Any], over: list[Any]) -> list[Any]:
    """Entries merge by agent id; new ids are appended."""
    out = [dict(a) if isinstance(a, dict) else a for a in base]
    index: dict[str, int] = {}
    for i, a in enumerate(out):
        if isinstance(a, dict):
            index.setdefault(agent_id(a), i)
    mine: set[str] = set()  # a second entry of one id in the same file is ignored (a warning)
    for item in over:
        if not isinstance(item, dict):
            out.append(item)
            continue
        aid = agent_id(item)
        if aid in mine:
            continue
        mine.add(aid)
        if aid in index:
            out[index[aid]] = merge(out[index[aid]], item, "agents.list[]")
        else:
            index[aid] = len(out)
            out.append(item)
    return out


def agent_id(item: Mapping[str, Any]) -> str:
    return normalize_agent_id(item.get("id") if isinstance(item.get("id"), str) else None)


def duplicate_agents(layer: Mapping[str, Any]) -> list[str]:
    """`agents.list[3]` whose id an earlier entry of the same file has: one sentence each,
    naming both (the first is used)."""
    agents = layer.get("agents")
    items = agents.get("list") if isinstance(agents, dict) else None
    first: dict[str, int] = {}
    out = []
    listed = items if isinstance(items, list) else []
    for i, item in enumerate(listed):
        if not isinstance(item, dict):
            continue
        aid = agent_id(item)
        if aid in first:
            j = first[aid]
            out.append(
                f"agents.list[{i}] (id {item.get('id')!r}) has the id of agents.list[{j}] "
                f"(id {listed[j].get('id')!r}): agents.list[{i}] is ignored"
            )
        else:
            first[aid] = i
    return out


# sessiontool's own keys inside OpenClaw's sections. The sections hold OpenClaw's keys too, which
# sessiontool does not all know, so a key there is reported only when it is a near miss of one
# of these (`runer`): a typo must not quietly leave the demo agent answering.
OWN_NESTED_KEYS = ("runner",)


def own_key_typos(layer: Mapping[str, Any]) -> list[str]:
    import difflib

    agents = layer.get("agents")
    if not isinstance(agents, dict):
        return []
    sections: list[tuple[str, Any]] = [("agents.defaults", agents.get("defaults"))]
    items = agents.get("list")
    if isinstance(items, list):
        sections += [(f"agents.list[{i}]", item) for i, item in enumerate(items)]
    out = []
    for where, section in sections:
        if not isinstance(section, dict):
            continue
        for k in section:
            if not isinstance(k, str) or k in OWN_NESTED_KEYS:
                continue
            close = difflib.get_close_matches(k.lower(), OWN_NESTED_KEYS, n=1, cutoff=0.75)
            if close:
                out.append(
                    f"unknown config key '{where}.{k}' (ignored): did you mean '{close[0]}'?"
                )
    return out


def unknown_keys(layer: Mapping[str, Any]) -> list[str]:
    """The keys of sessiontool's file that no row of the config table names, in the sections
    whose every key sessiontool knows (the top level, `sessiontool`, `sessiontool.delivery`);
    OpenClaw's sections hold keys of its own."""
    from sessiontool.state.config_keys import CLOSED, children

    out = []
    for section in CLOSED:
        node: Any = layer
        for part in section.split(".") if section else ():
            node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            continue
        known = children(section)
        for k in node:
            if k not in known:
                name = f"{section}.{k}" if section else k
                out.append(f"unknown config key {name!r} (ignored)")
    return out
