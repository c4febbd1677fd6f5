"""`send` and `spawn` as library calls: checks, the run record, the detached worker, and the
waiting that emulates OpenClaw's timeoutSeconds. The CLI and the runners' tool calls share
these, so a model calling sessions_send gets exactly what `sessiontool send --json` prints."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol, cast

from sessiontool import testhooks
from sessiontool.context import Context
from sessiontool.errors import ExitCode, ForbiddenError, StorageError, UsageError
from sessiontool.flow import policy
from sessiontool.runs import records
from sessiontool.runs.writer import SessionWriter
from sessiontool.sessions.archived import refuse_archived_target
from sessiontool.sessions.resolve import resolve
from sessiontool.state import keys
from sessiontool.state.jsonio import require_utf8

if TYPE_CHECKING:
    from sessiontool.state.config import Config

if TYPE_CHECKING:
    from sessiontool.runs.record_types import RunRecord, RunView
    from sessiontool.runs.result_types import SendResult, SpawnResult
    from sessiontool.runs.spawnopts import SpawnOptions

ResultWithExit = tuple["SendResult", int]  # what `send` returns, and the exit code the CLI gives it

SEND_POLICY_COMMANDS = {"/send on": "on", "/send off": "off", "/send inherit": "inherit"}


def _start(ctx: Context, rec: RunRecord) -> None:
    """Make sure the run's lane has a live worker (it runs the lane's queue in order)."""
    from sessiontool.runs import lanes

    own = ctx.config.own_file
    try:
        lanes.ensure_worker(
            ctx.paths, lanes.lane_id(rec["sessionKey"]), config_path=str(own) if own else None
        )
    except StorageError as exc:
        records.abandon(ctx.paths, rec, exc.message)
        raise


def run_result(ctx: Context, rec: RunRecord) -> ResultWithExit:
    """The send/wait result shape of spec §5.2 for a record, and its exit code."""
    out: SendResult
    status = rec.get("status")
    key = ctx.display(rec["sessionKey"])
    if status == "ok":
        reply = rec.get("reply") or ""
        out = {"runId": rec["runId"], "status": "ok", "reply": reply, "sessionKey": key}
        code = ExitCode.OK
    elif records.is_finished(rec):
        error = rec.get("error") or f"run ended with status {status}"
        out = {
            "runId": rec["runId"],
            "status": "error",
            "error": error,
            "runStatus": status,
            "sessionKey": key,
        }
        code = ExitCode.FAILURE
        if rec.get("abortReason") == "budget":
            out["reason"] = "budget"
            code = ExitCode.OVER_BUDGET
    else:
        error = f"still running after the wait timed out: sessiontool wait {rec['runId']}"
        out = {"runId": rec["runId"], "status": "timeout", "error": error, "sessionKey": key}
        code = ExitCode.TIMEOUT
    from sessiontool.runs.writer import writer_of

    writer = writer_of(rec)
    own = rec.get("deliver") and not writer.owns_delivery  # else OpenClaw's gateway delivers it
    mode: Literal["announce", "deliver"] | None = (
        "announce" if rec.get("a2a") else "deliver" if own else None
    )
    if writer.kind != "files":
        out["via"] = writer.kind  # the turn is OpenClaw's (its delivery too, with --deliver)
    if mode and rec.get("kind") == "send" and status in (None, "queued", "running", "ok"):
        out["delivery"] = {"status": "pending", "mode": mode}
    return out, int(code)


def send(
    ctx: Context,
    key: str | None,
    message: str,
    *,
    label: str | None = None,
    timeout: float = 30.0,
    deliver: bool = False,
    wait: Callable[[Any, str, float], RunRecord] | None = None,
    watch: SendWatch | None = None,
) -> ResultWithExit:
    """`wait(paths, run_id, timeout)` replaces the blocking `wait_for` when the caller waits
    its own way (the MCP server: in slices, with progress and cancellation). `watch` is told
    what the send does as it does it (SendWatch). The context's gate (budgets, `--max-cost`)
    refuses the run (exit 6) or sets its cost limit, before anything is written."""
    policy.check_tool(ctx, "sessions_send")
    stripped = message.strip()
    if ctx.requester.is_operator and stripped in SEND_POLICY_COMMANDS:
        from sessiontool.runs.sendpolicy import set_send_policy

        data = set_send_policy(ctx, key, label, SEND_POLICY_COMMANDS[stripped])
        return {
            "status": "ok",
            "sessionKey": data["sessionKey"],
            "sendPolicy": data.get("sendPolicy"),
        }, 0
    if not stripped:
        raise UsageError("the message is empty")
    require_utf8(message, "the message")
    r = resolve(ctx, key, label=label, create=True)
    refuse_archived_target(ctx, r.agent_id, r.key, r.entry)
    display = ctx.display(r.key)
    if watch is not None and r.entry is None and r.key != ctx.main_key(r.agent_id):
        watch.new_session(display)  # `main` always exists
    from sessiontool.runs.writer import writer_for

    writer = writer_for(ctx, [r.agent_id, ctx.agent_id], "send")
    req = ctx.requester
    try:
        if req.session_key is not None and req.session_key == r.key:
            raise ForbiddenError(
                "a session cannot send to itself (it would wait on its own lane)",
            )
        policy.check_access(ctx, r.key, r.entry, "send")
        decision = policy.send_decision(ctx.config.send_policy, r.key, r.entry)
        if not decision.allowed:
            raise ForbiddenError("send blocked by session policy")
    except ForbiddenError as exc:
        exc.extra.setdefault("sessionKey", display)
        raise
    a2a = req.session_key is not None and req.session_key != r.key
    if writer.kind == "files":  # refused before anything is written (the sweep included)
        _check_transcripts(ctx, (r.agent_id, r.entry), *([req.session_key] if a2a else []))
    cost_limit = ctx.gate.allow(r.agent_id, r.key, r.entry, None) if ctx.gate else None
    writer.before_run(ctx)
    provenance, system = _provenance(ctx, writer, r.key) if a2a else ({**_EXTERNAL}, None)
    # OpenClaw's own sessions_send carries an agent-to-agent send out where its gateway
    # allows the tool (its reply-back turns and announce step are then OpenClaw's).
    own = a2a and writer.openclaw_sends(ctx, req.session_key)  # type: ignore[arg-type]
    rec = records.create_record(
        ctx.paths,
        kind="send",
        via=_via(writer),
        tool="sessions_send" if own else None,
        sessionKey=r.key,
        agentId=r.agent_id,
        requesterSessionKey=req.session_key,
        message=message,
        system=system,
        provenance=provenance,
        a2a=True if a2a else None,
        deliver=True if (deliver and not a2a) else None,
        timeoutSeconds=timeout,
        costLimit=cost_limit,
    )
    if watch is not None:
        watch.run_created(rec["runId"])
    testhooks.pause("run-created")
    _start(ctx, rec)
    if timeout <= 0:
        out: SendResult = {"runId": rec["runId"], "status": "accepted", "sessionKey": display}
        if a2a or (deliver and not writer.owns_delivery):
            out["delivery"] = {"status": "pending", "mode": "announce" if a2a else "deliver"}
        return out, 0
    from sessiontool.runs.wait import wait_for

    return run_result(ctx, (wait or wait_for)(ctx.paths, rec["runId"], timeout))


_EXTERNAL: dict[str, Any] = {"kind": "external_user", "sourceTool": "sessiontool"}


def _provenance(ctx: Context, writer: SessionWriter, target: str) -> tuple[dict[str, Any], str]:
    """An agent-to-agent send's provenance (OpenClaw's inter_session) and its system prompt."""
    from sessiontool.flow.a2a import context_prompt, session_channel

    source = ctx.requester.session_key
    assert source is not None
    req_entry = writer.requester_entry(ctx, source)
    provenance: dict[str, Any] = {
        "kind": "inter_session",
        "sourceSessionKey": source,
        "sourceChannel": session_channel(source, req_entry),
        "sourceTool": "sessions_send",
    }
    if provenance["sourceChannel"] is None:
        del provenance["sourceChannel"]
    return provenance, context_prompt(source, provenance.get("sourceChannel"), target)


class SendWatch(Protocol):
    """What a caller of `send` is told as it happens (the CLI; the MCP server and the tools
    pass none)."""

    def new_session(self, key: str) -> None:
        """The key names no session yet: the run will create it (as OpenClaw does). Told
        before anything is written, so raising here refuses the send (`--no-create`). Whether
        the session exists once the command is over is `session_exists`'s to say: a run
        withdrawn from a full disk may have made none."""

    def run_created(self, run_id: str) -> None:
        """The run exists (the CLI then names it if Ctrl-C comes before its worker starts)."""


def session_exists(ctx: Context, key: str) -> bool:
    """Whether a session has an entry now (a send's new key, after its run: the worker writes
    the entry when the turn starts; a withdrawn run never did)."""
    from sessiontool.errors import NotFoundError

    try:
        return resolve(ctx, key).entry is not None
    except NotFoundError:
        return False


def _via(writer: SessionWriter) -> str | None:
    """A run's record names the writer its command chose (files: unnamed, as before)."""
    return None if writer.kind == "files" else writer.kind


def spawn(
    ctx: Context,
    task: str,
    *,
    label: str | None = None,
    agent_id: str | None = None,
    model: str | None = None,
    options: SpawnOptions | None = None,
) -> SpawnResult:
    """Start a sub-agent run in a new session; never waits (gated as `send` is). `options`: OpenClaw's other
    sessions_spawn parameters (runs/spawnopts.py)."""
    from sessiontool.runs import spawnopts

    if not task.strip():
        raise UsageError("the task is empty")
    require_utf8(task, "the task")
    opts = spawnopts.checked(options or spawnopts.SpawnOptions())
    if label is not None and len(label) > 64:
        raise UsageError("--label must be at most 64 characters")
    target_agent = keys.normalize_agent_id(agent_id) if agent_id else ctx.agent_id
    requester = ctx.requester_or_main()
    from sessiontool.runs.writer import writer_for

    writer = writer_for(ctx, [target_agent, keys.agent_of(requester, ctx.agent_id)], "spawn")
    req_entry = writer.requester_entry(ctx, requester)
    max_depth = spawnopts.max_spawn_depth(ctx)
    depth = spawnopts.check_depth(spawnopts.depth_of(requester, req_entry), max_depth)
    spawnopts.check_fork(opts, target_agent, keys.agent_of(requester, ctx.agent_id))
    policy.check_spawn_agent(ctx, target_agent)
    if model is not None:
        model = validate_model(
            ctx.config, model, target_agent, via_gateway=writer.kind == "gateway"
        )
    files = _prepared_attachments(ctx, opts)
    child = f"agent:{target_agent}:subagent:{uuid.uuid4()}"
    spawnopts.check_sandbox(ctx, opts, child, target_agent)
    if writer.kind == "files":  # refused before anything is written (the sweep included)
        opts = spawnopts.on_own_store(ctx, opts, req_entry, child=child, agent_id=target_agent)
        _check_transcripts(ctx, None, requester)
    cost_limit = ctx.gate.allow(target_agent, child, None, model) if ctx.gate else None
    writer.before_run(ctx)
    writer.add_child(
        ctx,
        {
            "key": child,
            "agentId": target_agent,
            "requester": requester,
            "label": label,
            "model": model,
            "entry": spawnopts.child_entry_fields(opts, depth, max_depth),
        },
    )
    run_id = records.new_run_id()
    own = writer.openclaw_spawn(
        ctx,
        run_id,
        {
            "task": task,
            "requester": requester,
            "agentId": target_agent,
            "label": label,
            "model": model,
            "runTimeout": opts.run_timeout,
            "cleanup": opts.cleanup,
            "more": spawnopts.tool_arguments(opts),
        },
    )
    fields = spawnopts.record_fields(opts, depth, max_depth)
    spawn = _Spawn(
        task=task, child=child, agent_id=target_agent, requester=requester, label=label, opts=opts
    )
    if own is not None:  # OpenClaw's own sessions_spawn made the child and started its run
        tool: dict[str, Any] = {"tool": "sessions_spawn", "runId": run_id}
        if own.get("runId"):
            tool["gatewayRunId"] = own["runId"]
        child = own["childSessionKey"]
        spawn = spawn._replace(child=child)
        rec = _spawn_record(
            ctx, spawn, None, via=_via(writer), model=model, costLimit=cost_limit, **tool, **fields
        )
        _start(ctx, rec)
        return {**_accepted(ctx, rec, child), "via": _via(writer), "tool": "sessions_spawn"}
    system = _child_system(ctx, writer, spawn)
    if files:
        from sessiontool.runs.attachments import stage

        receipt, block = stage(ctx, child, files, opts.attach_as)
        system = f"{system}\n\n{block}"
        fields["attachments"] = receipt
    via = _via(writer)
    rec = _spawn_record(
        ctx, spawn, system, via=via, model=model if via else None, costLimit=cost_limit, **fields
    )
    _start(ctx, rec)
    out = _accepted(ctx, rec, child)
    if via:
        out["via"] = via
    if files:
        out["attachments"] = {k: v for k, v in fields["attachments"].items() if k != "dir"}
    return out


class _Spawn(NamedTuple):
    """One spawn's parts that its record is made of."""

    task: str
    child: str
    agent_id: str
    requester: str
    label: str | None
    opts: SpawnOptions


def _child_system(ctx: Context, writer: SessionWriter, s: _Spawn) -> str:
    from sessiontool.flow.a2a import session_channel
    from sessiontool.flow.announce import subagent_system_prompt

    return subagent_system_prompt(
        task=s.task,
        label=s.label,
        requester_key=s.requester,
        requester_channel=session_channel(s.requester, writer.requester_entry(ctx, s.requester)),
        child_key=s.child,
    )


def _prepared_attachments(ctx: Context, opts: SpawnOptions) -> list[tuple[str, bytes]]:
    if not opts.attachments:
        return []
    from sessiontool.runs.attachments import prepare

    return prepare(ctx, opts.attachments)


def _accepted(ctx: Context, rec: RunRecord, child: str) -> SpawnResult:
    """What `spawn` answers: the run started, the child's key (spawn never waits)."""
    return {"status": "accepted", "runId": rec["runId"], "childSessionKey": ctx.display(child)}


def _check_transcripts(
    ctx: Context, target: tuple[str, Any] | None, *requesters: str | None
) -> None:
    """The transcripts a run will append to (the target's; a requester's, for reply turns and
    announces) must not be planted links: refused before anything starts (exit 5)."""
    from sessiontool.state.sessions_json import peek_entry
    from sessiontool.state.transcript import check_writable

    if target is not None:
        check_writable(ctx.paths, *target)
    for key in requesters:
        if key is not None:
            check_writable(ctx.paths, keys.agent_of(key, ctx.agent_id), peek_entry(ctx.paths, key))


def _spawn_record(ctx: Context, s: _Spawn, system: str | None, **more: Any) -> RunRecord:
    """The queued record of a spawn, file-based or through the gateway (`more`: via, model,
    the options' fields)."""
    return records.create_record(
        ctx.paths,
        kind="spawn",
        **more,
        sessionKey=s.child,
        agentId=s.agent_id,
        requesterSessionKey=s.requester,
        message=s.task,
        system=system,
        label=s.label,
        cleanup=s.opts.cleanup,
        runTimeoutSeconds=s.opts.run_timeout,
        provenance={
            "kind": "inter_session",
            "sourceSessionKey": s.requester,
            "sourceTool": "sessions_spawn",
        },
    )


# The fields of a run record that `runs` shows (docs/runs.md). The rest is the engine's
# bookkeeping, free to change with it: the lane position (`seq`), the worker's `pid`, `agentPid`
# and `workerStartedAt`, the decided `outcome`, `skipIndex`, `gatewayDeliver`. A new record
# field stays out of the output until it is added here (and to docs/runs.md).
PUBLIC_RUN_FIELDS = frozenset(
    {
        "runId",
        "kind",
        "status",
        "createdAt",
        "startedAt",
        "endedAt",
        "sessionKey",
        "sessionId",
        "agentId",
        "requesterSessionKey",
        "startedBy",
        "parentRunId",
        "step",
        "turn",
        "maxTurns",
        "a2a",
        "label",
        "cleanup",
        "deliver",
        "via",
        "tool",  # OpenClaw's own tool that carried the run out (tools.invoke)
        "message",
        "system",
        "provenance",
        "timeoutSeconds",
        "runTimeoutSeconds",
        "model",
        "modelProvider",
        "usage",
        "reply",
        "error",
        "followUp",
        "announce",
        "announcedAt",
        "rerunOf",  # `rerun`: the run this one repeats
        "recoveredAt",  # a dead worker's run ended from the reply found in its transcript
        "gatewayRunId",  # the run's id in OpenClaw's gateway (its logs, chat.abort, agent.wait)
        # A spawn's options (runs/spawnopts.py; docs/runs.md)
        "spawnDepth",
        "maxSpawnDepth",
        "thinkingLevel",
        "thinking",  # thinkingLevel, as an older sessiontool wrote it
        "cwd",
        "context",
        "spawnMode",
        "taskName",
        "completion",
        "sandbox",
        "attachments",
        "costLimit",  # what the run may spend: a budget's room at submission, or --max-cost
        "abortReason",  # "budget": stopped when its spend crossed costLimit
    }
)


def run_view(ctx: Context, rec: RunRecord) -> RunView:
    """A record as `runs` shows it: its public fields only (an internal field never leaks out by
    accident; the required ones are public), in the record's order, keys in display form."""
    out = cast("RunView", {k: v for k, v in rec.items() if k in PUBLIC_RUN_FIELDS})
    if isinstance(key := out.get("sessionKey"), str):
        out["sessionKey"] = ctx.display(key)
    if isinstance(requester := out.get("requesterSessionKey"), str):
        out["requesterSessionKey"] = ctx.display(requester)
    return out


def visible_run(ctx: Context, rec: RunRecord) -> bool:
    """A session requester sees only the runs it started (and their steps)."""
    req = ctx.requester.session_key
    return req is None or rec.get("requesterSessionKey") == req or rec.get("startedBy") == req


def get_run(ctx: Context, run_id: str) -> RunRecord:
    from sessiontool.errors import NotFoundError
    from sessiontool.runs.reconcile import reconcile

    rec = reconcile(ctx.paths, records.read_record(ctx.paths, run_id))
    if not visible_run(ctx, rec):
        raise NotFoundError(f"Run not found: {run_id}")
    return rec


# -- --model ----------------------------------------------------------------------------------


def validate_model(
    config: Config, name: str, agent_id: str | None = None, *, via_gateway: bool = False
) -> str:
    """The model name, trimmed, when the config knows it (or, for an agent whose runner is
    `llm`, when `llm` knows it: any id or alias `llm models`/`llm aliases` show); else a usage
    error (exit 2) listing the known models. OpenClaw only warns (`modelApplied: false`), but a
    CLI user who names a model should learn at once that it is unknown rather than get a run on
    another one. `via_gateway`: OpenClaw's gateway runs the session (its agent answers), so
    sessiontool's demo `echo` model is none of its models."""
    text = name.strip()
    if not text:
        raise UsageError("--model must not be empty")
    from sessiontool.state.config_models import is_known_model, known_models

    if is_known_model(config, text, demo=not via_gateway):
        return text
    runner = config.runner_for(agent_id) if agent_id and not via_gateway else {}
    if runner.get("type") == "llm":
        from sessiontool.runs.llm_models import knows_model

        known_to_llm = knows_model(text)
        if known_to_llm:
            return text
        if known_to_llm is False:
            raise UsageError(
                f"unknown model '{text}': llm knows no such model id or alias",
                hint="`llm models` and `llm aliases` list them; plugins add more",
            )
    known = known_models(config, demo=not via_gateway)
    raise UsageError(
        f"unknown model '{text}' (known: {', '.join(known)})",
        hint="add it to agents.defaults.models or to an agent's model in the config",
    )
