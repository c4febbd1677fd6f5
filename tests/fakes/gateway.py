"""A scripted OpenClaw gateway: a real WebSocket server (`websockets`, 127.0.0.1, its own process)
speaking the handshake and the methods sessiontool calls as the 2026.9.6 gateway does
(docs/gateway/protocol/*), and doing on request what the real one rarely does: a protocol it
does not share, pairing required, `UNAVAILABLE` while it starts, a connection dropped after it
accepted a turn, a wrong token, device-less scopes cleared. It checks what it is sent (the scopes
per method, a device's v3 signature) and logs every frame's method and params (never a secret)
to a JSON-lines file the tests read.

For `history --follow` it serves `chat.history` from `history` (messages with `__openclaw`
ids and seqs) and, on `sessions.messages.subscribe`, sends the next message of `events` as a
`session.message` event (appending it to the history); a connection that has sent one is
closed while `drop_after_event` lasts. `grant_scopes` caps the scopes hello-ok grants;
`config` is the OpenClaw config `config.get` answers (else the method is unknown).

A message `sleep:N ...` makes a turn take N seconds (or its `timeout`, then `timeout`, or
`timeout_as`'s status: 2026.9.6 under load ends a timed-out spawn `error`, its row `failed`,
and `agent.wait` then gives the run's `startedAt`/`endedAt`); `fail ...`
makes the gateway refuse it. `announce_fail: N` accepts the next N announce turns (a spawn's
result handed to its requester) and fails each after `announce_fail_s` ("worker task timed
out"), as 2026.9.6 did. A key the gateway has seen is replayed, as OpenClaw's dedupe does:
`in_flight` while its turn runs, then its end. With `store` set it plays a lockless JSON-era gateway: it applies
`sessions.patch` to that sessions.json itself and rewrites the file on its own meanwhile.

    python tests/fakes/gateway.py CONFIG.json   # prints "ready PORT"
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

READ, WRITE, ADMIN = "operator.read", "operator.write", "operator.admin"
SCOPE = {
    "status": READ,
    "sessions.list": READ,
    "chat.history": READ,
    "agent": WRITE,
    "agent.wait": WRITE,
    "chat.abort": WRITE,
    "tools.invoke": WRITE,
    "sessions.reset": ADMIN,
    "sessions.messages.subscribe": READ,
    "config.get": READ,
}


def required_scope(method: str, params: dict[str, Any]) -> str:
    if method == "sessions.patch":
        return WRITE if set(params) <= {"key", "label"} else ADMIN
    if method == "sessions.delete":
        return WRITE if params.get("archivedOnly") is True else ADMIN
    if method == "sessions.create":
        return ADMIN if params.get("incognito") or "execNode" in params else WRITE
    return SCOPE.get(method, ADMIN)


def allowed(scope: str, granted: list[str]) -> bool:
    return ADMIN in granted or scope in granted or (scope == READ and WRITE in granted)


def _b64(data: str) -> bytes:
    return base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))


FINAL = "agent:final"  # a log row of a turn's final answer, not a method called


class Server:
    def __init__(self, cfg: dict[str, Any]) -> None:
        self.cfg = cfg
        self.lock = threading.Lock()
        self.conns = 0
        self.unavailable_connects = int(cfg.get("unavailable_connects", 0))
        self.unavailable_calls = int(cfg.get("unavailable_calls", 0))
        self.drop_after_accept = int(cfg.get("drop_after_accept", 0))
        self.runs: dict[str, dict[str, Any]] = {}
        self.device_tokens: set[str] = set()
        self.paired: dict[str, dict[str, Any]] = {}  # pairing "remote": device id -> grant
        self.requests: dict[str, dict[str, Any]] = {}  # pending pairing requests by id
        self.store_stat: Any = None
        self.store_data: dict[str, Any] = {}
        self.history: list[dict[str, Any]] = list(cfg.get("history", []))
        self.events: list[dict[str, Any]] = list(cfg.get("events", []))
        self.drop_after_event = int(cfg.get("drop_after_event", 0))
        self.announce_fail = int(cfg.get("announce_fail", 0))
        self.by_key: dict[str, str] = {}  # idempotency key -> the gateway's run id

    def log(self, row: dict[str, Any]) -> None:
        with self.lock, open(self.cfg["log"], "a") as fh:
            fh.write(json.dumps(row) + "\n")

    # -- handshake -------------------------------------------------------------------------

    def handler(self, ws: Any) -> None:
        with self.lock:
            self.conns += 1
            n = self.conns
        nonce, ts = str(uuid.uuid4()), int(time.time() * 1000)
        ws.send(
            json.dumps(
                {
                    "type": "event",
                    "event": "connect.challenge",
                    "payload": {"nonce": nonce, "ts": ts},
                }
            )
        )
        req = json.loads(ws.recv())
        p = req.get("params") or {}
        auth = p.get("auth") or {}
        device = p.get("device")
        self.log(
            {
                "conn": n,
                "method": "connect",
                "params": {
                    "minProtocol": p.get("minProtocol"),
                    "maxProtocol": p.get("maxProtocol"),
                    "client": {k: p["client"].get(k) for k in ("id", "mode")},
                    "scopes": p.get("scopes"),
                    "auth": sorted(auth),
                    "device": bool(device),
                },
            }
        )

        def refuse(code: str, message: str, details: dict[str, Any], close: int = 1008) -> None:
            err: dict[str, Any] = {"code": code, "message": message, "details": details}
            if "retryAfterMs" in details:
                err["retryable"], err["retryAfterMs"] = True, details["retryAfterMs"]
            ws.send(json.dumps({"type": "res", "id": req["id"], "ok": False, "error": err}))
            ws.close(close, message[:100])

        try:  # a test may change the version between two commands (FakeGateway.set)
            now = json.loads(Path(self.cfg["path"]).read_text())
            self.cfg["version"], self.cfg["approved"] = now.get("version"), now.get("approved")
        except (OSError, ValueError, KeyError):
            pass
        proto = int(self.cfg.get("protocol", 4))
        if not p.get("minProtocol", 0) <= proto <= p.get("maxProtocol", 0):
            details = {"code": "PROTOCOL_MISMATCH", "expectedProtocol": proto}
            return refuse("INVALID_REQUEST", "protocol mismatch", details, 1002)
        with self.lock:
            busy = self.unavailable_connects > 0
            self.unavailable_connects -= 1 if busy else 0
        if busy:
            details = {"reason": "startup-sidecars", "retryAfterMs": 50}
            return refuse("UNAVAILABLE", "gateway starting", details, 1013)
        token = auth.get("token") or auth.get("password")
        secret = self.cfg.get("token")
        shared_ok = bool(secret) and token == secret
        if self.cfg.get("pairing") == "remote" and device:
            why = self.check_device(device, p, token or "", nonce, ts)
            if why:
                return refuse("INVALID_REQUEST", why, {"code": "DEVICE_AUTH_SIGNATURE_INVALID"})
            no, issued_token = self.remote_pairing(device["id"], token or "", shared_ok, p)
            if no is not None:
                return refuse(*no)
            return self.hello_ok(ws, n, req, proto, list(p.get("scopes") or []), issued_token)
        if secret and not shared_ok and token not in self.device_tokens:
            details = {
                "code": "AUTH_TOKEN_MISMATCH",
                "recommendedNextStep": "update_auth_credentials",
            }
            return refuse("INVALID_REQUEST", "unauthorized: gateway token mismatch", details)
        scopes = list(p.get("scopes") or [])
        issued = None
        if device:
            why = self.check_device(device, p, token or "", nonce, ts)
            if why:
                return refuse("INVALID_REQUEST", why, {"code": "DEVICE_AUTH_SIGNATURE_INVALID"})
            if self.cfg.get("pairing") == "required":
                rid = "req-" + device["id"][:12]
                details = {"code": "PAIRING_REQUIRED", "requestId": rid, "reason": "not-paired"}
                return refuse("NOT_PAIRED", f"pairing required (requestId: {rid})", details)
            issued = "devtok-" + uuid.uuid4().hex
            with self.lock:
                self.device_tokens.add(issued)
        elif self.cfg.get("clear_deviceless_scopes"):
            scopes = []
        if "grant_scopes" in self.cfg:
            scopes = [x for x in scopes if x in self.cfg["grant_scopes"]]
        self.hello_ok(ws, n, req, proto, scopes, issued)

    def hello_ok(
        self, ws: Any, n: int, req: dict[str, Any], proto: int, scopes: list[str], issued: Any
    ) -> None:
        hello_auth: dict[str, Any] = {"role": "operator", "scopes": scopes, "method": "token"}
        if issued:
            hello_auth["deviceToken"] = issued
        hello = {
            "type": "hello-ok",
            "protocol": proto,
            "server": {"version": self.cfg.get("version", "2026.9.6"), "connId": str(n)},
            "features": {"methods": sorted(SCOPE) + ["sessions.patch", "sessions.delete"]},
            "snapshot": {},
            "auth": hello_auth,
            "policy": {"maxPayload": 26214400, "tickIntervalMs": 30000},
        }
        ws.send(json.dumps({"type": "res", "id": req["id"], "ok": True, "payload": hello}))
        try:
            for raw in ws:
                self.request(ws, n, scopes, json.loads(raw))
        except Exception:  # noqa: BLE001 - the client went away
            pass

    def remote_pairing(
        self, dev: str, token: str, shared_ok: bool, p: dict[str, Any]
    ) -> tuple[tuple[str, str, dict[str, Any]] | None, str | None]:
        """`pairing: "remote"`: OpenClaw 2026.9.6's pairing off loopback, as measured on the
        real gateway. A device token only in hello-ok; without the shared secret a device gets
        in only with its current token (none: AUTH_TOKEN_MISSING; another: AUTH_TOKEN_MISMATCH;
        fewer scopes than asked: AUTH_SCOPE_MISMATCH, no request made); with it, an unpaired
        device or one asking more scopes gets a pairing request (not-paired / scope-upgrade).
        Approving (the test's `FakeGateway.set(approved=[request ids])`) replaces the device's
        token. Returns (refusal, None) or (None, the device's token)."""
        approved = set(self.cfg.get("approved") or [])
        scopes = set(p.get("scopes") or [])
        with self.lock:
            for rid in [r for r in self.requests if r in approved]:
                req = self.requests.pop(rid)
                fresh = "devtok-" + uuid.uuid4().hex
                self.paired[req["device"]] = {"scopes": req["scopes"], "token": fresh}
            entry = self.paired.get(dev)
        if not shared_ok:
            if not token:
                details = {"code": "AUTH_TOKEN_MISSING", "canRetryWithDeviceToken": False}
                return ("INVALID_REQUEST", "unauthorized: gateway token missing", details), None
            if entry is None or token != entry["token"]:
                details = {"code": "AUTH_TOKEN_MISMATCH", "canRetryWithDeviceToken": True}
                return ("INVALID_REQUEST", "unauthorized: gateway token mismatch", details), None
            if not scopes <= set(entry["scopes"]):
                details = {"code": "AUTH_SCOPE_MISMATCH", "authReason": "scope_mismatch"}
                why = "unauthorized: device token scope mismatch (re-pair or approve scope upgrade)"
                return ("INVALID_REQUEST", why, details), None
            return None, entry["token"]
        if entry is not None and scopes <= set(entry["scopes"]):
            return None, entry["token"]
        rid = str(uuid.uuid4())
        held = entry["scopes"] if entry else []
        asked = sorted(scopes | set(held))
        with self.lock:
            self.requests[rid] = {"device": dev, "scopes": asked}
        details = {
            "code": "PAIRING_REQUIRED",
            "reason": "scope-upgrade" if entry else "not-paired",
            "requestId": rid,
            "requestedScopes": asked,
        }
        if entry:
            details["approvedScopes"] = held
        return ("NOT_PAIRED", "pairing required", details), None

    def check_device(
        self, device: dict[str, Any], p: dict[str, Any], token: str, nonce: str, ts: int
    ) -> str | None:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

        raw = _b64(device["publicKey"])
        if hashlib.sha256(raw).hexdigest() != device["id"]:
            return "device identity mismatch"
        if device.get("nonce") != nonce or device.get("signedAt") != ts:
            return "device nonce mismatch"
        c = p["client"]
        payload = "|".join(
            [
                "v3",
                device["id"],
                c["id"],
                c["mode"],
                p["role"],
                ",".join(p.get("scopes") or []),
                str(ts),
                token,
                nonce,
                c["platform"].lower(),
                (c.get("deviceFamily") or "").lower(),
            ]
        )
        try:
            Ed25519PublicKey.from_public_bytes(raw).verify(
                _b64(device["signature"]), payload.encode()
            )
        except InvalidSignature:
            return "device signature invalid"
        return None

    # -- methods ---------------------------------------------------------------------------

    def request(self, ws: Any, n: int, scopes: list[str], frame: dict[str, Any]) -> None:
        method, params, rid = frame["method"], frame.get("params") or {}, frame["id"]
        self.log({"conn": n, "method": method, "params": params})

        def res(payload: dict[str, Any]) -> None:
            ws.send(json.dumps({"type": "res", "id": rid, "ok": True, "payload": payload}))

        def err(code: str, message: str, **more: Any) -> None:
            e = {"code": code, "message": message, **more}
            ws.send(json.dumps({"type": "res", "id": rid, "ok": False, "error": e}))

        need = required_scope(method, params)
        if not allowed(need, scopes):
            return err("FORBIDDEN", f"missing scope: {need}", details={"code": "MISSING_SCOPE"})
        with self.lock:
            busy = self.unavailable_calls > 0 and method != "status"
            self.unavailable_calls -= 1 if busy else 0
        if busy:
            return err("UNAVAILABLE", "busy", retryable=True, retryAfterMs=50)
        ws.send(json.dumps({"type": "event", "event": "tick", "payload": {"ts": 1}}))
        if method == "sessions.list":  # `sessions` rows, or an empty store
            rows = self.cfg.get("sessions") or []
            return res({"ts": int(time.time() * 1000), "count": len(rows), "sessions": rows})
        if method == "config.get" and "config" in self.cfg:  # the gateway host's OpenClaw config
            return res({"path": "/srv/openclaw/openclaw.json", "parsed": self.cfg["config"]})
        if method == "status":
            return res({"runtimeVersion": self.cfg.get("version", "2026.9.6")})
        if method == "agent":
            return self.agent(ws, n, params, res, err)
        if method == "tools.invoke":
            return self.tools_invoke(n, params, res)
        if method == "agent.wait":
            run = self.runs.get(params["runId"])
            if run is None:
                return res({"runId": params["runId"], "status": "timeout"})
            run["done"].wait(params.get("timeoutMs", 30000) / 1000)
            final = run.get("final") or {}
            text = ((final.get("result") or {}).get("payloads") or [{}])[0].get("text")
            answer = {
                "runId": params["runId"],
                "status": final.get("status", "timeout"),
                "endedAt": int(time.time() * 1000) if final else None,
                "terminalReply": {"disposition": "visible", "text": text},
            }
            if final.get("error"):
                answer["error"] = final["error"]
            if final and self.cfg.get("timeout_as"):
                answer["startedAt"] = run["startedAt"]
            return res(answer)
        if method == "chat.abort":
            # As OpenClaw: a run is stopped by its owner connection, or by operator.admin.
            run = self.runs.get(params.get("runId") or "")
            if run is not None and run["owner"] != n and ADMIN not in scopes:
                return err("INVALID_REQUEST", "unauthorized")
            live = run is not None and not run["done"].is_set()
            if live:
                assert run is not None
                run["abort"].set()
            return res(
                {"ok": True, "aborted": live, "runIds": [params.get("runId")] if live else []}
            )
        if method == "chat.history":
            return res(self.chat_history(params))
        if method == "sessions.messages.subscribe":
            res({"subscribed": True, "key": params["key"]})
            return self.next_event(ws, params["key"])
        if method == "sessions.patch":
            if self.cfg.get("store"):
                patched = self.patch_store(params)
                if self.cfg.get("patch_without_entry"):  # an answer that leaves the entry out
                    del patched["entry"]
                return res(patched)
            return res({"ok": True, "key": params["key"], "entry": {"sessionId": "x", **params}})
        if method == "sessions.create":
            entry = {"sessionId": "x", **{k: v for k, v in params.items() if k != "key"}}
            return res({"ok": True, "key": params["key"], "entry": entry})
        if method == "sessions.delete":
            return res({"ok": True, "key": params["key"], "deleted": True, "archived": []})
        if method == "sessions.reset":
            return res({"ok": True, "key": params["key"], "entry": {"sessionId": "same"}})
        return err("INVALID_REQUEST", f"unknown method: {method}")

    def chat_history(self, params: dict[str, Any]) -> dict[str, Any]:
        key = params["sessionKey"]
        info = {"key": key, "agentId": "main", "sessionId": "sid-follow", "updatedAt": 1}
        with self.lock:
            msgs = list(self.history)
        return {"sessionKey": key, "sessionId": "sid-follow", "messages": msgs, "sessionInfo": info}

    def next_event(self, ws: Any, key: str) -> None:
        with self.lock:
            if not self.events:
                return
            msg = self.events.pop(0)
            self.history.append(msg)
            drop = self.drop_after_event > 0
            self.drop_after_event -= 1 if drop else 0
        meta = msg.get("__openclaw") or {}
        payload = {
            "sessionKey": key,
            "agentId": "main",
            "message": msg,
            "messageId": meta.get("id"),
            "messageSeq": meta.get("seq"),
            "sessionId": "sid-follow",
        }
        ws.send(json.dumps({"type": "event", "event": "session.message", "payload": payload}))
        if drop:
            ws.close(1012, "dropped by the test")

    def tools_invoke(self, n: int, params: dict[str, Any], res: Any) -> None:
        """OpenClaw's own session tools, as 2026.9.6 runs them through `tools.invoke`: denied
        unless `tools_allowed` names them (`gateway.tools.allow`), then run as the tool does
        (a spawn makes the child and starts its run; a send starts the target's turn), the
        envelope `{ok, toolName, output: {details}}` answering at once."""
        name, args = params.get("name"), params.get("args") or {}
        if name not in self.cfg.get("tools_allowed", []):
            error = {"code": "not_found", "message": f"Tool not available: {name}"}
            return res({"ok": False, "toolName": name, "error": error})
        need = "task" if name == "sessions_spawn" else "message"
        if not args.get(need):
            error = {"code": "internal_error", "message": f"{need} required"}
            return res({"ok": False, "toolName": name, "error": error})
        if name == "sessions_spawn" and self.cfg.get("spawn_answer"):
            # `spawn_answer`: the tool's refusal (2026.9.6's `{status: forbidden, error}` for a
            # cwd on a sandboxed child), answered in the ok envelope as the real one does.
            details = dict(self.cfg["spawn_answer"])
            return res({"ok": True, "toolName": name, "output": {"details": details}})
        run_id = "gw-" + uuid.uuid4().hex[:12]
        run: dict[str, Any] = {
            "done": threading.Event(),
            "abort": threading.Event(),
            "final": None,
            "owner": -1,  # the gateway's own run: no client connection owns it
            "accepted": time.monotonic(),
            "startedAt": int(time.time() * 1000),
        }
        self.runs[run_id] = run
        if name == "sessions_spawn":
            child = f"agent:main:subagent:{uuid.uuid4()}"
            turn = {"sessionKey": child, "message": args["task"]}
            # `child_key`: the key it answers instead (a hostile or broken gateway's).
            details = {
                "status": "accepted",
                "childSessionKey": self.cfg.get("child_key", child),
                "runId": run_id,
            }
            if args.get("runTimeoutSeconds"):
                turn["timeout"] = args["runTimeoutSeconds"]
        else:
            turn = {"sessionKey": args["sessionKey"], "message": args["message"]}
            details = {"runId": run_id, "status": "accepted", "sessionKey": args["sessionKey"]}
            details["delivery"] = {"status": "pending", "mode": "announce"}
        turn.update(gatewayRunId=run_id, idempotencyKey=params.get("idempotencyKey") or run_id)
        target = self.finish
        if name == "sessions_spawn" and self.cfg.get("own_announce_s"):
            target = self.finish_and_announce
        threading.Thread(target=target, args=(run, turn), daemon=True).start()
        res({"ok": True, "toolName": name, "output": {"details": details}, "source": "core"})

    def finish_and_announce(self, run: dict[str, Any], turn: dict[str, Any]) -> None:
        """`own_announce_s`: OpenClaw's own announce of a spawned child (2026.7.35 makes it;
        2026.9.6's fails after tools.invoke), the requester's run under the key
        `announce:v1:<child>:<run>`, started as the child's run ends and lasting that long."""
        self.finish(run, turn)
        key = f"announce:v1:{turn['sessionKey']}:{turn['gatewayRunId']}"
        own: dict[str, Any] = {"done": threading.Event(), "final": None, "owner": -1}
        self.runs[key] = own
        time.sleep(float(self.cfg["own_announce_s"]))
        own["final"] = {"status": "ok", "result": {"payloads": [{"text": "announced"}]}}
        own["done"].set()

    def agent(self, ws: Any, n: int, params: dict[str, Any], res: Any, err: Any) -> None:
        idem = params.get("idempotencyKey")
        if idem in self.runs:  # a run under that key exists: one run
            return res({"runId": idem, "status": "in_flight"})
        seen = self.by_key.get(idem) if isinstance(idem, str) else None
        if seen is not None:  # as OpenClaw's dedupe: in flight while it runs, then its end
            known = self.runs[seen]
            if not known["done"].is_set():
                return res({"runId": seen, "status": "in_flight"})
            return res(known.get("final") or {"runId": seen, "status": "error"})
        # The gateway names the run itself (not by the idempotency key), as 2026.9.6 does.
        run_id, msg = "gw-" + uuid.uuid4().hex[:12], params.get("message", "")
        run: dict[str, Any] = {
            "done": threading.Event(),
            "abort": threading.Event(),
            "final": None,
            "owner": n,
            "accepted": time.monotonic(),
        }
        self.runs[run_id] = run
        if isinstance(idem, str):
            self.by_key[idem] = run_id
        res({"runId": run_id, "status": "accepted", "acceptedAt": int(time.time() * 1000)})
        params = {**params, "gatewayRunId": run_id}
        if isinstance(idem, str) and (idem.startswith("announce:v1:") or ":announce" in idem):
            with self.lock:
                fail = self.announce_fail > 0
                self.announce_fail -= 1 if fail else 0
            if fail:  # accepted, then the turn fails (2026.9.6: "worker task timed out")
                threading.Thread(target=self.fail_turn, args=(run, params), daemon=True).start()
                return
        with self.lock:
            drop = self.drop_after_accept > 0
            self.drop_after_accept -= 1 if drop else 0
        if drop:
            threading.Thread(target=self.finish, args=(run, params), daemon=True).start()
            ws.close(1011, "dropped by the test")
            return
        if msg.startswith("fail"):
            run["done"].set()
            return err("INVALID_REQUEST", "agent refused: " + msg)

        if self.cfg.get("usage_events"):
            args = (ws, run, run_id, [int(n) for n in self.cfg["usage_events"]])
            threading.Thread(target=self.stream_usage, args=args, daemon=True).start()

        def final() -> None:  # requests on one connection run concurrently, as in OpenClaw
            try:
                res(self.finish(run, params))
            except Exception:  # noqa: BLE001 - the client went away
                pass

        threading.Thread(target=final, daemon=True).start()

    def stream_usage(self, ws: Any, run: dict[str, Any], run_id: str, totals: list[int]) -> None:
        """`usage_events`: the `agent` events 2026.9.6 sends the turn's owner while it runs:
        `lifecycle` (phase `model`), then per model call the reply so far (`assistant`) and the
        run's output tokens so far (`usage`, `{outputTokens}`), `usage_event_s` apart."""

        def send(stream: str, data: dict[str, Any]) -> None:
            payload = {"runId": run_id, "sessionKey": "?", "stream": stream, "data": data}
            ws.send(json.dumps({"type": "event", "event": "agent", "payload": payload}))

        try:
            send("lifecycle", {"phase": "model", "provider": "fake", "model": "fake-model"})
            for i, total in enumerate(totals, 1):
                if run["abort"].wait(float(self.cfg.get("usage_event_s", 0.2))):
                    return
                send("assistant", {"text": f"partial reply {i}"})
                send("usage", {"outputTokens": total})
        except Exception:  # noqa: BLE001 - the client went away
            pass

    def fail_turn(self, run: dict[str, Any], params: dict[str, Any]) -> None:
        """`announce_fail`: an announce turn that was accepted and then failed."""
        time.sleep(float(self.cfg.get("announce_fail_s", 0.2)))
        run["final"] = {
            "runId": params["gatewayRunId"],
            "status": "error",
            "error": "worker task timed out",
        }
        self.log(
            {
                "method": FINAL,
                "params": {
                    "runId": params["gatewayRunId"],
                    "idempotencyKey": params["idempotencyKey"],
                    "status": "error",
                },
            }
        )
        run["done"].set()

    def finish(self, run: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
        run_id, msg = params["gatewayRunId"], params.get("message", "")
        key = params["idempotencyKey"]
        status, text = "ok", "pong: " + msg
        system = params.get("extraSystemPrompt") or ""
        if "Agent-to-agent reply step:" in system:
            text = "REPLY_SKIP"
        elif "Agent-to-agent announce step:" in system:
            text = "announced: " + msg[:40]
        elif msg.startswith("sleep:"):
            secs = float(msg.split()[0].split(":")[1])
            limit = params.get("timeout")
            wait = secs if limit is None else min(secs, float(limit))
            if run["abort"].wait(wait):
                status = "aborted"
            elif limit is not None and limit < secs:
                status = self.cfg.get("timeout_as", "timeout")
        elif self.cfg.get("turn_s"):
            time.sleep(float(self.cfg["turn_s"]))
        final = {
            "runId": run_id,
            "status": status,
            "summary": "completed",
            "result": {
                "payloads": [{"text": text}],
                "meta": {
                    # The turn's own time, as 2026.9.6 reports it (its embedded run only).
                    "durationMs": int((time.monotonic() - run["accepted"]) * 1000),
                    "agentMeta": {
                        "sessionId": "sid-" + key[:8],
                        "provider": "fake",
                        "model": "fake-model",
                        "usage": {"input": 1200, "output": 34, "total": 1234},
                    },
                },
            },
        }
        run["final"] = final
        # What the turn ended with, for tests to compare a record with (not a call).
        self.log(
            {
                "method": FINAL,
                "params": {
                    "runId": run_id,
                    "idempotencyKey": key,
                    "durationMs": final["result"]["meta"]["durationMs"],
                },
            }
        )
        run["done"].set()
        return final

    # -- a lockless JSON-era gateway's own store writes ------------------------------------

    def load_store(self) -> dict[str, Any]:
        path = self.cfg["store"]
        st = os.stat(path)
        key = (st.st_mtime_ns, st.st_size)
        if self.store_stat != key:
            with open(path) as fh:
                self.store_data = json.load(fh)
            self.store_stat = key
        return self.store_data

    def save_store(self, data: dict[str, Any]) -> None:
        path = self.cfg["store"]
        tmp = path + ".gw.tmp"
        with open(tmp, "w") as fh:
            json.dump(data, fh)
        os.replace(tmp, path)
        st = os.stat(path)
        self.store_stat = (st.st_mtime_ns, st.st_size)

    def patch_store(self, p: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            data = self.load_store()
            entry = data.setdefault(p["key"], {"sessionId": "new-" + p["key"], "updatedAt": 0})
            for k, v in p.items():
                if k != "key":
                    if v is None:
                        entry.pop(k, None)
                    else:
                        entry[k] = v
            entry["updatedAt"] = int(time.time() * 1000)
            self.save_store(data)
            return {"ok": True, "key": p["key"], "entry": entry}

    def own_writes(self, count: int) -> None:
        for i in range(count):
            with self.lock:
                data = self.load_store()
                data[f"agent:main:gw-{i}"] = {
                    "sessionId": f"gw-{i}",
                    "updatedAt": i,
                    "totalTokens": i,
                }
                self.save_store(data)
            time.sleep(0.002)
        print("own-done", flush=True)


def main() -> None:
    from websockets.sync.server import serve

    cfg = json.loads(Path(sys.argv[1]).read_text())
    cfg["path"] = sys.argv[1]
    srv = Server(cfg)
    more: dict[str, Any] = {}
    if cfg.get("tls"):  # {"cert": PEM, "key": PEM}: wss://, as gateway.tls.enabled serves it
        import ssl

        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cfg["tls"]["cert"], cfg["tls"]["key"])
        more["ssl"] = ctx

    def upgrade(conn: Any, request: Any) -> None:
        """Every HTTP upgrade that reached the server (what a client sends first after TLS)."""
        srv.log({"method": "http-upgrade", "params": {"path": request.path}})

    more["process_request"] = upgrade
    port = int(cfg.get("port", 0))
    with serve(srv.handler, "127.0.0.1", port, compression=None, **more) as ws_srv:
        port = ws_srv.socket.getsockname()[1]
        print(f"ready {port}", flush=True)
        if cfg.get("store") and cfg.get("own_writes"):
            threading.Thread(target=srv.own_writes, args=(cfg["own_writes"],), daemon=True).start()
        ws_srv.serve_forever()


# -- for the tests ---------------------------------------------------------------------------


class FakeGateway:
    def __init__(self, proc: subprocess.Popen[str], port: int, log: Path, cfg: Path) -> None:
        self.proc, self.port, self.log, self.cfg = proc, port, log, cfg

    def set(self, **kw: Any) -> None:
        """Change what the next handshakes say (`version`)."""
        cfg = json.loads(self.cfg.read_text())
        cfg.update(kw)
        self.cfg.write_text(json.dumps(cfg))

    def rows(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        # The fake's threads append while a test reads: a last line without its newline is still
        # being written, not a row yet.
        text = self.log.read_text()
        whole = text[: text.rfind("\n") + 1]
        return [json.loads(line) for line in whole.splitlines() if line.strip()]

    def calls(self, method: str | None = None) -> list[dict[str, Any]]:
        """Method calls (not the handshakes), in order."""
        return [
            r
            for r in self.rows()
            if r["method"] not in ("connect", "http-upgrade", FINAL)
            and (method is None or r["method"] == method)
        ]

    def finals(self) -> dict[str, dict[str, Any]]:
        """The turns that ended, by the gateway's run id: runId, idempotencyKey, durationMs."""
        return {r["params"]["runId"]: r["params"] for r in self.rows() if r["method"] == FINAL}

    def connects(self) -> list[dict[str, Any]]:
        return [r for r in self.rows() if r["method"] == "connect"]

    def readline(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().strip()


def self_signed(dest: Path, host: str = "127.0.0.1") -> tuple[Path, Path, str]:
    """A self-signed certificate for `host` (an IP SAN) as OpenClaw's autoGenerate makes one:
    (cert PEM, key PEM, SHA-256 of the DER as OpenClaw prints it, AA:BB:...)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "openclaw-gateway")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(host))]), False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    dest.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = dest / "cert.pem", dest / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    digest = cert.fingerprint(hashes.SHA256()).hex().upper()
    return cert_path, key_path, ":".join(digest[i : i + 2] for i in range(0, 64, 2))


@contextmanager
def running(tmp: Path, **cfg: Any) -> Iterator[FakeGateway]:
    """Start the fake on a free loopback port; stopped (by its pid) when the block ends."""
    tmp.mkdir(parents=True, exist_ok=True)
    cfg.setdefault("log", str(tmp / "gateway-frames.jsonl"))
    cfg_path = tmp / "fake-gateway.json"
    cfg_path.write_text(json.dumps(cfg))
    proc = subprocess.Popen(
        [sys.executable, __file__, str(cfg_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("ready "), f"the fake gateway did not start: {line!r}"
        yield FakeGateway(proc, int(line.split()[1]), Path(cfg["log"]), cfg_path)
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


if __name__ == "__main__":
    main()
