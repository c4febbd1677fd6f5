"""What a run sees of a JSONL transcript once it has a `compaction` entry, as OpenClaw builds a
session's context: the latest compaction's `summary` (as one message), then the messages from
its `firstKeptEntryId` on, then everything after it. A transcript without one is its messages.

OpenClaw's compaction entry (its session manager's `appendCompaction`):
`{"type": "compaction", "id", "parentId", "timestamp", "summary", "firstKeptEntryId",
"tokensBefore", "tokensAfter"?, "details"?, "fromHook"?}`; the full history stays in the file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson

from sessiontool.state.transcript import iter_lines_reverse

Message = dict[str, Any]
SUMMARY_PREFIX = "The conversation so far, summarized:\n\n"


def summary_message(summary: str, ts: Any = None) -> Message:
    """The compaction's summary as the message a runner gets in place of what it replaced."""
    msg: Message = {"role": "user", "content": [{"type": "text", "text": SUMMARY_PREFIX + summary}]}
    if isinstance(ts, int | float):
        msg["timestamp"] = ts
    return msg


def _parse(raw: bytes) -> dict[str, Any] | None:
    """One line's entry: orjson first (a third of `json`'s time per line, which a run's
    context and a compaction pay for every message), `json` for what orjson refuses (NaN and
    infinities, lone surrogates, deep nesting), so that no line it read is dropped now. An
    integer past 64 bits comes back a float from orjson, as OpenClaw (JavaScript) reads it."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        try:
            obj = json.loads(raw)
        except (ValueError, RecursionError):
            return None
    return obj if isinstance(obj, dict) else None


def read_context(
    path: Path, limit: int | None = None
) -> tuple[list[tuple[str | None, Message]], dict[str, Any] | None]:
    """(the messages a run sees, oldest first, each with its entry id; the compaction entry
    they start after, or None). With `limit`, at most that many of the newest messages (a
    compaction further back than those is not reached: its summary is left out). Read from the end: a transcript compacted long ago
    costs what its kept part costs."""
    out: list[tuple[str | None, Message]] = []
    compaction: dict[str, Any] | None = None
    keep_from: str | None = None
    try:
        for raw, _terminated in iter_lines_reverse(path):
            if not raw.strip():
                continue
            obj = _parse(raw)
            if obj is None:
                continue
            kind = obj.get("type")
            if kind == "compaction" and compaction is None:
                compaction = obj
                first = obj.get("firstKeptEntryId")
                keep_from = first if isinstance(first, str) else None
                if keep_from is None:
                    break
                continue
            if kind != "message" or not isinstance(obj.get("message"), dict):
                continue
            eid = obj.get("id")
            out.append((eid if isinstance(eid, str) else None, obj["message"]))
            if compaction is not None and eid == keep_from:
                break
            if limit is not None and len(out) >= limit:
                break
    except (FileNotFoundError, IsADirectoryError):
        return [], None
    out.reverse()
    return out, compaction


def context_messages(path: Path, limit: int | None = None) -> list[Message]:
    """The messages a run sees (`read_context`), the summary first when there is one."""
    msgs, compaction = read_context(path, limit)
    plain = [m for _, m in msgs]
    if compaction is not None and isinstance(compaction.get("summary"), str):
        return [summary_message(compaction["summary"]), *plain]
    return plain
