"""A spawn's announce through the gateway's `agent` method, followed to its end.

The gateway answers an `agent` call `accepted` as soon as it has queued the turn; the turn can
still fail afterwards (2026.9.6: "worker task timed out"), leaving the requester with nothing.
So an announce counts as made only when its turn ended `ok`: the step follows the turn
(`agent.wait` on the gateway's run id, in slices) and records `announcedAt` only then.

Exactly once, across kill -9: each attempt has a fixed idempotency key, recorded
(`followUp.announceAttempt`) before the call. The gateway runs one turn per key and replays a
key it knows (`in_flight` while it runs, its end once it ended), so a worker that resumes the
step after a kill finds the same turn and follows it instead of starting a second one. Only a
turn that is known to have failed moves the step to the next attempt, under a new key (the
gateway would replay the old key's failure). A turn that has not ended when the wait runs out
stays the same attempt: the next try follows it again.

Attempt 1 uses OpenClaw's own key (`announce:v1:<child>:<child's run>`), so OpenClaw's own
announce and sessiontool's are one turn; attempt N > 1 adds `:retry:N`. After
MAX_ATTEMPTS failed turns the step is left pending with its error and is no longer retried on
its own: `runs` and `wait` say so and `deliveries retry` tries once more.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from sessiontool.errors import SessiontoolError
from sessiontool.openclaw import gateway
from sessiontool.runs import records

if TYPE_CHECKING:
    from sessiontool.runs.record_types import RunRecord
    from sessiontool.state.paths import StatePaths

MAX_ATTEMPTS = 3
CALL_TIMEOUT_S = 60.0
RETRY_PAUSE_S = 1.0  # between an attempt that failed and the next, in one try of the step
FOLLOW_S = 900.0  # how long one try follows an announce turn before it retries later
WAIT_SLICE_MS = 30_000
ENDED_OK = ("ok",)
STILL_RUNNING = ("accepted", "in_flight", "started", "running")


class AnnounceNotLanded(SessiontoolError):
    """The announce turn failed (`failed` True: the next try is a new attempt) or has not
    ended yet (False: the next try follows the same turn)."""

    def __init__(self, message: str, *, failed: bool) -> None:
        super().__init__(message)
        self.failed = failed


def attempt_of(rec: RunRecord) -> int:
    n = (rec.get("followUp") or {}).get("announceAttempt")
    return n if isinstance(n, int) and not isinstance(n, bool) and n >= 1 else 1


def exhausted(rec: RunRecord) -> bool:
    """Whether the step has used the attempts it may make (`deliveries retry` allows one
    more: `announceLimit`)."""
    limit = (rec.get("followUp") or {}).get("announceLimit")
    most = limit if isinstance(limit, int) and not isinstance(limit, bool) else MAX_ATTEMPTS
    return attempt_of(rec) > most


def key_suffix(attempt: int) -> str:
    return "" if attempt <= 1 else f":retry:{attempt}"


def land(paths: StatePaths, rec: RunRecord, text: str) -> dict[str, Any]:
    """Make the announce turn and follow it to its end, a failed one made again under the
    next attempt's key (after RETRY_PAUSE_S) until it lands or the attempts are used up: the
    followUp fields to record when it landed (`announceRunId`, `announcedBy`). Raises
    AnnounceNotLanded when it did not (or not yet), a SessiontoolError when the gateway was
    not reached (the step is retried later, under the same attempt's key)."""
    while True:
        if exhausted(rec):
            raise AnnounceNotLanded(
                str((rec.get("followUp") or {}).get("error") or "the announce did not land"),
                failed=True,
            )
        try:
            return _attempt(paths, rec, text)
        except AnnounceNotLanded as exc:
            if not exc.failed:
                raise
            _note(paths, rec, announceAttempt=attempt_of(rec) + 1, announceRunId=None)
            if exhausted(rec):
                raise
            time.sleep(RETRY_PAUSE_S)


def _attempt(paths: StatePaths, rec: RunRecord, text: str) -> dict[str, Any]:
    attempt = attempt_of(rec)
    _note(paths, rec, announceAttempt=attempt)
    ours_before = isinstance((rec.get("followUp") or {}).get("announceRunId"), str)
    data = announce_call(paths, rec, text, key_suffix(attempt))
    run = data.get("runId") if isinstance(data.get("runId"), str) else None
    status = data.get("status")
    # `in_flight` on the first call of attempt 1: OpenClaw's own announce holds the key.
    by = "openclaw" if status == "in_flight" and attempt == 1 and not ours_before else "sessiontool"
    if run is not None and status == "accepted":
        _note(paths, rec, announceRunId=run)
    running = status is None or status in STILL_RUNNING
    ended = _follow(paths, run) if running else data
    if ended.get("status") in ENDED_OK:
        return {"announceRunId": run, "announcedBy": by, "announceAttempt": attempt}
    if ended.get("status") in STILL_RUNNING or (
        ended.get("status") == "timeout" and not isinstance(ended.get("endedAt"), int)
    ):
        raise AnnounceNotLanded(
            f"the announce turn {run} has not ended in {FOLLOW_S:g}s (attempt {attempt})",
            failed=False,
        )
    why = ended.get("error") or ended.get("summary")
    raise AnnounceNotLanded(
        f"the announce turn {run} (attempt {attempt}) ended {ended.get('status')}"
        + (f": {why}" if isinstance(why, str) and why else "")
        + "; the requester did not get the result",
        failed=True,
    )


def _note(paths: StatePaths, rec: RunRecord, **fields: Any) -> None:
    """A field of the step, in its followUp, written before what depends on it."""

    def mutate(r: RunRecord) -> None:
        fu: dict[str, Any] = dict(r.get("followUp") or {})
        fu.update(fields)
        for k in [k for k, v in fields.items() if v is None]:
            del fu[k]
        r["followUp"] = fu  # type: ignore[typeddict-item]

    done = records.update_record(paths, rec["runId"], mutate)
    rec["followUp"] = done["followUp"]


def _follow(paths: StatePaths, run: str | None) -> dict[str, Any]:
    """`agent.wait` on the turn until it ended (or FOLLOW_S ran out: its last answer)."""
    if run is None:
        return {"status": "error", "error": "the gateway named no run for the announce turn"}
    deadline = time.monotonic() + FOLLOW_S
    while True:
        left_ms = int((deadline - time.monotonic()) * 1000)
        if left_ms <= 0:
            return {"status": "timeout"}
        step = min(WAIT_SLICE_MS, left_ms)
        ended = gateway.call(
            paths, "agent.wait", {"runId": run, "timeoutMs": step}, timeout_s=step / 1000 + 15
        )
        if ended.get("status") != "timeout" or isinstance(ended.get("endedAt"), int):
            return ended


# -- what `runs`, `wait` and `deliveries retry` see ------------------------------------------

STEPS = ("gateway-announce", "openclaw-announce")
MODE = "spawn-announce"  # the id `<runId>:spawn-announce`, as a file spawn's announce delivery


def not_landed(rec: RunRecord) -> str | None:
    """Why a spawn's gateway announce has not landed yet (its last error), or None when it
    landed, is not a gateway announce, or is still under way without a failure."""
    fu = rec.get("followUp")
    if not isinstance(fu, dict) or fu.get("next") not in STEPS:
        return None
    err = fu.get("error")
    return err if isinstance(err, str) and err else None


def announce_call(paths: StatePaths, rec: RunRecord, text: str, suffix: str = "") -> dict[str, Any]:
    """A turn of the requester session in OpenClaw's own announce form (its `accepted` answer:
    runs/gateway_announce.py follows the turn to its end): the `task_completion` event as `internalEvents`, so
    OpenClaw keeps no user message for it, only the requester's reply, under OpenClaw's own key
    `announce:v1:<child>:<child's run>` (one announce even if OpenClaw's own is tried as well),
    `suffix` added for a later attempt after a failed turn.
    A gateway that refuses those fields (older ones) gets `text`, the visible
    Status/Result/Notes/Stats message. Raises on failure, so the step is retried. The gateway's
    answer: `accepted` with its run id, or `in_flight` when a run under that key already
    exists (OpenClaw's own announce got there first)."""
    from sessiontool.flow import announce

    child = rec["sessionKey"]
    stats = next((ln for ln in text.splitlines() if ln.startswith("Stats: ")), None)
    event = announce.completion_event(rec, stats)
    params: dict[str, Any] = {
        "sessionKey": rec["requesterSessionKey"],
        "message": announce.completion_prompt(event),
        "internalEvents": [event],
        "idempotencyKey": announce.announce_id(child, rec.get("gatewayRunId") or rec["runId"])
        + suffix,
        "inputProvenance": {
            "kind": "inter_session",
            "sourceSessionKey": child,
            "sourceChannel": "internal",
            "sourceTool": "subagent_announce",
        },
    }
    try:
        data = gateway.call(paths, "agent", params, timeout_s=CALL_TIMEOUT_S)
    except SessiontoolError as exc:
        if "internalEvents" not in exc.message and "inputProvenance" not in exc.message:
            raise
        params.update(
            message=text,
            idempotencyKey=f"{rec['runId']}:announce{suffix}",
            inputProvenance={
                "kind": "inter_session",
                "sourceSessionKey": child,
                "sourceTool": "sessions_spawn",
            },
        )
        del params["internalEvents"]
        data = gateway.call(paths, "agent", params, timeout_s=CALL_TIMEOUT_S)
    return data if isinstance(data, dict) else {}
