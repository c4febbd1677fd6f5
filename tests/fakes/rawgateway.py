"""A hostile OpenClaw gateway with every byte written by hand: a raw socket server (127.0.0.1,
one thread) that speaks the HTTP upgrade and the gateway's handshake (`connect.challenge` →
`connect` → `hello-ok`) correctly, then does what the test's script says, frame by frame: what a
library server never sends on purpose (a masked or RSV1 frame, an impossible length, text that is
not UTF-8), floods (pings, empty continuations, events), a frame nested 100,000 deep, an answer of
hundreds of megabytes streamed without ever being held whole.

`Peer` is the server's end of one connection; it reads the client's frames and unmasks them
itself, so what sessiontool sends is checked byte by byte. `serving(script)` runs `script(peer)`
for every connection that sends a byte (the CLI's TCP probe is skipped) and reaps its thread when
the block ends; an assertion error inside a script fails the test."""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA


def sframe(op: int, payload: bytes, fin: bool = True, rsv: int = 0, mask: bool = False) -> bytes:
    """A server frame, unmasked unless `mask` (a protocol error from a server)."""
    n = len(payload)
    head = bytes([(0x80 if fin else 0) | rsv | op])
    m = 0x80 if mask else 0
    if n < 126:
        head += bytes([m | n])
    elif n < 65536:
        head += bytes([m | 126]) + struct.pack("!H", n)
    else:
        head += bytes([m | 127]) + struct.pack("!Q", n)
    if mask:
        key = b"\x01\x02\x03\x04"
        return head + key + bytes(c ^ key[i % 4] for i, c in enumerate(payload))
    return head + payload


def head(op: int, n: int, fin: bool = True) -> bytes:
    """Only the header of an unmasked server frame of `n` bytes (its payload streamed after)."""
    b0 = bytes([(0x80 if fin else 0) | op])
    if n < 126:
        return b0 + bytes([n])
    if n < 65536:
        return b0 + bytes([126]) + struct.pack("!H", n)
    return b0 + bytes([127]) + struct.pack("!Q", n)


def close_payload(code: int, reason: str = "") -> bytes:
    return struct.pack("!H", code) + reason.encode()


def nested(depth: int) -> bytes:
    """A JSON value nested `depth` arrays deep, as a gateway's answer would carry it."""
    return b'{"type":"res","id":"x","ok":true,"payload":' + b"[" * depth + b"]" * depth + b"}"


class Peer:
    """The server's end of one connection: the upgrade request it read, frames both ways."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn = conn
        self.buf = b""
        self.request = ""
        conn.settimeout(20)

    def _read(self, n: int) -> bytes:
        while len(self.buf) < n:
            data = self.conn.recv(65536)
            if not data:
                raise EOFError(f"client closed with {len(self.buf)} of {n} bytes read")
            self.buf += data
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read_request(self) -> str:
        while b"\r\n\r\n" not in self.buf:
            data = self.conn.recv(65536)
            if not data:
                raise EOFError("no upgrade request")
            self.buf += data
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        self.request = head.decode()
        return self.request

    def header(self, name: str) -> str | None:
        for line in self.request.split("\r\n")[1:]:
            k, _, v = line.partition(":")
            if k.strip().lower() == name.lower():
                return v.strip()
        return None

    def upgrade(self, status: str = "101 Switching Protocols", accept: str | None = None) -> None:
        """Read the request, answer it (a right Sec-WebSocket-Accept unless `accept`)."""
        self.read_request()
        key = self.header("Sec-WebSocket-Key") or ""
        right = base64.b64encode(hashlib.sha1(key.encode() + GUID).digest()).decode()
        self.send_raw(
            f"HTTP/1.1 {status}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Accept: {right if accept is None else accept}\r\n\r\n".encode()
        )

    def send_raw(self, data: bytes) -> None:
        self.conn.sendall(data)

    def send_json(self, obj: Any) -> None:
        self.send_raw(sframe(OP_TEXT, json.dumps(obj).encode()))

    def read_frame(self) -> tuple[int, bool, bytes]:
        """A client frame (opcode, fin, unmasked payload); a client frame must be masked."""
        b0, b1 = self._read(2)
        assert b1 & 0x80, "a client frame without the mask bit"
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", self._read(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", self._read(8))[0]
        key = self._read(4)
        data = bytes(c ^ key[i % 4] for i, c in enumerate(self._read(n)))
        return b0 & 0x0F, bool(b0 & 0x80), data

    def read_request_frame(self) -> dict[str, Any]:
        """The client's next request (its pongs skipped); EOFError when it closes instead."""
        while True:
            op, _, data = self.read_frame()
            if op == OP_TEXT:
                frame: dict[str, Any] = json.loads(data)
                return frame
            if op == OP_CLOSE:
                raise EOFError(f"the client closed: {data!r}")
            assert op == OP_PONG, f"opcode {op} where a request was expected"

    def challenge(self) -> None:
        """The upgrade and the `connect.challenge` event: what every gateway sends first."""
        self.upgrade()
        ts = int(time.time() * 1000)
        self.send_json(
            {"type": "event", "event": "connect.challenge", "payload": {"nonce": "n", "ts": ts}}
        )

    def hello(self, scopes: tuple[str, ...] = ("operator.read", "operator.write")) -> None:
        """The whole handshake, answered with `hello-ok` granting `scopes` (a device-less cli
        on loopback keeps what it asked for)."""
        self.challenge()
        req = self.read_request_frame()
        assert req["method"] == "connect", req
        asked = req["params"].get("scopes") or []
        granted = [s for s in asked if s in scopes] if scopes else asked
        payload = {
            "type": "hello-ok",
            "protocol": 4,
            "server": {"version": "2026.9.6", "connId": "1"},
            "features": {"methods": ["sessions.list", "chat.history", "config.get"]},
            "snapshot": {},
            "auth": {"role": "operator", "scopes": granted, "method": "token"},
            "policy": {"maxPayload": 26214400, "tickIntervalMs": 30000},
        }
        self.send_json({"type": "res", "id": req["id"], "ok": True, "payload": payload})

    def answer(self, req: dict[str, Any], payload: Any) -> None:
        self.send_json({"type": "res", "id": req["id"], "ok": True, "payload": payload})

    def until_closed(self, timeout: float = 20) -> list[tuple[int, bytes]]:
        """The client's frames until it closes the socket: (opcode, payload) each."""
        self.conn.settimeout(timeout)
        got: list[tuple[int, bytes]] = []
        try:
            while True:
                op, _, data = self.read_frame()
                got.append((op, data))
        except (EOFError, OSError):
            return got


@contextmanager
def serving(script: Callable[[Peer], None]) -> Iterator[int]:
    """A port on 127.0.0.1; each connection that sends a byte runs `script(peer)` in the server's
    thread. When the block ends the server stops, its thread is joined, and the first error a
    script raised (its assertions included) is raised here."""
    errors: list[BaseException] = []
    done = threading.Event()
    srv = socket.create_server(("127.0.0.1", 0))
    srv.settimeout(0.2)  # accept() wakes to see the block end

    def loop() -> None:
        while not done.is_set():
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                peer = Peer(conn)
                try:
                    conn.settimeout(20)
                    first = conn.recv(65536, socket.MSG_PEEK)
                    if not first:
                        continue  # a probe: connected and closed
                    script(peer)
                except (EOFError, BrokenPipeError, ConnectionResetError):
                    pass  # the client closed or gave up on us: what a hostile server is for
                except BaseException as exc:  # noqa: BLE001 - handed to the test
                    errors.append(exc)

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    try:
        yield int(srv.getsockname()[1])
    finally:
        done.set()
        t.join(60)
        srv.close()
        assert not t.is_alive(), "the raw gateway's thread did not end"
    if errors:
        raise errors[0]


# -- a gateway's answers, hostile where a test (or the fuzz) says ------------------------------

KEY = "agent:main:main"
Answer = Callable[[Peer, dict[str, Any]], None]


KEY = "agent:main:main"


def row(key: str = KEY, **more: Any) -> dict[str, Any]:
    return {"key": key, "agentId": "main", "sessionId": "s1", "updatedAt": 1_795_000_000_000} | more


def listed(*rows: dict[str, Any]) -> dict[str, Any]:
    return {"count": len(rows), "sessions": list(rows)}


def history(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"sessionKey": KEY, "sessionId": "s1", "messages": list(messages), "sessionInfo": row()}


def gateway(**answers: Answer) -> Callable[[Peer], None]:
    """A gateway script: the handshake, then each request answered by `answers[method]`
    (`config.get` with nothing, `sessions.list` with one session, `chat.history` with one
    message, unless the test says otherwise), until the client closes."""
    plain: dict[str, Any] = {
        "config.get": {},
        "sessions.list": listed(row()),
        "chat.history": history({"role": "user", "content": "hi", "timestamp": 1}),
    }

    def script(p: Peer) -> None:
        p.hello()
        while True:
            req = p.read_request_frame()
            method = req["method"]
            if method in answers:
                answers[method](p, req)
            else:
                p.answer(req, plain.get(method, {}))

    return script


def raw_answer(body: bytes) -> Answer:
    """Answer with these bytes as the `res` frame's text, the request's id put in."""

    def answer(p: Peer, req: dict[str, Any]) -> None:
        p.send_raw(
            sframe(OP_TEXT, body.replace(b'"id":"x"', b'"id":' + json.dumps(req["id"]).encode()))
        )

    return answer


# What the fuzz draws from (tests/test_fuzz_hostile_state.py): each a way a gateway can be broken
# or hostile, in the handshake or in the answer to one method, with junk of the fuzz's own.
FOREIGN = "\u202egnp.exe\u202c \x9b2J \x1b[31m \x85 \u2066x\u2069 \u200f\n"
BROKEN_FRAMES = [
    sframe(OP_TEXT, b'{"a":1}', mask=True),
    sframe(OP_TEXT, b"{}", rsv=0x40),
    sframe(OP_TEXT, b'{"a":"\xff\xfe"}'),
    bytes([0x81, 127]) + struct.pack("!Q", 1 << 63),
    sframe(0x3, b"opcode 3"),
    sframe(OP_CONT, b"continuing nothing"),
    sframe(OP_PING, b"p" * 10, fin=False),
    sframe(OP_CLOSE, b"\x03"),
]


def _pings_unread(p: Peer, req: dict[str, Any] | None = None) -> None:
    batch = sframe(OP_PING, b"p" * 125) * 500
    while True:  # until the client gives up (BrokenPipe ends the script)
        p.send_raw(batch)


def _empty_continuations(p: Peer, req: dict[str, Any]) -> None:
    p.send_raw(head(OP_TEXT, 1, fin=False) + b"{")
    batch = head(OP_CONT, 0, fin=False) * 65536
    while True:
        p.send_raw(batch)


def _too_big(p: Peer, req: dict[str, Any]) -> None:
    p.send_raw(head(OP_TEXT, 300_000_000) + b'{"type":"res","id":' + json.dumps(req["id"]).encode())
    chunk = b"x" * (1 << 20)
    while True:
        p.send_raw(chunk)


def hostile(rng: Any, junk: Callable[[Any], Any]) -> tuple[str, Callable[[Peer], None]]:
    """A hostile gateway drawn with `rng` (junk values from `junk(rng)`): its name and its
    script. Every one of them ends (the client closes, or the script does) within the
    client's own deadlines, set short by the caller (OPENCLAW_HANDSHAKE_TIMEOUT_MS)."""
    method = rng.choice(["config.get", "sessions.list", "chat.history"])
    kind = rng.choice(
        [
            "broken-frame-in-handshake",
            "broken-frame-in-answer",
            "close-reason",
            "pings-unread",
            "nested",
            "too-big",
            "empty-continuations",
            "error-answer",
            "junk-payload",
            "junk-rows",
            "fragments-and-pings",
        ]
    )
    name = f"{kind} ({method})"
    broken = rng.choice(BROKEN_FRAMES)
    answers: dict[str, Answer] = {}

    if kind == "broken-frame-in-handshake":
        name = "broken-frame-in-handshake"

        def script(p: Peer) -> None:
            p.upgrade()
            p.send_raw(broken)
            p.until_closed()

        return name, script
    if kind == "close-reason":
        name = "close-reason"
        reason = f"{rng.choice(['unauthorized: ', 'pairing required ', ''])}{FOREIGN}"
        code = rng.choice([1008, 1002, 4000, 1011])

        def closes(p: Peer) -> None:
            p.challenge()
            p.read_request_frame()
            text = reason.encode()[:123].decode("utf-8", "ignore")
            p.send_raw(sframe(OP_CLOSE, close_payload(code, text)))
            p.until_closed()

        return name, closes
    if kind == "pings-unread":
        name = "pings-unread"

        def floods(p: Peer) -> None:
            p.upgrade()
            _pings_unread(p)

        return name, floods
    if kind == "broken-frame-in-answer":

        def breaks(p: Peer, req: dict[str, Any]) -> None:
            p.send_raw(broken)
            p.until_closed()

        answers[method] = breaks
    elif kind == "nested":
        depth = rng.choice([100_000, 990, 150])
        answers[method] = raw_answer(nested(depth))
    elif kind == "too-big":
        answers[method] = _too_big
    elif kind == "empty-continuations":
        answers[method] = _empty_continuations
    elif kind == "error-answer":
        error = rng.choice([{"code": junk(rng), "message": f"no {FOREIGN}"}, junk(rng)])
        answers[method] = lambda p, req: p.send_json(
            {"type": "res", "id": req["id"], "ok": False, "error": error}
        )
    elif kind == "junk-payload":
        payload = junk(rng)
        answers[method] = lambda p, req: p.send_json(
            {"type": "res", "id": req["id"], "ok": True, "payload": payload}
        )
    elif kind == "junk-rows":
        field = rng.choice(["key", "agentId", "sessionId", "updatedAt", "label", "model", "origin"])
        bad_row = row(label=f"lab{FOREIGN}") | {field: junk(rng)}
        bad_msg = {rng.choice(["role", "content", "timestamp", "usage", "__openclaw"]): junk(rng)}
        message = {"role": "assistant", "content": FOREIGN, "timestamp": 1, "model": FOREIGN}
        answers["sessions.list"] = lambda p, req: p.answer(req, listed(bad_row, row()))
        answers["chat.history"] = lambda p, req: p.answer(req, history(message | bad_msg))
    else:  # fragments-and-pings: a good answer in pieces, pings between them

        def pieces(p: Peer, req: dict[str, Any]) -> None:
            plain = listed(row()) if req["method"] == "sessions.list" else {}
            text = json.dumps({"type": "res", "id": req["id"], "ok": True, "payload": plain})
            cut = len(text) // 2
            p.send_raw(
                sframe(OP_TEXT, text[:cut].encode(), fin=False)
                + sframe(OP_PING, b"ping")
                + sframe(OP_CONT, text[cut:].encode())
            )

        answers[method] = pieces
    return name, gateway(**answers)
