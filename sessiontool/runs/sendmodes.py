"""`send --mode` (OpenClaw 2026.9.6's `sessions_send` `mode`) and the result words its tool answers
with, over `submit.send` (the follow-up turn, unchanged):

- `followup` (default): a new turn in the target session (submit.send).
- `steer`: guidance for the target's active run, taken before its next model call where its
  runner can (`openai`, `llm`: runs/steer.py): `targetDisposition: "steered"`, the active run's
  id; with no such run it is queued as a follow-up turn (`targetDisposition: "queued"`, and a
  `note` says so).
- `notify`: the message added to the target's transcript as inter-session context; no turn
  runs (`status: "queued"`, `runStarted: false`).

Results carry OpenClaw's `targetDisposition` (accepted) and `delivery` (`pending` | `skipped`),
and a waited run that ends with no visible reply is `status: "no_reply"` (exit 0). On an OpenClaw
store, steer and notify go to OpenClaw's own sessions_send (`tools.invoke`), its answer returned
as it gives it."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sessiontool.context import Context
from sessiontool.errors import ForbiddenError, UsageError
from sessiontool.flow import policy
from sessiontool.protocol import SILENT_REPLIES

if TYPE_CHECKING:
    from collections.abc import Callable

    from sessiontool.runs.record_types import RunRecord
    from sessiontool.runs.result_types import SendResult
    from sessiontool.runs.submit import ResultWithExit, SendWatch
    from sessiontool.state.paths import StatePaths

    Waiter = Callable[[StatePaths, str, float], RunRecord]

MODES = ("followup", "steer", "notify")
NO_REPLY_MESSAGE = "No visible reply or pending announcement. Continue or retry if needed."
QUEUED_NOTE = "the target has no active run that takes guidance: queued as a new turn"


@dataclass(frozen=True)
class SendRequest:
    """One send: the target (key or label), the message, how it is sent and waited for."""

    key: str | None
    message: str
    label: str | None = None
    mode: str = "followup"
    timeout: float = 30.0
    deliver: bool = False


def send(
    ctx: Context, req: SendRequest, *, wait: Waiter | None = None, watch: SendWatch | None = None
) -> ResultWithExit:
    """Carry out one send in its mode; (result, exit code)."""
    from sessiontool.runs import submit

    if req.mode not in MODES:
        raise UsageError(f"mode must be one of: {', '.join(MODES)} (got {req.mode!r})")
    if req.mode != "followup":
        policy.check_tool(ctx, "sessions_send")
        if not req.message.strip():
            raise UsageError("the message is empty")
        if req.deliver:
            raise UsageError(f"--deliver goes with a follow-up turn, not --mode {req.mode}")
        done = _not_followup(ctx, req)
        if done is not None:
            return done
    result, code = submit.send(
        ctx,
        req.key,
        req.message,
        label=req.label,
        timeout=req.timeout,
        deliver=req.deliver,
        wait=wait,
        watch=watch,
    )
    return openclaw_words(result, note=QUEUED_NOTE if req.mode == "steer" else None), code


def openclaw_words(result: SendResult, *, note: str | None = None) -> SendResult:
    """A follow-up's result in OpenClaw's words: `targetDisposition` when accepted, `delivery`
    always (`skipped` when nothing is announced), `no_reply` for a run that ended with no
    visible reply; `note` when a steer was queued instead."""
    out: dict[str, Any] = dict(result)
    if "runId" not in out:
        return result  # `/send on|off|inherit`: no run
    if note:
        out["note"] = note
    _words(out)
    return out  # type: ignore[return-value]


def _words(out: dict[str, Any]) -> None:
    status = out.get("status")
    if status == "accepted":
        out["targetDisposition"] = "queued"
    if status == "ok" and (
        not str(out.get("reply") or "").strip() or str(out["reply"]).strip() in SILENT_REPLIES
    ):
        out["status"] = "no_reply"
        out.pop("reply", None)
        out.pop("delivery", None)
        out["message"] = NO_REPLY_MESSAGE
        return
    if status in ("accepted", "ok") and "via" not in out:  # a gateway turn delivers itself
        out.setdefault("delivery", {"status": "skipped", "mode": "announce"})


def _not_followup(ctx: Context, req: SendRequest) -> ResultWithExit | None:
    """A steer or notify carried out (None: a steer with no run to take it, queued instead)."""
    from sessiontool.runs.writer import writer_for
    from sessiontool.sessions.resolve import resolve

    r = resolve(ctx, req.key, label=req.label, create=req.mode == "steer")
    display = ctx.display(r.key)
    try:
        if ctx.requester.session_key == r.key:
            raise ForbiddenError("a session cannot send to itself (it would wait on its own lane)")
        policy.check_access(ctx, r.key, r.entry, "send")
        if not policy.send_decision(ctx.config.send_policy, r.key, r.entry).allowed:
            raise ForbiddenError("send blocked by session policy")
    except ForbiddenError as exc:
        exc.extra.setdefault("sessionKey", display)
        raise
    writer = writer_for(ctx, [r.agent_id, ctx.agent_id], "send")
    if writer.kind != "files":
        return _through_openclaw(ctx, req, r.key, display)
    provenance = _provenance(ctx)
    if req.mode == "notify":
        from sessiontool.state import transcript
        from sessiontool.state.paths import transcript_path_for

        sid = (r.entry or {}).get("sessionId")
        if not isinstance(sid, str):
            raise UsageError(f"session {display} has no transcript to add context to")
        from sessiontool.clock import now_ms

        path = transcript_path_for(
            ctx.paths.sessions_dir(r.agent_id), sid, (r.entry or {}).get("sessionFile")
        )
        msg = {
            "role": "user",
            "content": [{"type": "text", "text": req.message}],
            "timestamp": now_ms(),
            "provenance": provenance,
        }
        transcript.append_message(path, sid, msg)
        out = {
            "status": "queued",
            "sessionKey": display,
            "notificationId": str(uuid.uuid4()),
            "durability": "transcript",
            "runStarted": False,
        }
        return out, 0  # type: ignore[return-value]
    run = _active_run(ctx, r.key, r.agent_id)
    if run is None:
        return None
    from sessiontool.runs import steer

    if not steer.offer(ctx.paths.root, run, {"text": req.message, "provenance": provenance}):
        return None
    steered = {
        "runId": run,
        "status": "accepted",
        "sessionKey": display,
        "targetDisposition": "steered",
        "delivery": {"status": "skipped", "mode": "announce"},
    }
    return steered, 0  # type: ignore[return-value]


def _provenance(ctx: Context) -> dict[str, Any]:
    source = ctx.requester.session_key
    if source is None:
        return {"kind": "external_user", "sourceTool": "sessiontool"}
    return {"kind": "inter_session", "sourceSessionKey": source, "sourceTool": "sessions_send"}


def _active_run(ctx: Context, key: str, agent_id: str) -> str | None:
    """The run that is running in the session now, when its runner takes guidance."""
    from sessiontool.runs.records import iter_records
    from sessiontool.runs.steer import STEERABLE_RUNNERS

    if ctx.config.runner_for(agent_id).get("type") not in STEERABLE_RUNNERS:
        return None
    for rec in iter_records(ctx.paths, warn=False):
        if rec.get("sessionKey") == key and rec.get("status") == "running" and not rec.get("via"):
            return rec["runId"]
    return None


def _through_openclaw(ctx: Context, req: SendRequest, key: str, display: str) -> ResultWithExit:
    """A steer or notify on an OpenClaw store: OpenClaw's own sessions_send carries it out."""
    from sessiontool.openclaw import own_tools

    args = {"sessionKey": key, "message": req.message, "mode": req.mode, "timeoutSeconds": 0}
    details = own_tools.invoke(
        ctx.paths, own_tools.SEND, ctx.requester_or_main(), args, idempotency_key=str(uuid.uuid4())
    )
    if details is None:
        raise UsageError(
            f"--mode {req.mode} on this OpenClaw store needs OpenClaw's own sessions_send",
            hint=f"allow it in OpenClaw's config: {own_tools.ALLOW_LINE}",
        )
    out = dict(details)
    if isinstance(out.get("sessionKey"), str):
        out["sessionKey"] = ctx.display(out["sessionKey"])
    else:
        out["sessionKey"] = display
    code = 0 if out.get("status") in ("accepted", "queued", "ok", "no_reply") else 1
    if out.get("status") == "forbidden":
        code = 4
    return out, code  # type: ignore[return-value]
