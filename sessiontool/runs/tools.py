"""The session tools, defined once: OpenClaw's names, parameters and result shapes, run in-process
with the same core functions as the CLI, acting as the caller's own session.

Each tool is one `ToolDef` (name, description, JSON input schema with a description for every
parameter, behaviour hints, handler). Every transport is built from these: the `openai` runner's
function tools (`offered_tools`/`execute_tool`), the `llm` runner, and the MCP server
(`sessiontool mcp`). Arguments are checked against the tool's own schema before the handler
runs, so what a client is told is exactly what is enforced.

A tool's refusal or failure comes back as the JSON object the CLI prints with `--json`
(`{"status": "forbidden"|"error"|"timeout", "error": ..., "code": N}`), never as a crash."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sessiontool.context import Context, Requester, SpendGate
from sessiontool.errors import SessiontoolError, UsageError
from sessiontool.runs import life_tools, read_tools, subagent_tools, tool_outputs
from sessiontool.runs.tool_params import SEND_MODE, SPAWN_PROPERTIES
from sessiontool.runs.tooldefs import SESSION_KEY as _SESSION_KEY
from sessiontool.runs.tooldefs import CallOptions, Searcher, ToolDef, ToolResult
from sessiontool.runs.tooldefs import obj_schema as _schema
from sessiontool.runs.tooldefs import str_param as _str

FAILED_STATUSES = frozenset({"forbidden", "error", "timeout"})

# -- checking arguments against a schema ------------------------------------------------------


_TYPE_NAMES = {
    "string": "a string",
    "integer": "a whole number",
    "number": "a number",
    "boolean": "true or false",
    "array": "an array",
    "object": "an object",
}


def _type_ok(kind: str, v: Any) -> bool:
    if kind == "string":
        return isinstance(v, str)
    if kind == "boolean":
        return isinstance(v, bool)
    if kind == "integer":
        return (isinstance(v, int) and not isinstance(v, bool)) or (
            isinstance(v, float) and v.is_integer()
        )
    if kind == "number":
        return isinstance(v, int | float) and not isinstance(v, bool) and v == v  # not NaN
    if kind == "array":
        return isinstance(v, list)
    return isinstance(v, Mapping)


def _json_word(v: Any) -> str:
    """An enum value as JSON spells it (true, not True)."""
    return json.dumps(v) if isinstance(v, bool) else str(v)


def _kind_of(name: str, schema: Mapping[str, Any], v: Any) -> str:
    """The schema's type for this value; of a union (`archived`: true, false or "all") the
    one it has, the enum naming the values when it has none."""
    kinds = schema.get("type", "string")
    if not isinstance(kinds, list):
        return str(kinds)
    kind = next((k for k in kinds if _type_ok(k, v)), None)
    if kind is None:
        raise UsageError(f"{name} must be one of: {', '.join(map(_json_word, schema['enum']))}")
    return str(kind)


def _check_value(name: str, schema: Mapping[str, Any], v: Any) -> Any:
    kind = _kind_of(name, schema, v)
    if not _type_ok(kind, v):
        raise UsageError(f"{name} must be {_TYPE_NAMES.get(kind, kind)}")
    if kind == "integer":
        v = int(v)
    if kind in ("integer", "number"):
        if v in (float("inf"), float("-inf")):
            raise UsageError(f"{name} must be a finite number")
        low = schema.get("minimum")
        if low is not None and v < low:
            raise UsageError(f"{name} must be at least {low}")
        high = schema.get("maximum")
        if high is not None and v > high:
            raise UsageError(f"{name} must be at most {high}")
    enum = schema.get("enum")
    if enum is not None and not any(type(v) is type(e) and v == e for e in enum):
        raise UsageError(f"{name} must be one of: {', '.join(map(_json_word, enum))}")
    if kind == "array":
        items = schema.get("items") or {}
        v = [_check_value(f"{name}[{i}]", items, x) for i, x in enumerate(v)]
    return v


def check_arguments(
    tool: ToolDef, arguments: Any, *, null_is_absent: bool = True
) -> dict[str, Any]:
    """The arguments as the tool's schema allows them (integers as int), or a UsageError
    naming the first thing wrong. Null counts as absent (as models send it for "unset") unless
    `null_is_absent` is off (MCP), where it is a value of the wrong type."""
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, Mapping):
        raise UsageError(f"the arguments of {tool.name} must be a JSON object")
    props: Mapping[str, Any] = tool.input_schema.get("properties", {})
    unknown = sorted(str(k) for k in arguments if k not in props)
    if unknown:
        valid = ", ".join(props) or "none"
        raise UsageError(f"{tool.name} has no argument {unknown[0]!r} (valid: {valid})")
    out: dict[str, Any] = {}
    for name, v in arguments.items():
        if v is None:
            if not null_is_absent:
                kind = props[name].get("type", "a value")
                kind = " or ".join(kind) if isinstance(kind, list) else kind
                raise UsageError(
                    f"{name} must be {kind}, not null (leave it out to use the default)"
                )
            continue
        out[str(name)] = _check_value(str(name), props[name], v)
    for name in tool.input_schema.get("required", []):
        if name not in out:
            raise UsageError(f"{name} is required")
    return out


# -- handlers -------------------------------------------------------------------------------


def _sessions_send(ctx: Context, args: Mapping[str, Any], opts: CallOptions) -> dict[str, Any]:
    from sessiontool.runs import sendmodes

    label = args.get("label")
    key = args.get("sessionKey")
    if label is None and key is None:
        raise UsageError("sessions_send needs sessionKey or label")
    request = sendmodes.SendRequest(
        None if label else key,
        args["message"],
        label=label,
        mode=args.get("mode", "followup"),
        timeout=float(args.get("timeoutSeconds", 30)),
    )
    result, _code = sendmodes.send(ctx, request, wait=opts.wait)
    return dict(result)  # a tool call's payload: JSON, as `send --json` prints it


def _sessions_spawn(ctx: Context, args: Mapping[str, Any], opts: CallOptions) -> dict[str, Any]:
    from sessiontool.runs import submit
    from sessiontool.runs.spawnopts import from_tool_arguments

    return dict(
        submit.spawn(
            ctx,
            args["task"],
            label=args.get("label"),
            agent_id=args.get("agentId"),
            model=args.get("model"),
            options=from_tool_arguments(args),
        )
    )


def _agents_list(ctx: Context, args: Mapping[str, Any], opts: CallOptions) -> dict[str, Any]:
    from sessiontool.flow.policy import agents_list

    return dict(agents_list(ctx))


# -- the definitions ------------------------------------------------------------------------

TOOLS: dict[str, ToolDef] = {
    t.name: t
    for t in (
        ToolDef(
            name="sessions_send",
            title="Send a message to a session",
            description=(
                "Send a message to another session: its agent runs on it. Waits up to "
                "timeoutSeconds for the reply (0 = don't wait). Result: {status: ok, reply, "
                "runId, sessionKey}; {status: accepted, runId} when not waiting; {status: "
                "timeout, runId} when the run is still going (it goes on). A key that does not "
                "exist yet is created."
            ),
            input_schema=_schema(
                {
                    "sessionKey": _str(_SESSION_KEY + " Give this or label."),
                    "label": _str("The target session's label, instead of sessionKey."),
                    "message": _str("The message for the target session's agent."),
                    "timeoutSeconds": {
                        "type": "number",
                        "minimum": 0,
                        "description": "How long to wait for the reply (default 30; 0 = "
                        "return at once with status accepted).",
                    },
                    "mode": SEND_MODE,
                },
                ["message"],
            ),
            handler=_sessions_send,
            read_only=False,
            open_world=True,
        ),
        ToolDef(
            name="sessions_spawn",
            title="Spawn a sub-agent",
            description=(
                "Start a sub-agent run on a task in a new isolated session; returns at once "
                "with {status: accepted, runId, childSessionKey}. When the run ends its result "
                "is announced back to this session."
            ),
            input_schema=_schema(
                {
                    "task": _str("What the sub-agent should do."),
                    "label": _str("A label for the child session (at most 64 characters)."),
                    "agentId": _str("Run under this agent (it must be in the spawn allowlist)."),
                    "model": _str("Model override for the child session."),
                    "runTimeoutSeconds": {
                        "type": "number",
                        "minimum": 0,
                        "description": "Stop the run after this many seconds (0 = no limit).",
                    },
                    "cleanup": {
                        "type": "string",
                        "enum": ["keep", "delete"],
                        "description": "keep (default) or delete the child session after the "
                        "announce.",
                    },
                    **SPAWN_PROPERTIES,
                },
                ["task"],
            ),
            handler=_sessions_spawn,
            read_only=False,
            open_world=True,
        ),
        ToolDef(
            name="agents_list",
            title="List spawnable agents",
            description=(
                "List the agent ids this session may spawn sub-agents under. Result: "
                "{requester, allowAny, agents: [{id, name, configured}]}."
            ),
            input_schema=_schema({}),
            handler=_agents_list,
            read_only=True,
            idempotent=True,
        ),
        *(ToolDef(**d) for d in life_tools.DEFS),  # `sessions`, `session_status`
    )
}

# The table, in the order tools are offered: the read tools (runs/read_tools.py), this module's,
# the orchestration tools (runs/subagent_tools.py); each with its output schema.
TOOLS = tool_outputs.with_outputs(
    {
        **{n: t for n, t in read_tools.TOOLS.items() if n != "sessions_search"},
        **TOOLS,
        "sessions_search": read_tools.TOOLS["sessions_search"],
        **subagent_tools.TOOLS,
    }
)
TOOL_NAMES: tuple[str, ...] = tuple(TOOLS)
READ_ONLY_TOOLS: tuple[str, ...] = tuple(n for n, t in TOOLS.items() if t.read_only)

# The chat-completions `tools[]` entries, built from the definitions (kept for callers).
TOOL_SPECS: dict[str, dict[str, Any]] = {n: t.openai_spec() for n, t in TOOLS.items()}


def get_tool(name: str) -> ToolDef:
    tool = TOOLS.get(name)
    if tool is None:
        raise UsageError(f"unknown tool {name!r} (available: {', '.join(TOOL_NAMES)})")
    return tool


def offered_names(ctx: Context) -> list[str]:
    """The tools this session may call: a sub-agent gets only what the config grants, and
    sessions_spawn only below the depth limit (runs/spawnopts.py)."""
    names = list(TOOL_NAMES)
    if ctx.requester.is_subagent:
        from sessiontool.runs.spawnopts import may_spawn

        allowed = set(ctx.config.subagent_tools_allow)
        if may_spawn(ctx):
            allowed.add("sessions_spawn")
        names = [n for n in names if n in allowed]
    return names


def offered_definitions(
    ctx: Context,
    *,
    read_only: bool = False,
    only: list[str] | None = None,
    searching: bool = False,
) -> list[ToolDef]:
    """The definitions a transport offers: `offered_names`, narrowed to the read-only tools
    and/or to `only` (order kept); sessions_search only where the transport hands the search
    down (`searching`: CallOptions.search)."""
    names = offered_names(ctx)
    if not searching:
        names = [n for n in names if n not in read_tools.NEEDS_SEARCH]
    if read_only:
        names = [n for n in names if n in READ_ONLY_TOOLS]
    if only is not None:
        names = [n for n in names if n in only]
    return [TOOLS[n] for n in names]


def offered_tools(ctx: Context) -> list[dict[str, Any]]:
    """The chat-completions `tools[]` entries this session may call."""
    return [t.openai_spec() for t in offered_definitions(ctx)]


# Read-only tools a transport adds from above the run engine (the `mcp` command registers
# `usage` and `diff`, whose handlers live in cli/mcp_reports.py: reports the engine may not
# import). Offered by that transport alone, never to a model.
TRANSPORT_TOOLS: dict[str, ToolDef] = {}


def register_transport_tool(tool: ToolDef) -> None:
    TRANSPORT_TOOLS[tool.name] = tool


def call_tool(
    ctx: Context, name: str, arguments: Any, options: CallOptions | None = None
) -> ToolResult:
    """Run one tool call as the context's requester. Never raises for what a tool or its
    caller got wrong: that is a failed result with the CLI's JSON object."""
    tool = TOOLS.get(name) or TRANSPORT_TOOLS.get(name)
    if tool is None:
        return ToolResult(
            {
                "status": "error",
                "error": f"unknown tool {name!r} (available: {', '.join(TOOL_NAMES)})",
                "code": 2,
            },
            failed=True,
            malformed=True,
        )
    if arguments is not None and not isinstance(arguments, Mapping):
        return ToolResult(
            {"status": "error", "error": f"arguments of {name} must be a JSON object", "code": 2},
            failed=True,
            malformed=True,
        )
    try:
        options = options or CallOptions()
        args = check_arguments(tool, arguments, null_is_absent=options.null_is_absent)
        data = tool.handler(ctx, args, options)
    except SessiontoolError as exc:
        from sessiontool.errors import refused_by_os

        return ToolResult(refused_by_os(exc).to_json(), failed=True)
    except OSError as exc:
        from sessiontool.errors import from_os_error

        return ToolResult(from_os_error(exc).to_json(), failed=True)
    except Exception as exc:  # noqa: BLE001 - a tool's crash must not end the run or server
        return ToolResult(
            {"status": "error", "error": f"{type(exc).__name__}: {exc}", "code": 1},
            failed=True,
            malformed=True,
        )
    return ToolResult(data, failed=data.get("status") in FAILED_STATUSES)


def execute_tool(ctx: Context, name: str, arguments: Any) -> tuple[dict[str, Any], bool]:
    """(result object, isError) for the `openai` runner. Refusals and failures of the tools
    themselves are ordinary results (`{"status": "forbidden"|"error", ...}`, isError false),
    exactly as the CLI would print them; only a call the tool could not even interpret is an
    error result."""
    r = call_tool(ctx, name, arguments)
    return r.data, r.malformed


# The gate a model's own sessions_send / sessions_spawn pass (context.SpendGate): handed down
# by the worker program above the engine (reports/runworker.py: the budgets), none otherwise.
_SPEND_GATE: list[Callable[[Context], SpendGate]] = []


def set_spend_gate(make: Callable[[Context], SpendGate]) -> None:
    """Gate the tool calls of this process's runs with `make(ctx)` (the budgets)."""
    _SPEND_GATE[:] = [make]


def tool_context(env: Mapping[str, str]) -> Context:
    """The run's own session as requester: its sandbox, policies and sub-agent limits apply,
    and the budgets when the worker program handed their gate down (`set_spend_gate`)."""
    from sessiontool.context import _sandboxed
    from sessiontool.state import keys
    from sessiontool.state.config import load_config
    from sessiontool.state.paths import StatePaths, resolve_state_dir

    paths = StatePaths(resolve_state_dir(env.get("SESSIONTOOL_STATE_DIR")))
    cfg = load_config(paths, env.get("SESSIONTOOL_CONFIG") or os.environ.get("SESSIONTOOL_CONFIG"))
    key = env.get("SESSIONTOOL_SESSION_KEY")
    if not key:
        raise UsageError("a tool call needs the run's session (SESSIONTOOL_SESSION_KEY)")
    agent_id = keys.agent_of(key, cfg.default_agent_id)
    sandboxed = env.get("SESSIONTOOL_SANDBOXED") == "1" or _sandboxed(cfg, key, agent_id)
    ctx = Context(paths, cfg, Requester(key, agent_id, sandboxed))
    return ctx.with_gate(_SPEND_GATE[0](ctx)) if _SPEND_GATE else ctx


def state_root(env: Mapping[str, str]) -> Path | None:
    v = env.get("SESSIONTOOL_STATE_DIR")
    return Path(v) if v else None


__all__ = [
    "FAILED_STATUSES",
    "READ_ONLY_TOOLS",
    "TOOLS",
    "TOOL_NAMES",
    "TRANSPORT_TOOLS",
    "TOOL_SPECS",
    "CallOptions",
    "Searcher",
    "ToolDef",
    "ToolResult",
    "call_tool",
    "check_arguments",
    "execute_tool",
    "get_tool",
    "offered_definitions",
    "offered_names",
    "register_transport_tool",
    "offered_tools",
    "state_root",
    "tool_context",
]
