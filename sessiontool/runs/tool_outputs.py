"""The output schema of each session tool (MCP's `outputSchema`): the shape of a successful
result, as OpenClaw 2026.9.6's tools answer. A refusal or failure is an isError result with the
CLI's `{status, error, code}` object, which no output schema describes (MCP checks only
successful results). A definition that carries its own schema keeps it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from sessiontool.runs.tooldefs import ToolDef, result_schema

_STR = {"type": "string"}
_INT = {"type": "integer"}
_NUM = {"type": "number"}
_BOOL = {"type": "boolean"}
_OBJS = {"type": "array", "items": {"type": "object"}}
_STRS = {"type": "array", "items": _STR}
_MAYBE_STR = {"type": ["string", "null"]}

_ROW = result_schema(
    {"key": _STR, "kind": _STR, "channel": _STR, "sessionId": _MAYBE_STR, "messages": _OBJS},
    ["key", "kind"],
)
_TASK = result_schema(
    {"taskId": _STR, "runtime": _STR, "status": _STR, "sessionKey": _STR, "label": _STR},
    ["taskId", "runtime", "status"],
)

OUTPUTS: dict[str, dict[str, Any]] = {
    "sessions_list": result_schema(
        {
            "count": _INT,
            "sessions": {"type": "array", "items": _ROW},
            "hasMore": _BOOL,
            "nextOffset": _INT,
            "limitApplied": _INT,
        },
        ["count", "sessions", "hasMore"],
    ),
    "sessions_history": result_schema(
        {
            "sessionKey": _STR,
            "sessionId": _STR,
            "messages": _OBJS,
            "truncated": _BOOL,
            "offset": _INT,
            "hasMore": _BOOL,
            "totalMessages": _INT,
            "nextOffset": _INT,
        },
        ["sessionKey", "messages"],
    ),
    "sessions_search": result_schema(
        {
            "results": {
                "type": "array",
                "items": result_schema(
                    {
                        "sessionKey": _STR,
                        "timestamp": _NUM,
                        "role": _STR,
                        "snippet": _STR,
                        "score": _NUM,
                        "sessionId": _STR,
                        "messageId": _STR,
                    },
                    ["sessionKey", "timestamp", "role", "snippet", "score"],
                ),
            }
        },
        ["results"],
    ),
    "sessions_send": result_schema(
        {
            "status": _STR,
            "runId": _STR,
            "reply": _MAYBE_STR,
            "sessionKey": _STR,
            "targetDisposition": {"type": "string", "enum": ["queued", "steered"]},
            "delivery": {"type": "object"},
            "message": _STR,  # no_reply
            "note": _STR,  # a steer queued as a new turn
            "notificationId": _STR,  # mode notify (status queued)
            "runStarted": _BOOL,
        },
        ["status"],
    ),
    "sessions_spawn": result_schema(
        {"status": _STR, "runId": _STR, "childSessionKey": _STR, "attachments": {"type": "object"}},
        ["status", "runId", "childSessionKey"],
    ),
    "agents_list": result_schema(
        {"requester": _MAYBE_STR, "allowAny": _BOOL, "agents": _OBJS}, ["agents"]
    ),
    "subagents": result_schema(
        {
            "status": _STR,
            "action": _STR,
            "tasks": {"type": "array", "items": _TASK},
            "active": _OBJS,
            "recent": _OBJS,
            "reason": _STR,
            "completed": _STRS,
            "attention": _STRS,
            "unavailable": _STRS,
            "taskId": _STR,
            "cancelled": _BOOL,
        },
        ["status"],
    ),
    "sessions_yield": result_schema(
        {"status": _STR, "events": _OBJS, "pendingChildren": _STRS}, ["status", "events"]
    ),
}


def with_outputs(tools: dict[str, ToolDef]) -> dict[str, ToolDef]:
    """The definitions, each with its output schema (its own, else the one named here)."""
    return {
        name: t
        if t.output_schema is not None or name not in OUTPUTS
        else replace(t, output_schema=OUTPUTS[name])
        for name, t in tools.items()
    }
