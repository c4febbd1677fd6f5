"""`diff A B` and `diff --runs R1 R2`: two sessions (or the turns of two runs) side by side.

Each side is read through its own store's reader (`history`, tools included), so an OpenClaw
session compares with a sessiontool one, a SQLite-era store with a JSONL one. What is compared
is each side's sequence of steps: a user message, a tool call (its name and arguments), a reply
(an assistant message's text); tool results are outputs, not choices, and are left out. The
first divergence is the first step where the two differ (or where one side ends). Beside it:
turns, tokens, cost (priced as `usage` prices), duration and the tool-call sequences."""

from __future__ import annotations

import json
from typing import Any

from sessiontool.context import Context
from sessiontool.errors import UsageError
from sessiontool.sessions.history import history, message_ts
from sessiontool.state.prices import prices_of, usage_cost

TOKENS = ("input", "output", "cacheRead", "cacheWrite")
_TEXT_MAX = 2000  # a step's text in the result (the first divergence's in full)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            b["text"]
            for b in content
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        )
    return ""


def _assistant_steps(msg: dict[str, Any], ts: int | None) -> list[dict[str, Any]]:
    out = []
    content = msg.get("content")
    text = _text(content).strip()
    if text:
        out.append({"kind": "reply", "text": text, "ts": ts})
    if isinstance(content, list):
        for b in content:
            if isinstance(b, dict) and b.get("type") == "toolCall":
                args = json.dumps(b.get("arguments"), sort_keys=True, ensure_ascii=False)
                name = str(b.get("name") or "?")
                out.append({"kind": "toolCall", "text": f"{name} {args}", "tool": name, "ts": ts})
    return out


def steps_of(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The comparable steps of a transcript's messages, in order."""
    out: list[dict[str, Any]] = []
    for m in messages:
        role, ts = m.get("role"), message_ts(m)
        if role == "user":
            text = _text(m.get("content")).strip() or str(m.get("text") or "").strip()
            out.append({"kind": "user", "text": text, "ts": ts})
        elif role == "assistant":
            out += _assistant_steps(m, ts)
    return out


def side(
    ctx: Context, messages: list[dict[str, Any]], name: str, session_id: str | None
) -> dict[str, Any]:
    """One side's figures: its steps, turns, tokens, cost, duration and tool calls."""
    prices = prices_of(ctx.config.providers)
    tokens = dict.fromkeys(TOKENS, 0)
    cost, turns = 0.0, 0
    times = [t for t in (message_ts(m) for m in messages) if t is not None]
    for m in messages:
        usage = m.get("usage")
        if m.get("role") != "assistant" or not isinstance(usage, dict):
            continue
        if m.get("stopReason") == "injected":
            continue
        turns += 1
        for k in TOKENS:
            v = usage.get(k)
            tokens[k] += int(v) if isinstance(v, int | float) and not isinstance(v, bool) else 0
        cost += usage_cost(prices, str(m.get("provider") or ""), str(m.get("model") or ""), usage)
    steps = steps_of(messages)
    return {
        "session": name,
        "sessionId": session_id,
        "messages": len(messages),
        "turns": turns,
        "tokens": {**tokens, "total": sum(tokens.values())},
        "cost": round(cost, 6),
        "durationMs": (max(times) - min(times)) if times else 0,
        "tools": [s["tool"] for s in steps if s["kind"] == "toolCall"],
        "steps": steps,
    }


def divergence(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The first step where the two sides differ: its index, what kind of step it is on each
    side (None: that side had ended), and the two texts; None when they are the same."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x["kind"] != y["kind"] or x["text"] != y["text"]:
            return {
                "step": i + 1,
                "aKind": x["kind"],
                "bKind": y["kind"],
                "a": x["text"],
                "b": y["text"],
            }
    if len(a) == len(b):
        return None
    i = min(len(a), len(b))
    longer = a if len(a) > len(b) else b
    return {
        "step": i + 1,
        "aKind": a[i]["kind"] if len(a) > i else None,
        "bKind": b[i]["kind"] if len(b) > i else None,
        "a": longer[i]["text"] if longer is a else None,
        "b": longer[i]["text"] if longer is b else None,
    }


def _short(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"kind": s["kind"], "text": s["text"][:_TEXT_MAX], "ts": s["ts"]} for s in steps]


def compare(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """The diff result of two sides (`side`): both, and their first divergence."""
    first = divergence(a["steps"], b["steps"])
    a, b = {**a, "steps": _short(a["steps"])}, {**b, "steps": _short(b["steps"])}
    same_tools = a["tools"] == b["tools"]
    return {"a": a, "b": b, "divergence": first, "same": first is None, "sameTools": same_tools}


def diff_sessions(ctx: Context, key_a: str, key_b: str) -> dict[str, Any]:
    """Two sessions, whole (their transcripts since their last reset)."""
    out = []
    for key in (key_a, key_b):
        h = history(ctx, key, limit=None, include_tools=True)
        out.append(side(ctx, list(h.messages), h.session_key, h.session_id))
    return {"kind": "sessions", **compare(out[0], out[1])}


def diff_runs(ctx: Context, run_a: str, run_b: str) -> dict[str, Any]:
    """Two runs: the messages of each run's session from its start to its end (a rerun and
    its original, two children of one spawn)."""
    from sessiontool.runs.control import full_run_id
    from sessiontool.runs.submit import get_run

    out = []
    for given in (run_a, run_b):
        rec = get_run(ctx, full_run_id(ctx, given))
        start, end = rec.get("startedAt"), rec.get("endedAt")
        if start is None:
            raise UsageError(f"run {rec['runId']} has not started: nothing to compare")
        h = history(ctx, rec["sessionKey"], limit=None, include_tools=True, since_ms=int(start))
        msgs = [
            m
            for m in h.messages
            if (t := message_ts(m)) is None or (t >= start and (end is None or t <= end))
        ]
        s = side(ctx, msgs, h.session_key, h.session_id)
        s.update(runId=rec["runId"], status=rec.get("status"))
        if end is not None:
            s["durationMs"] = int(end) - int(start)
        out.append(s)
    return {"kind": "runs", **compare(out[0], out[1])}
