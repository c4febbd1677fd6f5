"""The background worker: one detached process per send or spawn. It waits for its session's
lane, runs the agent, writes the transcript and the index, records the outcome, and then does
whatever follows (the agent-to-agent flow, a `--deliver` delivery, a spawn's announce) whether or
not anyone is still waiting.

Started as `python -m sessiontool.runs.worker <state dir> <runId> [run|announce]`. While it waits in
its lane it has imported only the standard library and `runs`; the rest loads when its turn
comes (a hundred of them may wait at once)."""

from __future__ import annotations

import fcntl
import os
import signal
import sys
import time
import uuid
from pathlib import Path
from types import FrameType
from typing import Any

from sessiontool.clock import now_ms
from sessiontool.runs import records as runs
from sessiontool.stores.paths import StatePaths

Record = dict[str, Any]
ANNOUNCE_SKIP = "ANNOUNCE_SKIP"


def _inter_session(source_key: str, source_channel: str | None) -> dict[str, Any]:
    """The provenance of a message one session sends another (spec §5.3). A channel nobody
    knows is left out, as send does for the primary run, never written as null."""
    prov: dict[str, Any] = {"kind": "inter_session", "sourceSessionKey": source_key}
    if source_channel:
        prov["sourceChannel"] = source_channel
    prov["sourceTool"] = "sessions_send"
    return prov


class RunAborted(Exception):
    """Raised inside the runner call when `abort` signals this worker."""


class Worker:
    def __init__(self, paths: StatePaths) -> None:
        self.paths = paths
        self.current: str | None = None
        self._cfg: Any = None

    # -- plumbing ------------------------------------------------------------------------------
    @property
    def cfg(self) -> Any:
        if self._cfg is None:
            from sessiontool.stores.config import load_config

            self._cfg = load_config(self.paths)
        return self._cfg

    def on_abort_signal(self, signum: int, frame: FrameType | None) -> None:
        run_id = self.current
        if run_id is None:
            return
        try:
            rec = runs.read_record(self.paths, run_id)
        except Exception:  # noqa: BLE001
            return
        if rec.get("status") == "aborted":
            raise RunAborted()

    def update(self, run_id: str, **fields: Any) -> Record:
        def mutate(r: Record) -> None:
            for k, v in fields.items():
                if v is None:
                    r.pop(k, None)
                else:
                    r[k] = v

        return runs.update_record(self.paths, run_id, mutate)

    def wait_lane(self, rec: Record) -> int | None:
        """Block until this run heads its session's lane, then hold the lane's flock while it
        runs. Waiters sleep in flock() on the lane lock, so the running worker's exit (or death:
        the kernel drops its flock) wakes them at once, and nobody spins. Returns the held lock
        descriptor, or None when the run was aborted or finished while it waited."""
        lock_path = runs.lane_dir(self.paths, rec["sessionKey"]).with_suffix(".lock")
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        self.current = rec["runId"]
        try:
            while True:
                head = runs.lane_head(self.paths, rec)
                if head == rec["runId"] or head is None:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                    # Re-check under the lock: an older run may have queued behind a stale view.
                    if runs.lane_head(self.paths, rec) in (rec["runId"], None):
                        cur = runs.read_record(self.paths, rec["runId"])
                        if runs.is_finished(cur):
                            os.close(fd)
                            return None
                        return fd
                    fcntl.flock(fd, fcntl.LOCK_UN)
                    continue
                cur = runs.read_record(self.paths, rec["runId"])
                if runs.is_finished(cur):
                    os.close(fd)
                    return None
                # Sleep until the lane's holder lets go, then look again.
                fcntl.flock(fd, fcntl.LOCK_EX)
                fcntl.flock(fd, fcntl.LOCK_UN)
                time.sleep(0.01)
        except RunAborted:
            os.close(fd)
            return None
        finally:
            self.current = None

    # -- one run -------------------------------------------------------------------------------
    def execute(self, rec: Record) -> Record:
        """Run one record (send, spawn or step) in its lane and return the finished record."""
        run_id = rec["runId"]
        lane_fd: int | None = None
        try:
            lane_fd = self.wait_lane(rec)
            if lane_fd is None:
                return runs.read_record(self.paths, run_id)
            cur = runs.read_record(self.paths, run_id)
            if runs.is_finished(cur):
                return cur
            return self._execute(cur)
        finally:
            runs.remove_lane_marker(self.paths, rec)
            if lane_fd is not None:
                os.close(lane_fd)

    def _execute(self, rec: Record) -> Record:
        from sessiontool import testhooks
        from sessiontool.runs.runners import RunnerError, RunnerTimeout, get_runner, make_usage
        from sessiontool.stores import keys, transcript
        from sessiontool.stores import sessions_json as store

        run_id = rec["runId"]
        key = rec["sessionKey"]
        agent_id = rec.get("agentId") or keys.agent_of(key)
        rec = self.update(run_id, status="running", startedAt=now_ms())
        entry, session_id, path = self.ensure_session(agent_id, key)
        provider, model = self.resolve_model(agent_id, key, entry)
        history = self.history_for(path)
        user_msg: dict[str, Any] = {
            "role": "user",
            "content": [{"type": "text", "text": rec.get("message", "")}],
            "timestamp": now_ms(),
        }
        if rec.get("provenance"):
            user_msg["provenance"] = rec["provenance"]
        testhooks.pause("before-user")
        transcript.append_message(path, session_id, user_msg)
        runner_cfg = self.cfg.runner_for(agent_id)
        request = {
            "runId": run_id,
            "kind": rec["kind"],
            "sessionKey": key,
            "sessionId": session_id,
            "agentId": agent_id,
            "model": model if provider is None else f"{provider}/{model}",
            "system": rec.get("system") or "",
            "message": rec.get("message", ""),
            "messages": history,
        }
        for k in ("step", "turn", "maxTurns", "announce"):
            if rec.get(k) is not None:
                request[k] = rec[k]
        env = self.agent_env(run_id, key, agent_id, rec)
        timeout_s = rec.get("runTimeoutSeconds")
        deadline = time.monotonic() + float(timeout_s) if timeout_s else None
        status, reply, error = "ok", "", None
        result = None
        self.current = run_id
        try:
            runner = get_runner(runner_cfg)
            result = runner.run(
                request,
                env=env,
                on_agent_pid=lambda pid: self.update(run_id, agentPid=pid),
                deadline=deadline,
            )
            reply = result.reply
        except RunAborted:
            status, error = "aborted", "aborted by user"
        except RunnerTimeout as exc:
            status, error = "timeout", exc.message
            result = exc.partial
        except RunnerError as exc:
            status, error = "error", exc.message
            result = exc.partial
        except Exception as exc:  # noqa: BLE001 - a runner bug must still end the run
            status, error = "error", f"{type(exc).__name__}: {exc}"
        finally:
            self.current = None
        latest = runs.read_record(self.paths, run_id)
        if latest.get("status") == "aborted":
            status, error = "aborted", latest.get("error") or "aborted by user"
        ended = now_ms()
        usage = result.usage if result is not None else make_usage(0, 0)
        used_model = (result.model if result is not None and result.model else None) or model
        used_provider = (
            result.provider if result is not None and result.provider else None
        ) or provider
        extra = list(result.extra_messages) if result is not None else []
        assistant: dict[str, Any] = {
            "role": "assistant",
            "content": [{"type": "text", "text": reply}] if reply else [],
            "api": result.api if result is not None else "sessiontool",
            "provider": used_provider or "sessiontool",
            "model": used_model,
            # Each assistant message carries its own model call's usage; the record sums them.
            "usage": (result.last_call_usage if result is not None else None) or usage,
            "stopReason": (result.stop_reason if result is not None else "stop")
            if status == "ok"
            else ("aborted" if status in ("aborted", "timeout") else "error"),
            "timestamp": ended,
        }
        if error:
            assistant["errorMessage"] = error
        transcript.append_entries(
            path, session_id, [{"type": "message", "message": m} for m in [*extra, assistant]]
        )
        last = (result.last_call_usage if result is not None else None) or usage

        def mutate(s: store.Store) -> None:
            e = dict(store.get_entry(s, agent_id, key) or entry)
            e["updatedAt"] = now_ms()
            e["model"] = used_model
            if used_provider:
                e["modelProvider"] = used_provider
            if result is not None:
                inp = int(last.get("input") or 0)
                ctx_tokens = (
                    inp + int(last.get("cacheRead") or 0) + int(last.get("cacheWrite") or 0)
                )
                e["inputTokens"] = inp
                e["outputTokens"] = int(last.get("output") or 0)
                e["totalTokens"] = ctx_tokens or int(last.get("totalTokens") or 0)
            e["abortedLastRun"] = status in ("aborted", "timeout")
            e["systemSent"] = True
            store.set_entry(s, agent_id, key, e)
            testhooks.pause("index-write")

        store.update_store(self.paths.store(agent_id), mutate)
        return self.update(
            run_id,
            status=status,
            reply=reply if status == "ok" else (reply or None),
            error=error,
            usage=usage,
            model=used_model,
            modelProvider=used_provider,
            endedAt=ended,
            sessionId=session_id,
        )

    def ensure_session(self, agent_id: str, key: str) -> tuple[dict[str, Any], str, Path]:
        """The session's entry, created (index entry; the header comes with the first line)
        when the key is new, as OpenClaw's sessions_send does."""
        from sessiontool.stores import sessions_json as store
        from sessiontool.stores.paths import is_plain_name, transcript_path_for

        def mutate(s: store.Store) -> dict[str, Any]:
            e = store.get_entry(s, agent_id, key)
            if (
                e is None
                or not isinstance(e.get("sessionId"), str)
                or not is_plain_name(e["sessionId"])
            ):
                e = dict(e or {})
                e["sessionId"] = str(uuid.uuid4())
                e["updatedAt"] = now_ms()
                store.set_entry(s, agent_id, key, e)
            return dict(e)

        entry = store.update_store(self.paths.store(agent_id), mutate)
        sid = entry["sessionId"]
        path = transcript_path_for(self.paths.sessions_dir(agent_id), sid, entry.get("sessionFile"))
        return entry, sid, path

    def history_for(self, path: Path) -> list[dict[str, Any]]:
        from sessiontool.sessions import strip_envelopes
        from sessiontool.stores.transcript import read_tail

        return strip_envelopes(read_tail(path, 200).messages)

    def resolve_model(
        self, agent_id: str, key: str, entry: dict[str, Any]
    ) -> tuple[str | None, str]:
        """Session override, then the sub-agent model, then the agent's and the defaults', then
        the runner's, then the runner type's name (spec §6). `provider/model` splits at '/'."""
        from sessiontool.stores import keys

        cfg = self.cfg
        override = entry.get("modelOverride")
        if isinstance(override, str) and override:
            prov = entry.get("providerOverride")
            return (prov if isinstance(prov, str) and prov else None), override
        agent = cfg.agent(agent_id)
        candidates: list[str | None] = []
        if keys.is_subagent(key):
            candidates += [agent.subagent_model, cfg.defaults_subagent_model]
        candidates += [agent.model, cfg.defaults_model[0]]
        runner = cfg.runner_for(agent_id)
        candidates.append(runner.get("model") if isinstance(runner.get("model"), str) else None)
        for c in candidates:
            if c:
                if "/" in c:
                    p, m = c.split("/", 1)
                    return p, m
                return None, c
        return None, str(runner.get("type", "echo"))

    def agent_env(self, run_id: str, key: str, agent_id: str, rec: Record) -> dict[str, str]:
        from sessiontool.context import _sandboxed

        env = dict(os.environ)
        env.pop("SESSIONTOOL_WORKER", None)
        env["SESSIONTOOL_STATE_DIR"] = str(self.paths.root)
        env["SESSIONTOOL_SESSION_KEY"] = key
        env["SESSIONTOOL_RUN_ID"] = run_id
        env["SESSIONTOOL_AGENT_ID"] = agent_id
        if _sandboxed(self.cfg, key, agent_id):
            env["SESSIONTOOL_SANDBOXED"] = "1"
        else:
            env.pop("SESSIONTOOL_SANDBOXED", None)
        return env

    def run_step(self, parent: Record, **fields: Any) -> Record:
        """Create a step record (a reply turn or an announce) and run it in this worker.

        The step holds its own run lock for as long as it waits in its lane and runs, and its
        record says so (`workerStartedAt`, `pid`) from the start: without them a reconciler
        would take any step older than the grace period (a slow model, or turn 1 queued behind
        the requester's own run) for a run whose worker never started, and mark it lost."""
        from sessiontool.stores import keys

        run_id = runs.new_run_id()
        lock_path = self.paths.run_lock(run_id)
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            step = runs.create_record(
                self.paths,
                runId=run_id,
                kind="step",
                parentRunId=parent["runId"],
                agentId=keys.agent_of(fields["sessionKey"]),
                workerStartedAt=now_ms(),
                pid=os.getpid(),
                **fields,
            )
            return self.execute(step)
        finally:
            try:
                os.unlink(lock_path)
            except OSError:
                pass
            os.close(fd)

    # -- what follows a run --------------------------------------------------------------------
    def entry_of(self, key: str) -> dict[str, Any] | None:
        from sessiontool.stores.sessions_json import peek_entry

        return peek_entry(self.paths, key)

    def send_allowed(self, key: str) -> bool:
        from sessiontool.flow.policy import send_decision

        return send_decision(self.cfg.send_policy, key, self.entry_of(key)).allowed

    def a2a_flow(self, rec: Record) -> None:
        from sessiontool.flow import a2a, delivery

        requester = rec["requesterSessionKey"]
        target = rec["sessionKey"]
        original = rec.get("message", "")
        round1 = rec.get("reply") if rec.get("status") == "ok" else None
        if not round1 or not round1.strip():
            return
        req_ch = a2a.session_channel(requester, self.entry_of(requester))
        tgt_ch = a2a.session_channel(target, self.entry_of(target))
        max_turns = self.cfg.max_ping_pong_turns
        latest = round1
        incoming = round1
        side = "requester"
        for turn in range(1, max_turns + 1):
            session = requester if side == "requester" else target
            other = target if side == "requester" else requester
            if not self.send_allowed(session):
                break
            done = self.run_step(
                rec,
                step="reply",
                turn=turn,
                maxTurns=max_turns,
                sessionKey=session,
                requesterSessionKey=other,
                message=incoming,
                system=a2a.reply_prompt(
                    current=side,  # type: ignore[arg-type]
                    turn=turn,
                    max_turns=max_turns,
                    requester_key=requester,
                    requester_channel=req_ch,
                    target_key=target,
                    target_channel=tgt_ch,
                ),
                provenance=_inter_session(other, tgt_ch if side == "requester" else req_ch),
            )
            reply = (done.get("reply") or "") if done.get("status") == "ok" else ""
            if not reply.strip() or a2a.is_reply_skip(reply):
                break
            latest = reply
            incoming = reply
            side = "target" if side == "requester" else "requester"
        if not self.send_allowed(target):
            return
        done = self.run_step(
            rec,
            step="announce",
            sessionKey=target,
            requesterSessionKey=requester,
            message=a2a.ANNOUNCE_STEP_MESSAGE,
            system=a2a.announce_prompt(
                requester_key=requester,
                requester_channel=req_ch,
                target_key=target,
                target_channel=tgt_ch,
                original=original,
                round1=round1,
                latest=latest,
            ),
            announce={"round1": round1, "latest": latest},
            provenance=_inter_session(requester, req_ch),
        )
        text = (done.get("reply") or "").strip() if done.get("status") == "ok" else ""
        if text and not a2a.is_announce_skip(text):
            delivery.deliver(
                self.paths,
                self.cfg,
                run_id=rec["runId"],
                session_key=target,
                mode="announce",
                text=text,
            )

    def deliver_reply(self, rec: Record) -> None:
        from sessiontool.flow import delivery

        text = (rec.get("reply") or "").strip()
        if rec.get("status") == "ok" and text:
            delivery.deliver(
                self.paths,
                self.cfg,
                run_id=rec["runId"],
                session_key=rec["sessionKey"],
                mode="deliver",
                text=text,
            )

    def spawn_announce(self, rec: Record) -> None:
        from sessiontool.flow import announce, delivery
        from sessiontool.flow.archive import archive_session
        from sessiontool.stores import keys, transcript

        child = rec["sessionKey"]
        requester = rec["requesterSessionKey"]
        outcome = str(rec.get("status"))
        child_reply = rec.get("reply") or self.last_assistant_reply(child)
        done = self.run_step(
            rec,
            step="announce",
            sessionKey=child,
            requesterSessionKey=requester,
            message=announce.ANNOUNCE_STEP_MESSAGE,
            system=announce.announce_step_prompt(
                task=rec.get("message", ""),
                label=rec.get("label"),
                outcome=outcome,
                latest_reply=child_reply,
            ),
            announce={"childReply": child_reply},
            provenance={
                "kind": "inter_session",
                "sourceSessionKey": requester,
                "sourceTool": "sessions_spawn",
            },
        )
        step_ok = done.get("status") == "ok"
        step_reply = (done.get("reply") or "").strip() if step_ok else None
        if step_ok and step_reply == ANNOUNCE_SKIP:
            self.cleanup(rec, archive_session)
            return
        child_entry = self.entry_of(child) or {}
        sid = child_entry.get("sessionId") or rec.get("sessionId")
        agent_id = keys.agent_of(child)
        tpath = None
        if isinstance(sid, str):
            from sessiontool.stores.paths import transcript_path_for

            tpath = str(
                transcript_path_for(
                    self.paths.sessions_dir(agent_id), sid, child_entry.get("sessionFile")
                )
            )
        cost = self.cfg.model_cost(rec.get("modelProvider"), rec.get("model"))
        stats = announce.stats_line(
            started_at=rec.get("startedAt"),
            ended_at=rec.get("endedAt"),
            usage=rec.get("usage"),
            cost=cost,
            child_key=child,
            session_id=sid if isinstance(sid, str) else None,
            # --cleanup delete archives the child right after this announce: name where to.
            transcript=f"{tpath}.deleted.<time> (archived: --cleanup delete)"
            if tpath and rec.get("cleanup") == "delete"
            else tpath,
        )
        message = announce.announce_message(
            status=outcome,
            result=announce.pick_result(step_reply or None, not step_ok, child_reply),
            notes=rec.get("error") or "none",
            stats=stats,
        )
        req_agent = keys.agent_of(requester)
        _entry, req_sid, req_path = self.ensure_session(req_agent, requester)
        transcript.append_message(
            req_path,
            req_sid,
            {
                "role": "assistant",
                "content": [{"type": "text", "text": message}],
                "timestamp": now_ms(),
                "stopReason": "injected",
                "usage": {"input": 0, "output": 0, "totalTokens": 0},
            },
        )
        self.touch(req_agent, requester)
        delivery.deliver(
            self.paths,
            self.cfg,
            run_id=rec["runId"],
            session_key=requester,
            mode="spawn-announce",
            text=message,
            mirror=False,
        )
        self.cleanup(rec, archive_session)

    def cleanup(self, rec: Record, archive_session: Any) -> None:
        from sessiontool.stores import keys

        if rec.get("cleanup") == "delete":
            archive_session(self.paths, keys.agent_of(rec["sessionKey"]), rec["sessionKey"])
        self.update(rec["runId"], announcedAt=now_ms())

    def touch(self, agent_id: str, key: str) -> None:
        from sessiontool.stores import sessions_json as store

        def mutate(s: store.Store) -> None:
            e = store.get_entry(s, agent_id, key)
            if e is not None:
                e = dict(e)
                e["updatedAt"] = now_ms()
                store.set_entry(s, agent_id, key, e)

        store.update_store(self.paths.store(agent_id), mutate)

    def last_assistant_reply(self, key: str) -> str | None:
        from sessiontool.stores import keys
        from sessiontool.stores.paths import transcript_path_for
        from sessiontool.stores.transcript import read_tail

        entry = self.entry_of(key)
        if not entry or not isinstance(entry.get("sessionId"), str):
            return None
        path = transcript_path_for(
            self.paths.sessions_dir(keys.agent_of(key)),
            entry["sessionId"],
            entry.get("sessionFile"),
        )
        res = read_tail(
            path,
            1,
            lambda m: (
                m.get("role") == "assistant" and m.get("stopReason") not in ("error", "aborted")
            ),
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

    # -- entry points --------------------------------------------------------------------------
    def run(self, run_id: str) -> None:
        rec = runs.read_record(self.paths, run_id)
        if runs.is_finished(rec):
            runs.remove_lane_marker(self.paths, rec)
            return
        rec = self.update(run_id, workerStartedAt=now_ms(), pid=os.getpid())
        done = self.execute(rec)
        self.follow_up(done)

    def follow_up(self, done: Record) -> None:
        kind = done.get("kind")
        if kind == "spawn":
            self.spawn_announce(done)
            return
        if kind == "send":
            if done.get("a2a"):
                self.a2a_flow(done)
            elif done.get("deliver"):
                self.deliver_reply(done)

    def announce_only(self, run_id: str) -> None:
        """A spawn whose worker died: its announce still has to reach the requester."""
        rec = runs.read_record(self.paths, run_id)
        if rec.get("kind") == "spawn" and runs.is_finished(rec) and not rec.get("announcedAt"):
            self.spawn_announce(rec)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2:
        sys.stderr.write(
            "usage: python -m sessiontool.runs.worker STATE_DIR RUN_ID [run|announce]\n"
        )
        return 2
    paths = StatePaths(Path(args[0]))
    run_id = args[1]
    mode = args[2] if len(args) > 2 else "run"
    lock_path = paths.run_lock(run_id)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    worker = Worker(paths)

    def on_term(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(143)

    signal.signal(signal.SIGUSR1, worker.on_abort_signal)
    signal.signal(signal.SIGTERM, on_term)
    code = 0
    try:
        if mode == "announce":
            worker.announce_only(run_id)
        else:
            worker.run(run_id)
    except Exception as exc:  # noqa: BLE001 - recorded, then logged to the run log
        code = 1
        problem = f"{type(exc).__name__}: {exc}"
        sys.stderr.write(f"sessiontool worker: {problem}\n")
        if os.environ.get("SESSIONTOOL_DEBUG") == "1":
            import traceback

            traceback.print_exc()
        try:

            def fail(r: Record) -> None:
                if not runs.is_finished(r):
                    r["status"] = "error"
                    r["error"] = problem
                    r["endedAt"] = now_ms()

            runs.update_record(paths, run_id, fail)
        except Exception:  # noqa: BLE001
            pass
    finally:
        try:
            os.unlink(lock_path)
        except OSError:
            pass
        os.close(fd)
    return code


if __name__ == "__main__":
    sys.exit(main())
