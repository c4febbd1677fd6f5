"""What a session tool is, for every module that defines some (`runs/tools.py` holds the table;
`search_tools.py` and `subagent_tools.py` add theirs to it): the definition, a call's options
and result, and the helpers their JSON schemas are written with."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sessiontool.context import Context

if TYPE_CHECKING:
    from sessiontool.runs.record_types import RunRecord
    from sessiontool.state.paths import StatePaths

Waiter = Callable[["StatePaths", str, float], "RunRecord"]
Searcher = Callable[..., Any]  # reports.search.search: (ctx, query, **filters) -> SearchResult


def _never() -> bool:
    return False


def _unreported(what: str, timeout: float) -> None:
    return None


@dataclass(frozen=True)
class CallOptions:
    """How a transport wants a call carried out. `wait` replaces the run engine's blocking wait
    for a `sessions_send` with `timeoutSeconds > 0` (the MCP server waits in slices, reporting
    progress and honouring cancellation); None is the engine's own `wait_for`. `null_is_absent`:
    a model's tool call sends `null` for "unset" and means it; an MCP client's `null` is a
    value of the wrong type (JSON Schema: an integer is not null), a usage error. `cancelled`:
    whether the caller stopped waiting (an MCP cancellation or shutdown), asked between the
    slices of the `subagents` and `sessions_yield` waits; `waiting(what, timeout)` is told when
    such a wait starts (the MCP server reports progress about it). `search`: the transcripts' search
    (`reports.search.search`) for `sessions_search`, handed down by the transport's maker (the
    `mcp` command): `runs/` sits below `reports/`, so a transport without it (the runners)
    does not offer that tool."""

    wait: Waiter | None = None
    null_is_absent: bool = True
    cancelled: Callable[[], bool] = _never
    waiting: Callable[[str, float], None] = _unreported
    search: Searcher | None = None


Handler = Callable[[Context, Mapping[str, Any], CallOptions], dict[str, Any]]


@dataclass(frozen=True)
class ToolDef:
    """One session tool, as every transport offers it. `output_schema`: the JSON schema of a
    successful result (MCP's outputSchema; a refusal or error is an isError result)."""

    name: str
    title: str
    description: str
    input_schema: dict[str, Any]
    handler: Handler
    read_only: bool
    destructive: bool = False
    idempotent: bool = False
    open_world: bool = False
    output_schema: dict[str, Any] | None = None

    @property
    def annotations(self) -> dict[str, Any]:
        """MCP tool annotations (hints a client may show or act on)."""
        return {
            "title": self.title,
            "readOnlyHint": self.read_only,
            "destructiveHint": self.destructive,
            "idempotentHint": self.idempotent,
            "openWorldHint": self.open_world,
        }

    def openai_spec(self) -> dict[str, Any]:
        """The chat-completions `tools[]` entry."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.input_schema,
            },
        }


@dataclass(frozen=True)
class ToolResult:
    """What one call gave. `data` is the CLI's JSON object for it; `failed` is true for a
    refusal, an error or a send that timed out (`status` forbidden/error/timeout); `malformed`
    only when the call could not even be interpreted (unknown tool, arguments not an object, a
    crash): the `openai` runner's own isError."""

    data: dict[str, Any]
    failed: bool = False
    malformed: bool = False

    @property
    def status(self) -> str | None:
        s = self.data.get("status")
        return s if isinstance(s, str) else None

    def text(self) -> str:
        """The text rendering every transport shows a model: the JSON object, indented."""
        return json.dumps(self.data, indent=2, ensure_ascii=False)


# -- schemas --------------------------------------------------------------------------------


def obj_schema(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    """An input schema: these properties and no others."""
    params: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        params["required"] = required
    return params


def int_param(
    description: str, minimum: int | None = None, maximum: int | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "integer", "description": description}
    if minimum is not None:
        out["minimum"] = minimum
    if maximum is not None:
        out["maximum"] = maximum
    return out


def str_param(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


def bool_param(description: str) -> dict[str, Any]:
    return {"type": "boolean", "description": description}


def result_schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    """An output schema: the keys every successful result has (`required`), the others it may
    have; keys not named are allowed (a row passes its store's fields through)."""
    return {"type": "object", "properties": properties, "required": required}


KINDS = ["main", "group", "cron", "hook", "node", "other"]

SESSION_KEY = (
    "The target session: its key as sessions_list shows it (e.g. `main` or "
    "`agent:main:discord:group:123`), or its sessionId."
)
