"""Which runs `runs` and `wait --session` show: the user's runs, with their internal steps
(reply turns, announce) only when asked for, listed under the run they belong to."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sessiontool.context import Context
from sessiontool.errors import UsageError
from sessiontool.runs import records, schema
from sessiontool.runs.reconcile import reconcile
from sessiontool.runs.submit import run_view, visible_run
from sessiontool.structs import Value

if TYPE_CHECKING:
    from typing import TypedDict

    from sessiontool.runs.record_types import RunRecord, RunView

    class RunsResult(TypedDict):
        """What `runs` returns; `--json` writes it as is (its rows are submit.run_view's)."""

        count: int
        runs: list[RunView]


USER_KINDS = ("send", "spawn", "compact")


def parse_kinds(values: list[str]) -> set[str]:
    """`--kind send,spawn` (or repeated): the kinds asked for, each checked."""
    kinds = {k.strip() for v in values for k in v.split(",") if k.strip()}
    bad = sorted(kinds - schema.KINDS)
    if bad:
        valid = ", ".join(sorted(schema.KINDS))
        raise UsageError(f"unknown kind {bad[0]!r} (valid: {valid})")
    return kinds


class RunQuery(Value):
    """Which runs `list_runs` gives: of a `status`, in a `session`, of `kinds`, with their
    `steps`, at most `limit` of them (each None or empty: any)."""

    __slots__ = ("status", "session", "kinds", "steps", "limit")

    def __init__(
        self,
        status: str | None = None,
        session: str | None = None,
        kinds: set[str] | None = None,
        steps: bool = False,
        limit: int | None = None,
    ) -> None:
        self.status, self.session, self.kinds = status, session, kinds
        self.steps, self.limit = steps, limit


def list_runs(ctx: Context, query: RunQuery | None = None) -> RunsResult:
    """Runs newest first, at most `limit` of them. Steps are internal (one `--as` send is a
    run and two steps): shown only with `steps` (each right after its run) or when `kinds`
    names them."""
    q = query or RunQuery()
    status, session, kinds, steps, limit = q.status, q.session, q.kinds, q.steps, q.limit
    if status and status not in schema.FINISHED_STATUSES | schema.ACTIVE_STATUSES:
        valid = ", ".join(sorted(schema.FINISHED_STATUSES | schema.ACTIVE_STATUSES))
        raise UsageError(f"unknown status {status!r} (valid: {valid})")
    wanted = set(kinds) if kinds else set(USER_KINDS) | ({"step"} if steps else set())
    every = [r for r in records.iter_records(ctx.paths) if visible_run(ctx, r)]
    full = session_key(ctx, session, every) if session else None
    out = []
    for rec in every:
        if rec.get("kind") not in wanted:
            continue
        rec = reconcile(ctx.paths, rec)
        if status and rec.get("status") != status:
            continue
        if full and rec.get("sessionKey") != full:
            continue
        out.append(rec)
    out.sort(key=lambda r: (r.get("createdAt") or 0, r.get("runId", "")), reverse=True)
    if steps and not kinds:
        out = _steps_under_their_runs(out)
    if limit is not None:
        out = out[:limit]
    return {"count": len(out), "runs": [run_view(ctx, r) for r in out]}


def _steps_under_their_runs(recs: list[RunRecord]) -> list[RunRecord]:
    ids = {r.get("runId") for r in recs}
    children: dict[str, list[RunRecord]] = {}
    for r in recs:
        parent = r.get("parentRunId")
        if r.get("kind") == "step" and isinstance(parent, str) and parent in ids:
            children.setdefault(parent, []).append(r)
    out: list[RunRecord] = []
    for r in recs:
        parent = r.get("parentRunId")
        if r.get("kind") == "step" and isinstance(parent, str) and parent in ids:
            continue  # listed under its run
        out.append(r)
        out.extend(reversed(children.get(str(r.get("runId")), [])))  # in the order they ran
    return out


def session_key(ctx: Context, session: str, recs: list[RunRecord]) -> str:
    """The stored key `--session` names: one that runs name (a session deleted since still has
    its runs), else one the store holds (by key or session id, as every command resolves it);
    else exit 3 with the nearest key, as `search --session` says it: a typo in a cron line's
    `wait --session` must not read as "all done"."""
    full = ctx.canonical(session)
    if any(r.get("sessionKey") == full for r in recs):
        return full
    from sessiontool.sessions.resolve import resolve

    return resolve(ctx, session).key


def open_runs(ctx: Context, session: str) -> list[str]:
    """The ids of the user's queued or running runs of a session (no internal steps), oldest
    first: what `wait --session KEY` waits for."""
    every = [r for r in records.iter_records(ctx.paths) if visible_run(ctx, r)]
    full = session_key(ctx, session, every)
    found = []
    for rec in every:
        if rec.get("sessionKey") != full or rec.get("kind") not in USER_KINDS:
            continue
        rec = reconcile(ctx.paths, rec)
        if rec.get("status") in schema.ACTIVE_STATUSES:
            found.append(rec)
    found.sort(key=lambda r: (r.get("createdAt") or 0, r.get("runId", "")))
    return [r["runId"] for r in found]


def active_session_keys(ctx: Context) -> frozenset[str]:
    """The stored keys of the sessions with a run of ours queued or running (any requester's:
    whether a session is busy is not private), for `list --active-only`."""
    found = set()
    for rec in records.iter_records(ctx.paths, warn=False):
        if rec.get("kind") not in USER_KINDS or rec.get("status") not in schema.ACTIVE_STATUSES:
            continue
        rec = reconcile(ctx.paths, rec)  # a dead worker's run is over, not active
        key = rec.get("sessionKey")
        if isinstance(key, str) and rec.get("status") in schema.ACTIVE_STATUSES:
            found.add(key)
    return frozenset(found)
