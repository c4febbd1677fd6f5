"""What a spawn asks for beyond its task (OpenClaw 2026.9.6's `sessions_spawn` parameters), checked
once with OpenClaw's own wording, and the rules that go with them: how deep sub-agents may nest
(`agents.defaults.subagents.maxSpawnDepth`), the child's first message (OpenClaw's `[Subagent
Context] … (depth N/M) … [Subagent Task]` form), and the arguments handed to OpenClaw's own tool
when its gateway carries the spawn out.

`spawn` (runs/submit.py) is the one place that refuses a requester for its depth: the CLI, the
session tools and the MCP server all reach it."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sessiontool.context import Context
from sessiontool.errors import ForbiddenError, UsageError
from sessiontool.runs.session_patch import THINKING_LEVELS, normalize_thinking
from sessiontool.state import keys

if TYPE_CHECKING:
    from sessiontool.state.paths import StatePaths

MODES = ("run", "session")
CONTEXTS = ("isolated", "fork")
SANDBOXES = ("inherit", "require")
COMPLETION_TARGETS = ("parent",)
# THINKING_LEVELS (runs/session_patch.py): OpenClaw's thinking levels (its `/think` words), one
# list for a spawn's `thinking` and a session's `thinkingLevel`; a runner maps them to what its
# model takes.
# OpenClaw's default when its config says nothing; sessiontool's own store keeps the January rule
# (a sub-agent spawns nothing) unless the config raises it.
OPENCLAW_MAX_SPAWN_DEPTH = 5
OWN_MAX_SPAWN_DEPTH = 1
_TASK_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
_RESERVED_TASK_NAMES = frozenset({"all", "last", "current", "parent", "self"})
SANDBOX_REQUIRED = (
    'sessions_spawn sandbox="require" needs a sandboxed target runtime. Pick a sandboxed agentId '
    'or use sandbox="inherit".'
)
PERSISTENT_NOTE = (
    "This subagent session is persistent and remains available for thread follow-up messages."
)


@dataclass(frozen=True)
class SpawnOptions:
    """A spawn's options (the CLI's flags, the tools' arguments), unchecked until `checked`."""

    run_timeout: float | None = None
    cleanup: str = "keep"
    thinking: str | None = None
    cwd: str | None = None
    context: str = "isolated"
    mode: str = "run"
    task_name: str | None = None
    expects_completion: bool = True
    completion_target: str | None = None
    sandbox: str = "inherit"
    attachments: tuple[Mapping[str, Any], ...] = field(default_factory=tuple)
    attach_as: str | None = None

    @property
    def completion(self) -> str | None:
        """How the result comes back: None (announced), `quiet` (nothing), `parent` (into
        the requester's transcript only, no channel delivery)."""
        if not self.expects_completion:
            return "quiet"
        return self.completion_target


def _choice(name: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise UsageError(f"{name} must be one of: {', '.join(allowed)} (got {value!r})")
    return value


def _thinking_level(raw: str) -> str:
    """A spawn's `thinking` as OpenClaw normalizes it (its `normalizeThinkLevel`, the same as a
    session's `thinkingLevel`: `think hard` is `low`), or its refusal's words (exit 2)."""
    try:
        return normalize_thinking(raw)
    except UsageError:
        raise UsageError(
            f'Invalid thinking level "{raw}". Use one of: {", ".join(THINKING_LEVELS)}.'
        ) from None


def checked(opts: SpawnOptions) -> SpawnOptions:
    """The options as OpenClaw takes them, or a UsageError with its wording (exit 2)."""
    if opts.cleanup not in ("keep", "delete"):
        raise UsageError(f"--cleanup must be keep or delete, got {opts.cleanup!r}")
    _choice("mode", opts.mode, MODES)
    _choice("context", opts.context, CONTEXTS)
    _choice("sandbox", opts.sandbox, SANDBOXES)
    if opts.completion_target is not None:
        _choice("completionTarget", opts.completion_target, COMPLETION_TARGETS)
        if opts.mode != "run" or not opts.expects_completion:
            raise UsageError(
                'sessions_spawn completionTarget="parent" requires mode="run", thread=false, '
                "collect=false, and completion notifications enabled."
            )
    thinking = _thinking_level(opts.thinking) if opts.thinking is not None else None
    name = opts.task_name.strip() if opts.task_name is not None else None
    if name:
        if not _TASK_NAME.match(name):
            raise UsageError(
                f'Invalid taskName "{name}". Use 1-64 chars matching [a-z][a-z0-9_-]*.'
            )
        if name in _RESERVED_TASK_NAMES:
            raise UsageError(
                f'Invalid taskName "{name}". Reserved subagent targets cannot be used as '
                "taskName values."
            )
    cwd = None
    if opts.cwd is not None:
        cwd = os.path.abspath(os.path.expanduser(opts.cwd))
        if not os.path.isdir(cwd):
            raise UsageError(f"cwd {opts.cwd!r} is not an existing directory")
    # A persistent child is never deleted after its announce (OpenClaw forces keep too).
    cleanup = "keep" if opts.mode == "session" else opts.cleanup
    return SpawnOptions(
        **{
            **opts.__dict__,
            "thinking": thinking,
            "cwd": cwd,
            "task_name": name or None,
            "cleanup": cleanup,
        }
    )


def from_tool_arguments(args: Mapping[str, Any]) -> SpawnOptions:
    """The options of a `sessions_spawn` call (OpenClaw's argument names)."""
    run_timeout = args.get("runTimeoutSeconds")
    attach_as = args.get("attachAs")
    mount = attach_as.get("mountPath") if isinstance(attach_as, Mapping) else None
    return SpawnOptions(
        run_timeout=float(run_timeout) if run_timeout else None,
        cleanup=args.get("cleanup", "keep"),
        thinking=args.get("thinking"),
        cwd=args.get("cwd"),
        context=args.get("context", "isolated"),
        mode=args.get("mode", "run"),
        task_name=args.get("taskName"),
        expects_completion=args.get("expectsCompletionMessage", True) is not False,
        completion_target=args.get("completionTarget"),
        sandbox=args.get("sandbox", "inherit"),
        attachments=tuple(args.get("attachments") or ()),
        attach_as=mount if isinstance(mount, str) else None,
    )


def tool_arguments(opts: SpawnOptions) -> dict[str, Any]:
    """The options as OpenClaw's own sessions_spawn takes them (only what was asked for, so
    OpenClaw's own defaults apply to the rest)."""
    given = {
        "thinking": opts.thinking,
        "cwd": opts.cwd,
        "context": opts.context if opts.context != "isolated" else None,
        "mode": opts.mode if opts.mode != "run" else None,
        "taskName": opts.task_name,
        "expectsCompletionMessage": None if opts.expects_completion else False,
        "completionTarget": opts.completion_target,
        "sandbox": opts.sandbox if opts.sandbox != "inherit" else None,
        "attachments": [dict(a) for a in opts.attachments] or None,
        "attachAs": {"mountPath": opts.attach_as} if opts.attach_as else None,
    }
    return {k: v for k, v in given.items() if v is not None}


# -- depth --------------------------------------------------------------------------------------


def max_spawn_depth(ctx: Context) -> int:
    """`agents.defaults.subagents.maxSpawnDepth`; unset: OpenClaw's 5 on an OpenClaw state dir
    (its `openclaw.json` there), sessiontool's 1 on its own."""
    value = ctx.config.get("agents.defaults.subagents.maxSpawnDepth")
    if isinstance(value, int | float) and not isinstance(value, bool) and value == value:
        return max(0, int(value))
    openclaw = (ctx.paths.root / "openclaw.json").is_file()  # not Clawdbot's (January rule)
    return OPENCLAW_MAX_SPAWN_DEPTH if openclaw else OWN_MAX_SPAWN_DEPTH


def depth_of(key: str, entry: Mapping[str, Any] | None) -> int:
    """A session's spawn depth: its entry's `spawnDepth`, else 1 for a sub-agent key (a child
    spawned before the field was written), else 0."""
    value = (entry or {}).get("spawnDepth")
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return 1 if keys.is_subagent(key) else 0


def check_depth(caller_depth: int, max_depth: int) -> int:
    """The child's depth, or OpenClaw's refusal when the requester is at the limit (exit 4)."""
    if caller_depth < max_depth:
        return caller_depth + 1
    raise ForbiddenError(
        f"sessions_spawn is not allowed at this depth (current depth: {caller_depth}, max: "
        f"{max_depth}; agents.defaults.subagents.maxSpawnDepth)."
    )


def may_spawn(ctx: Context) -> bool:
    """Whether the context's requester is below the depth limit (a sub-agent at the limit is
    not offered sessions_spawn); the store's own limit is decided again at the spawn."""
    key = ctx.requester.session_key
    if key is None or not keys.is_subagent(key):
        return True
    from sessiontool.state.sessions_json import peek_entry

    try:
        entry = peek_entry(ctx.paths, key)
    except Exception:  # noqa: BLE001 - an unreadable store: offer it, the spawn decides
        entry = None
    return depth_of(key, entry) < max_spawn_depth(ctx)


def task_message(task: str, *, depth: int, max_depth: int, mode: str) -> str:
    """The child's first message as OpenClaw 2026.9.6 writes it (the task after the context)."""
    parts = [
        f"[Subagent Context] You are running as a subagent (depth {depth}/{max_depth}). Complete "
        "the current [Subagent Task]; inherited conversation is background context, not your "
        "assignment.",
    ]
    if mode == "session":
        parts.append(f"[Subagent Context] {PERSISTENT_NOTE}")
    parts += ["[Subagent Task]", task.strip(), "Begin. Execute the assigned task to completion."]
    return "\n\n".join(parts)


def child_entry_fields(opts: SpawnOptions, depth: int, max_depth: int) -> dict[str, Any]:
    """What the child's store entry records of the spawn, with OpenClaw's field names."""
    out: dict[str, Any] = {
        "spawnDepth": depth,
        "subagentRole": "orchestrator" if depth < max_depth else "leaf",
    }
    if opts.cwd:
        out["spawnedCwd"] = opts.cwd
    if opts.thinking:
        out["thinkingLevel"] = opts.thinking
    if opts.mode == "session":
        out["spawnMode"] = "session"
    if opts.task_name:
        out["taskName"] = opts.task_name
    return out


def record_fields(opts: SpawnOptions, depth: int, max_depth: int) -> dict[str, Any]:
    """The spawn record's fields for these options (only what differs from the defaults)."""
    out: dict[str, Any] = {"spawnDepth": depth, "maxSpawnDepth": max_depth}
    for name, value in (
        ("thinkingLevel", opts.thinking),
        ("cwd", opts.cwd),
        ("taskName", opts.task_name),
        ("completion", opts.completion),
    ):
        if value:
            out[name] = value
    if opts.context == "fork":
        out["context"] = "fork"
    if opts.mode == "session":
        out["spawnMode"] = "session"
    if opts.sandbox == "require":
        out["sandbox"] = "require"
    return out


def on_own_store(
    ctx: Context, opts: SpawnOptions, requester: Mapping[str, Any] | None, child: str, agent_id: str
) -> SpawnOptions:
    """The options as sessiontool's own runners carry them out (a spawn the files writer
    makes; through a gateway OpenClaw decides): with no `thinking` the child inherits the
    requester's `thinkingLevel`, as OpenClaw's spawn does; a `cwd` needs a runner with an agent
    process (exit 2 naming it otherwise) and a child that is not sandboxed (OpenClaw's refusal,
    exit 4: sessiontool has no agent workspace a sandboxed child could keep)."""
    inherited = (requester or {}).get("thinkingLevel")
    if opts.thinking is None and isinstance(inherited, str) and inherited:
        try:
            opts = SpawnOptions(**{**opts.__dict__, "thinking": normalize_thinking(inherited)})
        except UsageError:
            pass  # a level OpenClaw would not take either: the child runs with none
    if opts.cwd is None:
        return opts
    from sessiontool.context import _sandboxed
    from sessiontool.state.runnertable import TAKES_CWD

    runner = str(ctx.config.runner_for(agent_id).get("type", "echo"))
    if runner not in TAKES_CWD:
        raise UsageError(
            f"cwd: agent {agent_id}'s runner ({runner}) answers inside sessiontool and has no "
            "working directory of its own; cwd is the working directory of a command runner's "
            "agent process"
        )
    if _sandboxed(ctx.config, child, agent_id):
        raise ForbiddenError(
            "cwd override is not supported for sandboxed subagent runs; omit cwd or use the "
            "target agent workspace as cwd"
        )
    return opts


def check_sandbox(ctx: Context, opts: SpawnOptions, child: str, agent_id: str) -> None:
    """`sandbox: "require"`: refused unless the child runs sandboxed, in the words 2026.9.6's
    sessions_spawn refuses a hidden child with (its shorter "needs sandboxed target." is the
    refusal of a `visible` session, which sessiontool does not make)."""
    if opts.sandbox != "require":
        return
    from sessiontool.context import _sandboxed

    if not _sandboxed(ctx.config, child, agent_id):
        raise ForbiddenError(SANDBOX_REQUIRED)


def from_record(rec: Mapping[str, Any], run_timeout: float | None) -> SpawnOptions:
    """The options a spawn's record kept (`rerun`; its attachments are not sent again)."""

    def text(name: str) -> str | None:
        value = rec.get(name)
        return value if isinstance(value, str) and value else None

    completion = text("completion")
    return SpawnOptions(
        run_timeout=run_timeout,
        cleanup=text("cleanup") or "keep",
        thinking=thinking_of(rec),
        cwd=text("cwd"),
        context=text("context") or "isolated",
        mode=text("spawnMode") or "run",
        task_name=text("taskName"),
        expects_completion=completion != "quiet",
        completion_target="parent" if completion == "parent" else None,
        sandbox=text("sandbox") or "inherit",
    )


def thinking_of(rec: Mapping[str, Any]) -> str | None:
    """A run record's thinking level: `thinkingLevel` (OpenClaw's name, as the session entry
    has it), or `thinking` in a record an older sessiontool wrote."""
    for name in ("thinkingLevel", "thinking"):
        value = rec.get(name)
        if isinstance(value, str) and value:
            return value
    return None


def first_message(rec: Mapping[str, Any]) -> str:
    """What a run's turn gives its agent: a spawn made with a depth gets OpenClaw's `[Subagent
    Context] … [Subagent Task]` message; every other run (and an older spawn) its message."""
    message = str(rec.get("message") or "")
    depth, limit = rec.get("spawnDepth"), rec.get("maxSpawnDepth")
    if rec.get("kind") != "spawn" or not isinstance(depth, int) or not isinstance(limit, int):
        return message
    return task_message(
        message, depth=depth, max_depth=limit, mode=str(rec.get("spawnMode") or "run")
    )


def fork_requester(paths: StatePaths, rec: Mapping[str, Any], path: Path, session_id: str) -> None:
    """`context: "fork"`: the requester's messages (its last 200) copied into the child's new
    transcript before the `[Subagent Task]` message, once (a transcript that has lines
    already is left alone: a resumed turn does not copy them twice)."""
    from sessiontool.state import transcript
    from sessiontool.state.paths import transcript_path_for
    from sessiontool.state.sessions_json import peek_entry

    if path.exists() and path.stat().st_size > 0:
        return
    requester = rec.get("requesterSessionKey")
    entry = peek_entry(paths, requester) if isinstance(requester, str) else None
    sid = (entry or {}).get("sessionId")
    if not isinstance(requester, str) or not isinstance(sid, str):
        return
    source = transcript_path_for(
        paths.sessions_dir(keys.agent_of(requester)), sid, (entry or {}).get("sessionFile")
    )
    messages = transcript.read_tail(source, 200).messages
    if messages:
        entries = [{"type": "message", "message": dict(m)} for m in messages]
        transcript.append_entries(path, session_id, entries)


def check_fork(opts: SpawnOptions, target_agent: str, requester_agent: str) -> None:
    """`context: "fork"` copies the requester's transcript: only into a child of its agent."""
    if opts.context == "fork" and target_agent != requester_agent:
        raise UsageError(
            'context="fork" currently requires the same target agent as the requester; use '
            'context="isolated" for cross-agent spawns.'
        )
