"""The session tools as function tools for a model: OpenClaw's names and parameter names, run
in-process with the same core functions as the CLI, acting as the run's own session. A tool's
refusal or error comes back as the JSON object the CLI prints with `--json`, never as a crash."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sessiontool.context import Context, Requester
from sessiontool.errors import SessiontoolError, UsageError

TOOL_NAMES = ("sessions_list", "sessions_history", "sessions_send", "sessions_spawn", "agents_list")


def _fn(
    name: str, description: str, properties: dict[str, Any], required: list[str] | None = None
) -> dict[str, Any]:
    params: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        params["required"] = required
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": params},
    }


_INT = {"type": "integer"}
TOOL_SPECS: dict[str, dict[str, Any]] = {
    "sessions_list": _fn(
        "sessions_list",
        "List sessions (newest first) with optional filters and the last messages of each.",
        {
            "kinds": {
                "type": "array",
                "items": {
                    "type": "string",
                    "enum": ["main", "group", "cron", "hook", "node", "other"],
                },
            },
            "limit": {**_INT, "minimum": 1},
            "activeMinutes": {**_INT, "minimum": 1},
            "messageLimit": {**_INT, "minimum": 0, "maximum": 20},
        },
    ),
    "sessions_history": _fn(
        "sessions_history",
        "Fetch the message history of a session (by key or sessionId).",
        {
            "sessionKey": {"type": "string"},
            "limit": {**_INT, "minimum": 1},
            "includeTools": {"type": "boolean"},
        },
        ["sessionKey"],
    ),
    "sessions_send": _fn(
        "sessions_send",
        "Send a message to another session and wait up to timeoutSeconds for its reply "
        "(0 = don't wait).",
        {
            "sessionKey": {"type": "string"},
            "label": {"type": "string"},
            "message": {"type": "string"},
            "timeoutSeconds": {"type": "number", "minimum": 0},
        },
        ["message"],
    ),
    "sessions_spawn": _fn(
        "sessions_spawn",
        "Start a sub-agent run in a new isolated session; its result is announced back here.",
        {
            "task": {"type": "string"},
            "label": {"type": "string"},
            "agentId": {"type": "string"},
            "model": {"type": "string"},
            "runTimeoutSeconds": {"type": "number", "minimum": 0},
            "cleanup": {"type": "string", "enum": ["keep", "delete"]},
        },
        ["task"],
    ),
    "agents_list": _fn(
        "agents_list", "List the agent ids this session may spawn sub-agents under.", {}
    ),
}


def tool_context(env: Mapping[str, str]) -> Context:
    """The run's own session as requester: its sandbox, policies and sub-agent limits apply."""
    from sessiontool.context import _sandboxed
    from sessiontool.stores import keys
    from sessiontool.stores.config import load_config
    from sessiontool.stores.paths import StatePaths, resolve_state_dir

    paths = StatePaths(resolve_state_dir(env.get("SESSIONTOOL_STATE_DIR")))
    cfg = load_config(paths, env.get("SESSIONTOOL_CONFIG") or os.environ.get("SESSIONTOOL_CONFIG"))
    key = env.get("SESSIONTOOL_SESSION_KEY")
    if not key:
        raise UsageError("a tool call needs the run's session (SESSIONTOOL_SESSION_KEY)")
    agent_id = keys.agent_of(key, cfg.default_agent_id)
    sandboxed = env.get("SESSIONTOOL_SANDBOXED") == "1" or _sandboxed(cfg, key, agent_id)
    return Context(paths, cfg, Requester(key, agent_id, sandboxed))


def offered_tools(ctx: Context) -> list[dict[str, Any]]:
    """The tools this session may call: a sub-agent gets only what the config grants, and
    never sessions_spawn."""
    names = list(TOOL_NAMES)
    if ctx.requester.is_subagent:
        allowed = set(ctx.config.subagent_tools_allow)
        names = [n for n in names if n in allowed and n != "sessions_spawn"]
    return [TOOL_SPECS[n] for n in names]


def _int(args: Mapping[str, Any], name: str, default: int | None = None) -> int | None:
    v = args.get(name, default)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise UsageError(f"{name} must be a number")
    return int(v)


def _str(args: Mapping[str, Any], name: str, required: bool = False) -> str | None:
    v = args.get(name)
    if v is None:
        if required:
            raise UsageError(f"{name} is required")
        return None
    if not isinstance(v, str):
        raise UsageError(f"{name} must be a string")
    return v


def _dispatch(ctx: Context, name: str, args: Mapping[str, Any]) -> dict[str, Any]:
    from sessiontool.runs import submit as sending
    from sessiontool.sessions import history, list_sessions

    if name == "sessions_list":
        kinds = args.get("kinds")
        if kinds is not None and not (
            isinstance(kinds, list) and all(isinstance(k, str) for k in kinds)
        ):
            raise UsageError("kinds must be an array of strings")
        return list_sessions(
            ctx,
            kinds=kinds,
            limit=_int(args, "limit", 200),
            active_minutes=_int(args, "activeMinutes"),
            message_limit=_int(args, "messageLimit", 0) or 0,
        )
    if name == "sessions_history":
        return history(
            ctx,
            _str(args, "sessionKey", required=True),
            limit=_int(args, "limit", 200) or 200,
            include_tools=bool(args.get("includeTools", False)),
        ).to_json()
    if name == "sessions_send":
        timeout = args.get("timeoutSeconds", 30)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout < 0:
            raise UsageError("timeoutSeconds must be a number >= 0")
        label = _str(args, "label")
        result, _code = sending.send(
            ctx,
            None if label else _str(args, "sessionKey", required=True),
            _str(args, "message", required=True) or "",
            label=label,
            timeout=float(timeout),
        )
        return result
    if name == "sessions_spawn":
        if ctx.requester.is_subagent:
            from sessiontool.errors import ForbiddenError

            raise ForbiddenError("sessions_spawn is not allowed from sub-agent sessions")
        run_timeout = args.get("runTimeoutSeconds")
        if run_timeout is not None and (
            isinstance(run_timeout, bool) or not isinstance(run_timeout, int | float)
        ):
            raise UsageError("runTimeoutSeconds must be a number")
        return sending.spawn(
            ctx,
            _str(args, "task", required=True) or "",
            label=_str(args, "label"),
            agent_id=_str(args, "agentId"),
            model=_str(args, "model"),
            run_timeout=float(run_timeout) if run_timeout else None,
            cleanup=_str(args, "cleanup") or "keep",
        )
    if name == "agents_list":
        from sessiontool.flow.policy import agents_list

        return agents_list(ctx)
    raise UsageError(f"unknown tool {name!r} (available: {', '.join(TOOL_NAMES)})")


def execute_tool(ctx: Context, name: str, arguments: Any) -> tuple[dict[str, Any], bool]:
    """(result object, isError). Refusals and failures of the tools themselves are ordinary
    results (`{"status": "forbidden"|"error", ...}`, isError false), exactly as the CLI would
    print them; only a call the tool could not even interpret is an error result."""
    if not isinstance(arguments, Mapping):
        return {
            "status": "error",
            "error": f"arguments of {name} must be a JSON object",
            "code": 2,
        }, True
    if name not in TOOL_NAMES:
        return {"status": "error", "error": f"unknown tool {name!r}", "code": 2}, True
    try:
        return _dispatch(ctx, name, arguments), False
    except SessiontoolError as exc:
        return exc.to_json(), False
    except Exception as exc:  # noqa: BLE001 - a tool's crash must not end the run
        return {"status": "error", "error": f"{type(exc).__name__}: {exc}", "code": 1}, True


def state_root(env: Mapping[str, str]) -> Path | None:
    v = env.get("SESSIONTOOL_STATE_DIR")
    return Path(v) if v else None
