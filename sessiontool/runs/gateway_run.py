"""A run whose turn OpenClaw's gateway carries out (SQLite-era agents, or a JSON-era state dir
whose running gateway ignores the store lock).

The record, the lane, the run lock, the FIFO wake-up, `wait`, `--timeout`/exit 124, `abort` and
`runs` are the ordinary run engine's: only the turn differs. The lane worker hands it to the
gateway's `agent` method (`--expect-final`, the run id as `idempotencyKey`, so a retried call
can never start a second turn) and records the final answer. Nothing here writes OpenClaw's
store: no sessions.json, no transcript, no lock under `agents/` — the gateway writes the turn,
and sessiontool's own files stay under `<state>/sessiontool/`.

A spawn creates its child through the gateway too: `sessions.create` on the new key, linked to
its requester (`create_child`), then the child's turn with the sub-agent system prompt
(`extraSystemPrompt`, lane `subagent`, `timeout` = `--run-timeout`; a turn that outlives it is
`timeout` and is aborted in the gateway). When it ends, its follow-up `gateway-announce` hands
the announce text (the same `Status/Result/Notes/Stats` message as the file form) to the
requester session through the writer (runs/gateway_writer.py); a `--cleanup delete` child
is then removed with `sessions.delete`. A send between two sessions gets the same reply-back
and announce steps as on files, each a gateway run of its own.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from sessiontool.clock import now_ms
from sessiontool.errors import SessiontoolError
from sessiontool.openclaw import gateway
from sessiontool.openclaw.wsconnection import TurnHooks
from sessiontool.runs import lanes, records, steps
from sessiontool.runs.gateway_budget import aborted
from sessiontool.runs.gateway_writer import ABORT_CALL_TIMEOUT_S
from sessiontool.runs.turn import Outcome, RunAborted, WorkerState, abortable, decide
from sessiontool.state.paths import StatePaths, is_plain_name

if TYPE_CHECKING:
    from sessiontool.runs.gateway_budget import BudgetWatch
    from sessiontool.runs.record_types import RunRecord

SEND_WAIT_S = 3600.0  # a send has no run timeout of its own; the gateway's agent timeout ends it
RUN_TIMEOUT_GRACE_S = 30.0


def turn_params(rec: RunRecord) -> dict[str, Any]:
    """The `agent` method's params for this record's turn."""
    params: dict[str, Any] = {
        "sessionKey": rec["sessionKey"],
        "message": rec.get("message", ""),
        "idempotencyKey": rec["runId"],
    }
    prov = rec.get("provenance")
    # Only a message from another session is attributed: OpenClaw's own operator clients stamp
    # no provenance on an operator's message (its requester-tool policy reads the kind).
    if isinstance(prov, dict) and prov.get("kind") == "inter_session":
        params["inputProvenance"] = {
            k: v
            for k, v in prov.items()
            if k in ("kind", "sourceSessionKey", "sourceChannel", "sourceTool")
            and isinstance(v, str)
        }
    if rec.get("system"):
        params["extraSystemPrompt"] = rec["system"]
    if rec.get("kind") == "spawn":
        params["lane"] = "subagent"
        timeout = rec.get("runTimeoutSeconds")
        if isinstance(timeout, int | float) and not isinstance(timeout, bool) and timeout > 0:
            params["timeout"] = max(1, int(timeout))
        model = rec.get("model")
        if isinstance(model, str) and model and model != "echo":
            if "/" in model:
                params["provider"], params["model"] = model.split("/", 1)
            else:
                params["model"] = model
    if rec.get("deliver") or rec.get("gatewayDeliver"):
        params["deliver"] = True
    return params


def _wait_s(rec: RunRecord) -> float:
    timeout = rec.get("runTimeoutSeconds")
    if isinstance(timeout, int | float) and not isinstance(timeout, bool) and timeout > 0:
        return float(timeout) + RUN_TIMEOUT_GRACE_S
    return SEND_WAIT_S


def execute_run(w: WorkerState, rec: RunRecord) -> None:
    """The record's turn when its command chose the gateway writer (worker.carry_out): the
    steps of execute.py's, minus every file of OpenClaw's."""
    paths: StatePaths = w.paths
    slot = None if rec.get("a2a") else lanes.acquire_slot(paths, w.max_concurrent())
    try:
        if not _start(paths, rec):
            return
        from sessiontool.runs.gateway_budget import watch_for

        out = _tool_turn(paths, rec) or _turn(paths, rec, watch_for(rec, w.cfg.providers))
        _over_budget(w, rec, out)
        out.status, out.error = decide(paths, rec, out)
        _publish(paths, rec, out)
    finally:
        if slot is not None:
            os.close(slot)


def _over_budget(w: WorkerState, rec: RunRecord, out: Outcome) -> None:
    """A gateway turn reports its usage at its end: one that spent its cost limit or more ends
    `aborted` for the budget (its reply kept), and the budget refuses the next run: what the
    mid-turn watch (runs/gateway_budget.py) could not tell, the input's tokens."""
    limit = rec.get("costLimit")
    usage = _usage(agent_meta(out.result))
    if not limit or out.status != "ok" or not usage:
        return
    from sessiontool.runs.runners import spend
    from sessiontool.state.prices import prices_of

    cost = spend.crossed(
        limit, prices_of(w.cfg.providers), out.provider, model=out.model, usage=usage
    )
    if cost is not None:
        out.status, out.error, out.reason = "aborted", spend.stop_message(limit, cost), "budget"


def _start(paths: StatePaths, rec: RunRecord) -> bool:
    def mark(r: RunRecord) -> bool:
        if r.get("status") != "queued":
            return False
        now = now_ms()
        r.update(
            {"status": "running", "startedAt": now, "workerStartedAt": now, "pid": os.getpid()}
        )
        return True

    done = records.update_record(paths, rec["runId"], mark)
    rec.update(done)
    return done.get("status") == "running"


def _tool_turn(paths: StatePaths, rec: RunRecord) -> Outcome | None:
    """The end of a run OpenClaw's own tool carries out (gateway_tool_run.py); None: the
    emulation, also when the gateway stopped offering the tool since the command asked."""
    if not rec.get("tool"):
        return None
    from sessiontool.runs import gateway_tool_run

    done = gateway_tool_run.turn(paths, rec)
    if done is None:
        rec.pop("tool", None)
        records.update_record(paths, rec["runId"], lambda r: r.pop("tool", None))
    return done


def _turn(paths: StatePaths, rec: RunRecord, watch: BudgetWatch | None = None) -> Outcome:
    """The gateway's `agent` turn of the record, to its end (`watch`: its spend, stopped
    mid-turn when it reaches its cost limit: runs/gateway_budget.py)."""
    out = Outcome()

    def on_pid(pid: int) -> None:
        records.update_record(paths, rec["runId"], lambda r: r.__setitem__("agentPid", pid))

    def on_accepted(payload: dict[str, Any]) -> None:
        """The gateway's own id of the turn (not our idempotency key): what `chat.abort` and
        `agent.wait` name it by."""
        gw_run = payload.get("runId")
        if isinstance(gw_run, str):
            rec["gatewayRunId"] = gw_run
            records.update_record(
                paths, rec["runId"], lambda r: r.__setitem__("gatewayRunId", gw_run)
            )

    def on_aborted(stopped: bool) -> None:
        records.update_record(
            paths, rec["runId"], lambda r: r.__setitem__("gatewayAborted", stopped)
        )

    try:
        with abortable(paths, rec["runId"]):
            if rec.get("cleanup") == "delete":  # one connection for the turn and the cleanup
                gateway.expect(paths, "sessions.delete", {"key": rec["sessionKey"]})
            if rec.get("kind") == "spawn":
                create_child(paths, rec)
            result = gateway.call(
                paths,
                "agent",
                turn_params(rec),
                timeout_s=_wait_s(rec),
                expect_final=True,
                on_pid=on_pid,
                abort_turn=True,
                hooks=TurnHooks(on_accepted, on_aborted, watch),
            )
        out.result = result
        status = result.get("status")
        if status == "ok" and _ran_out(rec, result):
            status = "timeout"
        if status == "ok":
            out.reply = reply_text(result)
        elif status in ("timeout", "timed_out"):
            out.status, out.error = "timeout", "the gateway's run timed out"
        elif status in ("aborted", "cancelled"):
            out.status, out.error = "aborted", "aborted in OpenClaw's gateway"
        else:
            summary = result.get("summary") or result.get("error")
            out.status = "error"
            out.error = f"the gateway's run ended with status {status}" + (
                f": {summary}" if isinstance(summary, str) and summary else ""
            )
    except RunAborted as exc:  # by a user, or by the budget's watch (chat.abort sent either way)
        aborted(out, exc)
    except SessiontoolError as exc:
        if "no answer in" in exc.message or "timeout" in exc.message.lower():
            out.status = "timeout"
        else:
            out.status = "error"
        out.error = exc.message
    except Exception as exc:  # noqa: BLE001 - a bug must still end the run
        from sessiontool.errors import describe

        out.status, out.error = "error", describe(exc)
    limit = _run_timeout(rec)
    if out.status == "timeout" and limit is not None:
        out.error = f"run timed out after {limit:g}s (--run-timeout)"
        _stop_turn(paths, rec)
    meta = agent_meta(out.result)
    if isinstance(meta.get("model"), str):
        out.model = meta["model"]
    if isinstance(meta.get("provider"), str):
        out.provider = meta["provider"]
    return out


def _run_timeout(rec: RunRecord) -> float | None:
    t = rec.get("runTimeoutSeconds")
    if isinstance(t, int | float) and not isinstance(t, bool) and t > 0:
        return float(t)
    return None


def _ran_out(rec: RunRecord, result: dict[str, Any]) -> bool:
    """A turn that hit its `timeout`: OpenClaw 2026.9.6 ends it `ok`, its tool cut short
    ("⚠️ Exec failed", an error payload) after at least that long. OpenClaw's own
    sessions_spawn counts such a run as timed out; so does sessiontool."""
    limit = _run_timeout(rec)
    if limit is None:
        return False
    res = result.get("result")
    meta = res.get("meta") if isinstance(res, dict) else None
    took = meta.get("durationMs") if isinstance(meta, dict) else None
    if not isinstance(took, int | float) or took < limit * 1000:
        return False
    payloads = res.get("payloads") if isinstance(res, dict) else None
    errored = any(isinstance(p, dict) and p.get("isError") for p in payloads or [])
    return errored or (isinstance(meta, dict) and meta.get("livenessState") == "paused")


def _stop_turn(paths: StatePaths, rec: RunRecord) -> None:
    """A timed-out turn is ended in the gateway too (best effort: the record says timeout)."""
    try:
        gateway.call(
            paths,
            "chat.abort",
            {"sessionKey": rec["sessionKey"], "runId": rec.get("gatewayRunId") or rec["runId"]},
            timeout_s=ABORT_CALL_TIMEOUT_S,
        )
    except SessiontoolError:
        pass


def create_child(paths: StatePaths, rec: RunRecord) -> None:
    """The spawn's child, created before its first turn and linked to its requester as
    OpenClaw's sessions_spawn links it: `parentSessionKey` (so the requester's row lists it in
    `childSessions`) and its `spawnDepth`, with its label (and `thinkingLevel`, `cwd`, `fork`
    when the spawn asked for them). Version facts, tried in order: 2026.9.6
    takes all of them; 2026.7.35's `sessions.create` has no `spawnDepth`; a gateway without
    `sessions.create` gets the label alone through `sessions.patch` (unlinked, as before).
    Creating an existing key adopts it, so a retried turn creates nothing twice."""
    params: dict[str, Any] = {
        "key": rec["sessionKey"],
        "parentSessionKey": rec["requesterSessionKey"],
        "spawnDepth": rec.get("spawnDepth") or 1,
    }
    if rec.get("label"):
        params["label"] = rec["label"]
    # A spawn's options that OpenClaw's sessions.create takes (2026.9.6), only when asked for.
    from sessiontool.runs.spawnopts import thinking_of

    for name, value in (("thinkingLevel", thinking_of(rec)), ("cwd", rec.get("cwd"))):
        if isinstance(value, str):
            params[name] = value
    if rec.get("context") == "fork":
        params["fork"] = True
    try:
        gateway.call(paths, "sessions.create", params)
        return
    except SessiontoolError as exc:  # the gateway refused (GatewayError) or was not reached
        text = exc.message
        if "spawnDepth" in text:
            del params["spawnDepth"]
            gateway.call(paths, "sessions.create", params)
            return
        if "unknown method" not in text.lower():
            raise
    if rec.get("label"):
        gateway.call(paths, "sessions.patch", {"key": rec["sessionKey"], "label": rec["label"]})


def reply_text(result: dict[str, Any]) -> str:
    """The reply of an `agent` final answer: its payloads' text, joined."""
    res = result.get("result") if isinstance(result.get("result"), dict) else result
    payloads = res.get("payloads") if isinstance(res, dict) else None
    texts = []
    for p in payloads if isinstance(payloads, list) else []:
        if isinstance(p, dict) and isinstance(p.get("text"), str):
            texts.append(p["text"])
    return "\n\n".join(texts)


def agent_meta(result: Any) -> dict[str, Any]:
    """`result.meta.agentMeta` of an `agent` final answer (sessionId, model, usage), or {}."""
    if not isinstance(result, dict):
        return {}
    res = result.get("result")
    meta = res.get("meta") if isinstance(res, dict) else None
    am = meta.get("agentMeta") if isinstance(meta, dict) else None
    return am if isinstance(am, dict) else {}


def turn_duration_ms(result: Any) -> int | float | None:
    """The gateway's own time for the turn (`result.meta.durationMs`): with the run's own
    timestamps, it tells sessiontool's overhead from the turn itself (bench/)."""
    res = result.get("result") if isinstance(result, dict) else None
    meta = res.get("meta") if isinstance(res, dict) else None
    took = meta.get("durationMs") if isinstance(meta, dict) else None
    if isinstance(took, int | float) and not isinstance(took, bool) and took >= 0:
        return took
    return None


def _usage(meta: dict[str, Any]) -> dict[str, Any] | None:
    u = meta.get("usage")
    if not isinstance(u, dict):
        return None
    out: dict[str, Any] = {}
    for ours, theirs in (
        ("input", "input"),
        ("output", "output"),
        ("cacheRead", "cacheRead"),
        ("cacheWrite", "cacheWrite"),
        ("totalTokens", "total"),
    ):
        v = u.get(theirs, u.get(ours))
        if isinstance(v, int | float) and not isinstance(v, bool):
            out[ours] = v
    return out or None


def _publish(paths: StatePaths, rec: RunRecord, out: Outcome) -> None:
    meta = agent_meta(out.result)

    def mark(r: RunRecord) -> None:
        records.record_end(r, out.status, out.error, out.reply)
        if out.reason and r.get("status") == out.status:
            r["abortReason"] = out.reason
        usage = _usage(meta)
        if usage:
            r["usage"] = usage
        if out.model:
            r["model"] = out.model
        if out.provider:
            r["modelProvider"] = out.provider
        sid = meta.get("sessionId")
        if isinstance(sid, str) and len(sid) <= 256 and is_plain_name(sid):  # never a path
            r["sessionId"] = sid
        took = turn_duration_ms(out.result)
        if took is not None:
            r["gatewayDurationMs"] = took
        steps.init_follow_up(r)

    records.update_record(paths, rec["runId"], mark)
    records.notify(paths, rec["runId"])
