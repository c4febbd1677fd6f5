"""A gateway run that OpenClaw's own tool carries out (the record's `tool`; openclaw/own_tools.py).

- `sessions_spawn`: the spawn command already called the tool (its answer named the child and
  the child's run, `gatewayRunId`); the worker follows that run.
- `sessions_send`: the worker calls the tool for the requester session with `timeoutSeconds: 0`
  (the tool answers at once with its run id, kept as `gatewayRunId`, and OpenClaw runs its own
  agent-to-agent flow after the turn: reply-back turns, the announce step), then follows it.

Following is `agent.wait {runId}` in slices until the run has ended (a slice that runs out
answers `status: "timeout"` without `endedAt`): the answer has the status, the final reply
(`terminalReply.text`), the session id and the model (`terminalReceipt`). `abort` interrupts
the wait and asks the gateway to stop the run (`chat.abort`). A `--run-timeout` is OpenClaw's
(`runTimeoutSeconds`): 2026.9.6 ends such a run `ok` in `agent.wait` while the child's row says
`timeout`, or, on a loaded machine, `error` with the row `failed`; a run that lasted at least
that long is recorded as `timeout` either way.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from sessiontool.errors import SessiontoolError
from sessiontool.openclaw import gateway
from sessiontool.runs import records
from sessiontool.runs.gateway_writer import chat_abort
from sessiontool.runs.turn import Outcome, RunAborted, abortable

if TYPE_CHECKING:
    from collections.abc import Callable

    from sessiontool.runs.record_types import RunRecord
    from sessiontool.state.config import Config
    from sessiontool.state.paths import StatePaths

WAIT_SLICE_MS = 30_000
SEND_WAIT_S = 3600.0
RUN_TIMEOUT_GRACE_S = 30.0


def _limit(rec: RunRecord) -> float | None:
    t = rec.get("runTimeoutSeconds")
    if isinstance(t, int | float) and not isinstance(t, bool) and t > 0:
        return float(t)
    return None


def turn(paths: StatePaths, rec: RunRecord) -> Outcome | None:
    """The run's end as OpenClaw reports it; None when the gateway no longer offers the tool
    (the caller falls back to sessiontool's own turn)."""
    out = Outcome()
    try:
        with abortable(paths, rec["runId"]):
            gw_run = rec.get("gatewayRunId") or _start_send(paths, rec)
            if gw_run is None:
                return None
            ended = _follow(paths, rec, gw_run)
            if ended.get("status") == "ok" and not isinstance(ended.get("terminalReply"), dict):
                ended.update(_from_history(paths, rec["sessionKey"]))
        _outcome(rec, ended, out)
    except RunAborted:
        out.status, out.error = "aborted", "aborted by user"
        stopped = _stop(paths, rec)
        records.update_record(
            paths, rec["runId"], lambda r: r.__setitem__("gatewayAborted", stopped)
        )
    except SessiontoolError as exc:
        out.status, out.error = "error", exc.message
    except Exception as exc:  # noqa: BLE001 - a bug must still end the run
        from sessiontool.errors import describe

        out.status, out.error = "error", describe(exc)
    return out


def _start_send(paths: StatePaths, rec: RunRecord) -> str | None:
    from sessiontool.openclaw import own_tools

    details = own_tools.invoke(
        paths,
        own_tools.SEND,
        str(rec.get("requesterSessionKey")),
        {"sessionKey": rec["sessionKey"], "message": rec.get("message", ""), "timeoutSeconds": 0},
        idempotency_key=rec["runId"],
    )
    if details is None:
        return None
    gw_run = details.get("runId")
    if details.get("status") not in ("accepted", "ok") or not isinstance(gw_run, str):
        why = details.get("error") or details.get("status") or "no run"
        raise own_tools.ToolRefused(f"OpenClaw's sessions_send: {why}")
    rec["gatewayRunId"] = gw_run
    records.update_record(paths, rec["runId"], lambda r: r.__setitem__("gatewayRunId", gw_run))
    return gw_run


def _follow(paths: StatePaths, rec: RunRecord, gw_run: str) -> dict[str, Any]:
    limit = _limit(rec)
    budget = limit + RUN_TIMEOUT_GRACE_S if limit is not None else SEND_WAIT_S
    deadline = time.monotonic() + budget
    while True:
        left_ms = int((deadline - time.monotonic()) * 1000)
        if left_ms <= 0:
            return {"status": "timeout", "error": f"no end of run {gw_run} in {budget:g}s"}
        step = min(WAIT_SLICE_MS, left_ms)
        ended = gateway.call(
            paths,
            "agent.wait",
            {"runId": gw_run, "timeoutMs": step},
            timeout_s=step / 1000 + 15,
        )
        if ended.get("status") != "timeout" or isinstance(ended.get("endedAt"), int):
            return ended


def _from_history(paths: StatePaths, key: str) -> dict[str, Any]:
    """What agent.wait does not say before 2026.9 (2026.7.35 answers only the status and the
    end): the session's last assistant message (its text, model) and session id, from
    chat.history, in agent.wait's shape."""
    try:
        hist = gateway.call(paths, "chat.history", {"sessionKey": key, "limit": 5})
    except SessiontoolError:
        return {}
    msgs = hist.get("messages")
    last = (
        next(
            (m for m in reversed(msgs) if isinstance(m, dict) and m.get("role") == "assistant"),
            None,
        )
        if isinstance(msgs, list)
        else None
    )
    if last is None:
        return {}
    content = last.get("content")
    text = (
        content
        if isinstance(content, str)
        else "\n".join(
            b.get("text", "")
            for b in content or []
            if isinstance(b, dict) and b.get("type") == "text"
        )
    )
    receipt: dict[str, Any] = {
        "effective": {k: last[k] for k in ("model", "provider") if k in last}
    }
    if isinstance(hist.get("sessionId"), str):
        receipt["sessionId"] = hist["sessionId"]
    return {"terminalReply": {"disposition": "visible", "text": text}, "terminalReceipt": receipt}


def _obj(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


# agent.wait's ends of a run its --run-timeout cut: `ok` (2026.9.6, the row `timeout`) and, on a
# loaded machine, `error` (the row `failed`).
_ENDED = ("ok", "error", "failed")


def _outcome(rec: RunRecord, ended: dict[str, Any], out: Outcome) -> None:
    status = ended.get("status")
    receipt = _obj(ended.get("terminalReceipt"))
    effective = _obj(receipt.get("effective"))
    reply = _obj(ended.get("terminalReply"))
    started, end = ended.get("startedAt"), ended.get("endedAt")
    took = end - started if isinstance(started, int) and isinstance(end, int) else None
    meta: dict[str, Any] = {}
    if isinstance(receipt.get("sessionId"), str):
        meta["sessionId"] = receipt["sessionId"]
    for k in ("model", "provider"):
        if isinstance(effective.get(k), str):
            meta[k] = effective[k]
    # The shape of an `agent` final answer, so the run's end is published as any gateway run's.
    out.result = {"result": {"meta": {"agentMeta": meta, **({"durationMs": took} if took else {})}}}
    out.model, out.provider = meta.get("model"), meta.get("provider")
    limit = _limit(rec)
    if status in _ENDED and limit is not None and took is not None and took >= limit * 1000:
        status = "timeout"  # whatever agent.wait says: 2026.9.6 says `ok`, or `error` under load
    if status == "ok":
        text = reply.get("text")
        out.reply = text if isinstance(text, str) and reply.get("disposition") != "silent" else ""
    elif status in ("timeout", "timed_out"):
        out.status = "timeout"
        out.error = (
            f"run timed out after {limit:g}s (--run-timeout)"
            if limit is not None
            else str(ended.get("error") or "the gateway's run timed out")
        )
    elif status in ("aborted", "cancelled", "killed"):
        out.status, out.error = "aborted", "aborted in OpenClaw's gateway"
    else:
        why = ended.get("error")
        out.status = "error"
        out.error = f"the gateway's run ended with status {status}" + (
            f": {why}" if isinstance(why, str) and why else ""
        )


def _stop(paths: StatePaths, rec: RunRecord) -> bool:
    """An aborted run is stopped in the gateway too (best effort: the record says aborted)."""
    return chat_abort(paths, rec["sessionKey"], rec.get("gatewayRunId") or rec["runId"])


# How long the announce step lets OpenClaw's own announce come first: it starts as the child's
# run ends (2026.7.35 at once), before the worker hears of that end. Not how long it may run:
# an announce of OpenClaw's under way is found by sending ours under its key (`in_flight`).
ANNOUNCE_GRACE_MS = 1_000


def openclaw_announce(paths: StatePaths, rec: RunRecord) -> str | None:
    """OpenClaw's announce of a child it spawned: the requester's run
    `announce:v1:<childSessionKey>:<child's runId>` (its idempotency key), when it ended within
    ANNOUNCE_GRACE_MS of the child's end; None when the gateway has no such run ended (2026.9.6's
    direct announce after a tools.invoke spawn fails, "operator tool invocation authority
    expired", and its requester-settle recovery hands the result over later, in a run of its
    own)."""
    gw_run = rec.get("gatewayRunId")
    if not isinstance(gw_run, str):
        return None
    announce_id = f"announce:v1:{rec['sessionKey']}:{gw_run}"
    try:
        ended = gateway.call(
            paths,
            "agent.wait",
            {"runId": announce_id, "timeoutMs": ANNOUNCE_GRACE_MS},
            timeout_s=ANNOUNCE_GRACE_MS / 1000 + 15,
        )
    except SessiontoolError:
        return None
    # Only a turn that ended ok landed: a failed one of OpenClaw's is retried by ours.
    return announce_id if ended.get("status") == "ok" else None


def announce(
    paths: StatePaths,
    cfg: Config,
    rec: RunRecord,
    text: Callable[[StatePaths, Config, RunRecord], str],
) -> dict[str, Any]:
    """The announce of a spawn OpenClaw's sessions_spawn made: OpenClaw hands the result to the
    requester itself (and archives a `--cleanup delete` child), and its announce run is recorded
    (`announceRunId`, `announcedBy: openclaw`). When it has not ended ok within the grace, it is
    handed over in OpenClaw's form under OpenClaw's own key and followed to its end
    (runs/gateway_announce.py): the gateway runs one announce per key, so an announce of
    OpenClaw's already under way answers `in_flight`, is followed and stays the one
    (`announcedBy: openclaw`); else ours runs (`announcedBy: sessiontool`), and a
    `--cleanup delete` child is then removed by sessiontool (OpenClaw's own clean-up came with
    the announce that failed). The followUp changes to record once it landed, `next` included;
    raises when it did not (the step is retried)."""
    from sessiontool.runs import gateway_announce

    first = gateway_announce.attempt_of(rec) == 1
    seen = openclaw_announce(paths, rec) if first else None
    if seen is not None:
        return {"next": "done", "announceRunId": seen, "announcedBy": "openclaw"}
    done = gateway_announce.land(paths, rec, text(paths, cfg, rec))
    ours = done["announcedBy"] == "sessiontool"
    return {"next": "cleanup" if ours and rec.get("cleanup") == "delete" else "done", **done}
