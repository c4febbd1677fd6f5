"""The `files` writer (runs/writer.py): sessions.json and JSONL transcripts written the way
OpenClaw writes them, so a state dir shared with a running gateway that honours the store lock
stays consistent.

Store changes happen under `sessions.json.lock` with a re-read and an atomic replace
(sessions_json.update_store); a deleted session's transcript is archived (renamed), never
unlinked; a run's turn is carried out by sessiontool's runner in the run engine
(runs/execute.py), and its follow-up writes the requester's transcript and the outbox.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from sessiontool.clock import now_ms
from sessiontool.errors import UsageError, session_not_found
from sessiontool.state import sessions_json as store
from sessiontool.state.sessions_json import Entry, Store, fold

if TYPE_CHECKING:
    from sessiontool.context import Context
    from sessiontool.runs.record_types import ChildSpec, FollowUp, RunRecord, Spawn
    from sessiontool.runs.result_types import DeleteResult, LabelResult, ResetResult
    from sessiontool.sessions.resolve import Resolved
    from sessiontool.state.config import Config
    from sessiontool.state.paths import StatePaths


# Per-conversation state that a reset clears. Everything else in the entry (label, levels,
# model and provider overrides, send policy, routing such as deliveryContext / lastChannel,
# spawnedBy, and fields we do not know) is kept: a reset starts a new conversation in the same
# session, it does not forget what the session is or where it delivers.
RESET_DROP = (
    "sessionFile",
    "totalTokensFresh",
    "cacheRead",
    "cacheWrite",
    "compactionCount",
    "memoryFlushAt",
    "memoryFlushCompactionCount",
    "systemPromptReport",
    "cliSessionIds",
    "claudeCliSessionId",
)
RESET_SET: dict[str, Any] = {
    "systemSent": False,
    "abortedLastRun": False,
    "inputTokens": 0,
    "outputTokens": 0,
    "totalTokens": 0,
}


def _updated_at(entry: Entry) -> int:
    v = entry.get("updatedAt")
    return int(v) if isinstance(v, int | float) and not isinstance(v, bool) else 0


def label_in_use(ctx: Context, label: str, by: str) -> UsageError:
    """Exit 2: a label names one session of an agent (both writers word it alike)."""
    return UsageError(
        f"label already in use: {label} (by {ctx.display(by)})",
        hint="labels name one session; pick another or relabel that one first",
    )


def refuse_label_in_use(
    ctx: Context, s: Store, agent_id: str, label: str, *, but: str | None = None
) -> None:
    """Inside the store lock: exit 2 naming the session of this store that has `label`."""
    for full, f in fold(s, agent_id).items():
        if full != but and f.entry.get("label") == label:
            raise label_in_use(ctx, label, full)


class FilesWriter:
    kind = "files"
    owns_delivery = False

    # -- session management -----------------------------------------------------------------
    def set_label(self, ctx: Context, r: Resolved, label: str) -> LabelResult:
        def mutate(s: Store) -> Entry:
            entry = store.get_entry(s, r.agent_id, r.key)
            if entry is None:
                raise session_not_found(r.key)
            refuse_label_in_use(ctx, s, r.agent_id, label, but=r.key)
            entry = dict(entry)
            entry["label"] = label
            entry["updatedAt"] = max(_updated_at(entry), now_ms())
            store.set_entry(s, r.agent_id, r.key, entry)
            return entry

        entry = store.update_store(r.store_path, mutate)
        return {"sessionKey": ctx.display(r.key), "entry": entry}

    def reset(self, ctx: Context, r: Resolved) -> ResetResult:
        """A new UUID v4 sessionId, zero tokens, `systemSent: false`; the old transcript stays
        on disk (as OpenClaw does), unreferenced."""

        def mutate(s: Store) -> Entry:
            entry = store.get_entry(s, r.agent_id, r.key)
            if entry is None:
                raise session_not_found(r.key)
            fresh = {k: v for k, v in entry.items() if k not in RESET_DROP}
            fresh["sessionId"] = str(uuid.uuid4())
            fresh["updatedAt"] = now_ms()
            fresh.update(RESET_SET)
            store.set_entry(s, r.agent_id, r.key, fresh)
            return fresh

        entry = store.update_store(r.store_path, mutate)
        return {
            "sessionKey": ctx.display(r.key),
            "entry": entry,
            "previousSessionId": r.session_id,
            "inPlace": False,
        }

    def delete(self, ctx: Context, r: Resolved) -> DeleteResult:
        from sessiontool.runs.archive import archive_session

        # The transcript lock, then the store entry, then the rename (archive.py's order,
        # shared with sweep): no append can start a fresh transcript between the two.
        archived = archive_session(ctx.paths, r.agent_id, r.key)
        return {
            "sessionKey": ctx.display(r.key),
            "entry": None,
            "archived": str(archived) if archived else None,
        }

    def set_send_policy(self, ctx: Context, r: Resolved, wanted: str | None) -> Entry | None:
        """A key without an entry gets one (a new sessionId, no transcript yet), as OpenClaw's
        sessions.patch does; `updatedAt` moves forward, never back; clearing what is not set
        rewrites (or creates) nothing."""
        if wanted is None and (r.entry is None or "sendPolicy" not in r.entry):
            return r.entry

        def mutate(s: Store) -> Entry | None:
            current = store.get_entry(s, r.agent_id, r.key)
            entry: Entry
            if current is None:
                if wanted is None:
                    return None
                entry = {"sessionId": str(uuid.uuid4()), "updatedAt": now_ms()}
            else:
                entry = dict(current)
                if wanted is None and "sendPolicy" not in entry:
                    return entry
                entry["updatedAt"] = max(_updated_at(entry), now_ms())
            if wanted is None:
                entry.pop("sendPolicy", None)
            else:
                entry["sendPolicy"] = wanted
            store.set_entry(s, r.agent_id, r.key, entry)
            return entry

        return store.update_store(r.store_path, mutate)

    def patch_session(
        self, ctx: Context, r: Resolved, patch: dict[str, Any], expected: str | None
    ) -> Entry | None:
        from sessiontool.runs.session_patch import apply_patch, check_expected

        def mutate(s: Store) -> Entry:
            entry = store.get_entry(s, r.agent_id, r.key)
            if entry is None:
                raise session_not_found(r.key)
            check_expected(ctx.display(r.key), entry, expected)
            entry = apply_patch(r.key, entry, patch, now_ms())
            store.set_entry(s, r.agent_id, r.key, entry)
            return entry

        return store.update_store(r.store_path, mutate)

    def fork(self, ctx: Context, r: Resolved, at: str | None, label: str | None) -> dict[str, Any]:
        from sessiontool.runs import files_branch

        return files_branch.fork(ctx, r, at, label=label, refuse_label_in_use=refuse_label_in_use)

    def rewind(self, ctx: Context, r: Resolved, at: str) -> dict[str, Any]:
        from sessiontool.runs import files_branch

        return files_branch.rewind(ctx, r, at)

    # -- runs -------------------------------------------------------------------------------
    def before_run(self, ctx: Context) -> None:
        from sessiontool.runs.archive import maybe_sweep

        maybe_sweep(ctx)

    def requester_entry(self, ctx: Context, key: str) -> Entry | None:
        return store.peek_entry(ctx.paths, key)

    def openclaw_spawn(self, ctx: Context, run_id: str, spawn: Spawn) -> dict[str, Any] | None:
        return None  # no gateway: sessiontool's own runner carries the spawn out

    def openclaw_sends(self, ctx: Context, requester: str) -> bool:
        return False

    def add_child(self, ctx: Context, spec: ChildSpec) -> None:
        """The child's entry (`spawnedBy` = the requester, as OpenClaw's sessions_spawn links
        it), and the requester's when it is new. The store is written once for the child (and
        the requester, in the same write when they share a store): a spawn and its announce
        write sessions.json at most four times."""
        from sessiontool.state import keys

        child, agent_id, requester = spec["key"], spec["agentId"], spec["requester"]
        label, model = spec["label"], spec["model"]
        req_agent = keys.agent_of(requester, ctx.agent_id)

        def ensure_requester(s: Store) -> None:
            if store.get_entry(s, req_agent, requester) is None:
                store.set_entry(
                    s, req_agent, requester, {"sessionId": str(uuid.uuid4()), "updatedAt": now_ms()}
                )

        entry: Entry = {
            "sessionId": str(uuid.uuid4()),
            "updatedAt": now_ms(),
            "spawnedBy": requester,
            **spec["entry"],
        }
        if label:
            entry["label"] = label
        if model and model != "echo":
            if "/" in model:
                entry["providerOverride"], entry["modelOverride"] = model.split("/", 1)
            else:
                entry["modelOverride"] = model

        def write_child(s: Store) -> None:
            if label:
                refuse_label_in_use(ctx, s, agent_id, label)
            if req_agent == agent_id:
                ensure_requester(s)
            store.set_entry(s, agent_id, child, entry)

        if req_agent != agent_id and store.peek_entry(ctx.paths, requester) is None:
            store.update_store(ctx.paths.sessions_json(req_agent), ensure_requester)
        store.update_store(ctx.paths.sessions_json(agent_id), write_child)

    def first_follow_up(self, rec: RunRecord) -> FollowUp | None:
        kind = rec.get("kind")
        raw = rec.get("reply")
        reply: str = raw if isinstance(raw, str) else ""
        ok = rec.get("status") == "ok"
        if kind == "spawn":  # a quiet spawn announces nothing (expectsCompletionMessage: false)
            return {"next": "cleanup" if rec.get("completion") == "quiet" else "announce"}
        if kind == "send" and rec.get("a2a") and ok and reply.strip():
            return {"next": "reply:1", "latest": reply, "incoming": reply}
        if kind == "send" and rec.get("deliver") and ok and reply.strip():
            return {
                "next": "deliver",
                "mode": "deliver",
                "to": rec["sessionKey"],
                "text": reply.strip(),
            }
        return None

    def announce_to_requester(
        self, paths: StatePaths, cfg: Config, rec: RunRecord, text: str
    ) -> str | None:
        """The announce message in the requester's transcript, once (looked for by its
        timestamp before it is appended again); the requester's entry is created or touched in
        the same single store write. No turn runs for it: no run id."""
        from sessiontool.state import keys, transcript
        from sessiontool.state.paths import transcript_path_for

        fu = rec.get("followUp") or {}
        ts = fu.get("injectAt") if isinstance(fu.get("injectAt"), int) else now_ms()
        requester = rec["requesterSessionKey"]
        agent_id = keys.agent_of(requester)

        def mutate(s: Store) -> Entry:
            e = dict(store.get_entry(s, agent_id, requester) or {})
            if not isinstance(e.get("sessionId"), str):
                e["sessionId"] = str(uuid.uuid4())
            e["updatedAt"] = now_ms()
            store.set_entry(s, agent_id, requester, e)
            return e

        entry = store.update_store(paths.sessions_json(agent_id), mutate)
        sid = entry["sessionId"]
        path = transcript_path_for(paths.sessions_dir(agent_id), sid, entry.get("sessionFile"))

        def same(m: dict[str, Any]) -> bool:
            return m.get("timestamp") == ts and m.get("stopReason") == "injected"

        if not transcript.read_tail(path, 1, same).messages:
            transcript.append_message(
                path,
                sid,
                {
                    "role": "assistant",
                    "content": [{"type": "text", "text": text}],
                    "timestamp": ts,
                    "stopReason": "injected",
                    "usage": {"input": 0, "output": 0, "totalTokens": 0},
                },
            )
        return None

    def cleanup(self, paths: StatePaths, rec: RunRecord) -> None:
        from sessiontool.runs.archive import archive_session
        from sessiontool.state import keys

        if rec.get("cleanup") == "delete":
            archive_session(paths, keys.agent_of(rec["sessionKey"]), rec["sessionKey"])

    def abort_turn(self, paths: StatePaths, rec: RunRecord) -> bool | None:
        return None  # the runner's process group is killed by `abort` itself

    def mark_aborted(self, paths: StatePaths, rec: RunRecord) -> None:
        """`abortedLastRun`, only while the entry is still the session the run started in (a
        deleted or reset session is left alone)."""
        from sessiontool.state import keys

        key = rec["sessionKey"]
        agent_id = rec.get("agentId") or keys.agent_of(key)
        sid = rec.get("sessionId")
        if sid is None:
            return

        def mutate(s: Store) -> None:
            entry = store.get_entry(s, agent_id, key)
            if entry is not None and entry.get("sessionId") == sid:
                entry = dict(entry)
                entry["abortedLastRun"] = True
                store.set_entry(s, agent_id, key, entry)

        current = store.peek_entry(paths, key)
        if current is None or current.get("sessionId") != sid:
            return
        store.update_store(paths.sessions_json(agent_id), mutate)

    def clear_stale_locks(self, paths: StatePaths, rec: RunRecord) -> None:
        """The transcript locks a lost worker may have held in its agent's sessions dir (only
        those whose holder is dead: a live OpenClaw run's lock is never touched)."""
        import os

        from sessiontool.errors import SessiontoolError
        from sessiontool.state import keys
        from sessiontool.state.locks import transcript_lock

        try:
            sdir = paths.sessions_dir(rec.get("agentId") or keys.agent_of(rec["sessionKey"]))
            names = os.listdir(sdir)
        except (OSError, SessiontoolError):
            return
        for name in names:
            if name.endswith(".jsonl.lock") and not name.startswith("."):
                try:
                    transcript_lock(sdir / name[: -len(".lock")], 0).clear_if_stale()
                except OSError:
                    pass
