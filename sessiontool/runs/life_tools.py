"""OpenClaw 2026.9.6's `sessions` and `session_status` tools, the handlers and schemas (runs/
tools.py builds their `ToolDef`s, as it does its own): what `archive`, `restore`, `pin`,
`session --model/--thinking`, `reset` and `delete` do, asked by a session's model or an MCP
client. This module imports nothing of tools.py (it is imported by it).

- `sessions`: `action: "patch"` (`archived`, `pinned`, `model`, `thinkingLevel`; the
  caller's own session by default), `"reset"`, `"delete"`; `expectedSessionId` refuses another
  generation, and archiving or restoring another session needs it, as OpenClaw's tool rules.
  Resetting or deleting the caller's own session is refused (its run is the caller).
- `session_status`: the `/status` card of a session (usage, model, run state); `model` sets
  its model override, `model: "default"` clears it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sessiontool.context import Context
from sessiontool.errors import ForbiddenError, UsageError
from sessiontool.state import keys

NAMES = ("sessions", "session_status")
_KEY = {
    "type": "string",
    "description": "The session: a key from sessions_list, or 'current' (the default) for the "
    "caller's own session.",
}
_EXPECTED = {
    "type": "string",
    "description": "Refuse unless the session is still this sessionId (from sessions_list); "
    "required to archive or restore another session.",
}


def _target(ctx: Context, args: Mapping[str, Any]) -> str:
    key = args.get("sessionKey")
    if key in (None, "", "current"):
        own = ctx.requester.session_key
        if own is None:
            raise UsageError("sessionKey is required (this caller has no session of its own)")
        return own
    return str(key)


def _patch_of(ctx: Context, args: Mapping[str, Any], agent_id: str) -> dict[str, Any]:
    from sessiontool.runs.session_patch import is_default_word, normalize_thinking

    patch: dict[str, Any] = {}
    for name in ("archived", "pinned"):
        if name in args:
            patch[name] = bool(args[name])
    if "model" in args:
        model = args["model"]
        if is_default_word(str(model)):
            patch["model"] = None
        else:
            from sessiontool.runs.submit import validate_model

            patch["model"] = validate_model(ctx.config, str(model), agent_id)
    if "thinkingLevel" in args:
        level = args["thinkingLevel"]
        patch["thinkingLevel"] = (
            None if is_default_word(str(level)) else normalize_thinking(str(level))
        )
    return patch


def sessions_tool(ctx: Context, args: Mapping[str, Any], opts: Any) -> dict[str, Any]:
    """The `sessions` tool (OpenClaw's): patch, reset or delete one visible session."""
    from sessiontool.runs.sessionlife import check_generation, locate

    action = args.get("action")
    key = _target(ctx, args)
    expect = args.get("expectedSessionId")
    archiving = action == "patch" and "archived" in args
    r, writer = locate(ctx, "sessions", key, None, archived_too=archiving)
    check_generation(ctx, r, expect)
    own = ctx.requester.session_key == r.key
    if action in ("reset", "delete"):
        if own:
            raise ForbiddenError(f"sessions: a session cannot {action} itself")
        if action == "delete" and keys.kind_of(r.key, r.entry, ctx.config.main_key) == "main":
            raise ForbiddenError(f"Cannot delete the main session ({ctx.display(r.key)}).")
        done: dict[str, Any] = dict(
            writer.reset(ctx, r) if action == "reset" else writer.delete(ctx, r)
        )
        return {"status": "ok", "action": action, **done}
    return _patch(ctx, args, r, writer=writer, expect=expect)


def _patch(
    ctx: Context, args: Mapping[str, Any], r: Any, writer: Any, expect: Any
) -> dict[str, Any]:
    from sessiontool.runs.sessionlife import refuse_busy, result_of

    patch = _patch_of(ctx, args, r.agent_id)
    if "archived" in patch:
        if expect is None and ctx.requester.session_key != r.key:
            raise UsageError("expectedSessionId is required to archive or restore another session")
        if patch["archived"] and keys.kind_of(r.key, r.entry, ctx.config.main_key) == "main":
            raise ForbiddenError(f"Cannot archive the main session ({ctx.display(r.key)}).")
        if patch["archived"]:
            refuse_busy(ctx, r, "sessions")
    if "label" in args:
        entry = writer.set_label(ctx, r, _label(str(args["label"])))["entry"]
        if not patch:
            return {"status": "ok", "action": "patch", **result_of(ctx, r, writer, entry)}
    if not patch:
        raise UsageError("sessions patch: nothing to change (archived, pinned, model, ...)")
    entry = writer.patch_session(ctx, r, patch, expect or r.session_id)
    return {"status": "ok", "action": "patch", **result_of(ctx, r, writer, entry)}


def _label(text: str) -> str:
    """OpenClaw's label rule (as `label` checks it): trimmed, 1 to 64 characters, no controls."""
    label = text.strip()
    if not label or len(label) > 64 or any(ord(c) < 0x20 or c == "\x7f" for c in label):
        raise UsageError("a label is 1 to 64 characters, without control characters")
    return label


def session_status(ctx: Context, args: Mapping[str, Any], opts: Any) -> dict[str, Any]:
    """The `session_status` tool: the session's card; `model` sets (or clears) its override."""
    from sessiontool.runs.sessionlife import busy_run, locate, result_of
    from sessiontool.sessions.listing import total_tokens

    key = _target(ctx, args)
    r, writer = locate(ctx, "session_status", key, None)
    entry = r.entry or {}
    if "model" in args:
        entry = writer.patch_session(ctx, r, _patch_of(ctx, args, r.agent_id), None) or entry
    card = result_of(ctx, r, writer, entry)
    run_id = busy_run(ctx, r.key)
    state = "idle"
    if run_id is not None:
        from sessiontool.runs import records

        state = str(records.read_record(ctx.paths, run_id).get("status") or "queued")
    usage = {
        n: entry[n]
        for n in ("inputTokens", "outputTokens", "contextTokens", "compactionCount")
        if isinstance(entry.get(n), int | float)
    }
    tt = total_tokens(entry)
    if tt is not None:
        usage["totalTokens"] = tt
    used = card["model"] or entry.get("model")
    out: dict[str, Any] = {
        "status": "ok",
        **card,
        "model": used,
        "modelOverride": card["model"],
        "usage": usage,
        "updatedAt": entry.get("updatedAt"),
        "run": {"state": state, **({"runId": run_id} if run_id else {})},
    }
    out["text"] = _card_text(out)
    return out


def _card_text(c: Mapping[str, Any]) -> str:
    """The card as OpenClaw's `/status` words it, one fact a line."""
    usage = c["usage"]
    lines = [
        f"Session: {c['sessionKey']}",
        f"Model: {c['model'] or 'default'}" + (" (session override)" if c["modelOverride"] else ""),
        f"Thinking: {c['thinkingLevel'] or 'default'}",
        f"Tokens: {usage.get('totalTokens', 0)} (in {usage.get('inputTokens', 0)}, "
        f"out {usage.get('outputTokens', 0)})",
        f"Run: {c['run']['state']}" + (f" ({c['run']['runId']})" if c["run"].get("runId") else ""),
    ]
    if usage.get("compactionCount"):
        lines.append(f"Compactions: {usage['compactionCount']}")
    if c["archived"]:
        lines.append("Archived")
    return "\n".join(lines)


def _output(more: dict[str, Any]) -> dict[str, Any]:
    """A successful result's schema (MCP's outputSchema)."""
    props = {"status": {"type": "string"}, "sessionKey": {"type": "string"}, **more}
    return {"type": "object", "properties": props, "required": ["status", "sessionKey"]}


SESSIONS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {
            "type": "string",
            "enum": ["patch", "reset", "delete"],
            "description": "patch (the fields below), reset (a new conversation) or delete.",
        },
        "sessionKey": _KEY,
        "expectedSessionId": _EXPECTED,
        "archived": {"type": "boolean", "description": "patch: archive (true) or restore."},
        "pinned": {"type": "boolean", "description": "patch: pin (root sessions only)."},
        "model": {
            "type": "string",
            "description": "patch: the session's model; 'default' clears it.",
        },
        "thinkingLevel": {
            "type": "string",
            "description": "patch: off, minimal, low, medium, high, xhigh, adaptive, max, "
            "ultra; 'default' clears it.",
        },
        "label": {
            "type": "string",
            "description": "patch: the session's label (at most 64 characters, one session's).",
        },
    },
    "required": ["action"],
    "additionalProperties": False,
}
STATUS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "sessionKey": _KEY,
        "model": {
            "type": "string",
            "description": "Set this session's model override ('default' clears it).",
        },
    },
    "additionalProperties": False,
}
DEFS: tuple[dict[str, Any], ...] = (
    {
        "name": "sessions",
        "title": "Manage a session",
        "description": (
            "Patch (archive/restore, pin, model, thinking level), reset or delete a "
            "visible session; the caller's own session by default (reset and delete never it). "
            "Result: {status, action, sessionKey, sessionId, archived, pinned, model, "
            "thinkingLevel, entry}."
        ),
        "input_schema": SESSIONS_SCHEMA,
        "output_schema": _output(
            {"action": {"type": "string"}, "entry": {"type": ["object", "null"]}}
        ),
        "handler": sessions_tool,
        "read_only": False,
        "destructive": True,
    },
    {
        "name": "session_status",
        "title": "Session status",
        "description": (
            "A session's status card (/status): model, thinking level, token usage, run "
            "state; `model` sets its model override, 'default' clears it. Result: {status, "
            "sessionKey, sessionId, model, modelOverride, thinkingLevel, usage, run, text}."
        ),
        "input_schema": STATUS_SCHEMA,
        "output_schema": _output(
            {"usage": {"type": "object"}, "run": {"type": "object"}, "text": {"type": "string"}}
        ),
        "handler": session_status,
        "read_only": False,
        "idempotent": True,
    },
)
