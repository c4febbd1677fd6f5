"""The client side of RFC 6455 over `socket` + `ssl`, as much of it as OpenClaw's gateway needs:
the HTTP/1.1 upgrade (Sec-WebSocket-Accept checked), masked client frames, text and binary
messages (fragmented ones reassembled), pings answered, the close handshake, a bound on the size
of a message (its frames' headers counted, and the number of its frames), and deadlines that
nothing the server sends can stretch: a flood of pings or fragments is read only until the
caller's deadline, and the pongs it asks for are sent within it too (a server that reads nothing
fills the socket's buffer; the send then fails at the deadline instead of waiting 30 s a pong).
A server's protocol error (a masked frame, reserved bits, text that is not UTF-8, an impossible
length) closes the connection with ProtocolError naming it. No extension is offered (the gateway
never negotiates compression).

Why not `websockets`: importing it (and, through it, urllib.request, http.client, email,
logging, importlib.metadata) took ~110 ms of a ~290 ms `list --json` through the gateway, which
is a third of the command; this module costs what `socket`, `ssl` and `hashlib` cost.

Single-threaded: pings are answered whenever the caller reads (wsconnection.py reads through
every call); a connection left idle past the gateway's pong deadline is closed by it, and the
next call reconnects (wsclient.py). Nothing here logs: the `connect` frame carries a secret."""

from __future__ import annotations

import base64
import hashlib
import os
import socket
import struct
import time
from typing import Any, NoReturn
from urllib.parse import urlsplit

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
MAX_HEADERS = 65536
CHUNK = 65536
SEND_TIMEOUT_S = 30.0  # a send with no deadline of the caller's
CLOSE_SEND_S = 1.0  # a close frame is a courtesy: never waited on longer than this
MAX_FRAMES = 4096  # frames of one message (OpenClaw's gateway sends one; any is allowed up to this)
OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
DATA_OPS = (OP_CONT, OP_TEXT, OP_BINARY)
CLOSE_NORMAL, CLOSE_PROTOCOL, CLOSE_BAD_DATA, CLOSE_POLICY, CLOSE_TOO_BIG = (
    1000,
    1002,
    1007,
    1008,
    1009,
)


class WebSocketError(Exception):
    """Anything that ends a WebSocket connection or keeps one from opening."""


class InvalidURL(WebSocketError):
    def __init__(self, url: str, why: str) -> None:
        super().__init__(f"{url} isn't a valid URI: {why}")


class HandshakeError(WebSocketError):
    """The server did not accept the upgrade (an HTTP status other than 101, a wrong
    Sec-WebSocket-Accept, a malformed answer)."""


class ConnectionClosed(WebSocketError):
    """The connection is closed: `code` and `reason` of the server's close frame (code None
    when none came: the socket ended, or a protocol error of the server's closed it)."""

    def __init__(self, code: int | None, reason: str = "", why: str = "") -> None:
        said = f"code {code}" + (f" ({reason})" if reason else "") if code else "no close frame"
        super().__init__(why or f"connection closed: {said}")
        self.code = code
        self.reason = reason


class ProtocolError(ConnectionClosed):
    """The server broke RFC 6455 (or the bound on a message): the connection is closed with
    1002, 1007 or 1009, and the error names what came."""


class ControlFlood(ProtocolError):
    """More pings and pongs in a row than `max_controls`, no data between them: the connection
    is closed (1008) rather than kept answering them until the caller's deadline."""


class PayloadTooBig(ProtocolError):
    """A message longer than the limit (or in more frames than MAX_FRAMES): the connection is
    closed (1009) rather than read."""


def accept_key(key: str) -> str:
    return base64.b64encode(hashlib.sha1(key.encode() + GUID).digest()).decode()


def mask(data: bytes, key: bytes) -> bytes:
    """`data` XOR the repeated 4-byte key, as one big-integer operation (linear, no loop in
    Python: a 1 MB frame takes ~1 ms)."""
    n = len(data)
    if not n:
        return b""
    keys = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(data, "big") ^ int.from_bytes(keys, "big")).to_bytes(n, "big")


def frame(opcode: int, payload: bytes, fin: bool = True) -> bytes:
    """One masked client frame."""
    n = len(payload)
    head = bytes([(0x80 if fin else 0) | opcode])
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 1 << 16:
        head += bytes([0x80 | 126]) + struct.pack("!H", n)
    else:
        head += bytes([0x80 | 127]) + struct.pack("!Q", n)
    key = os.urandom(4)
    return head + key + mask(payload, key)


class WebSocket:
    """An open client connection over a connected (maybe TLS-wrapped) socket. `recv` keeps a
    partial frame or message across a timeout, so a TimeoutError loses nothing."""

    def __init__(self, sock: Any, buffered: bytes = b"", max_size: int | None = None) -> None:
        self.sock = sock
        self.buf = bytearray(buffered)
        self.max_size = max_size
        self.parts: list[bytes] = []  # a fragmented message read so far
        self.part_op = 0
        self.part_len = 0  # its bytes so far, each frame's header counted
        self.part_frames = 0
        self.closed: ConnectionClosed | None = None
        self.close_sent = False
        # Pings and pongs since the last data frame, and how many in a row are allowed (None:
        # any, until the caller's deadline; wsconnection.py sets it once the handshake is done).
        self.controls = 0
        self.max_controls: int | None = None

    # -- sending -----------------------------------------------------------------------------

    def send(self, message: str | bytes, deadline: float | None = None) -> None:
        """One message in one frame: text for a str, binary for bytes. Sent by `deadline` (a
        time.monotonic() value; else within SEND_TIMEOUT_S), or the connection is lost."""
        if isinstance(message, str):
            self._send(frame(OP_TEXT, message.encode()), deadline)
        else:
            self._send(frame(OP_BINARY, bytes(message)), deadline)

    def _send(self, data: bytes, deadline: float | None = None) -> None:
        if self.closed is not None:
            raise self.closed
        wait = SEND_TIMEOUT_S
        if deadline is not None:  # past it, still a moment: an empty buffer takes a pong at once
            wait = max(0.05, min(wait, deadline - time.monotonic()))
        try:
            self.sock.settimeout(wait)
            self.sock.sendall(data)
        except TimeoutError as exc:  # a frame half sent leaves no stream to use
            why = (
                "connection lost: the server reads nothing sessiontool sends "
                f"(a send timed out after {wait:.2g}s)"
            )
            raise self._abort(ConnectionClosed(None, why=why)) from exc
        except OSError as exc:
            raise self._abort(ConnectionClosed(None, why=f"connection lost: {exc}")) from exc

    # -- receiving ---------------------------------------------------------------------------

    def recv(self, timeout: float | None = None) -> str | bytes:
        """The next message (str for text, bytes for binary). Raises TimeoutError when none
        is complete in `timeout` seconds, ConnectionClosed when the connection ends."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self.closed is not None:
                raise self.closed
            got = self._parse()
            if got is not None:
                op, payload = got
                self._count(op)
                msg = self._handle(op, payload, deadline)
                if msg is not None:
                    return msg
                if deadline is not None and time.monotonic() >= deadline:
                    raise TimeoutError("no message in time")  # a flood of pings or fragments
                continue
            self._fill(deadline)

    def _count(self, op: int) -> None:
        """A data frame ends a run of pings and pongs; a run longer than `max_controls` is a
        flood (a gateway pings a few times a minute and ticks between), ended here, before its
        pong is sent."""
        if op in DATA_OPS:
            self.controls = 0
            return
        if op in (OP_PING, OP_PONG):
            self.controls += 1
            if self.max_controls is not None and self.controls > self.max_controls:
                why = f"a ping flood ({self.max_controls} pings or pongs in a row, no message)"
                self._fail(CLOSE_POLICY, why, ControlFlood(None, why=why))

    def _fill(self, deadline: float | None) -> None:
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            raise TimeoutError("no message in time")
        try:
            self.sock.settimeout(remaining)
            data = self.sock.recv(CHUNK)
        except TimeoutError:
            raise
        except OSError as exc:
            raise self._abort(ConnectionClosed(None, why=f"connection lost: {exc}")) from exc
        if not data:
            raise self._abort(ConnectionClosed(None, why="connection closed: no close frame"))
        self.buf += data

    def _parse(self) -> tuple[int, bytes] | None:
        """One whole frame off the buffer, or None until more bytes come: (opcode, payload)
        of a control frame or of a whole message, (OP_CONT, b"") for a fragment kept."""
        buf = self.buf
        if len(buf) < 2:
            return None
        b0, b1 = buf[0], buf[1]
        fin, op, n, pos = b0 & 0x80, b0 & 0x0F, b1 & 0x7F, 2
        if b0 & 0x70:
            self._fail(CLOSE_PROTOCOL, "reserved bits set (no extension was negotiated)")
        if b1 & 0x80:
            self._fail(CLOSE_PROTOCOL, "a masked frame from the server")
        if op not in DATA_OPS and op not in (OP_CLOSE, OP_PING, OP_PONG):
            self._fail(CLOSE_PROTOCOL, f"unknown opcode {op}")
        if op >= OP_CLOSE and (not fin or n > 125):
            self._fail(CLOSE_PROTOCOL, "a fragmented or long control frame")
        if n >= 126:
            got = self._length(n)
            if got is None:
                return None
            n, pos = got
        if op in DATA_OPS:
            self._bound(pos + n)
        if len(buf) < pos + n:
            return None
        with memoryview(buf) as view:  # one copy of the payload, not two
            payload = bytes(view[pos : pos + n])
        del buf[: pos + n]
        if op in DATA_OPS:
            return self._fragment(op, payload, bool(fin), pos)
        return op, payload

    def _length(self, n: int) -> tuple[int, int] | None:
        """The 16- or 64-bit length that the 7-bit `n` (126, 127) announces, and where the
        payload starts; None until its bytes came. A 64-bit length has its top bit clear."""
        size = 2 if n == 126 else 8
        if len(self.buf) < 2 + size:
            return None
        length = struct.unpack_from("!H" if n == 126 else "!Q", self.buf, 2)[0]
        if length >> 63:
            self._fail(CLOSE_PROTOCOL, f"an impossible frame length ({length} bytes, over 2^63)")
        return int(length), 2 + size

    def _bound(self, size: int) -> None:
        """A data frame of `size` bytes (header included) is about to be read: refused when it
        would take the message past `max_size`, or past MAX_FRAMES frames (empty continuation
        frames cost their header and a frame each, so no stream of them goes on for ever)."""
        if self.max_size is not None and self.part_len + size > self.max_size:
            why = f"message larger than {self.max_size} bytes"
            self._fail(
                CLOSE_TOO_BIG, f"a message over {self.max_size} bytes", PayloadTooBig(None, why=why)
            )
        if self.part_frames >= MAX_FRAMES:
            why = f"message in more than {MAX_FRAMES} frames"
            self._fail(CLOSE_TOO_BIG, why, PayloadTooBig(None, why=why))

    def _fragment(self, op: int, payload: bytes, fin: bool, header: int) -> tuple[int, bytes]:
        if op == OP_CONT and not self.part_op:
            self._fail(CLOSE_PROTOCOL, "a continuation frame with no message to continue")
        if op != OP_CONT and self.part_op:
            self._fail(CLOSE_PROTOCOL, "a new message inside a fragmented one")
        if op != OP_CONT:
            self.part_op = op
        if payload:
            self.parts.append(payload)
        self.part_len += header + len(payload)
        self.part_frames += 1
        if not fin:
            return OP_CONT, b""
        parts, kind = self.parts, self.part_op
        self.parts, self.part_op, self.part_len, self.part_frames = [], 0, 0, 0
        return kind, parts[0] if len(parts) == 1 else b"".join(parts)  # one part: no copy

    def _handle(self, op: int, payload: bytes, deadline: float | None) -> str | bytes | None:
        """A data message as the caller gets it; control frames answered here (a pong by the
        caller's deadline), fragments kept (None)."""
        if op == OP_TEXT:
            try:
                return payload.decode()
            except UnicodeDecodeError:
                self._fail(CLOSE_BAD_DATA, "a text message that is not UTF-8")
        if op == OP_BINARY:
            return payload
        if op == OP_PING:
            self._send(frame(OP_PONG, payload), deadline)
        elif op == OP_CLOSE:
            self._closed_by_server(payload)
        return None

    # -- closing -----------------------------------------------------------------------------

    def _closed_by_server(self, payload: bytes) -> NoReturn:
        code: int | None = None
        reason = ""
        if len(payload) == 1:
            self._fail(CLOSE_PROTOCOL, "a close frame of one byte")
        if len(payload) >= 2:
            code = struct.unpack_from("!H", payload)[0]
            reason = payload[2:].decode("utf-8", "replace")
        if not self.close_sent:
            self.close_sent = True
            try:  # the close handshake: its code and reason echoed
                self.sock.settimeout(CLOSE_SEND_S)
                self.sock.sendall(frame(OP_CLOSE, payload))
            except OSError:
                pass
        raise self._abort(ConnectionClosed(code, reason))

    def _fail(self, code: int, why: str, exc: ConnectionClosed | None = None) -> NoReturn:
        """The server broke the protocol: close with `code` and raise (RFC 6455 7.1.7)."""
        self._send_close(code, why)
        raise self._abort(exc or ProtocolError(None, why=f"protocol error: {why}"))

    def _send_close(self, code: int, reason: str = "") -> None:
        if self.close_sent or self.closed is not None:
            return
        self.close_sent = True
        try:
            self.sock.settimeout(CLOSE_SEND_S)
            self.sock.sendall(frame(OP_CLOSE, struct.pack("!H", code) + reason.encode()[:123]))
        except OSError:
            pass

    def _abort(self, exc: ConnectionClosed) -> ConnectionClosed:
        """The socket closed; the first reason kept (and returned) for every later call."""
        if self.closed is None:
            self.closed = exc
        try:
            self.sock.close()
        except OSError:
            pass
        return self.closed

    def close(self, code: int = CLOSE_NORMAL, timeout: float = 1.0) -> None:
        """The close handshake: our close frame, then the server's (data read meanwhile is
        dropped) for at most `timeout` seconds, then the socket closed."""
        if self.closed is not None:
            return
        self._send_close(code)
        deadline = time.monotonic() + timeout
        try:
            while True:
                got = self._parse()
                if got is not None:
                    if got[0] == OP_CLOSE or time.monotonic() >= deadline:
                        break
                    continue
                self._fill(deadline)
        except (TimeoutError, ConnectionClosed):
            pass
        self._abort(ConnectionClosed(code, why="connection closed by sessiontool"))


def connect(
    url: str,
    *,
    ssl_context: Any = None,
    open_timeout: float = 10.0,
    max_size: int | None = None,
    user_agent: str | None = None,
) -> WebSocket:
    """An open WebSocket to a ws:// or wss:// URL. Raises InvalidURL, OSError (socket and TLS
    errors as they come: a TLS context that refuses the peer raises inside the wrap, before
    anything is sent), TimeoutError, HandshakeError."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise InvalidURL(url, str(exc)) from None
    if parts.scheme not in ("ws", "wss"):
        raise InvalidURL(url, "scheme isn't ws or wss")
    if not parts.hostname:
        raise InvalidURL(url, "no host")
    secure = parts.scheme == "wss"
    if ssl_context is None and secure:
        import ssl

        ssl_context = ssl.create_default_context()
    host = parts.hostname
    port = port or (443 if secure else 80)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    host_header = f"[{host}]" if ":" in host else host
    if port != (443 if secure else 80):
        host_header += f":{port}"
    deadline = time.monotonic() + open_timeout
    sock = open_socket(host, port, open_timeout)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if ssl_context is not None:
            sock.settimeout(max(deadline - time.monotonic(), 0.001))
            sock = ssl_context.wrap_socket(sock, server_hostname=host)
        key = base64.b64encode(os.urandom(16)).decode()
        lines = [
            f"GET {path} HTTP/1.1",
            f"Host: {host_header}",
            "Upgrade: websocket",
            "Connection: Upgrade",
            f"Sec-WebSocket-Key: {key}",
            "Sec-WebSocket-Version: 13",
        ]
        if user_agent:
            lines.append(f"User-Agent: {user_agent}")
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        head, rest = _read_head(sock, deadline)
        _check_answer(head, key)
    except TimeoutError:
        sock.close()
        raise TimeoutError("timed out during opening handshake") from None
    except BaseException:
        sock.close()
        raise
    return WebSocket(sock, rest, max_size)


def open_socket(
    host: str, port: int, timeout: float, resolve_timeout: float | None = None
) -> socket.socket:
    """A TCP connection to `host`:`port` within `timeout` seconds, the name's resolution
    included (or resolved within `resolve_timeout`, then connected within `timeout`: a probe
    that must not take a slow resolver for a dead host). socket.create_connection resolves with
    no deadline at all (a resolver that hangs held a command for ever) and then gives each
    address the whole timeout again. Raises TimeoutError (`timed out resolving HOST`, or `timed
    out during opening handshake`) or the OSError of the last address tried."""
    start = time.monotonic()
    addresses = resolve(host, port, timeout if resolve_timeout is None else resolve_timeout)
    deadline = (start if resolve_timeout is None else time.monotonic()) + timeout
    err: OSError | None = None
    for family, kind, proto, _, addr in addresses:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(remaining)
            sock.connect(addr)
            return sock
        except OSError as exc:
            sock.close()
            err = exc
    if err is not None and not isinstance(err, TimeoutError):
        raise err
    raise TimeoutError("timed out during opening handshake")


def resolve(host: str, port: int, timeout: float) -> list[Any]:
    """getaddrinfo's TCP addresses for `host`, within `timeout` seconds. An IP address is read
    at once; a name is resolved in a thread of its own (getaddrinfo has no timeout and cannot
    be interrupted), left to finish on its own when the deadline passes: a daemon thread, at
    most one per connection attempt (a failed attempt is not repeated for 15 s)."""
    tcp = socket.SOCK_STREAM
    try:  # an IP address: no lookup, answered at once (a name is refused here, never looked up)
        return socket.getaddrinfo(host, port, 0, tcp, 0, socket.AI_NUMERICHOST)
    except socket.gaierror:
        pass
    import threading

    got: list[Any] = []

    def run() -> None:
        try:
            got.append(socket.getaddrinfo(host, port, 0, tcp))
        except OSError as exc:
            got.append(exc)

    t = threading.Thread(target=run, name=f"resolve {host}", daemon=True)
    t.start()
    t.join(timeout)
    if not got:
        raise TimeoutError(f"timed out resolving {host}")
    if isinstance(got[0], OSError):
        raise got[0]
    return list(got[0])


def _read_head(sock: Any, deadline: float) -> tuple[bytes, bytes]:
    buf = b""
    while b"\r\n\r\n" not in buf:
        if len(buf) > MAX_HEADERS:
            raise HandshakeError("the server's HTTP answer has headers over 64 KiB")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("timed out during opening handshake")
        sock.settimeout(remaining)
        data = sock.recv(CHUNK)
        if not data:
            raise HandshakeError("the server closed the connection during the opening handshake")
        buf += data
    head, _, rest = buf.partition(b"\r\n\r\n")
    return head, rest


def _check_answer(head: bytes, key: str) -> None:
    lines = head.decode("iso-8859-1").split("\r\n")
    status = lines[0].split(" ", 2)
    if len(status) < 2 or not status[0].startswith("HTTP/1.") or not status[1].isdigit():
        raise HandshakeError(f"invalid HTTP status line: {lines[0][:80]!r}")
    if status[1] != "101":
        raise HandshakeError(f"server rejected WebSocket connection: HTTP {status[1]}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            raise HandshakeError(f"invalid HTTP header line: {line[:80]!r}")
        name = name.strip().lower()
        headers[name] = f"{headers[name]}, {value.strip()}" if name in headers else value.strip()
    if headers.get("upgrade", "").lower() != "websocket":
        raise HandshakeError(f"invalid Upgrade header: {headers.get('upgrade')!r}")
    if "upgrade" not in [t.strip().lower() for t in headers.get("connection", "").split(",")]:
        raise HandshakeError(f"invalid Connection header: {headers.get('connection')!r}")
    if headers.get("sec-websocket-accept") != accept_key(key):
        raise HandshakeError(
            f"invalid Sec-WebSocket-Accept header: {headers.get('sec-websocket-accept')!r}"
        )
    for name in ("sec-websocket-extensions", "sec-websocket-protocol"):
        if headers.get(name):
            raise HandshakeError(f"the server chose {name} {headers[name]!r}, never offered")
