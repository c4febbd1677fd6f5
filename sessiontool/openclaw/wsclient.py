"""OpenClaw's gateway protocol spoken directly: one WebSocket per sessiontool process, reused for
every call (a send, or a spawn with its label, turn, announce and cleanup), instead of a Node
start (~1 s, ~216 MiB) per call through `openclaw gateway call`.

The wire, as the 2026.9.6 package documents it (docs/gateway/protocol/*) and its CLI speaks it:
`connect.challenge` event → `connect` request (protocol 4..4, which every gateway from 2026.5.28
to 2026.9.6 accepts; client id/mode `cli`; role `operator`; least-privilege scopes; the shared
secret) → `hello-ok` (server version, granted scopes, maybe a device token) → `req`/`res` frames
by id, events in between (ignored). A device-less `cli` client with a good shared secret on
loopback keeps its scopes (OpenClaw's own CLI relies on that); anywhere else (a remote gateway,
no shared secret, scopes cleared) sessiontool presents its own Ed25519 device (device.py),
silently paired on loopback, and keeps the device token the gateway issues.

Failures, each with what to do: a protocol sessiontool does not speak → ProtocolMismatch (the
caller may fall back to the `openclaw` CLI of that version); pairing required → exit 4 with the
request id and the `openclaw devices approve` line; bad credentials → exit 4, naming where the
secret came from, never its value; `UNAVAILABLE` + `retryAfterMs` → waited out and retried.
An `agent` turn whose socket drops after the gateway accepted it is re-attached with
`agent.wait {runId}` (the run id is the turn's idempotency key), never sent again.

`websockets` is imported inside functions: reads never load it.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sessiontool.errors import ExitCode, ForbiddenError, SessiontoolError
from sessiontool.openclaw.secrets import Secret
from sessiontool.stores.paths import StatePaths

PROTOCOL = 4
CLIENT_ID = "cli"
CLIENT_MODE = "cli"
ROLE = "operator"
READ, WRITE, ADMIN = "operator.read", "operator.write", "operator.admin"
OPEN_TIMEOUT_S = 10.0
CHALLENGE_TIMEOUT_S = 15.0
HELLO_TIMEOUT_S = 30.0
CONNECT_BUDGET_S = 60.0  # UNAVAILABLE (startup sidecars) retried for this long
MAX_RETRY_AFTER_S = 10.0
REATTACH_LIMIT = 5
WAIT_CHUNK_MS = 30_000
ABORT_TIMEOUT_S = 5.0

READ_METHODS = frozenset(
    {"status", "health", "sessions.list", "sessions.get", "sessions.search", "chat.history"}
)
PATCH_WRITE_FIELDS = frozenset(
    {"key", "agentId", "expectedSessionId", "label", "autoLabel", "icon", "color", "category"}
    | {"pinned", "archived", "unread", "model", "thinkingLevel", "fastMode"}
)


class GatewayError(SessiontoolError):
    """The gateway answered with an error, or could not be reached: exit 1."""

    code = ExitCode.FAILURE


class ProtocolMismatch(GatewayError):
    """The gateway speaks a protocol other than 4 (before 2026.5.28, or a future wire break)."""

    def __init__(self, message: str, expected: Any) -> None:
        super().__init__(message)
        self.expected = expected


class GatewayTimeout(GatewayError):
    pass


class _Dropped(Exception):
    """The socket closed under a request."""


class _RpcError(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(str(error.get("message") or "failed"))
        self.error = error

    @property
    def code(self) -> str:
        return str(self.error.get("code") or "")

    @property
    def detail_code(self) -> str:
        d = self.error.get("details")
        return str(d.get("code") or "") if isinstance(d, dict) else ""

    def retry_after_s(self) -> float | None:
        ms = self.error.get("retryAfterMs")
        d = self.error.get("details")
        if ms is None and isinstance(d, dict):
            ms = d.get("retryAfterMs")
        retryable = self.code == "UNAVAILABLE" or self.error.get("retryable") is True
        if not retryable:
            return None
        if isinstance(ms, int | float) and not isinstance(ms, bool) and ms >= 0:
            return min(float(ms) / 1000, MAX_RETRY_AFTER_S)
        return 1.0 if self.code == "UNAVAILABLE" else None


def scopes_for(method: str, params: dict[str, Any]) -> frozenset[str]:
    """The least-privilege operator scopes OpenClaw requires for this call
    (`resolveLeastPrivilegeOperatorScopesForMethod`): admin only for a reset, a send-policy (or
    any non-cosmetic) patch, a delete that is not archived-only, and an `agent` `/new`/`/reset`."""
    if method in READ_METHODS:
        return frozenset({READ})
    if method == "sessions.reset":
        return frozenset({ADMIN})
    if method == "sessions.patch":
        if set(params) <= PATCH_WRITE_FIELDS:
            return frozenset({WRITE})
        return frozenset({ADMIN})
    if method == "sessions.delete":
        return frozenset({WRITE}) if params.get("archivedOnly") is True else frozenset({ADMIN})
    if method == "sessions.create":
        admin = params.get("incognito") is True or params.get("permissionMode") == "full"
        if admin or {"execNode", "toolOverrides"} & set(params):
            return frozenset({ADMIN})
        return frozenset({WRITE})
    if method == "agent":
        msg = params.get("message")
        if isinstance(msg, str) and msg.strip().lower().split(" ")[0] in ("/new", "/reset"):
            return frozenset({ADMIN})
        return frozenset({WRITE})
    if method in ("agent.wait", "chat.abort", "sessions.abort", "chat.send", "sessions.send"):
        return frozenset({WRITE})
    return frozenset({ADMIN})  # OpenClaw's default for a method it does not classify


def _covered(needed: frozenset[str], granted: frozenset[str]) -> bool:
    if ADMIN in granted:
        return True
    if WRITE in granted:
        granted = granted | {READ}
    return needed <= granted


@dataclass
class Hello:
    """What the handshake said: for `doctor`, the version checks and the run records."""

    version: str | None
    protocol: int | None
    scopes: list[str]
    auth: str  # how sessiontool authenticated (never the secret)
    identity: str  # "device-less cli" or "device <id>"
    methods: frozenset[str] = frozenset()
    tick_s: float = 30.0  # hello-ok.policy.tickIntervalMs

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "protocol": self.protocol,
            "scopes": self.scopes,
            "auth": self.auth,
            "identity": self.identity,
        }


@dataclass
class Connection:
    ws: Any
    hello: Hello
    requested: frozenset[str]
    _n: int = 0

    @property
    def granted(self) -> frozenset[str]:
        return frozenset(self.hello.scopes)

    def request(
        self,
        method: str,
        params: dict[str, Any],
        *,
        timeout_s: float,
        expect_final: bool = False,
        on_accepted: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """One call: its (final) payload. With `expect_final`, an `accepted` answer first goes
        to `on_accepted` (it carries the gateway's own run id). Raises _Dropped."""
        from websockets.exceptions import ConnectionClosed

        self._n += 1
        rid = f"{self._n}:{uuid.uuid4()}"
        try:
            self.ws.send(json.dumps({"type": "req", "id": rid, "method": method, "params": params}))
        except ConnectionClosed as exc:
            raise _Dropped() from exc
        deadline = time.monotonic() + timeout_s
        silence = 2 * self.hello.tick_s + 5
        heard = time.monotonic()
        while True:
            now = time.monotonic()
            remaining = deadline - now
            if remaining <= 0:
                raise GatewayTimeout(f"gateway {method}: no answer in {timeout_s:g}s")
            if now - heard > silence:
                self.close()
                raise _Dropped()  # not even a tick: the connection is dead
            try:
                raw = self.ws.recv(timeout=min(remaining, silence))
            except TimeoutError:
                continue
            except ConnectionClosed as exc:
                raise _Dropped() from exc
            heard = time.monotonic()
            frame = _parse(raw)
            if frame.get("type") != "res" or frame.get("id") != rid:
                continue  # events, and answers to nothing we wait for
            if frame.get("ok") is not True:
                err = frame.get("error")
                raise _RpcError(err if isinstance(err, dict) else {"message": str(err)})
            payload = frame.get("payload")
            payload = payload if isinstance(payload, dict) else {}
            if expect_final and payload.get("status") == "accepted":
                if on_accepted is not None:
                    on_accepted(payload)
                continue
            return payload

    def close(self) -> None:
        try:
            self.ws.close()
        except Exception:  # noqa: BLE001 - closing a dead socket
            pass


def _parse(raw: Any) -> dict[str, Any]:
    try:
        frame = json.loads(raw)
    except (ValueError, TypeError):
        return {}
    return frame if isinstance(frame, dict) else {}


@dataclass
class Client:
    """One gateway endpoint for this process: its current connection and the scopes asked so far
    (a later call that needs more reconnects once with the union)."""

    url: str
    secret: Secret | None
    paths: StatePaths
    loopback: bool
    conn: Connection | None = None
    wanted: set[str] = field(default_factory=set)
    connects: int = 0
    use_device: bool = False

    def want(self, scopes: frozenset[str] | set[str]) -> None:
        """Scopes a later call of this process will need, asked for at the first connect, so
        that one connection serves the whole command."""
        self.wanted |= set(scopes)

    def hello(self, scopes: frozenset[str] = frozenset({READ})) -> Hello:
        return self._connection(scopes).hello

    def call(
        self,
        method: str,
        params: dict[str, Any],
        *,
        timeout_s: float,
        expect_final: bool = False,
        abort_turn: bool = False,
        on_accepted: Callable[[dict[str, Any]], None] | None = None,
        on_aborted: Callable[[bool], None] | None = None,
    ) -> dict[str, Any]:
        """One method over this process's connection. An `agent` turn with `expect_final`:
        the gateway's `accepted` answer goes to `on_accepted`; if the socket drops after it, the
        turn is re-attached (`agent.wait` with the gateway's run id), never sent again; with
        `abort_turn`, a wait given up (our deadline, an abort, Ctrl-C) asks the gateway to stop
        the turn on this same connection, the one OpenClaw lets stop it (the run's owner), and
        `on_aborted` learns whether it did."""
        needed = scopes_for(method, params)
        deadline = time.monotonic() + timeout_s
        accepted: dict[str, Any] = {}

        def took(payload: dict[str, Any]) -> None:
            accepted.update(payload)
            if on_accepted is not None:
                on_accepted(payload)

        drops = 0
        while True:
            conn = self._connection(needed)
            remaining = max(0.1, deadline - time.monotonic())
            try:
                if accepted and method == "agent":
                    return self._reattach(conn, method, accepted, deadline)
                return conn.request(
                    method, params, timeout_s=remaining, expect_final=expect_final, on_accepted=took
                )
            except _Dropped as exc:
                self.drop()
                drops += 1
                if drops > REATTACH_LIMIT or time.monotonic() >= deadline:
                    raise GatewayError(
                        f"gateway {method}: the connection to {self.url} kept closing"
                    ) from exc
                # Not accepted: sent again, same idempotency key (the gateway dedupes it).
                # Accepted: the work goes on without us; the loop re-attaches to it.
            except _RpcError as exc:
                after = exc.retry_after_s()
                if after is not None and time.monotonic() + after < deadline:
                    time.sleep(after)
                    continue
                raise GatewayError(f"gateway {method}: {exc}", extra=_code_extra(exc)) from exc
            except BaseException:
                # Our deadline, an abort (SIGUSR1 → RunAborted), Ctrl-C: stop the turn we own.
                if abort_turn and accepted:
                    stopped = self._abort_turn(conn, params, accepted)
                    if on_aborted is not None:
                        on_aborted(stopped)
                self.drop()
                raise

    def _reattach(
        self, conn: Connection, method: str, accepted: dict[str, Any], deadline: float
    ) -> dict[str, Any]:
        """The final answer of an accepted turn, through `agent.wait` (the `agent` frame shape
        rebuilt from its terminal snapshot: status, reply text)."""
        run_id = accepted.get("runId")
        while True:
            remaining_ms = int((deadline - time.monotonic()) * 1000)
            if remaining_ms <= 0:
                raise GatewayTimeout(f"gateway {method}: no answer in time (run {run_id})")
            snap = conn.request(
                "agent.wait",
                {"runId": run_id, "timeoutMs": min(remaining_ms, WAIT_CHUNK_MS)},
                timeout_s=min(remaining_ms, WAIT_CHUNK_MS) / 1000 + 30,
            )
            status = snap.get("status")
            if status == "pending" or (status == "timeout" and not snap.get("endedAt")):
                continue
            reply = snap.get("terminalReply")
            text = reply.get("text") if isinstance(reply, dict) else None
            out: dict[str, Any] = {
                "runId": run_id,
                "status": status,
                "summary": snap.get("error") or snap.get("stopReason") or "completed",
                "result": {"payloads": [{"text": text}] if isinstance(text, str) else []},
                "reattached": True,
            }
            return out

    def _abort_turn(
        self, conn: Connection, params: dict[str, Any], accepted: dict[str, Any]
    ) -> bool:
        """`chat.abort` of the turn this connection started (OpenClaw lets a run's owner
        connection stop it; another client needs operator.admin). Best effort: True when the
        gateway says it stopped it."""
        run_id = accepted.get("runId") or params.get("idempotencyKey")
        try:
            res = conn.request(
                "chat.abort",
                {"sessionKey": params.get("sessionKey"), "runId": run_id},
                timeout_s=ABORT_TIMEOUT_S,
            )
        except BaseException:  # noqa: BLE001 - the caller's exception goes on
            return False
        return res.get("aborted") is True

    def drop(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    # -- connecting --------------------------------------------------------------------------

    def _connection(self, needed: frozenset[str]) -> Connection:
        if self.conn is not None and _covered(needed, self.conn.granted):
            return self.conn
        scopes = frozenset(
            self.wanted | set(needed) | (self.conn.requested if self.conn else set())
        )
        self.drop()
        self.conn = self._open(scopes)
        self.wanted |= scopes
        return self.conn

    def _open(self, scopes: frozenset[str]) -> Connection:
        use_device = self.use_device or not self.loopback or self.secret is None
        deadline = time.monotonic() + CONNECT_BUDGET_S
        retried_token = False
        while True:
            try:
                conn = self._handshake(scopes, use_device)
            except _RpcError as exc:
                after = exc.retry_after_s()
                if after is not None and time.monotonic() + after < deadline:
                    time.sleep(after)
                    continue
                if exc.detail_code == "DEVICE_IDENTITY_REQUIRED" and not use_device:
                    use_device = True
                    continue
                if exc.detail_code == "AUTH_DEVICE_TOKEN_MISMATCH" and not retried_token:
                    from sessiontool.openclaw import device

                    device.load_or_create(self.paths).forget(self.url)
                    retried_token = True
                    continue
                raise self._refused(exc) from None
            if not use_device and not _covered(scopes, conn.granted):
                # The device-less path was let in with its scopes cleared: present a device.
                conn.close()
                use_device = True
                continue
            self.use_device = use_device
            return conn

    def probe_version(self, protocol: int) -> str | None:
        """The version an older gateway states in its hello-ok when asked in its own protocol
        (3: 2026.1 to 2026.5.27), only to tell whether it takes sessions.json.lock; nothing
        else is sent on that connection. None when it will not say."""
        try:
            conn = self._handshake(frozenset({READ}), False, protocol)
        except (SessiontoolError, _RpcError):
            return None
        conn.close()
        return conn.hello.version

    def _handshake(
        self, scopes: frozenset[str], use_device: bool, protocol: int = PROTOCOL
    ) -> Connection:
        import logging

        from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI
        from websockets.sync.client import connect

        # websockets logs whole frames at DEBUG, and the connect frame carries the secret.
        logging.getLogger("websockets").setLevel(logging.INFO)

        opts: dict[str, Any] = {
            "open_timeout": OPEN_TIMEOUT_S,
            "compression": None,  # the gateway never negotiates permessage-deflate
            "max_size": None,  # hello-ok.policy.maxPayload bounds frames, server-side
            "user_agent_header": f"sessiontool/{_version()}",
            "close_timeout": 1,
            # No keepalive thread of ours: the gateway pings and ticks; a silence longer than
            # two ticks is a dead connection (Connection.request), as OpenClaw's client has it.
            "ping_interval": None,
        }
        try:
            try:  # websockets 17 wants the direct (non-context-manager) form said explicitly
                ws = connect(self.url, legacy=True, **opts)
            except TypeError:
                ws = connect(self.url, **opts)
        except (OSError, TimeoutError, InvalidHandshake, InvalidURI) as exc:
            raise GatewayError(
                f"cannot connect to OpenClaw's gateway at {self.url}: {exc}"
            ) from exc
        self.connects += 1
        try:
            return self._hello(ws, sorted(scopes), use_device, protocol)
        except ConnectionClosed as exc:
            ws.close()
            reason = exc.rcvd.reason if exc.rcvd is not None else ""
            raise self._refused(_RpcError({"message": reason or "connection closed"})) from None
        except BaseException:
            ws.close()
            raise

    def _hello(self, ws: Any, scopes: list[str], use_device: bool, protocol: int) -> Connection:
        challenge = self._challenge(ws)
        nonce, ts = challenge.get("nonce"), challenge.get("ts")
        auth: dict[str, str] = {}
        sig_token = ""
        how = "none"
        if self.secret is not None:
            auth[self.secret.field] = self.secret.value
            how = f"{self.secret.field} ({self.secret.source})"
            if self.secret.field == "token":
                sig_token = self.secret.value
        platform = sys.platform
        family = {"linux": "Linux", "darwin": "Mac"}.get(platform, platform)
        params: dict[str, Any] = {
            "minProtocol": protocol,
            "maxProtocol": protocol,
            "client": {
                "id": CLIENT_ID,
                "version": _version(),
                "platform": platform,
                "deviceFamily": family,
                "mode": CLIENT_MODE,
                "instanceId": str(uuid.uuid4()),
            },
            "caps": [],
            "role": ROLE,
            "scopes": scopes,
            "auth": auth,
        }
        identity = "device-less cli"
        dev = None
        if use_device:
            from sessiontool.openclaw import device

            dev = device.load_or_create(self.paths)
            stored = dev.token_for(self.url)
            if stored and "token" not in auth:
                auth["token"] = sig_token = stored
                how = "device token" if self.secret is None else how
            if not isinstance(nonce, str) or not isinstance(ts, int):
                raise GatewayError(f"OpenClaw's gateway at {self.url} sent no valid challenge")
            params["device"] = dev.block(
                client_id=CLIENT_ID,
                client_mode=CLIENT_MODE,
                role=ROLE,
                scopes=scopes,
                signed_at=ts,
                token=sig_token,
                nonce=nonce,
                platform=platform,
                device_family=family,
            )
            identity = f"device {dev.device_id[:16]}"
        rid = f"0:{uuid.uuid4()}"
        ws.send(json.dumps({"type": "req", "id": rid, "method": "connect", "params": params}))
        deadline = time.monotonic() + HELLO_TIMEOUT_S
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise GatewayError(f"OpenClaw's gateway at {self.url} did not answer `connect`")
            frame = _parse(ws.recv(timeout=remaining))
            if frame.get("type") == "res" and frame.get("id") == rid:
                break
        if frame.get("ok") is not True:
            err = frame.get("error")
            raise _RpcError(err if isinstance(err, dict) else {"message": str(err)})
        payload = frame.get("payload") if isinstance(frame.get("payload"), dict) else {}
        assert isinstance(payload, dict)
        server = payload.get("server") if isinstance(payload.get("server"), dict) else {}
        granted = payload.get("auth") if isinstance(payload.get("auth"), dict) else {}
        assert isinstance(server, dict) and isinstance(granted, dict)
        got = [s for s in granted.get("scopes") or [] if isinstance(s, str)]
        token = granted.get("deviceToken")
        if dev is not None and isinstance(token, str) and token:
            dev.remember(self.url, token, got)
        features = payload.get("features") if isinstance(payload.get("features"), dict) else {}
        methods = features.get("methods") if isinstance(features, dict) else None
        version = server.get("version")
        proto = payload.get("protocol")
        policy = payload.get("policy") if isinstance(payload.get("policy"), dict) else {}
        tick = policy.get("tickIntervalMs") if isinstance(policy, dict) else None
        hello = Hello(
            version=version if isinstance(version, str) else None,
            protocol=proto if isinstance(proto, int) else None,
            scopes=got,
            auth=how,
            identity=identity,
            methods=frozenset(m for m in methods or [] if isinstance(m, str)),
            tick_s=tick / 1000 if isinstance(tick, int | float) and tick > 0 else 30.0,
        )
        return Connection(ws, hello, frozenset(scopes))

    def _challenge(self, ws: Any) -> dict[str, Any]:
        deadline = time.monotonic() + CHALLENGE_TIMEOUT_S
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise GatewayError(
                    f"{self.url} sent no connect.challenge: is it OpenClaw's gateway?"
                )
            try:
                frame = _parse(ws.recv(timeout=remaining))
            except TimeoutError:
                continue
            if frame.get("type") == "event" and frame.get("event") == "connect.challenge":
                payload = frame.get("payload")
                return payload if isinstance(payload, dict) else {}

    def _refused(self, exc: _RpcError) -> SessiontoolError:
        """A refused handshake as the error to show: what happened and what to do, without the
        secret (scrubbed from the gateway's text too, should it ever echo it)."""
        msg = self._scrub(str(exc))
        code = exc.detail_code
        details = exc.error.get("details")
        details = details if isinstance(details, dict) else {}
        low = msg.lower()
        if code == "PROTOCOL_MISMATCH" or "protocol mismatch" in low:
            expected = details.get("expectedProtocol")
            return ProtocolMismatch(
                f"OpenClaw's gateway at {self.url} speaks protocol {expected or '?'}; "
                f"sessiontool speaks {PROTOCOL} (OpenClaw 2026.5.28 and later)",
                expected,
            )
        if code == "PAIRING_REQUIRED" or "pairing required" in low or "pending approval" in low:
            request_id = details.get("requestId")
            if not isinstance(request_id, str):
                import re

                m = re.search(r"requestId:\s*([A-Za-z0-9._:-]+)", msg)
                request_id = m.group(1) if m else None
            if request_id:
                return ForbiddenError(
                    f"OpenClaw's gateway at {self.url} has not approved sessiontool's device yet "
                    f"(pairing request {request_id})",
                    hint=f"on the gateway's host run: openclaw devices approve {request_id}",
                    extra={"pairingRequestId": request_id},
                )
            return ForbiddenError(
                f"OpenClaw's gateway at {self.url} asks to approve sessiontool's device ({msg})",
                hint="on the gateway's host run: openclaw devices list, then "
                "openclaw devices approve REQUEST_ID",
            )
        if code.startswith("AUTH_") or "unauthorized" in low or "token mismatch" in low:
            where = self.secret.source if self.secret else "no shared secret was found"
            return ForbiddenError(
                f"OpenClaw's gateway at {self.url} refused sessiontool's credentials "
                f"({code or msg}; the secret came from {where})",
                hint="check gateway.auth in openclaw.json, or OPENCLAW_GATEWAY_TOKEN / "
                "OPENCLAW_GATEWAY_PASSWORD",
            )
        return GatewayError(f"OpenClaw's gateway at {self.url} refused the connection: {msg}")

    def _scrub(self, text: str) -> str:
        if self.secret is not None and self.secret.value:
            text = text.replace(self.secret.value, "***")
        return text


def _code_extra(exc: _RpcError) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if exc.code:
        out["gatewayCode"] = exc.code
    return out


_VERSION: list[str] = []


def _version() -> str:
    if not _VERSION:
        try:
            from importlib.metadata import version

            _VERSION.append(version("sessiontool"))
        except Exception:  # noqa: BLE001
            _VERSION.append("0")
    return _VERSION[0]


# -- one client per gateway URL, per process -------------------------------------------------

_clients: dict[str, Client] = {}


def client(url: str, secret: Secret | None, paths: StatePaths, loopback: bool) -> Client:
    c = _clients.get(url)
    if c is None:
        c = _clients[url] = Client(url, secret, paths, loopback)
    return c


def close_all() -> None:
    for c in _clients.values():
        c.drop()
