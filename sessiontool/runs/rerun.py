"""`rerun RUN_ID`: a new run with the target, message and options of one that did not end well
(failed, lost, aborted, timed out), as pueue's `restart` does. The old record stays as it is;
the new one names it (`rerunOf`), so `runs` shows both and a script can follow the chain."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sessiontool.context import Context, context_for_session
from sessiontool.errors import UsageError
from sessiontool.runs import records, schema

if TYPE_CHECKING:
    from sessiontool.runs.record_types import RunRecord
    from sessiontool.runs.result_types import SendResult, SpawnResult

RERUNNABLE = ("error", "lost", "aborted", "timeout")


def rerun(ctx: Context, old: RunRecord) -> SendResult | SpawnResult:
    """Start the new run (never waits) and return the `send --timeout 0` / `spawn` result
    with `rerunOf`. `old` is a visible, reconciled record (`submit.get_run`)."""
    from sessiontool.runs.submit import send, spawn

    run_id = str(old.get("runId"))
    status = old.get("status")
    if old.get("kind") == "step":
        parent = old.get("parentRunId")
        raise UsageError(
            f"run {run_id} is an internal step; rerun its run instead",
            hint=f"sessiontool rerun {parent}" if isinstance(parent, str) else None,
        )
    if old.get("kind") == "compact":
        raise UsageError(
            f"run {run_id} is a compaction; compact the session again",
            hint=f"sessiontool compact {old.get('sessionKey')}",
        )
    if status not in RERUNNABLE:
        raise UsageError(
            f"run {run_id} is {status}; only a run that failed, was lost, aborted or timed out "
            "is rerun",
            hint=f"sessiontool wait {run_id}" if status in schema.ACTIVE_STATUSES else None,
        )
    message = old.get("message")
    key = old.get("sessionKey")
    if not isinstance(message, str) or not isinstance(key, str):
        raise UsageError(f"run {run_id} has no message or session to run again")
    result: SendResult | SpawnResult
    if old.get("kind") == "spawn":
        from sessiontool.runs.spawnopts import from_record

        result = spawn(
            ctx,
            message,
            label=_free_label(ctx, old),
            agent_id=str(old.get("agentId") or ctx.agent_id),
            options=from_record(old, _number(old.get("runTimeoutSeconds"))),
        )
    else:
        requester = old.get("requesterSessionKey")
        if old.get("a2a") and isinstance(requester, str) and ctx.requester.is_operator:
            # An agent-to-agent send stays one: run it again as the session that sent it.
            ctx = context_for_session(ctx.paths.root, ctx.config, requester)
        result, _code = send(ctx, key, message, timeout=0, deliver=bool(old.get("deliver")))
    new_id = result.get("runId")
    if isinstance(new_id, str):
        records.update_record(ctx.paths, new_id, lambda r: r.__setitem__("rerunOf", run_id))
    result["rerunOf"] = run_id
    return result


def _number(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) and v > 0 else None


def _free_label(ctx: Context, old: RunRecord) -> str | None:
    """The old spawn's label when no session holds it any more (labels name one session; the
    old child usually keeps it, and then the new child goes without)."""
    from sessiontool.sessions.reading import iter_sessions

    label = old.get("label")
    if not isinstance(label, str) or not label:
        return None
    agent = str(old.get("agentId") or ctx.agent_id)
    for row in iter_sessions(ctx.paths, [agent], fields=("label",)):
        if row.entry.get("label") == label:
            return None
    return label
