"""What follows a run, as durable steps.

When a run ends, its record gets a `followUp` with the name of its next step:

- a send between two sessions: `reply:1` ... `reply:N` (reply-back turns, alternating sessions),
  then `announce` (the announce step in the target session), then `deliver`;
- a send with `--deliver`: `deliver`;
- a spawn: `announce` (the announce step in the child), `inject` (the result message in the
  requester's transcript), `deliver` (the outbox line), `cleanup`.

Agent steps (`reply:k`, `announce`) are step records with an id derived from the run and the
step name, queued in their session's lane like any run; the lane worker that finishes one
advances the parent. The other steps run in whoever advances. Every step is recorded in the
parent's record after it is done (and a delivery also before it starts), so a worker killed at
any point leaves the run resumable from the last finished step: by the lane's next worker, by
`sweep`, or by any command that reconciles runs (reconcile.py starts a follow-up worker). Each
step is idempotent: a step record is created once (its id is fixed), a delivery carries the id
`<runId>:<mode>` and is never written twice, an injected or mirrored message is looked for
before it is appended again.
"""

from __future__ import annotations

import os
import uuid
from typing import TYPE_CHECKING, Any, cast

from sessiontool.clock import now_ms
from sessiontool.errors import CorruptStateError, NotFoundError, SessiontoolError
from sessiontool.protocol import ANNOUNCE_SKIP, is_announce_skip, is_reply_skip
from sessiontool.runs import records
from sessiontool.state.paths import StatePaths

if TYPE_CHECKING:
    from pathlib import Path

    from sessiontool.runs.record_types import FollowUp, RunRecord
    from sessiontool.state.config import Config

DONE = "done"
WAIT = "wait"


def init_follow_up(rec: RunRecord) -> None:
    """Give a run that has just ended its first follow-up step (in place, under the lock): the
    one its writer names (runs/writer.py)."""
    if "followUp" in rec:
        return
    from sessiontool.runs.writer import writer_of

    first = writer_of(rec).first_follow_up(rec)
    if first is not None:
        rec["followUp"] = first


def pending(rec: RunRecord) -> bool:
    fu = rec.get("followUp")
    return isinstance(fu, dict) and fu.get("next") not in (None, DONE)


def step_id(run_id: str, name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"sessiontool:{run_id}:{name}"))


def is_agent_step(name: str) -> bool:
    return name == "announce" or name.startswith("reply:")


def try_lock(paths: StatePaths, run_id: str, *, block: bool) -> int | None:
    """The run's lock, held through a descriptor of the file its path names now. A holder
    unlinks the file as it lets go (release_lock), so a waiter blocked on the old file wakes
    holding a lock nobody else can see: it opens the path again instead, or two workers would
    advance one run's follow-up at once (and `lock_held` would call a live run dead)."""
    from sessiontool.state.flock import open_lock_file, try_flock, wait_flock

    path = paths.run_lock(run_id)
    while True:
        fd = open_lock_file(path)
        if block:
            wait_flock(fd)
        elif not try_flock(fd):
            os.close(fd)
            return None
        if _names(path, fd):
            return fd
        os.close(fd)


def _names(path: Path, fd: int) -> bool:
    """Whether `path` still names the file open at `fd`."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    held = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (held.st_dev, held.st_ino)


def release_lock(paths: StatePaths, run_id: str, fd: int) -> None:
    try:
        os.unlink(paths.run_lock(run_id))
    except OSError:
        pass
    os.close(fd)


class Advancer:
    """Runs a finished run's follow-up from its recorded step on, until it is done or waits for
    an agent step in some lane. The caller holds the run's lock."""

    def __init__(self, paths: StatePaths, cfg: Config) -> None:
        self.paths = paths
        self.cfg = cfg

    def advance(self, run_id: str) -> None:
        while True:
            try:
                rec = records.read_record(self.paths, run_id)
            except (NotFoundError, CorruptStateError):
                return
            if not pending(rec):
                return
            name = str(rec["followUp"]["next"])
            local = {
                "inject": self.inject,
                "deliver": self.delivery_step,
                "cleanup": self.cleanup,
                "gateway-announce": self.gateway_announce,
                "openclaw-announce": self.openclaw_announce,
            }.get(name)
            if is_agent_step(name):
                result = self.agent_step(rec, name)
            elif local is not None:
                result = local(rec)
            else:
                result = self.record(rec, {"next": DONE})
            if result == WAIT:
                return

    # -- recording -------------------------------------------------------------------------
    def record(self, rec: RunRecord, changes: dict[str, Any], **top: Any) -> str:
        def mutate(r: RunRecord) -> None:
            fu: dict[str, Any] = dict(r.get("followUp") or {})
            fu.update(changes)
            for k in [k for k, v in fu.items() if v is None]:
                del fu[k]
            if "error" not in changes:
                fu.pop("error", None)
            r["followUp"] = cast("FollowUp", fu)
            r.update(cast("RunRecord", top))

        records.update_record(self.paths, rec["runId"], mutate)
        return str(changes.get("next", ""))

    # -- agent steps -----------------------------------------------------------------------
    def agent_step(self, rec: RunRecord, name: str) -> str:
        sid = step_id(rec["runId"], name)
        try:
            step = records.read_record(self.paths, sid)
        except NotFoundError:
            fields = step_fields(self.paths, self.cfg, rec, name)
            if fields is None:
                return WAIT
            if "next" in fields:  # skipped: straight to the given step
                return self.record(rec, fields)
            from sessiontool.state import keys

            fields = {k: v for k, v in fields.items() if v is not None}
            step = records.create_record(
                self.paths,
                runId=sid,
                kind="step",
                parentRunId=rec["runId"],
                agentId=keys.agent_of(fields["sessionKey"]),
                startedBy=rec.get("requesterSessionKey"),
                **fields,
                # A step's turn goes where its run's did (the writer its command chose).
                **({"via": rec["via"]} if rec.get("via") else {}),
            )
        if not records.is_finished(step):
            from sessiontool.runs import lanes

            lanes.ensure_worker(self.paths, lanes.lane_id(step["sessionKey"]))
            return WAIT
        return self.consume(rec, name, step)

    def consume(self, rec: RunRecord, name: str, step: RunRecord) -> str:
        ok = step.get("status") == "ok"
        reply = (step.get("reply") or "") if ok else ""
        if rec.get("kind") == "spawn":
            return self.spawn_result(rec, step)

        if name.startswith("reply:"):
            turn = int(name.split(":", 1)[1])
            if not reply.strip() or is_reply_skip(reply):
                return self.record(rec, {"next": "announce"})
            return self.record(
                rec, {"next": f"reply:{turn + 1}", "latest": reply, "incoming": reply}
            )
        text = reply.strip()
        if text and not is_announce_skip(text):
            return self.record(
                rec, {"next": "deliver", "mode": "announce", "to": rec["sessionKey"], "text": text}
            )
        return self.record(rec, {"next": DONE})

    def spawn_result(self, rec: RunRecord, step: RunRecord) -> str:
        from sessiontool.flow import announce
        from sessiontool.state import keys
        from sessiontool.state.config_models import model_cost
        from sessiontool.state.paths import transcript_path_for
        from sessiontool.state.sessions_json import peek_entry

        step_ok = step.get("status") == "ok"
        step_reply = (step.get("reply") or "").strip() if step_ok else None
        if step_ok and step_reply == ANNOUNCE_SKIP:
            return self.record(rec, {"next": "cleanup"})
        child = rec["sessionKey"]
        child_reply = (step.get("announce") or {}).get("childReply")
        child_entry = peek_entry(self.paths, child) or {}
        sid = rec.get("sessionId") or child_entry.get("sessionId")
        tpath = None
        if isinstance(sid, str):
            session_file = (
                child_entry.get("sessionFile") if child_entry.get("sessionId") == sid else None
            )
            tpath = str(
                transcript_path_for(
                    self.paths.sessions_dir(keys.agent_of(child)), sid, session_file
                )
            )
        stats = announce.stats_line(
            started_at=rec.get("startedAt"),
            ended_at=rec.get("endedAt"),
            usage=rec.get("usage"),
            cost=model_cost(self.cfg, rec.get("modelProvider"), rec.get("model")),
            child_key=child,
            session_id=sid if isinstance(sid, str) else None,
            # --cleanup delete archives the child right after this announce: name where to.
            transcript=f"{tpath}.deleted.<time> (archived: --cleanup delete)"
            if tpath and rec.get("cleanup") == "delete"
            else tpath,
        )
        message = announce.announce_message(
            status=announce.status_word(rec),
            result=announce.pick_result(step_reply or None, not step_ok, child_reply),
            notes=rec.get("error") or "none",
            stats=stats,
        )
        return self.record(rec, {"next": "inject", "text": message, "injectAt": now_ms()})

    # -- local steps -----------------------------------------------------------------------
    def inject(self, rec: RunRecord) -> str:
        """The announce message handed to the requester session, once (the writer's way)."""
        from sessiontool.runs.writer import writer_of

        text = str(rec["followUp"].get("text") or "")
        writer_of(rec).announce_to_requester(self.paths, self.cfg, rec, text)
        # `--completion-target parent`: the requester's transcript only, no channel delivery.
        to = None if rec.get("completion") == "parent" else rec["requesterSessionKey"]
        nxt = {"next": "deliver", "mode": "spawn-announce", "to": to} if to else {"next": "cleanup"}
        return self.record(
            rec, {**nxt, "text": rec["followUp"].get("text") if to else None, "injectAt": None}
        )

    def delivery_step(self, rec: RunRecord) -> str:
        """The follow-up's `deliver` step: its text handed to the outbox (flow/delivery.py
        `deliver`, which the `--deliver` option asks for), resumed by id after a killed worker."""
        from sessiontool import testhooks
        from sessiontool.flow import delivery
        from sessiontool.runs.writer import writer_of

        fu = rec["followUp"]
        mode = str(fu.get("mode") or "deliver")
        resume = bool(fu.get("delivering"))
        if not resume:
            self.record(rec, {"delivering": True})
        testhooks.pause("deliver")
        try:
            delivery.deliver(
                self.paths,
                self.cfg,
                run_id=rec["runId"],
                session_key=str(fu.get("to") or rec["sessionKey"]),
                mode=mode,  # type: ignore[arg-type]
                text=str(fu.get("text") or ""),
                mirror=mode != "spawn-announce" and not writer_of(rec).owns_delivery,
                delivery_id=f"{rec['runId']}:{mode}",
                resume=resume,
            )
        except SessiontoolError as exc:
            return self.retry_later(rec, exc)
        nxt = "cleanup" if rec.get("kind") == "spawn" else DONE
        return self.record(rec, {"next": nxt, "delivering": None, "text": None, "attemptAt": None})

    def retry_later(self, rec: RunRecord, exc: SessiontoolError) -> str:
        """A step that failed (disk full, gateway refused) stays pending with its error: the
        next worker, `sweep` or `runs` tries it again."""
        try:
            self.record(rec, {"error": exc.message, "attemptAt": now_ms()})
        except SessiontoolError:
            pass
        return WAIT

    def gateway_announce(self, rec: RunRecord) -> str:
        """A gateway spawn's announce, followed until it landed (runs/gateway_announce.py)."""
        from sessiontool.runs import gateway_announce

        try:
            done = gateway_announce.land(self.paths, rec, announce_text(self.paths, self.cfg, rec))
        except SessiontoolError as exc:
            return self.retry_later(rec, exc)
        return self.record(
            rec, {"next": "cleanup", "attemptAt": None, **done}, announcedAt=now_ms()
        )

    def openclaw_announce(self, rec: RunRecord) -> str:
        """A spawn made by OpenClaw's own sessions_spawn (gateway_tool_run.announce)."""
        from sessiontool.runs import gateway_tool_run

        try:
            done = gateway_tool_run.announce(self.paths, self.cfg, rec, announce_text)
        except SessiontoolError as exc:
            return self.retry_later(rec, exc)
        return self.record(rec, {"attemptAt": None, **done}, announcedAt=now_ms())

    def cleanup(self, rec: RunRecord) -> str:
        from sessiontool import testhooks
        from sessiontool.runs.writer import writer_of

        testhooks.pause("cleanup")
        try:
            writer_of(rec).cleanup(self.paths, rec)
        except SessiontoolError as exc:
            return self.retry_later(rec, exc)
        return self.record(rec, {"next": DONE, "attemptAt": None}, announcedAt=now_ms())


# -- what an agent step's record holds -------------------------------------------------------


def _channels(paths: StatePaths, rec: RunRecord) -> tuple[str | None, str | None]:
    """The channels of a send's requester and target (their entries' routing)."""
    from sessiontool.flow import a2a

    req, tgt = rec["requesterSessionKey"], rec["sessionKey"]
    return (
        a2a.session_channel(req, entry_of(paths, req)),
        a2a.session_channel(tgt, entry_of(paths, tgt)),
    )


def _allowed(paths: StatePaths, cfg: Config, key: str) -> bool:
    """Whether the send policy lets `key` be sent to (a reply turn, an announce)."""
    from sessiontool.flow.policy import send_decision

    return send_decision(cfg.send_policy, key, entry_of(paths, key)).allowed


def step_fields(paths: StatePaths, cfg: Config, rec: RunRecord, name: str) -> dict[str, Any] | None:
    """What the record of the agent step `name` holds (its session, message, prompt): a reply
    turn of a send's ping-pong, its announce, or a spawn's announce; `{"next": ...}` when the
    step is skipped (past the turn limit, the send policy says no), None when it must wait."""
    if rec.get("kind") == "spawn":
        return spawn_announce_fields(paths, rec)
    from sessiontool.flow import a2a

    requester, target = rec["requesterSessionKey"], rec["sessionKey"]
    fu = rec["followUp"]
    req_ch, tgt_ch = _channels(paths, rec)
    if name.startswith("reply:"):
        turn = int(name.split(":", 1)[1])
        max_turns = cfg.max_ping_pong_turns
        side = "requester" if turn % 2 == 1 else "target"
        session = requester if side == "requester" else target
        other = target if side == "requester" else requester
        if turn > max_turns or not _allowed(paths, cfg, session):
            return {"next": "announce"}
        return {
            "step": "reply",
            "turn": turn,
            "maxTurns": max_turns,
            "sessionKey": session,
            "requesterSessionKey": other,
            "message": fu.get("incoming") or "",
            "system": a2a.reply_prompt(
                current=side,  # type: ignore[arg-type]
                turn=turn,
                max_turns=max_turns,
                requester_key=requester,
                requester_channel=req_ch,
                target_key=target,
                target_channel=tgt_ch,
            ),
            "provenance": inter_session(other, tgt_ch if side == "requester" else req_ch),
        }
    if not _allowed(paths, cfg, target):
        return {"next": DONE}
    round1 = rec.get("reply") or ""
    return {
        "step": "announce",
        "sessionKey": target,
        "requesterSessionKey": requester,
        "message": a2a.ANNOUNCE_STEP_MESSAGE,
        "system": a2a.announce_prompt(
            requester_key=requester,
            requester_channel=req_ch,
            target_key=target,
            target_channel=tgt_ch,
            original=rec.get("message", ""),
            round1=round1,
            latest=fu.get("latest") or round1,
        ),
        "announce": {"round1": round1, "latest": fu.get("latest") or round1},
        "provenance": inter_session(requester, req_ch),
    }


def spawn_announce_fields(paths: StatePaths, rec: RunRecord) -> dict[str, Any]:
    """A spawn's announce step: the child is asked to report its result to the requester."""
    from sessiontool.flow import announce

    child = rec["sessionKey"]
    child_reply = rec.get("reply") or last_assistant_reply(paths, child)
    return {
        "step": "announce",
        "sessionKey": child,
        "requesterSessionKey": rec["requesterSessionKey"],
        "message": announce.ANNOUNCE_STEP_MESSAGE,
        "system": announce.announce_step_prompt(
            task=rec.get("message", ""),
            label=rec.get("label"),
            outcome=str(rec.get("status")),
            latest_reply=child_reply,
        ),
        "announce": {"childReply": child_reply},
        # The child is archived right after: its entry need not record this turn (a spawn
        # and its announce write the store at most four times).
        "skipIndex": True if rec.get("cleanup") == "delete" else None,
        "provenance": {
            "kind": "inter_session",
            "sourceSessionKey": rec["requesterSessionKey"],
            "sourceTool": "sessions_spawn",
        },
    }


def announce_text(paths: StatePaths, cfg: Config, rec: RunRecord) -> str:
    """A gateway spawn's announce message, the same text the file form injects: Status, Result
    (the child's final reply), Notes, Stats."""
    from sessiontool.flow import announce
    from sessiontool.state.config_models import model_cost

    stats = announce.stats_line(
        started_at=rec.get("startedAt"),
        ended_at=rec.get("endedAt"),
        usage=rec.get("usage"),
        cost=model_cost(cfg, rec.get("modelProvider"), rec.get("model")),
        child_key=rec["sessionKey"],
        session_id=rec.get("sessionId") if isinstance(rec.get("sessionId"), str) else None,
        transcript=None,  # in OpenClaw's database: `sessiontool history KEY` reads it
    )
    ok = rec.get("status") == "ok"
    return announce.announce_message(
        status=announce.status_word(rec),
        result=announce.pick_result(None, not ok, rec.get("reply") if ok else None),
        notes=rec.get("error") or "none",
        stats=stats,
    )


def entry_of(paths: StatePaths, key: str) -> dict[str, Any] | None:
    """A session's entry as its store has it, through the read interface (OpenClaw's
    database for a SQLite-era agent, not a leftover sessions.json); None when unreadable."""
    from sessiontool.sessions.reading import read_scope, reader_for
    from sessiontool.state import keys

    try:
        with read_scope():
            found = reader_for(paths, keys.agent_of(key)).session(key)
    except SessiontoolError:
        return None
    return dict(found.entry) if found is not None else None


def inter_session(source_key: str, source_channel: str | None) -> dict[str, Any]:
    """The provenance of a message one session sends another (spec §5.3). A channel nobody
    knows is left out, never written as null."""
    prov: dict[str, Any] = {"kind": "inter_session", "sourceSessionKey": source_key}
    if source_channel:
        prov["sourceChannel"] = source_channel
    prov["sourceTool"] = "sessions_send"
    return prov


def last_assistant_reply(paths: StatePaths, key: str) -> str | None:
    from sessiontool.state import keys
    from sessiontool.state.paths import transcript_path_for
    from sessiontool.state.sessions_json import peek_entry
    from sessiontool.state.transcript import read_tail

    entry = peek_entry(paths, key)
    if not entry or not isinstance(entry.get("sessionId"), str):
        return None
    path = transcript_path_for(
        paths.sessions_dir(keys.agent_of(key)), entry["sessionId"], entry.get("sessionFile")
    )
    res = read_tail(
        path,
        1,
        lambda m: m.get("role") == "assistant" and m.get("stopReason") not in ("error", "aborted"),
    )
    for m in res.messages:
        content = m.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            text = "\n".join(
                b.get("text", "")
                for b in content
                if isinstance(b, dict) and b.get("type") == "text"
            )
            return text or None
    return None
