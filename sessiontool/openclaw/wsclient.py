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
silently paired on loopback, and keeps the device token the gateway issues. `wss://` is TLS as
OpenClaw's client does it (tls.py): the certificate checked, or pinned by
`gateway.remote.tlsFingerprint`; a wrong one is refused (exit 4) before anything is sent.

Failures, each with what to do: a protocol sessiontool does not speak → ProtocolMismatch (the
caller may fall back to the `openclaw` CLI of that version); pairing required → exit 4 with the
request id and the `openclaw devices approve` line (a device approved for fewer scopes: the
same, naming them); bad credentials → exit 4, naming where the
secret came from, never its value; `UNAVAILABLE` + `retryAfterMs` → waited out and retried.
An `agent` turn whose socket drops after the gateway accepted it is re-attached with
`agent.wait {runId}` (the run id is the turn's idempotency key), never sent again.

The wire itself (handshake, frames, the errors worded for the user) is wsconnection.py; this
module is the policy over it (websocket.py the WebSocket under both, imported inside functions:
reads of a local state dir never load it).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from sessiontool.errors import SessiontoolError
from sessiontool.openclaw.secrets import Secret
from sessiontool.openclaw.wsconnection import (
    PROTOCOL,
    Connection,
    Dropped,
    GatewayError,
    GatewayTimeout,
    Hello,
    ProtocolMismatch,
    RpcError,
    TurnHooks,
    code_extra,
    open_connection,
)
from sessiontool.state.paths import StatePaths

__all__ = [
    "ADMIN",
    "READ",
    "WRITE",
    "Client",
    "GatewayError",
    "GatewayTimeout",
    "Hello",
    "ProtocolMismatch",
    "client",
    "close_all",
    "scopes_for",
]

READ, WRITE, ADMIN = "operator.read", "operator.write", "operator.admin"
CONNECT_BUDGET_S = 60.0  # UNAVAILABLE (startup sidecars) retried for this long
REATTACH_LIMIT = 5
WAIT_CHUNK_MS = 30_000
ABORT_TIMEOUT_S = 5.0

READ_METHODS = frozenset(
    {"status", "health", "sessions.list", "sessions.get", "sessions.search", "chat.history"}
    | {"sessions.messages.subscribe", "sessions.usage", "agents.list", "config.get"}
)
PATCH_WRITE_FIELDS = frozenset(
    {"key", "agentId", "expectedSessionId", "label", "autoLabel", "icon", "color", "category"}
    | {"pinned", "archived", "unread", "model", "thinkingLevel", "fastMode"}
)


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
    if method == "tools.invoke":  # OpenClaw's own tools (own_tools.py); owner-only ones: admin
        if params.get("name") in ("cron", "gateway", "nodes"):
            return frozenset({ADMIN})
        return frozenset({WRITE})
    return frozenset({ADMIN})  # OpenClaw's default for a method it does not classify


def _covered(needed: frozenset[str], granted: frozenset[str]) -> bool:
    if ADMIN in granted:
        return True
    if WRITE in granted:
        granted = granted | {READ}
    return needed <= granted


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
    tls_fingerprint: str | None = None  # as configured (gateway.remote.tlsFingerprint)

    def want(self, scopes: frozenset[str] | set[str]) -> None:
        """Scopes a later call of this process will need, asked for at the first connect, so
        that one connection serves the whole command. A connection already open without them
        (one a forked worker was handed: hand_over) is replaced now, before the first call,
        rather than in the middle of the run."""
        self.wanted |= set(scopes)
        if self.conn is not None and not _covered(frozenset(self.wanted), self.conn.granted):
            self.conn.ws.close(timeout=0)
            self.conn = None

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
        hooks: TurnHooks | None = None,
    ) -> dict[str, Any]:
        """One method over this process's connection. An `agent` turn with `expect_final`:
        the gateway's `accepted` answer goes to the hooks' `accepted`; if the socket drops after
        it, the turn is re-attached (`agent.wait` with the gateway's run id), never sent again;
        with `abort_turn`, a wait given up (our deadline, an abort, Ctrl-C, what the hooks'
        `event` raised) asks the gateway to stop the turn on this same connection, the one
        OpenClaw lets stop it (the run's owner), and the hooks' `aborted` learns whether it did."""
        needed = scopes_for(method, params)
        deadline = time.monotonic() + timeout_s
        accepted: dict[str, Any] = {}

        def took(payload: dict[str, Any]) -> None:
            accepted.update(payload)
            if hooks is not None and hooks.accepted is not None:
                hooks.accepted(payload)

        seen = TurnHooks(took, None, hooks.event if hooks is not None else None)

        drops = 0
        while True:
            conn = self._connection(needed)
            remaining = max(0.1, deadline - time.monotonic())
            try:
                if accepted and method == "agent":
                    return self._reattach(conn, method, accepted, deadline)
                return conn.request(
                    method,
                    params,
                    timeout_s=remaining,
                    expect_final=expect_final,
                    hooks=seen,
                )
            except Dropped as exc:
                self.drop()
                drops += 1
                if drops > REATTACH_LIMIT or time.monotonic() >= deadline:
                    raise GatewayError(
                        f"gateway {method}: the connection to {self.url} kept closing"
                    ) from exc
                # Not accepted: sent again, same idempotency key (the gateway dedupes it).
                # Accepted: the work goes on without us; the loop re-attaches to it.
            except RpcError as exc:
                after = exc.retry_after_s()
                if after is not None and time.monotonic() + after < deadline:
                    time.sleep(after)
                    continue
                raise GatewayError(f"gateway {method}: {exc}", extra=code_extra(exc)) from exc
            except BaseException:
                # Our deadline, an abort (SIGUSR1 → RunAborted), Ctrl-C: stop the turn we own.
                if abort_turn and accepted:
                    stopped = self._abort_turn(conn, params, accepted)
                    if hooks is not None and hooks.aborted is not None:
                        hooks.aborted(stopped)
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
            except RpcError as exc:
                after = exc.retry_after_s()
                if after is not None and time.monotonic() + after < deadline:
                    time.sleep(after)
                    continue
                if exc.detail_code == "DEVICE_IDENTITY_REQUIRED" and not use_device:
                    use_device = True
                    continue
                if (
                    exc.detail_code == "AUTH_DEVICE_TOKEN_MISMATCH"
                    and self.secret is not None  # without it no token gets in: pairing.py says so
                    and not retried_token
                ):
                    from sessiontool.openclaw import device

                    device.load_or_create(self.paths).forget(self.url)
                    retried_token = True
                    continue
                from sessiontool.openclaw import pairing

                mine = self.paths if use_device else None
                raise pairing.refused(
                    self.url, self.secret, exc, asked=scopes, device_of=mine
                ) from None
            if not use_device and not _covered(scopes, conn.granted):
                # The device-less path was let in with its scopes cleared: present a device.
                conn.close()
                use_device = True
                continue
            self.use_device = use_device
            return conn

    def _handshake(
        self, scopes: frozenset[str], use_device: bool, protocol: int = PROTOCOL
    ) -> Connection:
        self.connects += 1
        return open_connection(
            self.url,
            self.secret,
            self.paths,
            scopes,
            use_device=use_device,
            protocol=protocol,
            pin=self.tls_fingerprint,
        )

    def probe_version(self, protocol: int) -> str | None:
        """The version an older gateway states in its hello-ok when asked in its own protocol
        (3: 2026.1 to 2026.5.27), only to tell whether it takes sessions.json.lock; nothing
        else is sent on that connection. None when it will not say."""
        try:
            conn = self._handshake(frozenset({READ}), False, protocol)
        except (SessiontoolError, RpcError):
            return None
        conn.close()
        return conn.hello.version


# -- one client per gateway URL, per process -------------------------------------------------

_clients: dict[str, Client] = {}


def client(
    url: str, secret: Secret | None, paths: StatePaths, loopback: bool, pin: str | None = None
) -> Client:
    c = _clients.get(url)
    if c is None:
        c = _clients[url] = Client(url, secret, paths, loopback, tls_fingerprint=pin)
    return c


def close_all() -> None:
    """Every connection of this process closed at once, before it forks a worker
    (runs/spawnproc.py): our close frame is sent, the gateway's answer not waited for (that round
    trip was a spawn command's own time, up to a second on a busy gateway); the gateway ends the
    socket as it does a process's that exits."""
    for c in _clients.values():
        if c.conn is not None:
            c.conn.ws.close(timeout=0)
            c.conn = None


HANDED_MIN_FD = 4  # a forked worker's descriptors 0-3 are its stdio and its lane lock


def hand_over() -> int | None:
    """Before a worker is forked from this process (runs/spawnproc.py): the descriptor of this
    process's one open gateway connection, which the forked worker goes on using (the spawn's
    handshake is not made twice: a round trip and, with a device, a signature). None, every
    connection closed, when there is not exactly one, or its descriptor is one the worker
    reassigns."""
    held = [c.conn for c in _clients.values() if c.conn is not None]
    fd = _above_stdio(held[0].ws) if len(held) == 1 else None
    if fd is None:
        close_all()
    return fd


def _above_stdio(ws: Any) -> int | None:
    """The connection's descriptor, moved to HANDED_MIN_FD or above if it is lower (a plain
    socket only: a TLS one is not moved, so not handed over)."""
    import socket

    sock = ws.sock
    fd = sock.fileno()
    if fd >= HANDED_MIN_FD:
        return int(fd)
    if type(sock) is not socket.socket:
        return None
    import fcntl

    moved = socket.socket(fileno=fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, HANDED_MIN_FD))
    moved.settimeout(sock.gettimeout())
    sock.close()
    ws.sock = moved
    return int(moved.fileno())


def let_go() -> None:
    """After that fork, in the process that handed the connection over: it is the worker's now,
    so it is forgotten here without a close frame (only this process's descriptor closed)."""
    for c in _clients.values():
        if c.conn is not None:
            try:
                c.conn.ws.sock.close()
            except OSError:
                pass
            c.conn = None
