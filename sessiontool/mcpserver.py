"""`sessiontool mcp`: the session tools over the Model Context Protocol (stdio), on the official
SDK (`mcp` 2.x, the optional extra `.[mcp]`).

The tools are `runs.tools`' definitions, so they cannot drift from the `openai`/`llm` runners'.
Every call runs in a worker thread as the server's requester (`--as` / SESSIONTOOL_SESSION_KEY,
else the operator) with a context built afresh (config edits apply to the next call), so the
server keeps answering while a `sessions_send` waits; that wait is taken in slices that report
MCP progress and stop on cancellation or shutdown (the run itself goes on, detached, as with the
CLI's timeout). Transcripts are resources `sessiontool://session/<key>`.

This module imports the SDK at module level: import it only once `mcp` is needed
(`require_sdk` first gives the one-line install hint)."""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from sessiontool import __version__
from sessiontool.context import Context
from sessiontool.errors import SessiontoolError
from sessiontool.runs import tools
from sessiontool.state.paths import StatePaths

if TYPE_CHECKING:
    from sessiontool.runs.record_types import RunRecord

URI_PREFIX = "sessiontool://session/"
PAGE = 100
PROGRESS_EVERY = 1.0
WAIT_SLICE = 0.25
RESOURCE_NOT_FOUND = -32002
WAITING_TOOLS = frozenset({"sessions_send", "subagents", "sessions_yield"})  # report progress


@dataclass
class _Wait:
    """One sessions_send's wait, shared between its worker thread and the progress task."""

    cancel: threading.Event
    shutdown: threading.Event
    run_id: str | None = None
    what: str | None = None  # what a subagents wait or sessions_yield waits for
    timeout: float = 0.0
    started: float = field(default_factory=time.monotonic)

    def __call__(self, paths: StatePaths, run_id: str, timeout: float) -> RunRecord:
        from sessiontool.runs import records
        from sessiontool.runs.wait import wait_for

        self.run_id, self.timeout, self.started = run_id, timeout, time.monotonic()
        deadline = self.started + timeout
        while True:
            left = deadline - time.monotonic()
            rec = wait_for(paths, run_id, max(0.0, min(WAIT_SLICE, left)))
            if records.is_finished(rec) or left <= 0:
                return rec
            if self.stopped():
                return rec  # nobody is waiting any more; the run goes on

    def begin(self, what: str, timeout: float) -> None:
        """A wait of another tool starts: progress is reported about it from now on."""
        self.what, self.timeout, self.started = what, timeout, time.monotonic()

    def stopped(self) -> bool:
        """Whether the call was cancelled or the server is shutting down."""
        return self.cancel.is_set() or self.shutdown.is_set()


class SessionToolsServer:
    """The MCP handlers over one identity and tool selection."""

    def __init__(
        self,
        make_ctx: Callable[[], Context],
        *,
        read_only: bool = False,
        only: list[str] | None = None,
        search: tools.Searcher | None = None,
    ) -> None:
        self.make_ctx = make_ctx
        self.read_only = read_only
        self.only = only
        self.search = search
        self.shutdown = threading.Event()
        ctx = make_ctx()  # fail at start-up on a bad config or identity
        who = ctx.requester.session_key or f"the operator (agent {ctx.agent_id})"
        self.instructions = (
            f"OpenClaw-format session tools over the state dir {ctx.paths.root}, acting as {who}. "
            "sessions_list/sessions_history read sessions, sessions_search their transcripts; "
            "sessions_send runs a session's agent on a message; sessions_spawn starts a "
            "sub-agent whose result is announced back; subagents lists, waits for or cancels "
            "this session's runs and its children's; sessions_yield waits for this session's "
            "sub-agents and returns their completion events; agents_list shows the agents "
            "sessions_spawn may use; usage and diff report cost and compare sessions or runs. "
            "Transcripts are resources "
            f"{URI_PREFIX}<key>."
        )

    # -- tools --------------------------------------------------------------------------

    def offered(self, ctx: Context) -> list[tools.ToolDef]:
        extra = [
            t for t in tools.TRANSPORT_TOOLS.values() if self.only is None or t.name in self.only
        ]
        return (
            tools.offered_definitions(
                ctx, read_only=self.read_only, only=self.only, searching=self.search is not None
            )
            + extra
        )

    async def list_tools(
        self, rctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        ctx = await anyio.to_thread.run_sync(self.make_ctx)
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=t.name,
                    title=t.title,
                    description=t.description,
                    input_schema=t.input_schema,
                    output_schema=t.output_schema,
                    annotations=types.ToolAnnotations(
                        title=t.title,
                        read_only_hint=t.read_only,
                        destructive_hint=t.destructive,
                        idempotent_hint=t.idempotent,
                        open_world_hint=t.open_world,
                    ),
                )
                for t in self.offered(ctx)
            ]
        )

    def _not_offered(self, ctx: Context, name: str) -> tools.ToolResult | None:
        if name in {t.name for t in self.offered(ctx)}:
            return None
        if name not in tools.TOOLS and name not in tools.TRANSPORT_TOOLS:
            return None  # call_tool reports an unknown name itself
        why = (
            "the server is read-only (--read-only)"
            if self.read_only and name not in tools.READ_ONLY_TOOLS
            else "not in --tools"
            if self.only is not None and name not in self.only
            else "not available to this session"
        )
        return tools.ToolResult(
            {"status": "forbidden", "error": f"{name} is not offered: {why}", "code": 4},
            failed=True,
        )

    def _call(self, name: str, arguments: Any, wait: _Wait) -> tools.ToolResult:
        try:
            ctx = self.make_ctx()
        except SessiontoolError as exc:
            return tools.ToolResult(exc.to_json(), failed=True)
        refused = self._not_offered(ctx, name)
        if refused is not None:
            return refused
        options = tools.CallOptions(
            wait=wait,
            null_is_absent=False,
            cancelled=wait.stopped,
            waiting=wait.begin,
            search=self.search,
        )
        return tools.call_tool(ctx, name, arguments, options)

    async def call_tool(
        self, rctx: Any, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        wait = _Wait(threading.Event(), self.shutdown)
        result: tools.ToolResult | None = None

        async def progress() -> None:
            while True:
                await anyio.sleep(PROGRESS_EVERY)
                if wait.run_id is None and wait.what is None:
                    continue
                waited = time.monotonic() - wait.started
                await rctx.session.report_progress(
                    min(waited, wait.timeout),
                    wait.timeout,
                    f"waiting for {wait.what or f'run {wait.run_id}'} "
                    f"({waited:.0f}s of {wait.timeout:g}s)",
                )

        async def work(tg: Any) -> None:
            nonlocal result
            result = await anyio.to_thread.run_sync(
                self._call, params.name, params.arguments, wait, abandon_on_cancel=True
            )
            tg.cancel_scope.cancel()

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(work, tg)
                if params.name in WAITING_TOOLS:
                    tg.start_soon(progress)
        finally:
            wait.cancel.set()  # cancelled: the thread stops waiting; the run goes on
        assert result is not None
        return types.CallToolResult(
            content=[types.TextContent(text=result.text())],
            structured_content=result.data,
            is_error=result.failed,
        )

    # -- resources ------------------------------------------------------------------------

    def _resources_allowed(self, ctx: Context) -> bool:
        return any(t.name == "sessions_history" for t in self.offered(ctx))

    def _list_resources(self, offset: int) -> tuple[list[types.Resource], str | None]:
        from sessiontool.sessions.listing import list_sessions

        try:
            ctx = self.make_ctx()
        except SessiontoolError as exc:
            raise MCPError(types.INTERNAL_ERROR, exc.message, exc.to_json()) from None
        if not self._resources_allowed(ctx):
            return [], None
        try:
            rows = list_sessions(ctx, limit=None)["sessions"]
        except SessiontoolError:
            return [], None
        page = rows[offset : offset + PAGE]
        out = []
        for row in page:
            key = row["key"]
            name = row.get("label") or row.get("displayName")
            desc = f"{row.get('kind', 'other')} session"
            if row.get("channel") and row["channel"] != "unknown":
                desc += f" on {row['channel']}"
            out.append(
                types.Resource(
                    uri=session_uri(key),
                    name=key,
                    title=f"{name} ({key})" if name else key,
                    description=desc + "; its transcript as sessions_history JSON",
                    mime_type="application/json",
                )
            )
        more = offset + PAGE < len(rows)
        return out, str(offset + PAGE) if more else None

    async def list_resources(
        self, rctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        cursor = params.cursor if params is not None else None
        try:
            offset = int(cursor) if cursor else 0
        except ValueError:
            raise MCPError(types.INVALID_PARAMS, f"bad cursor {cursor!r}") from None
        resources, nxt = await anyio.to_thread.run_sync(self._list_resources, max(0, offset))
        return types.ListResourcesResult(resources=resources, next_cursor=nxt)

    async def list_resource_templates(
        self, rctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(
            resource_templates=[
                types.ResourceTemplate(
                    uri_template=URI_PREFIX + "{key}",
                    name="session",
                    title="A session's transcript",
                    description="One session's messages (sessions_history JSON); the key as "
                    "sessions_list shows it, percent-encoded.",
                    mime_type="application/json",
                )
            ]
        )

    def _read(self, uri: str) -> str:
        from sessiontool.sessions.history import HISTORY_MAX_LIMIT, history

        if not uri.startswith(URI_PREFIX) or len(uri) == len(URI_PREFIX):
            raise MCPError(RESOURCE_NOT_FOUND, f"not a session resource: {uri} ({URI_PREFIX}KEY)")
        key = urllib.parse.unquote(uri[len(URI_PREFIX) :])
        try:
            ctx = self.make_ctx()
        except SessiontoolError as exc:
            raise MCPError(types.INTERNAL_ERROR, exc.message, exc.to_json()) from None
        if not self._resources_allowed(ctx):
            raise MCPError(
                RESOURCE_NOT_FOUND, "transcripts are not offered (sessions_history is not)"
            )
        try:
            data = history(ctx, key, limit=HISTORY_MAX_LIMIT).to_json()
        except SessiontoolError as exc:
            raise MCPError(RESOURCE_NOT_FOUND, exc.message, exc.to_json()) from None
        return json.dumps(data, ensure_ascii=False)

    async def read_resource(
        self, rctx: Any, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        text = await anyio.to_thread.run_sync(self._read, str(params.uri))
        return types.ReadResourceResult(
            contents=[
                types.TextResourceContents(
                    uri=str(params.uri), mime_type="application/json", text=text
                )
            ]
        )

    # -- serving --------------------------------------------------------------------------

    def build(self) -> Server[Any]:
        return Server(
            "sessiontool",
            version=__version__,
            title="sessiontool session tools",
            instructions=self.instructions,
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
            on_list_resources=self.list_resources,
            on_list_resource_templates=self.list_resource_templates,
            on_read_resource=self.read_resource,
        )

    async def serve_stdio(self) -> None:
        server = self.build()
        try:
            from sessiontool.mcpwire import ScreenedStdin, stdin_lines

            stdin = ScreenedStdin(stdin_lines())
            async with stdio_server(stdin=stdin) as (read_stream, write_stream):  # type: ignore[arg-type]
                stdin.connect(write_stream)
                await server.run(read_stream, write_stream, server.create_initialization_options())
        finally:
            self.shutdown.set()  # waiting threads return at once; their runs go on


def session_uri(key: str) -> str:
    return URI_PREFIX + urllib.parse.quote(key, safe=":@+-_.~")


def serve(
    make_ctx: Callable[[], Context],
    *,
    read_only: bool = False,
    only: list[str] | None = None,
    search: tools.Searcher | None = None,
) -> None:
    """Serve MCP on stdin/stdout until stdin closes. `search`: the transcripts' search for
    sessions_search (reports/ is this module's sibling: the `mcp` command hands it over)."""
    server = SessionToolsServer(make_ctx, read_only=read_only, only=only, search=search)
    try:
        anyio.run(server.serve_stdio)
    finally:
        server.shutdown.set()  # also on SIGTERM/^C: no thread keeps the process waiting
