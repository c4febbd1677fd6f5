"""One WebSocket connection to OpenClaw's gateway: opening it (the socket, the challenge, the
`connect` request with the shared secret or sessiontool's device, `hello-ok` read into Hello),
requests and their answers on it, and the errors either ends in, worded for the user.

Apart from the per-process client (wsclient.py), which decides when to connect, with which
scopes, and what to retry or re-attach: this module speaks the gateway's protocol, that one
keeps the policy. The WebSocket under it is websocket.py, imported inside functions: reads of a
local state dir never load it."""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sessiontool import __version__
from sessiontool.errors import ForbiddenError, SessiontoolError

# The errors a connection ends in live in gateway_errors.py; importers of this module find them
# here too.
from sessiontool.openclaw.gateway_errors import (
    BadFrame as BadFrame,
)
from sessiontool.openclaw.gateway_errors import (
    Dropped as Dropped,
)
from sessiontool.openclaw.gateway_errors import (
    GatewayError as GatewayError,
)
from sessiontool.openclaw.gateway_errors import (
    GatewayTimeout as GatewayTimeout,
)
from sessiontool.openclaw.gateway_errors import (
    HandshakeTimeout as HandshakeTimeout,
)
from sessiontool.openclaw.gateway_errors import (
    ProtocolMismatch as ProtocolMismatch,
)
from sessiontool.openclaw.gateway_errors import (
    RpcError as RpcError,
)
from sessiontool.openclaw.secrets import Secret
from sessiontool.openclaw_releases import PROTOCOLS, named, newest_protocol
from sessiontool.state.paths import StatePaths

PROTOCOL = newest_protocol()  # the protocols and their releases: openclaw_releases.PROTOCOLS
CLIENT_ID = "cli"
CLIENT_MODE = "cli"
ROLE = "operator"
# A connection attempt (TCP, TLS, the upgrade, the challenge, `connect` → hello-ok) ends within
# this, as OpenClaw's own client's does (startGatewayConnectTimeout; the gateway closes a socket
# whose handshake is not done in the same 15 s), and OPENCLAW_HANDSHAKE_TIMEOUT_MS changes it
# for both, as for OpenClaw's.
CONNECT_TIMEOUT_S = 15.0
# hello-ok.policy.maxPayload (25 MiB on 2026.9.6) bounds the gateway's frames, and OpenClaw's own
# client refuses a message over 25 MiB (chat.history keeps its answer under it too); a message
# past this is no answer of the gateway's: the connection is closed rather than read. A command
# holds at most about three copies of one (the bytes, the text, what the text says).
MAX_MESSAGE_BYTES = 32 * 1024 * 1024
MAX_DEPTH = 100  # JSON nesting of a gateway frame (a real one nests about a dozen levels)
# Pings (and pongs) in a row with no message between, once the handshake is done: the gateway
# ticks every 30 s (hello-ok.policy.tickIntervalMs) and pings far less often than it ticks, so a
# run of this many is a flood, ended at once instead of answered until the call's deadline.
MAX_CONTROL_RUN = 256


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
    """An open, authenticated socket and what its hello-ok granted."""

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
        hooks: TurnHooks | None = None,
    ) -> dict[str, Any]:
        """One call: its (final) payload. With `expect_final`, an `accepted` answer first goes
        to the hooks' `accepted` (it carries the gateway's own run id); their `event` sees each
        event frame that arrives meanwhile (what it raises ends the wait). Raises Dropped."""
        from sessiontool.openclaw.websocket import ConnectionClosed, ProtocolError

        self._n += 1
        rid = f"{self._n}:{uuid.uuid4()}"
        deadline = time.monotonic() + timeout_s
        req = json.dumps({"type": "req", "id": rid, "method": method, "params": params})
        try:
            self.ws.send(req, deadline)
        except ConnectionClosed as exc:
            raise Dropped() from exc
        silence = 2 * self.hello.tick_s + 5
        heard = time.monotonic()
        while True:
            now = time.monotonic()
            remaining = deadline - now
            if remaining <= 0:
                raise GatewayTimeout(f"gateway {method}: no answer in {timeout_s:g}s")
            if now - heard > silence:
                self.close()
                raise Dropped()  # not even a tick: the connection is dead
            try:
                raw = self.ws.recv(timeout=min(remaining, silence))
            except TimeoutError:
                continue
            except ProtocolError as exc:  # the message limit too: no answer of a gateway's
                raise BadFrame(f"gateway {method}: {exc}") from None
            except ConnectionClosed as exc:
                raise Dropped() from exc
            heard = time.monotonic()
            frame = parse_frame(raw, f"gateway {method}")
            if frame.get("type") != "res" or frame.get("id") != rid:
                _heard(hooks, frame)
                continue  # events, and answers to nothing we wait for
            if frame.get("ok") is not True:
                err = frame.get("error")
                raise RpcError(err if isinstance(err, dict) else {"message": str(err)})
            payload = frame.get("payload")
            payload = payload if isinstance(payload, dict) else {}
            if expect_final and payload.get("status") == "accepted":
                if hooks is not None and hooks.accepted is not None:
                    hooks.accepted(payload)
                continue
            return payload

    def close(self) -> None:
        try:
            self.ws.close()
        except Exception:  # noqa: BLE001 - closing a dead socket
            pass


@dataclass(frozen=True)
class TurnHooks:
    """What the caller of an `agent` turn learns while it runs: `accepted`, the gateway's
    accepted answer (its own run id); `aborted`, whether a turn given up was stopped in the
    gateway (wsclient); `event`, each event frame while the answer is awaited (what it raises
    ends the wait: the budget's stop, runs/gateway_budget.py)."""

    accepted: Callable[[dict[str, Any]], None] | None = None
    aborted: Callable[[bool], None] | None = None
    event: Callable[[dict[str, Any]], None] | None = None


def _heard(hooks: TurnHooks | None, frame: dict[str, Any]) -> None:
    if hooks is not None and hooks.event is not None and frame.get("type") == "event":
        hooks.event(frame)


def parse_frame(raw: Any, where: str) -> dict[str, Any]:
    """A frame as a dict ({} for what is no JSON object: skipped as no frame of the protocol's).
    A message nested deeper than MAX_DEPTH is no gateway's (its frames nest a dozen levels):
    BadFrame, said by `where`, rather than read by code that recurses (json.loads stops near
    Python's recursion limit; what it let through could stop a later json.dumps)."""
    try:
        frame = json.loads(raw)
    except RecursionError:
        frame = _TOO_DEEP
    except (ValueError, TypeError):
        return {}
    if frame is _TOO_DEEP or _deeper_than(frame, MAX_DEPTH):
        raise BadFrame(
            f"{where}: a message nested more than {MAX_DEPTH} levels deep, which no OpenClaw "
            "gateway sends"
        )
    return frame if isinstance(frame, dict) else {}


_TOO_DEEP = object()


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether JSON containers nest more than `limit` levels in `value`, level by level (no
    recursion; the time is one look at each container's items)."""
    level = [value] if isinstance(value, dict | list) else []
    for _ in range(limit):
        nxt: list[Any] = []
        for v in level:
            items = v.values() if isinstance(v, dict) else v
            nxt += [x for x in items if isinstance(x, dict | list)]
        if not nxt:
            return False
        level = nxt
    return True


def open_connection(
    url: str,
    secret: Secret | None,
    paths: StatePaths,
    scopes: frozenset[str],
    use_device: bool,
    protocol: int = PROTOCOL,
    pin: str | None = None,
) -> Connection:
    """A connection that has passed the handshake with these scopes, authenticated with the
    shared secret or (`use_device`) sessiontool's device. Raises RpcError when the gateway
    refuses the `connect` request (the caller decides whether to retry), the error to show when
    it closes the socket on us (or, wss://, when its certificate is not the one expected: tls.py,
    before anything is sent), GatewayError when it cannot be reached."""
    from sessiontool.openclaw.websocket import ConnectionClosed

    held = _held.get(url)
    if held is not None and time.monotonic() < held[0]:
        raise held[1].with_traceback(None)  # the attempt just made, not made again at once
    at = _Attempt(url, connect_timeout_s())
    try:
        ws = _socket(at, pin)
        try:
            return _hello(
                ws,
                at,
                secret,
                paths,
                scopes=sorted(scopes),
                use_device=use_device,
                protocol=protocol,
            )
        except BaseException as exc:
            ws.close(timeout=at.left())
            if isinstance(exc, ConnectionClosed):
                raise _closed(at, secret, exc) from None
            raise
    except (BadFrame, HandshakeTimeout) as exc:
        # An attempt that ran out its deadline, or met a gateway that breaks the protocol, is
        # not repeated within the next CONNECT_TIMEOUT_S: a command's next call (its config
        # read failed, then its own call) says the same at once instead of waiting it again.
        _held[url] = (time.monotonic() + at.budget, exc)
        raise


# Connection attempts that failed slowly or on a protocol error, by URL: (until, the error).
_held: dict[str, tuple[float, GatewayError]] = {}


def connect_timeout_s() -> float:
    """The deadline of one connection attempt: OPENCLAW_HANDSHAKE_TIMEOUT_MS (a positive whole
    number of milliseconds, as OpenClaw's client reads it), else CONNECT_TIMEOUT_S."""
    import os

    raw = os.environ.get("OPENCLAW_HANDSHAKE_TIMEOUT_MS", "").strip().removeprefix("+")
    if raw.isdigit() and raw.isascii() and int(raw) > 0:
        return int(raw) / 1000
    return CONNECT_TIMEOUT_S


class _Attempt:
    """One connection attempt: its URL and the deadline every step of it keeps."""

    def __init__(self, url: str, budget: float) -> None:
        self.url = url
        self.budget = budget
        self.deadline = time.monotonic() + budget

    def left(self, most: float = 1.0) -> float:
        """What is left of the deadline, at most `most` (a failed attempt's close waits no
        longer for the server's)."""
        return max(0.0, min(most, self.deadline - time.monotonic()))


def _socket(at: _Attempt, pin: str | None) -> Any:
    """The WebSocket, open (TCP, TLS, the upgrade) within the attempt's deadline."""
    from sessiontool.openclaw.websocket import WebSocketError, connect

    url = at.url
    # No keepalive of ours: the gateway pings (answered as we read) and ticks; a silence
    # longer than two ticks is a dead connection (Connection.request), as OpenClaw's client
    # has it. No compression offered: the gateway never negotiates permessage-deflate.
    ctx = None
    if url.startswith("wss://") or pin:
        from sessiontool.openclaw import tls

        ctx = tls.context(url, pin)
    try:
        return connect(
            url,
            ssl_context=ctx,
            open_timeout=at.budget,
            max_size=MAX_MESSAGE_BYTES,
            user_agent=f"sessiontool/{__version__}",
        )
    except TimeoutError as exc:
        raise HandshakeTimeout(
            f"cannot connect to OpenClaw's gateway at {url}: {exc} ({at.budget:g}s)"
        ) from exc
    except (OSError, WebSocketError) as exc:
        if ctx is not None:
            from sessiontool.openclaw import tls

            tls.refuse(url, exc)  # a certificate not trusted, or not the pinned one: exit 4
        raise GatewayError(f"cannot connect to OpenClaw's gateway at {url}: {exc}") from exc


def _closed(at: _Attempt, secret: Secret | None, exc: Any) -> SessiontoolError:
    """The handshake's socket closed (a websocket.ConnectionClosed) as the error to show: a
    protocol error named, a socket that ended or read nothing, or the gateway's refusal."""
    from sessiontool.openclaw.websocket import ProtocolError

    if isinstance(exc, ProtocolError):
        return BadFrame(f"OpenClaw's gateway at {at.url}: {exc}")
    if exc.code is None:  # no close frame: the socket ended, or our pongs went unread
        lost = HandshakeTimeout if time.monotonic() >= at.deadline else GatewayError
        return lost(f"OpenClaw's gateway at {at.url}: {exc} (during the handshake)")
    reason = exc.reason or f"connection closed with code {exc.code}"
    return refused(at.url, secret, RpcError({"message": reason}))


def _hello(
    ws: Any,
    at: _Attempt,
    secret: Secret | None,
    paths: StatePaths,
    scopes: list[str],
    use_device: bool,
    protocol: int,
) -> Connection:
    url = at.url
    challenge = _challenge(ws, at)
    nonce, ts = challenge.get("nonce"), challenge.get("ts")
    auth: dict[str, str] = {}
    sig_token = ""
    how = "none"
    if secret is not None:
        auth[secret.field] = secret.value
        how = f"{secret.field} ({secret.source})"
        if secret.field == "token":
            sig_token = secret.value
    platform = sys.platform
    family = {"linux": "Linux", "darwin": "Mac"}.get(platform, platform)
    params: dict[str, Any] = {
        "minProtocol": protocol,
        "maxProtocol": protocol,
        "client": {
            "id": CLIENT_ID,
            "version": __version__,
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

        dev = device.load_or_create(paths)
        stored = dev.token_for(url)
        if stored and "token" not in auth:
            auth["token"] = sig_token = stored
            how = "device token" if secret is None else how
        if not isinstance(nonce, str) or not isinstance(ts, int):
            raise GatewayError(f"OpenClaw's gateway at {url} sent no valid challenge")
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
    payload = _connect(ws, at, params)
    server = payload.get("server") if isinstance(payload.get("server"), dict) else {}
    granted = payload.get("auth") if isinstance(payload.get("auth"), dict) else {}
    assert isinstance(server, dict) and isinstance(granted, dict)
    got = [s for s in granted.get("scopes") or [] if isinstance(s, str)]
    token = granted.get("deviceToken")
    if dev is not None and isinstance(token, str) and token:
        dev.remember(url, token, got)
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
    ws.max_controls = MAX_CONTROL_RUN  # the handshake is bounded by its own deadline
    return Connection(ws, hello, frozenset(scopes))


def _connect(ws: Any, at: _Attempt, params: dict[str, Any]) -> dict[str, Any]:
    """The `connect` request and its answer's payload (hello-ok), by the attempt's deadline.
    Raises RpcError when the gateway refuses it."""
    url, deadline = at.url, at.deadline
    rid = f"0:{uuid.uuid4()}"
    ws.send(json.dumps({"type": "req", "id": rid, "method": "connect", "params": params}), deadline)
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise HandshakeTimeout(
                f"OpenClaw's gateway at {url} did not answer `connect` within the handshake's "
                f"{at.budget:g}s"
            )
        try:
            raw = ws.recv(timeout=remaining)
        except TimeoutError:
            continue
        frame = parse_frame(raw, f"OpenClaw's gateway at {url}")
        if frame.get("type") == "res" and frame.get("id") == rid:
            break
    if frame.get("ok") is not True:
        err = frame.get("error")
        raise RpcError(err if isinstance(err, dict) else {"message": str(err)})
    payload = frame.get("payload")
    return payload if isinstance(payload, dict) else {}


def _challenge(ws: Any, at: _Attempt) -> dict[str, Any]:
    url, deadline = at.url, at.deadline
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise HandshakeTimeout(
                f"{url} sent no connect.challenge within the handshake's {at.budget:g}s: "
                "is it OpenClaw's gateway?"
            )
        try:
            frame = parse_frame(ws.recv(timeout=remaining), f"OpenClaw's gateway at {url}")
        except TimeoutError:
            continue
        if frame.get("type") == "event" and frame.get("event") == "connect.challenge":
            payload = frame.get("payload")
            return payload if isinstance(payload, dict) else {}


def refused(url: str, secret: Secret | None, exc: RpcError) -> SessiontoolError:
    """A refused handshake as the error to show: what happened and what to do, without the
    secret (scrubbed from the gateway's text too, should it ever echo it)."""
    msg = str(exc)
    if secret is not None and secret.value:
        msg = msg.replace(secret.value, "***")
    code = exc.detail_code
    details = exc.error.get("details")
    details = details if isinstance(details, dict) else {}
    low = msg.lower()
    if code == "PROTOCOL_MISMATCH" or "protocol mismatch" in low:
        expected = details.get("expectedProtocol")
        return ProtocolMismatch(
            f"OpenClaw's gateway at {url} speaks protocol {expected or '?'}; "
            f"sessiontool speaks {PROTOCOL} (OpenClaw {named(PROTOCOLS[PROTOCOL])} and later)",
            expected,
        )
    if code == "PAIRING_REQUIRED" or "pairing required" in low or "pending approval" in low:
        request_id = details.get("requestId")
        if not isinstance(request_id, str):
            import re

            m = re.search(r"requestId:\s*([A-Za-z0-9._:-]+)", msg)
            request_id = m.group(1) if m else None
        if request_id and details.get("reason") == "scope-upgrade":
            # Approved for fewer scopes than this command asks (a device paired by a read).
            asked = _names(details.get("requestedScopes")) or "more scopes"
            approved = _names(details.get("approvedScopes")) or "fewer scopes"
            return ForbiddenError(
                f"OpenClaw's gateway at {url} approved sessiontool's device for {approved}; "
                f"this command needs {asked} (pairing request {request_id})",
                hint=f"on the gateway's host run: openclaw devices approve {request_id}",
                extra={"pairingRequestId": request_id},
            )
        if request_id:
            return ForbiddenError(
                f"OpenClaw's gateway at {url} has not approved sessiontool's device yet "
                f"(pairing request {request_id})",
                hint=f"on the gateway's host run: openclaw devices approve {request_id}",
                extra={"pairingRequestId": request_id},
            )
        return ForbiddenError(
            f"OpenClaw's gateway at {url} asks to approve sessiontool's device ({msg})",
            hint="on the gateway's host run: openclaw devices list, then "
            "openclaw devices approve REQUEST_ID",
        )
    if code == "AUTH_SCOPE_MISMATCH" or "scope mismatch" in low:
        # A device approved for fewer scopes (a read) asked for more (a write).
        asked = _names(details.get("requestedScopes")) or "the scopes this command needs"
        return ForbiddenError(
            f"OpenClaw's gateway at {url} approved sessiontool's device for fewer scopes than "
            f"this command asks ({asked})",
            hint="on the gateway's host run `openclaw devices list` and approve sessiontool's "
            "pending request (`openclaw devices approve REQUEST_ID`)",
        )
    if code == "AUTH_DEVICE_TOKEN_MISMATCH" or "device token mismatch" in low:
        return ForbiddenError(
            f"OpenClaw's gateway at {url} no longer takes the device token sessiontool kept for "
            "it (an `openclaw devices approve` replaces it)",
            hint="run this command once with OPENCLAW_GATEWAY_TOKEN (or "
            "OPENCLAW_GATEWAY_PASSWORD) set: the new device token is kept",
        )
    if code.startswith("AUTH_") or "unauthorized" in low or "token mismatch" in low:
        where = (
            f"the secret came from {secret.source}"
            if secret
            else "sessiontool found no shared secret to send"
        )
        # Only a secret read from an openclaw.json points there (a `--gateway URL` laptop may
        # have none).
        conf = secret.source.split()[1] if secret and secret.source.startswith("config ") else None
        return ForbiddenError(
            f"OpenClaw's gateway at {url} refused sessiontool's credentials "
            f"({code or msg}; {where})",
            hint=(f"check {conf} in openclaw.json, or set " if conf else "set ")
            + "OPENCLAW_GATEWAY_TOKEN / OPENCLAW_GATEWAY_PASSWORD to the gateway's secret",
        )
    return GatewayError(f"OpenClaw's gateway at {url} refused the connection: {msg}")


def _names(scopes: Any) -> str:
    return ", ".join(s for s in scopes or [] if isinstance(s, str))


def code_extra(exc: RpcError) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if exc.code:
        out["gatewayCode"] = exc.code
    return out
