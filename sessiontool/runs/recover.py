"""A run whose worker died after it wrote the reply: ended, not lost.

The worker records the outcome it reached (`outcome`), then appends the reply to the transcript,
then writes the store and publishes the end. Killed between the append and the end, it leaves a
`running` record nobody holds, whose reply is on disk: calling it `lost` would contradict the
transcript (and `abortedLastRun` would say the session's last run failed). The reconciler looks
for the reply first: the last assistant message after the run's own user line that an agent wrote
(a lane runs one run of a session at a time, so no other agent answers in between; a mirror or an
injected note may), and ends the run with it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from sessiontool.clock import now_ms
from sessiontool.state.paths import StatePaths, is_plain_name

if TYPE_CHECKING:
    from sessiontool.runs.record_types import RunRecord

# The run's user line is among the last few messages (only its own reply and tool calls follow).
TAIL = 200
ENDED = ("ok", "error", "timeout")


def _text(msg: dict[str, Any]) -> str | None:
    content = msg.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list) and content and isinstance(content[0], dict):
        t = content[0].get("text")
        return t if isinstance(t, str) else None
    return None


def _transcript(paths: StatePaths, rec: RunRecord) -> Any:
    from sessiontool.state import keys
    from sessiontool.state.transcript import archived_of

    sid = rec.get("sessionId")
    if not isinstance(sid, str) or not is_plain_name(sid):
        return None
    agent = rec.get("agentId") or keys.agent_of(rec["sessionKey"])
    path = paths.sessions_dir(agent) / f"{sid}.jsonl"
    return path if os.path.lexists(path) else archived_of(path)


def reply_on_disk(paths: StatePaths, rec: RunRecord) -> dict[str, Any] | None:
    """The assistant message this run appended, when its worker got that far; else None."""
    if rec.get("outcome") not in ENDED or rec.get("via") == "gateway":
        return None
    from sessiontool.state.transcript import read_tail

    try:
        path = _transcript(paths, rec)
        if path is None:
            return None
        msgs = read_tail(path, TAIL).messages
    except (OSError, ValueError):
        return None
    started = rec.get("startedAt")
    started = started if isinstance(started, int) else 0
    for i in range(len(msgs) - 1, -1, -1):
        m = msgs[i]
        ts = m.get("timestamp")
        if (
            m.get("role") == "user"
            and _text(m) == rec.get("message")
            and isinstance(ts, int | float)
            and ts >= started
        ):
            after = msgs[i + 1 :]
            cut = next((j for j, n in enumerate(after) if n.get("role") == "user"), len(after))
            answers = [n for n in after[:cut] if _own_answer(n)]
            return answers[-1] if answers else None
    return None


def _own_answer(msg: dict[str, Any]) -> bool:
    """An assistant message a run's agent wrote: not a delivery mirror or an injected note,
    which another run's follow-up may append while this run's turn is open (a delivery resumed
    after its worker died), and which would otherwise be taken for this run's reply."""
    from sessiontool.protocol import INJECTED, is_delivery_mirror

    return (
        msg.get("role") == "assistant"
        and msg.get("stopReason") != INJECTED
        and not is_delivery_mirror(msg)
    )


def end_dead(paths: StatePaths, r: RunRecord) -> bool:
    """End a started run whose worker died (in place, under the records lock): with its reply
    when that is on disk (True), else `lost` (or the abort it had decided)."""
    from sessiontool.runs import records

    reply = reply_on_disk(paths, r)
    if reply is not None:
        end_from(r, reply)
        return True
    r.update(records.lost_fields(r))
    r["endedAt"] = now_ms()
    return False


def after_end(paths: StatePaths, rec: RunRecord, recovered: bool) -> None:
    """What follows a dead worker's end outside the records lock: the store update it did not
    get to, or the session's `abortedLastRun`."""
    if recovered:
        record_in_store(paths, rec)
    else:
        flag_aborted(paths, rec)


def flag_aborted(paths: StatePaths, rec: RunRecord) -> None:
    """The session of an aborted or lost run flagged as such, the writer's way."""
    from sessiontool.runs.writer import writer_of

    writer_of(rec).mark_aborted(paths, rec)


def end_from(r: RunRecord, msg: dict[str, Any]) -> None:
    """End the record (in place, under the records lock) as its worker would have."""
    status = r["outcome"]
    r["status"] = status
    r["endedAt"] = now_ms()
    text = _text(msg) or ""
    if status == "ok" or text:
        r["reply"] = text
    err = msg.get("errorMessage")
    if status != "ok" and isinstance(err, str) and err:
        r.setdefault("error", err)
    if isinstance(msg.get("usage"), dict):
        r.setdefault("usage", msg["usage"])
    if isinstance(msg.get("model"), str) and msg["model"]:
        r.setdefault("model", msg["model"])
    if isinstance(msg.get("provider"), str) and msg["provider"]:
        r.setdefault("modelProvider", msg["provider"])
    r["recoveredAt"] = r["endedAt"]


def record_in_store(paths: StatePaths, rec: RunRecord) -> None:
    """The store update the worker did not get to: only while the entry is still the session
    the run started in (as execute.record_in_store)."""
    from sessiontool.state import keys
    from sessiontool.state import sessions_json as store

    if rec.get("skipIndex") or rec.get("via") == "gateway":
        return
    key = rec["sessionKey"]
    agent_id = rec.get("agentId") or keys.agent_of(key)
    sid = rec.get("sessionId")
    current = store.peek_entry(paths, key)
    if current is None or current.get("sessionId") != sid:
        return
    raw = rec.get("usage")
    usage: dict[str, Any] = raw if isinstance(raw, dict) else {}

    def num(k: str) -> int:
        v = usage.get(k)
        return int(v) if isinstance(v, int | float) and not isinstance(v, bool) else 0

    def mutate(s: store.Store) -> None:
        e = store.get_entry(s, agent_id, key)
        if e is None or e.get("sessionId") != sid:
            return
        e = dict(e)
        e["updatedAt"] = now_ms()
        if isinstance(rec.get("model"), str):
            e["model"] = rec["model"]
        if isinstance(rec.get("modelProvider"), str):
            e["modelProvider"] = rec["modelProvider"]
        if usage:
            inp = num("input")
            e["inputTokens"] = inp
            e["outputTokens"] = num("output")
            e["totalTokens"] = (inp + num("cacheRead") + num("cacheWrite")) or num("totalTokens")
        e["abortedLastRun"] = rec.get("status") == "timeout"
        e["systemSent"] = True
        store.set_entry(s, agent_id, key, e)

    store.update_store(paths.sessions_json(agent_id), mutate)
