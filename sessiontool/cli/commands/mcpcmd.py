"""`mcp`: the session tools as an MCP server over stdio (the optional extra `.[mcp]`).
The SDK is imported only when the command runs, so no other command pays for it."""

from __future__ import annotations

import typer

from sessiontool.cli.app import G, app, command, install_store_guard
from sessiontool.errors import SessiontoolError, UsageError

# sessiontool is not on a package index: name the package itself, and the checkout's extra.
INSTALL = (
    "pip install 'mcp>=2.3,<3' in sessiontool's environment (from a checkout: "
    "pip install '.[mcp]'; with pipx: pipx inject sessiontool 'mcp>=2.3,<3')"
)
SDK_MAJOR = 2


def require_sdk() -> None:
    """The one-line error, with the install command, when the MCP SDK is missing or is not
    the major version sessiontool is built on."""
    from importlib import metadata, util

    try:
        found = util.find_spec("mcp") is not None
        version = metadata.version("mcp") if found else ""
    except (ImportError, ValueError, metadata.PackageNotFoundError):
        found = False
    if not found:
        raise SessiontoolError(
            f"sessiontool mcp needs the MCP Python SDK (package `mcp`), not installed: {INSTALL}"
        )
    major = version.split(".", 1)[0]
    if major != str(SDK_MAJOR):
        raise SessiontoolError(
            f"sessiontool mcp needs the MCP Python SDK {SDK_MAJOR}.x, found mcp {version}: "
            f"{INSTALL}"
        )


def parse_tools(value: str | None) -> list[str] | None:
    from sessiontool.cli.mcp_reports import NAMES
    from sessiontool.runs import tools

    valid = (*tools.TOOL_NAMES, *NAMES)  # the session tools and the report tools
    if value is None:
        return None
    names = [n.strip() for n in value.split(",") if n.strip()]
    if not names:
        raise UsageError("--tools needs at least one tool name", hint=", ".join(valid))
    for n in names:
        if n not in valid:
            raise UsageError(f"--tools: unknown tool {n!r} (valid: {', '.join(valid)})")
    return names


@app.command("mcp")
@command
def mcp_cmd(
    as_key: str | None = typer.Option(
        None,
        "--as",
        help="Act as this session (env SESSIONTOOL_SESSION_KEY; default: the operator).",
        metavar="KEY",
    ),
    read_only: bool = typer.Option(
        False,
        "--read-only",
        help="Offer only the read tools: sessions_list, sessions_history, sessions_search, "
        "sessions_yield and agents_list.",
    ),
    tools_: str | None = typer.Option(
        None,
        "--tools",
        help="Offer only these tools (comma-separated names).",
        metavar="LIST",
    ),
) -> None:
    """Serve the session tools over MCP on stdin/stdout (for Claude Code, Codex, Cursor...)."""
    only = parse_tools(tools_)
    require_sdk()
    from sessiontool.cli import render
    from sessiontool.cli.app import global_options, remote_context
    from sessiontool.context import Context, build_context
    from sessiontool.state import perms

    install_store_guard()
    key = as_key or G.as_key
    options = global_options()  # parsed once: every call's context carries these, frozen
    ctx = remote_context(build_context(G.state_dir, G.config, G.agent, key), options, key)
    perms.check_state_dir(ctx.paths.root)
    for w in ctx.config.warnings:  # once, on stderr: stdout is the protocol from here on
        render.warning_line(w)

    def make_ctx() -> Context:
        from sessiontool.cli.app import gated

        got = remote_context(build_context(G.state_dir, G.config, G.agent, key), options, key)
        return gated(got, None, False)  # sessions_send/spawn pass the budgets too

    from sessiontool.cli.mcp_reports import register
    from sessiontool.mcpserver import serve
    from sessiontool.reports.search import search

    register()  # the read-only report tools, usage and diff
    serve(make_ctx, read_only=read_only, only=only, search=search)
    # Stdin closed: nothing is left to clean up (runs are detached workers). Tearing down the
    # SDK's modules takes the interpreter about a second more on a busy machine, while clients
    # give a server little time to leave before they kill it (the SDK's own: 2 s).
    import os
    import sys

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(0)
