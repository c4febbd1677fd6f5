"""What the run commands (`runs`, `wait`, `abort`, `send --deliver`) ask of the engine beyond
starting a run: a run named by a prefix of its id, one run shown with its worker log, an abort
that reaches the turn where it runs, and the fate of a `--deliver` run's delivery. Here, not in
the CLI, so that every caller (the CLI, a tool call) gets the same answer and the CLI only
parses and renders."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

from sessiontool.errors import UsageError
from sessiontool.state.paths import StatePaths, is_plain_name

if TYPE_CHECKING:
    from sessiontool.context import Context
    from sessiontool.flow.result_types import DeliveryRecord
    from sessiontool.runs.record_types import RunRecord, RunView
    from sessiontool.runs.result_types import AbortResult

# How often the outbox is looked at while a `--deliver` run's worker delivers its reply: the
# delivery is one command (seconds), so 50 ms is quick to notice and cheap to look.
DELIVERY_POLL_SECONDS = 0.05


def full_run_id(ctx: Context, given: str) -> str:
    """A run id, or a unique prefix of one (the RUN column shows 8 characters). An unknown id is
    given back as it is: the caller's lookup says it was not found."""
    if not is_plain_name(given) or ctx.paths.run_record(given).exists():
        return given
    try:
        names = os.listdir(ctx.paths.runs_dir)
    except OSError:
        return given
    hits: list[str] = sorted(n[:-5] for n in names if n.endswith(".json") and n.startswith(given))
    if len(hits) == 1:
        return hits[0]
    if len(hits) > 1:
        shown = ", ".join(hits[:5]) + (" …" if len(hits) > 5 else "")
        raise UsageError(
            f"run id prefix {given!r} is ambiguous ({len(hits)} runs: {shown})",
            hint="give more characters of the run id",
        )
    return given


def show_run(ctx: Context, given: str, *, log: bool = False) -> RunView:
    """One run as `runs RUN_ID` shows it (its public fields), with its worker's log under `log`
    when asked for (empty when the worker wrote none)."""
    from sessiontool.runs.submit import get_run, run_view

    run_id = full_run_id(ctx, given)
    view = run_view(ctx, get_run(ctx, run_id))
    if log:
        try:
            view["log"] = ctx.paths.run_log(run_id).read_text(encoding="utf-8", errors="replace")
        except OSError:
            view["log"] = ""
    return view


def abort_run(ctx: Context, given: str) -> AbortResult:
    """End a run as `aborted` (`abort`) and, where its turn runs elsewhere (OpenClaw's
    gateway), ask that to stop it too: `gatewayAborted` says whether it stopped something."""
    from sessiontool.runs.submit import get_run

    run_id = full_run_id(ctx, given)
    get_run(ctx, run_id)
    rec = abort(ctx.paths, run_id)
    result: AbortResult = {"runId": run_id, "status": rec.get("status")}
    if rec.get("status") == "aborted" and rec.get("startedAt"):
        from sessiontool.runs.writer import writer_of

        stopped = writer_of(rec).abort_turn(ctx.paths, rec)
        if stopped is not None:
            result["gatewayAborted"] = stopped
    return result


def abort(paths: StatePaths, run_id: str) -> RunRecord:
    """End the run as `aborted` unless its end is already decided; then kill what runs it (the
    agent's process group, and a signal to the worker for an in-process runner). Returns the
    record as everyone will see it: `status` is the one outcome."""
    import signal

    from sessiontool.clock import now_ms
    from sessiontool.runs import lanes, steps
    from sessiontool.runs.reconcile import reconcile
    from sessiontool.runs.records import (
        is_finished,
        lock_held,
        notify,
        read_record,
        update_record,
    )
    from sessiontool.runs.wait import wait_for

    rec = reconcile(paths, read_record(paths, run_id))
    if is_finished(rec):
        return rec
    state: dict[str, Any] = {}

    def mark(r: RunRecord) -> bool:
        if is_finished(r):
            return False
        if r.get("outcome"):
            state["decided"] = r["outcome"]
            return False
        state["was"] = r.get("status")
        r.update(
            {
                "status": "aborted",
                "outcome": "aborted",
                "error": "aborted by user",
                "endedAt": now_ms(),
            }
        )
        if state["was"] == "queued":
            steps.init_follow_up(r)
        return True

    rec = update_record(paths, run_id, mark)
    if "decided" in state:
        # The worker reached its end first: that is the answer, published in a moment.
        view = rec.copy()
        view["status"] = state["decided"]
        done = wait_for(paths, run_id, 30.0)
        return done if is_finished(done) else view
    notify(paths, run_id)
    if state.get("was") == "queued":
        lanes.remove_marker(paths, rec)
        return reconcile(paths, read_record(paths, run_id))  # a spawn's announce is still owed
    agent_pid = rec.get("agentPid")
    if isinstance(agent_pid, int) and agent_pid > 0:
        try:
            os.killpg(agent_pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    worker_pid = rec.get("pid")
    if isinstance(worker_pid, int) and worker_pid > 0 and lock_held(paths, run_id):
        try:
            os.kill(worker_pid, signal.SIGUSR1)
        except (ProcessLookupError, PermissionError):
            pass
    return rec


def wait_delivery(ctx: Context, rec: RunRecord, wait_s: float) -> tuple[str, DeliveryRecord] | None:
    """After a `--deliver` run ended ok its worker delivers the reply: wait (up to `wait_s`, at
    most the delivery command's own limit and a little) for the delivery's outbox line, and give
    (delivery id, its latest line), or None while it is still pending. It stops early when the
    worker is past its delivery step and wrote no line. An unreadable outbox raises."""
    from sessiontool.flow.delivery import COMMAND_TIMEOUT_SECONDS
    from sessiontool.flow.redeliver import latest

    run_id = rec["runId"]
    deadline = time.monotonic() + min(wait_s, COMMAND_TIMEOUT_SECONDS + 5)
    while True:
        found: tuple[str, DeliveryRecord] | None = None
        for did, line in latest(ctx).items():
            if line.get("runId") == run_id and line.get("mode") == "deliver":
                found = did, line
        if found is not None or time.monotonic() >= deadline or _follow_up_done(ctx, run_id):
            return found
        time.sleep(DELIVERY_POLL_SECONDS)


def wait_announce(ctx: Context, rec: RunRecord, wait_s: float) -> str | None:
    """After a spawn through the gateway ended, its worker hands the result to the requester
    and follows that turn (runs/gateway_announce.py): wait up to `wait_s` for it, and say why
    it has not landed (None: it landed, or is not such a spawn)."""
    from sessiontool.errors import SessiontoolError
    from sessiontool.runs import gateway_announce, records

    deadline = time.monotonic() + wait_s
    cur = rec
    while True:
        fu = cur.get("followUp")
        if not isinstance(fu, dict) or fu.get("next") not in gateway_announce.STEPS:
            return None
        why = gateway_announce.not_landed(cur)
        if why is not None:
            return why
        if time.monotonic() >= deadline:
            return "its announce turn has not ended yet (still pending)"
        time.sleep(DELIVERY_POLL_SECONDS)
        try:
            cur = records.read_record(ctx.paths, rec["runId"])
        except SessiontoolError as exc:
            return exc.message


def _follow_up_done(ctx: Context, run_id: str) -> bool:
    from sessiontool.errors import SessiontoolError
    from sessiontool.runs import records

    try:
        fu = records.read_record(ctx.paths, run_id).get("followUp")
    except SessiontoolError:
        return True
    return isinstance(fu, dict) and fu.get("next") == "done"


def pending_announces(paths: StatePaths) -> list[RunRecord]:
    """The runs whose gateway announce failed and is still to be made."""
    from sessiontool.runs import records
    from sessiontool.runs.gateway_announce import not_landed

    return [r for r in records.iter_records(paths, warn=False) if not_landed(r) is not None]


def retry_announces(paths: StatePaths, cfg: Any, run_ids: list[str]) -> list[dict[str, Any]]:
    """`deliveries retry` for announces that did not land: each given run's (all pending
    ones when none is given) announce step made once more now, one more attempt allowed
    past the automatic ones, under the run's lock (one held by a worker making it now is
    left to that worker). What each ended as, in the shape of a retried delivery."""
    from sessiontool.runs import records, steps
    from sessiontool.runs.gateway_announce import MODE, STEPS, not_landed

    out: list[dict[str, Any]] = []
    for rec in (
        [records.read_record(paths, r) for r in run_ids] if run_ids else pending_announces(paths)
    ):
        before = not_landed(rec)
        fd = steps.try_lock(paths, rec["runId"], block=False)
        if fd is not None:
            try:
                _allow_one_more(paths, rec)
                steps.Advancer(paths, cfg).advance(rec["runId"])
            finally:
                steps.release_lock(paths, rec["runId"], fd)
        now = records.read_record(paths, rec["runId"])
        why = not_landed(now)
        landed = now.get("followUp", {}).get("next") not in STEPS
        item: dict[str, Any] = {
            "id": f"{rec['runId']}:{MODE}",
            "runId": rec["runId"],
            "mode": MODE,
            "sessionKey": rec.get("requesterSessionKey"),
            "status": "delivered" if landed else "failed" if why else "pending",
            "previousStatus": "failed" if before else "pending",
        }
        if why and not landed:
            item["error"] = why
        out.append(item)
    return out


def _allow_one_more(paths: StatePaths, rec: RunRecord) -> None:
    from sessiontool.runs import records
    from sessiontool.runs.gateway_announce import attempt_of

    def mutate(r: RunRecord) -> None:
        fu: dict[str, Any] = dict(r.get("followUp") or {})
        fu["announceLimit"] = attempt_of(r)
        fu.pop("attemptAt", None)
        r["followUp"] = fu  # type: ignore[typeddict-item]

    records.update_record(paths, rec["runId"], mutate)
