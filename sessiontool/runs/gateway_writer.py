"""The `gateway` writer (runs/writer.py): every change is a method of OpenClaw's running
gateway, called through `gateway.call`; nothing of OpenClaw's (sessions.json, its database, a
transcript, a lock under `agents/`) is written by sessiontool. Run records, logs and the outbox
stay sessiontool's own, under `<state>/sessiontool/`.

What each operation is, checked against the real 2026.9.6 gateway's `sessions.list` and
`chat.history` (tests/interop_openclaw):
- label / send policy: `sessions.patch {key, label | sendPolicy}`; a label another session of
  the agent has is refused first (exit 2, as the file writer does).
- reset: `sessions.reset {key}`; 2026.9.6 resets in place (the sessionId is kept, the
  transcript starts over), which the result says (`inPlace`).
- delete: `sessions.delete {key, deleteTranscript: true}`.
- a run's turn: the `agent` method (runs/gateway_run.py); a spawn's child is created first with
  `sessions.create {key, parentSessionKey, spawnDepth: 1, label}`, so OpenClaw links it to its
  requester (`parentSessionKey`, the requester's `childSessions`) as its own sessions_spawn does.
- a spawn's announce: an `agent` turn of the requester carrying the announce message.
- abort: `chat.abort {sessionKey, runId}` (the run id is the turn's idempotency key), by the
  run's worker on its own connection, else from here (`abort_in_gateway`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sessiontool.errors import ForbiddenError, SessiontoolError, UsageError
from sessiontool.openclaw import gateway
from sessiontool.runs import records
from sessiontool.runs.session_patch import fork_source_of
from sessiontool.state.locks import pid_alive

if TYPE_CHECKING:
    from sessiontool.context import Context
    from sessiontool.runs.record_types import ChildSpec, FollowUp, RunRecord, Spawn
    from sessiontool.runs.result_types import DeleteResult, LabelResult, ResetResult
    from sessiontool.sessions.resolve import Resolved
    from sessiontool.state.config import Config
    from sessiontool.state.paths import StatePaths

Entry = dict[str, Any]
ABORT_CALL_TIMEOUT_S = 30.0


def _entry(data: dict[str, Any]) -> Entry | None:
    e = data.get("entry")
    return e if isinstance(e, dict) else None


def refuse_label_in_use(ctx: Context, agent_id: str, label: str, *, but: str | None = None) -> None:
    """Exit 2 when a session of this agent already has `label`, read from the store the gateway
    writes, before anything is asked of it (the file writer checks inside its lock)."""
    from sessiontool.runs.files_writer import label_in_use
    from sessiontool.sessions.reading import iter_sessions, read_scope

    with read_scope():
        for row in iter_sessions(ctx.paths, [agent_id], fields=("label",)):
            if row.key != but and row.entry.get("label") == label:
                raise label_in_use(ctx, label, row.key)


def _call(ctx: Context, method: str, params: dict[str, Any], label: str | None = None) -> Any:
    """A session-management call; a label the gateway finds in use (a race with the check
    above) is exit 2 here too, not a generic failure."""
    try:
        return gateway.call(ctx.paths, method, params)
    except SessiontoolError as exc:  # the gateway refused (GatewayError) or was not reached
        if label is not None and "label" in exc.message.lower() and "in use" in exc.message:
            raise UsageError(
                f"label already in use: {label}",
                hint="labels name one session; pick another or relabel that one first",
            ) from exc
        raise


MAX_KEY_CHARS = 512  # OpenClaw's own keys are short; a key past this is junk, not a session


def checked_key(value: Any, agent_id: str, what: str) -> str:
    """A session key the gateway answered, held to the rule a user's key is held to
    (sessions/resolve.py `validate_key_input`: no path, no control character), and to be a
    whole key (`agent:<id>:<rest>`, at most MAX_KEY_CHARS) of the agent asked for, before
    any record names it. Raises GatewayError (exit 1) saying what came back, escaped."""
    import unicodedata

    from sessiontool.openclaw.wsconnection import GatewayError
    from sessiontool.sessions.resolve import validate_key_input
    from sessiontool.state import keys

    def refuse(why: str) -> GatewayError:
        shown = (
            ascii(value[:60]) + ("…" if len(value) > 60 else "")
            if isinstance(value, str)
            else type(value).__name__
        )
        return GatewayError(
            f"the gateway answered an invalid {what}: {shown} ({why}); nothing was recorded",
            hint="check what runs the gateway (sessiontool doctor)",
        )

    if not isinstance(value, str) or not value:
        raise refuse("not a session key")
    if len(value) > MAX_KEY_CHARS:
        raise refuse(f"{len(value)} characters, at most {MAX_KEY_CHARS}")
    try:
        text = validate_key_input(value)
    except SessiontoolError:
        raise refuse("keys never name paths or hold control characters") from None
    if text != value or any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in value):
        raise refuse("keys hold no spaces around them, control or format characters")
    parsed = keys.split_agent_key(value)
    if parsed is None:
        raise refuse("not a whole agent:<id>:<rest> key")
    if keys.normalize_agent_id(parsed[0]) != agent_id or parsed[0] != agent_id:
        raise refuse(f"a session of agent {ascii(parsed[0])}, not of {agent_id}, the one asked")
    return value


class GatewayWriter:
    kind = "gateway"
    owns_delivery = True

    # -- session management -----------------------------------------------------------------
    def set_label(self, ctx: Context, r: Resolved, label: str) -> LabelResult:
        refuse_label_in_use(ctx, r.agent_id, label, but=r.key)
        data = _call(ctx, "sessions.patch", {"key": r.key, "label": label}, label)
        return {"sessionKey": ctx.display(r.key), "entry": _entry(data), "via": "gateway"}

    def reset(self, ctx: Context, r: Resolved) -> ResetResult:
        data = _call(ctx, "sessions.reset", {"key": r.key})
        entry = _entry(data)
        sid = entry.get("sessionId") if entry else None
        return {
            "sessionKey": ctx.display(r.key),
            "entry": entry,
            "previousSessionId": r.session_id,
            "inPlace": sid is not None and sid == r.session_id,
            "via": "gateway",
        }

    def delete(self, ctx: Context, r: Resolved) -> DeleteResult:
        data = _call(ctx, "sessions.delete", {"key": r.key, "deleteTranscript": True})
        archived = data.get("archived")
        first = archived[0] if isinstance(archived, list) and archived else None
        return {
            "sessionKey": ctx.display(r.key),
            "entry": None,
            "archived": first if isinstance(first, str) else None,
            "via": "gateway",
        }

    def set_send_policy(self, ctx: Context, r: Resolved, wanted: str | None) -> Entry | None:
        return _entry(_call(ctx, "sessions.patch", {"key": r.key, "sendPolicy": wanted}))

    def patch_session(
        self, ctx: Context, r: Resolved, patch: dict[str, Any], expected: str | None
    ) -> Entry | None:
        """`sessions.patch`; an archive or restore always carries `expectedSessionId` (OpenClaw
        requires it): the caller's, else the sessionId just read."""
        from sessiontool.runs.session_patch import check_expected

        check_expected(ctx.display(r.key), r.entry, expected)
        params: dict[str, Any] = {"key": r.key, **patch}
        want = expected or r.session_id
        if want is not None:
            params["expectedSessionId"] = want
        try:
            data = _call(ctx, "sessions.patch", params)
        except SessiontoolError as exc:
            if "session-changed" in exc.message or "expectedSessionId" in exc.message:
                raise ForbiddenError(
                    f"session changed: {ctx.display(r.key)} ({exc.message})",
                    hint="re-read it with `sessiontool list` before deciding again",
                ) from exc
            raise
        return _entry(data)

    def fork(self, ctx: Context, r: Resolved, at: str | None, label: str | None) -> dict[str, Any]:
        """`sessions.fork {sessionKey, entryId}` (then the label by `sessions.patch`), or, for
        the whole transcript, `sessions.create {parentSessionKey, fork: true}`."""
        if label:
            refuse_label_in_use(ctx, r.agent_id, label)
        if at is None:
            params: dict[str, Any] = {"parentSessionKey": r.key, "fork": True}
            if label:
                params["label"] = label
            data = _call(ctx, "sessions.create", params, label)
        else:
            data = _call(ctx, "sessions.fork", {"sessionKey": r.key, "entryId": at})
        key = data.get("sessionKey") or data.get("key")
        if not isinstance(key, str):
            raise SessiontoolError(f"the gateway's fork of {r.key} named no new session")
        if label and at is not None:
            _call(ctx, "sessions.patch", {"key": key, "label": label}, label)
        out: dict[str, Any] = {
            "sessionKey": ctx.display(key),
            "sessionId": data.get("sessionId"),
            "forkedFrom": ctx.display(r.key),
            "forkSource": fork_source_of(r.key, r.session_id, at),
            "at": at,
            "entry": _entry(data),
            "via": "gateway",
        }
        if isinstance(data.get("editorText"), str):
            out["editorText"] = data["editorText"]
        return out

    def rewind(self, ctx: Context, r: Resolved, at: str) -> dict[str, Any]:
        """`sessions.rewind {sessionKey, entryId}`: OpenClaw keeps the later part as a branch
        of its transcript (`sessions.branches.list`)."""
        data = _call(ctx, "sessions.rewind", {"sessionKey": r.key, "entryId": at})
        return {
            "sessionKey": ctx.display(r.key),
            "sessionId": r.session_id,
            "at": at,
            "archived": None,
            "editorText": data.get("editorText") if isinstance(data, dict) else None,
            "entry": None,
            "via": "gateway",
        }

    # -- runs -------------------------------------------------------------------------------
    def before_run(self, ctx: Context) -> None:
        return None  # sweeping is a file operation; OpenClaw maintains its own store

    def requester_entry(self, ctx: Context, key: str) -> Entry | None:
        from sessiontool.sessions.reading import read_scope, reader_for
        from sessiontool.state import keys

        try:
            with read_scope():
                found = reader_for(ctx.paths, keys.agent_of(key, ctx.agent_id)).session(key)
        except SessiontoolError:
            return None
        return dict(found.entry) if found is not None else None

    def add_child(self, ctx: Context, spec: ChildSpec) -> None:
        if spec["label"]:
            refuse_label_in_use(ctx, spec["agentId"], spec["label"])

    def openclaw_spawn(self, ctx: Context, run_id: str, spawn: Spawn) -> dict[str, Any] | None:
        """`tools.invoke sessions_spawn` for the requester session (openclaw/own_tools.py):
        sessiontool's options as the tool's arguments (`--label` label, `--agent` agentId,
        `--model` model, `--run-timeout` runTimeoutSeconds in whole seconds, `--cleanup`
        cleanup), the run id as the call's idempotency key. None: the gateway does not offer
        the tool (its answer is remembered for this process)."""
        import math

        from sessiontool.openclaw import own_tools
        from sessiontool.state import keys

        requester, timeout = spawn["requester"], spawn["runTimeout"]
        args: dict[str, Any] = {"task": spawn["task"]}
        if spawn["label"]:
            args["label"] = spawn["label"]
        if spawn["agentId"] != keys.agent_of(requester, ctx.agent_id):
            args["agentId"] = spawn["agentId"]
        if spawn["model"]:
            args["model"] = spawn["model"]
        if timeout is not None and timeout > 0:
            args["runTimeoutSeconds"] = max(1, math.ceil(timeout))
        args["cleanup"] = spawn["cleanup"]
        args.update(spawn.get("more") or {})  # OpenClaw's other parameters, as asked for
        details = own_tools.invoke(
            ctx.paths, own_tools.SPAWN, requester, args, idempotency_key=run_id
        )
        if details is None:
            return None
        child, gw_run = details.get("childSessionKey"), details.get("runId")
        if details.get("status") != "accepted" or child is None:
            raise own_tools.refusal(own_tools.SPAWN, details, "no child session")
        child = checked_key(child, spawn["agentId"], "sessions_spawn's childSessionKey")
        return {"childSessionKey": child, "runId": gw_run if isinstance(gw_run, str) else None}

    def openclaw_sends(self, ctx: Context, requester: str) -> bool:
        from sessiontool.openclaw import own_tools

        return own_tools.allowed(ctx.paths, own_tools.SEND, requester)

    def first_follow_up(self, rec: RunRecord) -> FollowUp | None:
        """A spawn announces back through the gateway; a send between two sessions gets the
        same reply-back turns and announce step as on files (their turns are gateway runs
        too); a `--deliver` send was delivered by OpenClaw itself."""
        if rec.get("tool") == "sessions_spawn":  # OpenClaw announces; its run is recorded
            # A quiet or parent-only completion is OpenClaw's own to make (or not): no fallback.
            return None if rec.get("completion") else {"next": "openclaw-announce"}
        if rec.get("tool") == "sessions_send":  # OpenClaw's own reply-back and announce step
            return None
        if rec.get("kind") == "spawn":  # a quiet spawn announces nothing
            return {"next": "cleanup" if rec.get("completion") == "quiet" else "gateway-announce"}
        reply = rec.get("reply")
        if (
            rec.get("kind") == "send"
            and rec.get("a2a")
            and rec.get("status") == "ok"
            and isinstance(reply, str)
            and reply.strip()
        ):
            return {"next": "reply:1", "latest": reply, "incoming": reply}
        return None

    def announce_to_requester(
        self, paths: StatePaths, cfg: Config, rec: RunRecord, text: str
    ) -> str | None:
        """The announce turn, followed until it landed (runs/gateway_announce.py); the
        gateway's run id of it. Raises when it did not land."""
        from sessiontool.runs import gateway_announce

        run_id = gateway_announce.land(paths, rec, text).get("announceRunId")
        return run_id if isinstance(run_id, str) else None

    def cleanup(self, paths: StatePaths, rec: RunRecord) -> None:
        if rec.get("cleanup") == "delete":
            gateway.call(
                paths, "sessions.delete", {"key": rec["sessionKey"], "deleteTranscript": True}
            )

    def abort_turn(self, paths: StatePaths, rec: RunRecord) -> bool | None:
        """Best effort: the record says `aborted` whatever the gateway answers."""
        return abort_in_gateway(paths, rec)

    def mark_aborted(self, paths: StatePaths, rec: RunRecord) -> None:
        return None  # OpenClaw's gateway owns that session's entry

    def clear_stale_locks(self, paths: StatePaths, rec: RunRecord) -> None:
        return None  # no lock of sessiontool's lives in OpenClaw's store


def abort_in_gateway(paths: StatePaths, rec: RunRecord) -> bool:
    """After `abort` ended a started gateway run (the record `aborted`, its worker signalled),
    the gateway is asked to stop the turn. OpenClaw lets only the run's owner connection (or an
    operator.admin one) stop it, so the worker does it on its own connection when the signal
    interrupts its wait, and records the answer (`gatewayAborted`); this waits for that. A
    worker that is gone (or a turn through the CLI): `chat.abort` from here, best effort.
    True when the gateway says it stopped something."""
    import time

    cur = rec
    deadline = time.monotonic() + ABORT_CALL_TIMEOUT_S
    while time.monotonic() < deadline:
        cur = records.read_record(paths, rec["runId"])
        if isinstance(cur.get("gatewayAborted"), bool):
            return bool(cur["gatewayAborted"])
        pid = cur.get("pid")
        if not cur.get("gatewayRunId") or not (isinstance(pid, int) and pid_alive(pid)):
            break
        time.sleep(0.05)
    return chat_abort(paths, rec["sessionKey"], cur.get("gatewayRunId") or rec["runId"])


def chat_abort(paths: StatePaths, session_key: str, run_id: str) -> bool:
    """`chat.abort` of one gateway run, best effort: True when the gateway says it stopped
    something (a refusal or a gateway that is gone is False; the record says aborted anyway)."""
    try:
        data = gateway.call(
            paths,
            "chat.abort",
            {"sessionKey": session_key, "runId": run_id},
            timeout_s=ABORT_CALL_TIMEOUT_S,
        )
    except SessiontoolError:
        return False
    return data.get("aborted") is True
