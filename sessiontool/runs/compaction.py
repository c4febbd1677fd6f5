"""`compact` on sessiontool's own store: one run of kind `compact` in the session's lane (queued
behind the runs already there, never beside one: the lane runs one at a time), waited on and
aborted like any run. Its worker:

1. reads what the session's runs see (state/transcript_context.py: an earlier compaction's
   summary, then the messages it kept and those after it);
2. keeps the last `keep` turns (a turn starts at a user message) and hands the rest to the
   session's own runner with the compaction prompt (`request.kind` is `compact`; the echo
   runner's summary is deterministic, for tests);
3. copies the transcript aside whole first (`<transcript>.compacted.<time>`), then appends
   OpenClaw's `compaction` entry (`summary`, `firstKeptEntryId`, `tokensBefore`,
   `tokensAfter`) and counts it in the entry (`compactionCount`), as OpenClaw does.

An abort, a runner error or a crash before step 3's append leaves the transcript as it was.
On OpenClaw's store the command calls the gateway's `sessions.compact` instead (no run).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from sessiontool import testhooks
from sessiontool.clock import archive_stamp, now_ms
from sessiontool.runs import lanes, records
from sessiontool.runs.turn import Outcome, WorkerState, decide

if TYPE_CHECKING:
    from sessiontool.context import Context
    from sessiontool.runs.execute import TurnSession
    from sessiontool.runs.record_types import RunRecord
    from sessiontool.sessions.resolve import Resolved

DEFAULT_KEEP = 2
COMPACT_PROMPT = (
    "Summarize the conversation above for your own future use: the goals, the decisions "
    "made, the facts and names that matter, and what is still open. Reply with the summary "
    "only."
)
CHARS_PER_TOKEN = 4


def _estimate(messages: list[dict[str, Any]]) -> int:
    """Tokens, estimated from the text (4 characters a token), as OpenClaw estimates them."""
    total = 0
    for m in messages:
        content = m.get("content")
        if isinstance(content, str):
            total += len(content)
        elif isinstance(content, list):
            for b in content:
                if isinstance(b, dict) and isinstance(b.get("text"), str):
                    total += len(b["text"])
    return total // CHARS_PER_TOKEN


def split(
    msgs: list[tuple[str | None, dict[str, Any]]], keep: int
) -> tuple[list[dict[str, Any]], str | None]:
    """(the messages to summarize, the id of the first one kept): the last `keep` turns are
    kept, a turn starting at a user message; nothing to summarize: ([], None)."""
    starts = [i for i, (_, m) in enumerate(msgs) if m.get("role") == "user"]
    if keep <= 0:
        cut = len(msgs)
    elif len(starts) <= keep:
        return [], None
    else:
        cut = starts[-keep]
    older = [m for _, m in msgs[:cut]]
    first_kept = msgs[cut][0] if cut < len(msgs) else None
    if not older or (cut < len(msgs) and first_kept is None):
        return [], None
    return older, first_kept


def submit(ctx: Context, r: Resolved, keep: int, timeout: float) -> tuple[dict[str, Any], int]:
    """Queue the compaction run in the session's lane and wait up to `timeout` seconds for it
    (0: return at once, `accepted`); the result is `send`'s, with what it did (`compaction`)."""
    from sessiontool.runs.submit import _start, run_result
    from sessiontool.runs.wait import wait_for

    rec = records.create_record(
        ctx.paths,
        kind="compact",
        sessionKey=r.key,
        agentId=r.agent_id,
        keep=keep,
        timeoutSeconds=timeout,
    )
    _start(ctx, rec)
    if timeout <= 0:
        accepted = {"runId": rec["runId"], "status": "accepted", "sessionKey": ctx.display(r.key)}
        return accepted, 0
    done = wait_for(ctx.paths, rec["runId"], timeout)
    shown, code = run_result(ctx, done)
    result: dict[str, Any] = dict(shown)
    if isinstance(done.get("compaction"), dict):
        result["compaction"] = done["compaction"]
    return result, code


def run_compact(w: WorkerState, rec: RunRecord) -> None:
    """The compaction run's turn over the files (worker.carry_out)."""
    from sessiontool.runs import execute

    slot = lanes.acquire_slot(w.paths, w.max_concurrent())
    try:
        session = execute.open_session(w.paths, rec)
        if not execute.start(w.paths, rec, session):
            return
        _compact(w, rec, session)
    finally:
        os.close(slot)


def _compact(w: WorkerState, rec: RunRecord, session: TurnSession) -> None:
    from sessiontool.runs import execute
    from sessiontool.state.transcript_context import read_context, summary_message

    msgs, earlier = read_context(session.path)
    keep = rec.get("keep")
    older, first_kept = split(msgs, keep if isinstance(keep, int) else DEFAULT_KEEP)
    if earlier is not None and isinstance(earlier.get("summary"), str) and older:
        older = [summary_message(earlier["summary"]), *older]
    if not older:
        out = Outcome()
        out.reply = "nothing to compact"
        out.status, out.error = decide(w.paths, rec, out)
        _publish(
            w, rec, session, out=out, info={"compacted": False, "reason": "nothing to compact"}
        )
        return
    rec["message"] = COMPACT_PROMPT
    out = execute.run_agent(w, rec, session, older)
    out.status, out.error = decide(w.paths, rec, out)
    info: dict[str, Any] = {"compacted": False}
    if out.status == "ok" and (out.reply or "").strip():
        info = _write(w, session, out.reply.strip(), first_kept=first_kept, older=older)
    elif out.status == "ok":
        out.status, out.error = "error", "the runner's summary was empty"
    _publish(w, rec, session, out=out, info=info)


def _write(
    w: WorkerState, session: TurnSession, summary: str, first_kept: str | None, older: list[Any]
) -> dict[str, Any]:
    """The transcript copied aside, then the compaction entry appended and counted."""
    from sessiontool.state import sessions_json as store
    from sessiontool.state import transcript
    from sessiontool.state import transcript_cut as cut
    from sessiontool.state.locks import transcript_lock

    path = session.path
    archive = path.with_name(f"{path.name}.compacted.{archive_stamp()}")
    with transcript_lock(path):
        size = path.stat().st_size
        cut.write_copy(path, archive, b"", start=0, end=size)
    testhooks.pause("compact-archived")
    entry: dict[str, Any] = {
        "type": "compaction",
        "summary": summary,
        "firstKeptEntryId": first_kept,
        "tokensBefore": _estimate(older),
        "tokensAfter": len(summary) // CHARS_PER_TOKEN,
        "fromHook": False,
    }
    written = transcript.append_entries(path, session.session_id, [entry])[0]

    def mutate(s: store.Store) -> None:
        e = store.get_entry(s, session.agent_id, session.key)
        if e is None or e.get("sessionId") != session.session_id:
            return
        e = dict(e)
        count = e.get("compactionCount")
        e["compactionCount"] = (count if isinstance(count, int) else 0) + 1
        e["updatedAt"] = now_ms()
        store.set_entry(s, session.agent_id, session.key, e)

    store.update_store(w.paths.sessions_json(session.agent_id), mutate)
    return {
        "compacted": True,
        "archived": str(archive),
        "entryId": written["id"],
        "firstKeptEntryId": first_kept,
        "tokensBefore": entry["tokensBefore"],
        "tokensAfter": entry["tokensAfter"],
        "summarized": len(older),
    }


def _publish(
    w: WorkerState, rec: RunRecord, session: TurnSession, out: Outcome, info: dict[str, Any]
) -> None:
    from sessiontool.runs import execute

    def mark(r: RunRecord) -> None:
        r["compaction"] = info

    records.update_record(w.paths, rec["runId"], mark)
    execute.publish(w.paths, rec, session, out)
