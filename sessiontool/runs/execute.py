"""Running one queued record's turn (a send, a spawn or an agent step) over the files, with
sessiontool's runner, step by step (a gateway run's turn is gateway_run.py's; what both share,
turn.py):

1. take a run slot (the global cap) — `run_in_files`
2. the session it runs in, fixed now: its entry (created only when missing: store write 1) —
   `open_session`
3. `running`, with the sessionId, in the record — `start`
4. the user line — `append_user`
5. the agent — `run_agent`
6. the end decided under the record lock (an abort that came first wins) — `decide` (turn.py)
7. the assistant line, in the transcript the run started in (archived or not) — `append_reply`
8. the store, only while the entry is still that session (store write 2) — `record_in_store`
9. `status` published and every waiter woken — `publish`
10. with budgets configured, the transcript caught up in the search index, the slot freed
    (the next run's budget check then reads the spend without a catch-up) — `index_for_budgets`
"""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sessiontool import testhooks
from sessiontool.clock import now_ms
from sessiontool.runs import lanes, records, steps
from sessiontool.runs.turn import Outcome, RunAborted, WorkerState, abortable, decide
from sessiontool.state.paths import StatePaths

if TYPE_CHECKING:
    from sessiontool.runs.record_types import RunRecord
    from sessiontool.state.config import Config


@dataclass
class TurnSession:
    """The session a run's turn writes to over the files (not the read side's sessions/
    package): its agent, key, store entry, session id and transcript file."""

    agent_id: str
    key: str
    entry: dict[str, Any]
    session_id: str
    path: Path


def _points(name: str, rec: RunRecord) -> tuple[str, ...]:
    what = rec.get("step") or rec.get("kind")
    return (name, f"{name}:{what}")


def run_in_files(w: WorkerState, rec: RunRecord) -> None:
    """The record's turn when its command chose the files writer (worker.carry_out)."""
    paths: StatePaths = w.paths
    # An agent-to-agent send is waited on by its requester's own run, which holds a slot:
    # capping it too could starve that run of the very slot it waits for.
    slot = None if rec.get("a2a") else lanes.acquire_slot(paths, w.max_concurrent())
    ended: Path | None = None
    try:
        session = open_session(paths, rec)
        if not start(paths, rec, session):
            return
        testhooks.pause(*_points("before-user", rec))
        if rec.get("context") == "fork":
            from sessiontool.runs.spawnopts import fork_requester

            fork_requester(paths, rec, session.path, session.session_id)
        history = history_for(session.path)
        append_user(rec, session)
        testhooks.pause(*_points("after-user", rec))
        out = run_agent(w, rec, session, history)
        testhooks.pause(*_points("after-runner", rec))
        from sessiontool.runs.steer import requeue_left

        requeue_left(paths, w.cfg, rec)
        out.status, out.error = decide(paths, rec, out)
        append_reply(session, out)
        if not rec.get("skipIndex"):
            record_in_store(paths, session, out)
        publish(paths, rec, session, out)
        ended = session.path
    finally:
        if slot is not None:
            os.close(slot)
    if ended is not None:
        index_for_budgets(w, ended)


def index_for_budgets(w: WorkerState, transcript: Path) -> None:
    """With budgets configured, the run's transcript caught up in the search index once the
    run is published (its waiters have their answer) and its slot is free: the next run's
    budget check then finds the index current and reads the spend without a catch-up of its
    own (reports/budgets.py; issue 44, bench `send_budget`). Best effort: the index is
    disposable, and a check that finds it behind catches up itself."""
    from sessiontool.errors import SessiontoolError

    try:
        if not w.cfg.budgets:
            return
        from sessiontool.index import sync as si

        si.using_index(
            w.paths.tool_dir, lambda idx: idx.sync([transcript], text=False, others=False)
        )
    except (SessiontoolError, OSError):
        pass


def open_session(paths: StatePaths, rec: RunRecord) -> TurnSession:
    """The session's entry as the run starts; created (store entry; the transcript header
    comes with the first line) only when the key is new, as OpenClaw's sessions_send does."""
    from sessiontool.state import keys
    from sessiontool.state import sessions_json as store
    from sessiontool.state.paths import is_plain_name, transcript_path_for

    key = rec["sessionKey"]
    agent_id = rec.get("agentId") or keys.agent_of(key)

    def usable(e: dict[str, Any] | None) -> bool:
        return (
            e is not None and isinstance(e.get("sessionId"), str) and is_plain_name(e["sessionId"])
        )

    entry = store.read_entry(paths, key, agent_id)
    if not usable(entry):

        def mutate(s: store.Store) -> dict[str, Any]:
            e = store.get_entry(s, agent_id, key)
            if not usable(e):
                e = dict(e or {})
                e["sessionId"] = str(uuid.uuid4())
                e["updatedAt"] = now_ms()
                store.set_entry(s, agent_id, key, e)
            return dict(e)  # type: ignore[arg-type]

        entry = store.update_store(paths.sessions_json(agent_id), mutate)
    assert entry is not None
    sid = entry["sessionId"]
    path = transcript_path_for(paths.sessions_dir(agent_id), sid, entry.get("sessionFile"))
    return TurnSession(agent_id=agent_id, key=key, entry=dict(entry), session_id=sid, path=path)


def start(paths: StatePaths, rec: RunRecord, session: TurnSession) -> bool:
    """`running` (the run lock is already held), unless it ended while queued (aborted)."""

    def mark(r: RunRecord) -> bool:
        if r.get("status") != "queued":
            return False
        now = now_ms()
        r.update(
            {
                "status": "running",
                "startedAt": now,
                "workerStartedAt": now,
                "pid": os.getpid(),
                "sessionId": session.session_id,
            }
        )
        return True

    done = records.update_record(paths, rec["runId"], mark)
    rec.update(done)
    return done.get("status") == "running"


def history_for(path: Path) -> list[dict[str, Any]]:
    """What the runner gets of the session: its last 200 messages, or, after a compaction,
    the summary and what it kept (state/transcript_context.py)."""
    from sessiontool.state.envelopes import strip_envelopes
    from sessiontool.state.transcript_context import context_messages

    return strip_envelopes(context_messages(path, 200))


def append_user(rec: RunRecord, session: TurnSession) -> None:
    from sessiontool.runs.spawnopts import first_message
    from sessiontool.state import transcript

    msg: dict[str, Any] = {
        "role": "user",
        "content": [{"type": "text", "text": first_message(rec)}],
        "timestamp": now_ms(),
    }
    if rec.get("provenance"):
        msg["provenance"] = rec["provenance"]
    if rec.get("attachments"):  # the staged files' receipt, with the task
        msg["attachments"] = {k: v for k, v in rec["attachments"].items() if k != "dir"}
    transcript.append_message(session.path, session.session_id, msg)


def resolve_model(cfg: Config, session: TurnSession) -> tuple[str | None, str]:
    """Session override, then the sub-agent model, then the agent's and the defaults', then
    the runner's, then the runner type's name (spec §6). `provider/model` splits at '/'."""
    from sessiontool.state import keys

    entry = session.entry
    override = entry.get("modelOverride")
    if isinstance(override, str) and override:
        prov = entry.get("providerOverride")
        return (prov if isinstance(prov, str) and prov else None), override
    agent = cfg.agent(session.agent_id)
    candidates: list[str | None] = []
    if keys.is_subagent(session.key):
        candidates += [agent.subagent_model, cfg.defaults_subagent_model]
    candidates += [agent.model, cfg.defaults_model[0]]
    runner = cfg.runner_for(session.agent_id)
    candidates.append(runner.get("model") if isinstance(runner.get("model"), str) else None)
    for c in candidates:
        if c:
            if "/" in c:
                p, m = c.split("/", 1)
                return p, m
            return None, c
    return None, str(runner.get("type", "echo"))


def agent_env(
    paths: StatePaths, cfg: Config, rec: RunRecord, session: TurnSession
) -> dict[str, str]:
    from sessiontool.context import _sandboxed

    env = dict(os.environ)
    env.pop("SESSIONTOOL_WORKER", None)
    env["SESSIONTOOL_STATE_DIR"] = str(paths.root)
    env["SESSIONTOOL_SESSION_KEY"] = session.key
    env["SESSIONTOOL_RUN_ID"] = rec["runId"]
    env["SESSIONTOOL_AGENT_ID"] = session.agent_id
    if _sandboxed(cfg, session.key, session.agent_id):
        env["SESSIONTOOL_SANDBOXED"] = "1"
    else:
        env.pop("SESSIONTOOL_SANDBOXED", None)
    return env


def agent_request(
    rec: RunRecord, session: TurnSession, model: str, history: list[dict[str, Any]]
) -> dict[str, Any]:
    """What the runner is given for this record's turn."""
    from sessiontool.runs.spawnopts import first_message, thinking_of

    request: dict[str, Any] = {
        "runId": rec["runId"],
        "kind": rec["kind"],
        "sessionKey": session.key,
        "sessionId": session.session_id,
        "agentId": session.agent_id,
        "model": model,
        "system": rec.get("system") or "",
        "message": rec.get("message", ""),
        "messages": history,
    }
    if rec.get("kind") == "spawn":  # the task, as the transcript's first message has it
        request["taskMessage"] = first_message(rec)
    for k in ("step", "turn", "maxTurns", "announce", "cwd", "attachments"):
        if rec.get(k) is not None:
            request[k] = rec[k]
    spawned_cwd = session.entry.get("spawnedCwd")  # a persistent child's later turns keep it
    if "cwd" not in request and isinstance(spawned_cwd, str) and spawned_cwd:
        request["cwd"] = spawned_cwd
    # One thinking level, OpenClaw's `thinkingLevel`: the run's own (a spawn's `thinking`), else
    # the session's (`session --thinking`); `thinking` is its older spelling, kept for programs.
    level = thinking_of(rec) or session.entry.get("thinkingLevel")
    if isinstance(level, str) and level:
        request["thinkingLevel"] = request["thinking"] = level
    return request


def run_agent(
    w: WorkerState, rec: RunRecord, session: TurnSession, history: list[dict[str, Any]]
) -> Outcome:
    from sessiontool.runs.runners import RunnerError, RunnerTimeout, get_runner

    paths: StatePaths = w.paths
    cfg = w.cfg
    provider, model = resolve_model(cfg, session)
    full_model = model if provider is None else f"{provider}/{model}"
    request = agent_request(rec, session, full_model, history)
    timeout_s = rec.get("runTimeoutSeconds")
    deadline = time.monotonic() + float(timeout_s) if timeout_s else None
    out = Outcome(model=model, provider=provider)

    def on_pid(pid: int) -> None:
        records.update_record(paths, rec["runId"], lambda r: r.__setitem__("agentPid", pid))

    from sessiontool.runs.runners import spend
    from sessiontool.state.prices import prices_of

    prices = prices_of(cfg.providers)
    try:
        with abortable(paths, rec["runId"]), spend.limited(rec.get("costLimit"), prices):
            runner = get_runner(cfg.runner_for(session.agent_id))
            out.result = runner.run(
                request,
                env=agent_env(paths, cfg, rec, session),
                on_agent_pid=on_pid,
                deadline=deadline,
            )
            out.reply = out.result.reply
    except RunAborted:
        out.status, out.error = "aborted", "aborted by user"
    except spend.BudgetStop as exc:
        _stopped(out, exc)
    except RunnerTimeout as exc:
        out.status, out.error, out.result = "timeout", exc.message, exc.partial
    except RunnerError as exc:
        out.status, out.error, out.result = "error", exc.message, exc.partial
    except Exception as exc:  # noqa: BLE001 - a runner bug must still end the run
        from sessiontool.errors import describe

        out.status, out.error = "error", describe(exc)
    res = out.result
    if res is not None:
        out.model = res.model or model
        out.provider = res.provider or provider
        out.extra = list(res.extra_messages)
    _over_budget(out, rec.get("costLimit"), prices)
    return out


def _stopped(out: Outcome, exc: Any) -> None:
    """A run its budget stopped between model calls (runners/spend.py BudgetStop)."""
    out.status, out.error, out.result = "aborted", exc.message, exc.partial
    out.reason = "budget"
    out.reply = exc.partial.reply if exc.partial is not None else ""


def _over_budget(out: Outcome, limit: Any, prices: Any) -> None:
    """A run that ended with its spend at or over its cost limit (a `command` runner tells its
    usage only at its end; a model's last call) ends `aborted` for the budget, its reply kept."""
    from sessiontool.runs.runners import spend

    res = out.result
    if res is None or out.status != "ok":
        return
    cost = spend.crossed(limit, prices, out.provider, model=out.model, usage=res.usage)
    if cost is not None:
        out.status, out.error, out.reason = "aborted", spend.stop_message(limit, cost), "budget"


def _usage(out: Outcome) -> tuple[dict[str, Any], dict[str, Any]]:
    from sessiontool.runs.runners import make_usage

    res = out.result
    usage = res.usage if res is not None else make_usage(0, 0)
    last = (res.last_call_usage if res is not None else None) or usage
    return usage, last


def append_reply(session: TurnSession, out: Outcome) -> None:
    from sessiontool.state import transcript

    res = out.result
    _, last = _usage(out)
    ok = out.status == "ok"
    assistant: dict[str, Any] = {
        "role": "assistant",
        "content": [{"type": "text", "text": out.reply}] if out.reply else [],
        "api": res.api if res is not None else "sessiontool",
        "provider": out.provider or "sessiontool",
        "model": out.model,
        # Each assistant message carries its own model call's usage; the record sums them.
        "usage": last,
        "stopReason": (res.stop_reason if res is not None else "stop")
        if ok
        else ("aborted" if out.status in ("aborted", "timeout") else "error"),
        "timestamp": now_ms(),
    }
    if out.error:
        assistant["errorMessage"] = out.error
    entries = [{"type": "message", "message": m} for m in [*out.extra, assistant]]
    transcript.append_entries(session.path, session.session_id, entries)


def record_in_store(paths: StatePaths, session: TurnSession, out: Outcome) -> None:
    """The run's end in the store, only while the entry is still the session the run started
    in: a deleted entry is not brought back, a reset one gets no foreign tokens."""
    from sessiontool.state import sessions_json as store

    current = store.peek_entry(paths, session.key)
    if current is None or current.get("sessionId") != session.session_id:
        return
    _, last = _usage(out)

    def mutate(s: store.Store) -> None:
        e = store.get_entry(s, session.agent_id, session.key)
        if e is None or e.get("sessionId") != session.session_id:
            return
        e = dict(e)
        e["updatedAt"] = now_ms()
        e["model"] = out.model
        if out.provider:
            e["modelProvider"] = out.provider
        if out.result is not None:
            inp = int(last.get("input") or 0)
            ctx_tokens = inp + int(last.get("cacheRead") or 0) + int(last.get("cacheWrite") or 0)
            e["inputTokens"] = inp
            e["outputTokens"] = int(last.get("output") or 0)
            e["totalTokens"] = ctx_tokens or int(last.get("totalTokens") or 0)
        e["abortedLastRun"] = out.status in ("aborted", "timeout")
        e["systemSent"] = True
        store.set_entry(s, session.agent_id, session.key, e)
        testhooks.pause("index-write")

    store.update_store(paths.sessions_json(session.agent_id), mutate)


def publish(paths: StatePaths, rec: RunRecord, session: TurnSession, out: Outcome) -> None:
    usage, _ = _usage(out)

    def mark(r: RunRecord) -> None:
        records.record_end(r, out.status, out.error, out.reply)
        if out.reason and r.get("status") == out.status:
            r["abortReason"] = out.reason
        r["usage"] = usage
        if out.model:
            r["model"] = out.model
        if out.provider:
            r["modelProvider"] = out.provider
        r["sessionId"] = session.session_id
        steps.init_follow_up(r)

    records.update_record(paths, rec["runId"], mark)
    records.notify(paths, rec["runId"])
