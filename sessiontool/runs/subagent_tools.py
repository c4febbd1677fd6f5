"""The orchestration tools, OpenClaw 2026.9.6's names and result shapes: `subagents` (list,
wait for or cancel the runs of the caller's session tree: its own and, through the sessions it
spawned, theirs) and `sessions_yield` (wait for the caller's outstanding children and return
their completion events, the `task_completion` events their announces carry). Registered into
`runs/tools.py`'s table.

A run is OpenClaw's task here: `taskId` is the runId. The waits are taken in slices so an MCP
cancellation or shutdown ends them (the runs go on)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sessiontool.context import Context
from sessiontool.errors import UsageError
from sessiontool.runs.tooldefs import CallOptions, ToolDef, int_param, obj_schema, str_param

if TYPE_CHECKING:
    from sessiontool.runs.record_types import RunRecord

# sessiontool's run statuses in OpenClaw's task words.
TASK_STATUS = {
    "queued": "queued",
    "running": "running",
    "ok": "completed",
    "error": "failed",
    "timeout": "timed_out",
    "aborted": "cancelled",
    "lost": "failed",
}
RECENT_MINUTES = 30
WAIT_DEFAULT, WAIT_MAX = 30, 60  # OpenClaw's subagents wait
YIELD_DEFAULT, YIELD_MAX = 600, 3600
SLICE = 0.25
MAX_TASK_IDS = 32
NO_PENDING = (  # OpenClaw's words (sessions_yield with no child completion pending)
    "No pending child completion is owned by this turn. If the assigned work is complete, "
    "return its result normally."
)


def tree_runs(ctx: Context) -> list[RunRecord]:
    """The send and spawn runs of the caller's session tree, reconciled, newest first: those it
    started, and those started by a session it spawned (and so on down)."""
    from sessiontool.runs import records
    from sessiontool.runs.reconcile import reconcile

    every = [
        r for r in records.iter_records(ctx.paths, warn=False) if r.get("kind") in ("send", "spawn")
    ]
    me = ctx.requester.session_key
    owners = {me}
    picked: dict[str, RunRecord] = {}
    grew = True
    while grew:
        grew = False
        for r in every:
            rid = str(r.get("runId"))
            if rid in picked or not _owned(r, owners, me is None):
                continue
            picked[rid] = r
            grew = True
            if r.get("kind") == "spawn" and isinstance(r.get("sessionKey"), str):
                owners.add(r["sessionKey"])
    out = [reconcile(ctx.paths, r) for r in picked.values()]
    out.sort(key=lambda r: (r.get("createdAt") or 0, str(r.get("runId"))), reverse=True)
    return out


def _owned(rec: RunRecord, owners: set[str | None], operator: bool) -> bool:
    return operator or rec.get("requesterSessionKey") in owners or rec.get("startedBy") in owners


def task_view(ctx: Context, rec: RunRecord) -> dict[str, Any]:
    """One run as OpenClaw's subagents tool shows a task, with the run's own keys beside."""
    status = str(rec.get("status"))
    out: dict[str, Any] = {
        "taskId": rec.get("runId"),
        "runtime": "subagent" if rec.get("kind") == "spawn" else "session",
        "status": TASK_STATUS.get(status, "failed"),
        "runStatus": status,
        "kind": rec.get("kind"),
        "sessionKey": ctx.display(str(rec.get("sessionKey"))),
    }
    for name in ("label", "createdAt", "startedAt", "endedAt"):
        if rec.get(name) is not None:
            out[name] = rec[name]
    reply, error = rec.get("reply"), rec.get("error")
    if status == "ok" and isinstance(reply, str):
        out["terminalSummary"] = reply[:500]
    if isinstance(error, str) and error:
        out["error"] = error[:120]
    return out


def _active(rec: RunRecord) -> bool:
    return rec.get("status") in ("queued", "running")


def _updated(rec: RunRecord) -> int:
    for name in ("endedAt", "startedAt", "createdAt"):
        v = rec.get(name)
        if isinstance(v, int | float) and not isinstance(v, bool):
            return int(v)
    return 0


# -- subagents ----------------------------------------------------------------------------------


def _list(ctx: Context, args: Mapping[str, Any]) -> dict[str, Any]:
    from sessiontool.clock import now_ms

    minutes = min(args.get("recentMinutes", RECENT_MINUTES), 24 * 60)
    cutoff = now_ms() - minutes * 60_000
    runs = [r for r in tree_runs(ctx) if _active(r) or _updated(r) >= cutoff]
    tasks = [task_view(ctx, r) for r in runs]
    subs = [t for t in tasks if t["runtime"] == "subagent"]
    active = [t for t in subs if t["status"] in ("queued", "running")]
    recent = [t for t in subs if t["status"] not in ("queued", "running")]
    me = ctx.requester.session_key
    lines = [
        f"{i}. {t.get('label') or t['sessionKey']} {t['status']}" for i, t in enumerate(subs, 1)
    ]
    return {
        "status": "ok",
        "action": "list",
        "requesterSessionKey": ctx.display(me) if me else None,
        "callerSessionKey": ctx.display(me) if me else None,
        "callerIsSubagent": ctx.requester.is_subagent,
        "total": len(subs),
        "taskTotal": len(tasks),
        "tasks": tasks,
        "active": active,
        "recent": recent,
        "text": "\n".join(lines) if lines else "No sub-agents.",
    }


def _wait_state(ctx: Context, ids: list[str]) -> dict[str, Any]:
    by_id = {str(r.get("runId")): r for r in tree_runs(ctx)}
    found = [by_id[i] for i in ids if i in by_id]
    unavailable = [i for i in ids if i not in by_id]
    done = [str(r.get("runId")) for r in found if not _active(r)]
    state: dict[str, Any] = {
        "reason": "unavailable" if unavailable else "completed" if done else None,
        "tasks": [task_view(ctx, r) for r in found],
        "completed": done,
        "attention": [],
    }
    if unavailable:
        state["unavailable"] = unavailable
    return state


def _wait(ctx: Context, args: Mapping[str, Any], opts: CallOptions) -> dict[str, Any]:
    from sessiontool.runs.wait import wait_for

    ids = list(dict.fromkeys(args.get("taskIds") or []))
    if not ids:
        raise UsageError("subagents wait needs taskIds (the runs to wait for)")
    if len(ids) > MAX_TASK_IDS:
        raise UsageError(f"subagents wait supports at most {MAX_TASK_IDS} taskIds")
    timeout = args.get("timeoutSeconds", WAIT_DEFAULT)
    deadline = time.monotonic() + timeout
    opts.waiting(f"{len(ids)} run(s)", timeout)
    while True:
        state = _wait_state(ctx, ids)
        left = deadline - time.monotonic()
        if state["reason"] is not None or left <= 0 or opts.cancelled():
            state["reason"] = state["reason"] or "timeout"
            return {"status": "ok", "action": "wait", **state}
        wait_for(ctx.paths, state["tasks"][0]["taskId"], min(SLICE, left))  # all still going


def _cancel(ctx: Context, args: Mapping[str, Any]) -> dict[str, Any]:
    from sessiontool.runs.control import abort

    task_id = args.get("taskId")
    if not task_id:
        raise UsageError("subagents cancel needs taskId")
    target = next((r for r in tree_runs(ctx) if r.get("runId") == task_id), None)
    if target is None:
        return {"status": "forbidden", "error": "Task outside session tree."}
    rec = abort(ctx.paths, task_id)
    cancelled = rec.get("status") == "aborted"
    if cancelled and rec.get("startedAt"):
        from sessiontool.runs.writer import writer_of

        writer_of(rec).abort_turn(ctx.paths, rec)
    out: dict[str, Any] = {
        "status": "cancelled" if cancelled else "error",
        "taskId": task_id,
        "found": True,
        "cancelled": cancelled,
    }
    if not cancelled:
        out["reason"] = f"the run had already ended ({rec.get('status')})"
    return out


def _subagents(ctx: Context, args: Mapping[str, Any], opts: CallOptions) -> dict[str, Any]:
    action = args.get("action", "list")
    if action == "wait":
        return _wait(ctx, args, opts)
    if action == "cancel":
        return _cancel(ctx, args)
    return _list(ctx, args)


# -- sessions_yield -----------------------------------------------------------------------------


def _children(ctx: Context) -> list[RunRecord]:
    """The caller's own spawn runs (not its children's)."""
    from sessiontool.runs.submit import visible_run

    return [r for r in tree_runs(ctx) if r.get("kind") == "spawn" and visible_run(ctx, r)]


def _yield(ctx: Context, args: Mapping[str, Any], opts: CallOptions) -> dict[str, Any]:
    from sessiontool.flow.announce import completion_event
    from sessiontool.runs.wait import wait_for

    pending = [str(r.get("runId")) for r in _children(ctx) if _active(r)]
    if not pending:
        return {"status": "error", "error": NO_PENDING}
    timeout = args.get("timeoutSeconds", YIELD_DEFAULT)
    deadline = time.monotonic() + timeout
    opts.waiting(f"{len(pending)} sub-agent run(s)", timeout)
    while True:
        by_id = {str(r.get("runId")): r for r in _children(ctx)}
        going = [i for i in pending if i in by_id and _active(by_id[i])]
        left = deadline - time.monotonic()
        if not going or left <= 0 or opts.cancelled():
            break
        wait_for(ctx.paths, going[0], min(SLICE, left))
    events = []
    for i in pending:
        r = by_id.get(i)
        if r is not None and not _active(r):
            events.append({"runId": i, **completion_event(r, None)})
    out: dict[str, Any] = {"status": "yielded" if not going else "timeout", "events": events}
    if going:
        out["pendingChildren"] = going
        out["error"] = f"{len(going)} child run(s) still going; they go on"
    return out


_SUBAGENTS = ToolDef(
    name="subagents",
    title="List, wait for or cancel sub-agent runs",
    description=(
        "Background work of this session's tree (its runs, and through the sessions it "
        "spawned, theirs): action list (default: active and recent runs), wait (for taskIds "
        "until one finishes, at most timeoutSeconds; a timeout cancels nothing) or cancel "
        "(a taskId). A taskId is a runId. Result: {status: ok, action, tasks: [{taskId, "
        "runtime, status, label, sessionKey, ...}], ...}; cancel: {status: cancelled, taskId}."
    ),
    input_schema=obj_schema(
        {
            "action": {
                "type": "string",
                "enum": ["list", "wait", "cancel"],
                "description": "list (default), wait or cancel.",
            },
            "recentMinutes": int_param(
                f"list: finished runs of the last N minutes too (default {RECENT_MINUTES}).", 1
            ),
            "taskId": str_param("cancel: the run to cancel (its runId)."),
            "taskIds": {
                "type": "array",
                "items": {"type": "string"},
                "description": "wait: the runs to wait for (1 to 32 runIds).",
            },
            "timeoutSeconds": int_param(
                f"wait: at most this long (default {WAIT_DEFAULT}, at most {WAIT_MAX}).",
                0,
                WAIT_MAX,
            ),
        }
    ),
    handler=_subagents,
    read_only=False,
    destructive=True,
)

_YIELD = ToolDef(
    name="sessions_yield",
    title="Wait for this session's sub-agents",
    description=(
        "Wait until every sub-agent run this session spawned and that is still going has "
        "ended, and return their completion events (what their announces carry). Result: "
        "{status: yielded, events: [{type: task_completion, childSessionKey, status, result, "
        "...}]}; {status: timeout, events, pendingChildren} when the wait ran out (the runs go "
        "on)."
    ),
    input_schema=obj_schema(
        {
            "timeoutSeconds": int_param(
                f"At most this long (default {YIELD_DEFAULT}, at most {YIELD_MAX}).",
                0,
                YIELD_MAX,
            ),
        }
    ),
    handler=_yield,
    read_only=True,
)

TOOLS: dict[str, ToolDef] = {t.name: t for t in (_SUBAGENTS, _YIELD)}
