"""docs/tools.md, the table of OpenClaw 2026.9.6's session tools beside sessiontool's, kept in
step: every MCP tool has its section and every argument of its schema a row (and no row names an
argument the schema lacks); every CLI command and flag a row names exists; every parameter of
OpenClaw 2026.9.6's tools is either a row or in the "Not offered" table, with its reason."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from sessiontool.cli.docs import _root_command
from sessiontool.runs import tools

DOC = Path(__file__).resolve().parent.parent / "docs" / "tools.md"

# OpenClaw 2026.9.6's session tools and their parameters, as its dist's tool schemas have them
# (openclaw-tools-*.mjs, sessions-spawn-tool-*.mjs; visible/group/project/worktree/placement
# from the spawn tool's visible-session fields).
OPENCLAW = {
    "sessions_list": (
        "kinds limit offset activeMinutes activeOnly excludeSubagents relationship ownerId "
        "creatorId projectId workspaceDir group pinned messageLimit label agentId search "
        "archived includeDerivedTitles includeLastMessage"
    ),
    "sessions_history": "sessionKey limit offset pendingBefore messageId sessionId includeTools",
    "sessions_search": "query sessionKey limit",
    "sessions_send": "sessionKey label agentId message timeoutSeconds watch mode",
    "sessions_spawn": (
        "task taskName label runtime agentId model runTimeoutSeconds thinking cwd thread mode "
        "cleanup expectsCompletionMessage completionTarget sandbox context lightContext collect "
        "outputSchema fastMode groupId attachments attachAs resumeSessionId streamTo visible "
        "group projectId projectGitUrl worktree placement"
    ),
    "subagents": "action recentMinutes taskId taskIds timeoutSeconds",
    "sessions_yield": "waitFor message acknowledgment",
    "agents_list": "",
    "session_status": "sessionKey model changesSince",
    "sessions": (
        "action sessionKey label icon color group statusNote attention pinned archived model "
        "thinkingLevel ownerType ownerId expectedSessionId deleteTranscript names name to "
        "profileId targets ttlMinutes"
    ),
}

# Being added by other branches right now (issue 41 items 3-4, issue 43): tolerated as long as
# they do not exist yet. THE LEAD EMPTIES THIS LIST once those branches are merged, so that from
# then on every name on the page must be real.
PENDING_TOOLS: set[str] = set()
PENDING_COMMANDS: set[str] = set()
PENDING_FLAGS: set[tuple[str, str]] = set()
PENDING_ARGS: set[tuple[str, str]] = set()

TICKED = re.compile(r"`([^`]+)`")


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _sections() -> dict[str, list[list[str]]]:
    """Each `### \\`tool\\`` section's table rows (header and rule left out), and the tools
    and not-offered tables under `## Tools` / `## Not offered`."""
    out: dict[str, list[list[str]]] = {}
    current = None
    for line in DOC.read_text().splitlines():
        if line.startswith("#"):
            m = TICKED.search(line)
            current = m.group(1) if line.startswith("### ") and m else line.lstrip("# ").strip()
            out.setdefault(current, [])
        elif line.startswith("|") and current is not None and not line.startswith("| ---"):
            out[current].append(_cells(line))
    return {k: rows[1:] for k, rows in out.items()}  # each table's header row dropped


def _param(cell: str) -> str:
    m = TICKED.search(cell)
    assert m, cell
    return m.group(1)


def _commands() -> dict[str, set[str]]:
    """Each command (sub-commands as `group sub`) and its options, global ones included."""
    root = _root_command()
    glob = {o for p in root.params for o in p.opts}
    out: dict[str, set[str]] = {}
    for name, cmd in root.commands.items():
        out[name] = glob | {o for p in cmd.params for o in getattr(p, "opts", [])}
    return out


def test_every_mcp_tool_and_argument_has_its_row() -> None:
    sections = _sections()
    listed = {_param(r[0]): r for r in sections["Tools"]}
    for name, tool in tools.TOOLS.items():
        assert name in listed, f"{name} has no row in docs/tools.md's Tools table"
        assert _param(listed[name][2]) == name
        rows = sections.get(name)
        assert rows is not None or not tool.input_schema["properties"], f"no section {name}"
        in_doc = {m for r in rows or [] for m in TICKED.findall(r[2])}
        schema = set(tool.input_schema["properties"])
        missing = schema - in_doc
        assert not missing, f"{name}: arguments without a row: {sorted(missing)}"
        extra = {a for a in in_doc - schema if (name, a) not in PENDING_ARGS}
        assert not extra, f"{name}: rows name arguments the schema lacks: {sorted(extra)}"
        assert tool.output_schema is not None, f"{name} has no outputSchema"
    for name in set(listed) - set(tools.TOOLS):
        assert name in PENDING_TOOLS, f"docs/tools.md lists a tool sessiontool lacks: {name}"


def test_every_cli_command_and_flag_named_exists() -> None:
    commands = _commands()
    sections = _sections()
    for row in sections["Tools"]:
        tool = _param(row[0])
        names = [c.split()[0] for c in TICKED.findall(row[1])]
        for c in names:
            assert c in commands or c in PENDING_COMMANDS, f"{tool}: no command {c!r}"
        for r in sections.get(tool, []):
            # a row may name its own command (`wait --timeout`, `session KEY --model`)
            here = names + [c.split()[0] for c in TICKED.findall(r[1])]
            for flag in re.findall(r"--[a-z][a-z-]*", r[1]):
                where = [c for c in here if flag in commands.get(c, ())]
                pending = any((c, flag) in PENDING_FLAGS for c in here)
                assert where or pending, f"{tool}: {flag} is not an option of {here}"
    # the planned flags really are missing (so the lead's list empties once they land)
    for command, flag in PENDING_FLAGS:
        if command in commands and flag in commands[command]:
            print(f"note: {command} {flag} exists now: drop it from PENDING_FLAGS")


def test_every_openclaw_parameter_is_a_row_or_not_offered_with_a_reason() -> None:
    sections = _sections()
    not_offered: dict[str, set[str]] = {}
    for row in sections["Not offered"]:
        assert row[2], row
        for tool in TICKED.findall(row[0]):
            not_offered.setdefault(tool, set()).update(
                OPENCLAW.get(tool, "").split() if row[1] == "all" else TICKED.findall(row[1])
            )
    for tool in ("conversations_list", "conversations_send", "conversations_turn"):
        assert tool in not_offered, tool
    for tool, params in OPENCLAW.items():
        rows = sections.get(tool, [])
        offered = {_param(r[0]) for r in rows if not r[0].startswith("sessiontool's")}
        if tool == "subagents":  # one row per parameter; `action` names the three actions
            assert "action" in offered
        expected = set(params.split())
        for p in expected:
            assert p in offered or p in not_offered.get(tool, set()), f"{tool}.{p} is missing"
        invented = (offered | not_offered.get(tool, set())) - expected
        assert not invented, f"{tool}: not OpenClaw parameters: {sorted(invented)}"


def test_the_pending_lists_name_only_what_the_page_plans() -> None:
    text = DOC.read_text()
    for _command, flag in PENDING_FLAGS:
        assert f"`{flag}`" in text, flag
    for tool, arg in PENDING_ARGS:
        assert re.search(rf"`{arg}` \*\(planned\)\*", text), (tool, arg)
    planned = set(re.findall(r"`([^`]+)` \*\(planned\)\*", text))
    assert planned <= {arg for _, arg in PENDING_ARGS}, f"done, still marked planned: {planned}"
    plans: Any = PENDING_TOOLS | PENDING_COMMANDS
    assert all(f"`{p}`" in text for p in plans)
