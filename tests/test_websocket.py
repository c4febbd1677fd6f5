"""sessiontool's own WebSocket client (sessiontool/openclaw/websocket.py) on the wire: against a
real WebSocket server (`websockets`, the library the fake gateway is built on: it rejects an
unmasked client frame, a bad close, a bad handshake), and against a raw socket server for what a
library server never does on purpose (a fragmented message with a ping inside, half a frame then
a pause, a masked or oversized server frame, a non-101 answer, a wrong Sec-WebSocket-Accept).
The raw server reads our frames back and unmasks them itself, so masking is checked byte by byte.
What the user sees of these failures (exit code, one line, no secret) is checked through the CLI."""

from __future__ import annotations

import base64
import json
import os
import queue
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sessiontool.openclaw import tls, websocket, wsconnection
from sessiontool.openclaw.websocket import (
    ConnectionClosed,
    HandshakeError,
    InvalidURL,
    PayloadTooBig,
    connect,
)
from tests.helpers import generous, run_cli

from .fakes import gateway as fake
from .fakes.rawgateway import Peer, close_payload, sframe
from .runhelpers import MODULES_PROBE

TOKEN = "s3cret-WS-t0ken"

# -- a raw server: one scripted connection per accept, in a thread -----------------------------


@pytest.fixture
def raw() -> Iterator[Callable[[Callable[[Peer], None]], int]]:
    """serve(script) → a port; each connection that sends anything runs `script` in the
    server's thread (connections closed before a byte, like the CLI's TCP probe, are skipped).
    The script's own assertion errors fail the test."""
    errors: list[BaseException] = []
    threads: list[threading.Thread] = []
    socks: list[socket.socket] = []

    done = threading.Event()

    def serve(script: Callable[[Peer], None]) -> int:
        srv = socket.create_server(("127.0.0.1", 0))
        srv.settimeout(0.2)  # accept() wakes to see the test end
        socks.append(srv)

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
                        peer.buf = conn.recv(65536, socket.MSG_PEEK)
                        if not peer.buf:
                            continue  # a probe: connected and closed
                        peer.buf = b""
                        script(peer)
                    except BaseException as exc:  # noqa: BLE001 - handed to the test
                        errors.append(exc)

        t = threading.Thread(target=loop, daemon=True)
        t.start()
        threads.append(t)
        return int(srv.getsockname()[1])

    yield serve
    done.set()
    for t in threads:
        t.join(10)
    for s in socks:
        s.close()
    for t in threads:
        t.join(10)
    if errors:
        raise errors[0]


# -- against a real WebSocket server (websockets) ---------------------------------------------


@pytest.fixture
def echo() -> Iterator[tuple[str, queue.Queue[Any]]]:
    """A `websockets` server: echoes every message; "fragments" → one message in three frames;
    "ping" → pings us and says whether our pong came; "close" → closes with 4001 "bye". How
    each connection ended (the client's close code) goes to the queue."""
    from websockets.sync.server import serve

    ended: queue.Queue[Any] = queue.Queue()

    from websockets.exceptions import ConnectionClosed as Closed

    def handler(ws: Any) -> None:
        try:
            for msg in ws:
                if msg == "fragments":
                    ws.send(["ab", "cd", "é"])
                elif msg == "ping":
                    ws.send("ponged" if ws.ping(b"hello").wait(10) else "no pong")
                elif msg == "close":
                    ws.close(4001, "bye")
                else:
                    ws.send(msg)
        except Closed:
            pass  # a close code other than 1000/1001 ends the loop with an exception
        ended.put((ws.close_code, ws.close_reason))

    with serve(handler, "127.0.0.1", 0, compression=None, max_size=None) as srv:
        t = threading.Thread(target=srv.serve_forever, daemon=True)
        t.start()
        yield f"ws://127.0.0.1:{srv.socket.getsockname()[1]}/path?q=1", ended
        srv.shutdown()
        t.join(10)


def test_messages_round_trip_through_a_real_server(echo: tuple[str, queue.Queue[Any]]) -> None:
    url, ended = echo
    ws = connect(url, user_agent="sessiontool/test")
    # 7-bit, 16-bit and 64-bit lengths, empty, non-ASCII text; binary stays bytes.
    for msg in ["", "x" * 125, "y" * 126, "z" * 70_000, "ünïcode ✓"]:
        ws.send(msg)
        assert ws.recv(timeout=10) == msg
    blob = os.urandom(1_100_000)
    ws.send(blob)
    assert ws.recv(timeout=30) == blob
    ws.send("fragments")
    assert ws.recv(timeout=10) == "abcdé"
    ws.send("ping")
    assert ws.recv(timeout=10) == "ponged"
    ws.close()
    assert ended.get(timeout=10) == (1000, "")
    with pytest.raises(ConnectionClosed):
        ws.send("after close")


def test_a_server_close_with_a_code_ends_recv_with_that_code(
    echo: tuple[str, queue.Queue[Any]],
) -> None:
    url, ended = echo
    ws = connect(url)
    ws.send("close")
    with pytest.raises(ConnectionClosed) as info:
        ws.recv(timeout=10)
    assert (info.value.code, info.value.reason) == (4001, "bye")
    # The close handshake completed: the server got its close echoed, not an abrupt end (1006).
    assert ended.get(timeout=10) == (4001, "bye")
    with pytest.raises(ConnectionClosed):
        ws.recv(timeout=1)


# -- edge cases from a raw server -------------------------------------------------------------


def test_the_upgrade_request_offers_no_extension(raw: Any) -> None:
    seen: queue.Queue[Peer] = queue.Queue()

    def script(p: Peer) -> None:
        p.upgrade()
        seen.put(p)
        assert p.read_frame()[0] == 0x8

    port = raw(script)
    ws = connect(f"ws://127.0.0.1:{port}", user_agent="sessiontool/9")
    p = seen.get(timeout=10)
    ws.close()
    assert p.request.startswith("GET / HTTP/1.1\r\n")
    assert p.header("Host") == f"127.0.0.1:{port}"
    assert p.header("Upgrade") == "websocket" and p.header("Connection") == "Upgrade"
    assert p.header("Sec-WebSocket-Version") == "13"
    assert len(base64.b64decode(p.header("Sec-WebSocket-Key") or "")) == 16
    assert p.header("Sec-WebSocket-Extensions") is None
    assert p.header("User-Agent") == "sessiontool/9"


def test_a_fragmented_message_with_a_ping_inside_is_one_message_and_the_ping_is_answered(
    raw: Any,
) -> None:
    pongs: queue.Queue[tuple[int, bool, bytes]] = queue.Queue()

    def script(p: Peer) -> None:
        p.upgrade()
        p.send_raw(
            sframe(0x1, b'{"a":', fin=False)
            + sframe(0x9, b"are you there")
            + sframe(0x0, b' "b', fin=False)
            + sframe(0x0, 'é"}'.encode())
        )
        pongs.put(p.read_frame())
        assert p.read_frame()[0] == 0x8

    ws = connect(f"ws://127.0.0.1:{raw(script)}")
    assert ws.recv(timeout=10) == '{"a": "bé"}'
    assert pongs.get(timeout=10) == (0xA, True, b"are you there")
    ws.close()


def test_half_a_frame_then_a_pause_is_a_timeout_that_loses_nothing(raw: Any) -> None:
    go = threading.Event()
    body = json.dumps({"type": "res", "payload": "p" * 1000}).encode()
    whole = sframe(0x1, body)

    def script(p: Peer) -> None:
        p.upgrade()
        p.send_raw(whole[:3])  # inside the 16-bit length
        go.wait(20)
        p.send_raw(whole[3:600])
        p.send_raw(whole[600:])
        p.read_frame()

    ws = connect(f"ws://127.0.0.1:{raw(script)}")
    with pytest.raises(TimeoutError):
        ws.recv(timeout=0.3)
    go.set()
    assert ws.recv(timeout=10) == body.decode()
    ws.close()


def test_a_server_close_code_is_echoed_and_raised(raw: Any) -> None:
    got: queue.Queue[tuple[int, bool, bytes]] = queue.Queue()

    def script(p: Peer) -> None:
        p.upgrade()
        p.send_raw(sframe(0x8, close_payload(4008, "going away now")))
        got.put(p.read_frame())

    ws = connect(f"ws://127.0.0.1:{raw(script)}")
    with pytest.raises(ConnectionClosed) as info:
        ws.recv(timeout=10)
    assert (info.value.code, info.value.reason) == (4008, "going away now")
    assert got.get(timeout=10) == (0x8, True, close_payload(4008, "going away now"))


def test_a_socket_ended_without_a_close_frame(raw: Any) -> None:
    def script(p: Peer) -> None:
        p.upgrade()
        p.send_raw(sframe(0x1, b"last"))

    ws = connect(f"ws://127.0.0.1:{raw(script)}")
    assert ws.recv(timeout=10) == "last"
    with pytest.raises(ConnectionClosed) as info:
        ws.recv(timeout=10)
    assert info.value.code is None and "no close frame" in str(info.value)


@pytest.mark.parametrize(
    "frames",
    [
        [sframe(0x1, b"x" * 1001)],  # one frame over the limit
        [sframe(0x1, b"x" * 600, fin=False), sframe(0x0, b"x" * 600)],  # fragments over it
    ],
    ids=["one-frame", "fragments"],
)
def test_a_message_over_the_limit_closes_with_1009_unread(raw: Any, frames: list[bytes]) -> None:
    got: queue.Queue[tuple[int, bool, bytes]] = queue.Queue()

    def script(p: Peer) -> None:
        p.upgrade()
        p.send_raw(b"".join(frames))
        got.put(p.read_frame())

    ws = connect(f"ws://127.0.0.1:{raw(script)}", max_size=1000)
    with pytest.raises(PayloadTooBig, match="larger than 1000 bytes"):
        ws.recv(timeout=10)
    op, _, payload = got.get(timeout=10)
    assert (op, payload[:2]) == (0x8, struct.pack("!H", 1009))


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        (sframe(0x1, b"masked", mask=True), 1002),
        (sframe(0x1, b"compressed?", rsv=0x40), 1002),
        (sframe(0x0, b"continuing nothing"), 1002),
        (sframe(0x9, b"p" * 10, fin=False), 1002),
        (sframe(0x3, b"opcode 3"), 1002),
        (sframe(0x1, b"\xff\xfe not utf-8"), 1007),
    ],
    ids=["masked", "rsv1", "orphan-continuation", "fragmented-ping", "bad-opcode", "bad-utf8"],
)
def test_a_protocol_error_of_the_server_closes_with_its_code(
    raw: Any, frame: bytes, code: int
) -> None:
    got: queue.Queue[tuple[int, bool, bytes]] = queue.Queue()

    def script(p: Peer) -> None:
        p.upgrade()
        p.send_raw(frame)
        got.put(p.read_frame())

    ws = connect(f"ws://127.0.0.1:{raw(script)}")
    with pytest.raises(ConnectionClosed):
        ws.recv(timeout=10)
    op, _, payload = got.get(timeout=10)
    assert (op, payload[:2]) == (0x8, struct.pack("!H", code))


def test_a_ping_flood_cannot_hold_recv_past_its_deadline(raw: Any) -> None:
    """Each ping is answered, but a stream of them is no message: recv gives up at its own
    deadline, not when the pings stop (issue 37, item 10)."""
    stop = threading.Event()

    def script(p: Peer) -> None:
        p.upgrade()

        def drain() -> None:
            try:
                while True:
                    p.read_frame()
            except (EOFError, OSError):
                stop.set()

        t = threading.Thread(target=drain, daemon=True)
        t.start()
        try:
            while not stop.is_set():
                p.send_raw(sframe(0x9, b"p") * 200)
        except OSError:
            pass
        t.join(20)

    ws = connect(f"ws://127.0.0.1:{raw(script)}")
    start = time.monotonic()
    with pytest.raises(TimeoutError):
        ws.recv(timeout=0.5)
    assert time.monotonic() - start < generous(0.5 + 0.5)  # the flood does not reset the timeout
    ws.close(timeout=0.2)
    assert ws.closed is not None


def test_empty_continuation_frames_count_against_the_message(raw: Any) -> None:
    """An empty frame costs its header and one of MAX_FRAMES frames: a message of them ends
    at once with 1009, whatever the size limit (issue 37, item 9)."""
    got: queue.Queue[tuple[int, bool, bytes]] = queue.Queue()

    def script(p: Peer) -> None:
        p.upgrade()
        p.send_raw(sframe(0x1, b"{", fin=False) + sframe(0x0, b"", fin=False) * 5000)
        got.put(p.read_frame())

    ws = connect(f"ws://127.0.0.1:{raw(script)}")
    with pytest.raises(PayloadTooBig, match=f"in more than {websocket.MAX_FRAMES} frames"):
        ws.recv(timeout=10)
    op, _, payload = got.get(timeout=10)
    assert (op, payload[:2]) == (0x8, struct.pack("!H", 1009))


@pytest.mark.parametrize(
    ("status", "accept", "error"),
    [
        ("403 Forbidden", None, "server rejected WebSocket connection: HTTP 403"),
        ("200 OK", None, "server rejected WebSocket connection: HTTP 200"),
        ("101 Switching Protocols", "bm90IHRoZSByaWdodCBvbmU=", "invalid Sec-WebSocket-Accept"),
    ],
    ids=["403", "200", "bad-accept"],
)
def test_a_refused_or_wrong_upgrade_is_a_handshake_error(
    raw: Any, status: str, accept: str | None, error: str
) -> None:
    port = raw(lambda p: p.upgrade(status, accept))
    with pytest.raises(HandshakeError, match=error):
        connect(f"ws://127.0.0.1:{port}")


def test_not_a_websocket_url() -> None:
    for url in ("http://127.0.0.1:1", "ws://", "ws://127.0.0.1:notaport"):
        with pytest.raises(InvalidURL, match="isn't a valid URI"):
            connect(url)


# -- the gateway connection over it -----------------------------------------------------------


def _conn(port: int, max_size: int | None = None) -> wsconnection.Connection:
    ws = connect(f"ws://127.0.0.1:{port}", max_size=max_size)
    hello = wsconnection.Hello("9", 4, ["operator.read"], "token", "device-less cli")
    return wsconnection.Connection(ws, hello, frozenset({"operator.read"}))


def test_a_ping_and_an_event_during_a_request_then_its_answer_in_fragments(raw: Any) -> None:
    pong: queue.Queue[tuple[int, bool, bytes]] = queue.Queue()

    def script(p: Peer) -> None:
        p.upgrade()
        op, _, data = p.read_frame()
        req = json.loads(data)
        assert op == 0x1 and req["method"] == "sessions.list"
        p.send_raw(sframe(0x9, b"tick?"))
        pong.put(p.read_frame())
        p.send_raw(sframe(0x1, b'{"type":"event","event":"tick","payload":{}}'))
        res = json.dumps({"type": "res", "id": req["id"], "ok": True, "payload": {"n": 3}})
        half = len(res) // 2
        p.send_raw(sframe(0x1, res[:half].encode(), fin=False) + sframe(0x0, res[half:].encode()))
        p.read_frame()

    conn = _conn(raw(script))
    assert conn.request("sessions.list", {}, timeout_s=10) == {"n": 3}
    assert pong.get(timeout=10) == (0xA, True, b"tick?")
    conn.close()


def test_an_answer_over_the_limit_is_a_gateway_error_not_a_retry(raw: Any) -> None:
    def script(p: Peer) -> None:
        p.upgrade()
        req = json.loads(p.read_frame()[2])
        res = json.dumps({"type": "res", "id": req["id"], "ok": True, "payload": "x" * 5000})
        p.send_raw(sframe(0x1, res.encode()))
        assert p.read_frame()[0] == 0x8

    conn = _conn(raw(script), max_size=4096)
    with pytest.raises(wsconnection.GatewayError, match="gateway status: .*larger than 4096"):
        conn.request("status", {}, timeout_s=10)


# -- what the user sees -----------------------------------------------------------------------


def _env(tmp_path: Path) -> dict[str, str]:
    state = tmp_path / "local-state"
    state.mkdir(exist_ok=True)
    cfg = tmp_path / "openclaw.json"
    cfg.write_text("{}")
    return {
        "SESSIONTOOL_STATE_DIR": str(state),
        "OPENCLAW_CONFIG_PATH": str(cfg),
        "OPENCLAW_GATEWAY_TOKEN": TOKEN,
        "SESSIONTOOL_OPENCLAW_BIN": "",
    }


@pytest.mark.parametrize(
    ("status", "accept", "error"),
    [
        ("404 Not Found", None, "server rejected WebSocket connection: HTTP 404"),
        ("101 Switching Protocols", "d3Jvbmc=", "invalid Sec-WebSocket-Accept header"),
    ],
    ids=["404", "bad-accept"],
)
def test_cli_a_server_that_is_no_websocket_is_exit_1_in_one_line(
    tmp_path: Path, raw: Any, status: str, accept: str | None, error: str
) -> None:
    url = f"ws://127.0.0.1:{raw(lambda p: p.upgrade(status, accept))}"
    proc = run_cli("--gateway", url, "list", "--json", env=_env(tmp_path))
    assert proc.returncode == 1, proc.stderr
    err = json.loads(proc.stdout)["error"]
    assert err.startswith(f"cannot connect to OpenClaw's gateway at {url}: ") and error in err
    assert TOKEN not in proc.stdout + proc.stderr


def test_cli_a_gateway_closing_on_the_credentials_is_exit_4_naming_the_reason(
    tmp_path: Path, raw: Any
) -> None:
    got: list[bytes] = []

    def script(p: Peer) -> None:
        p.upgrade()
        p.send_raw(sframe(0x8, close_payload(1008, "unauthorized: gateway token mismatch")))
        got.append(p.read_frame()[2])

    url = f"ws://127.0.0.1:{raw(script)}"
    proc = run_cli("--gateway", url, "list", env=_env(tmp_path))
    assert proc.returncode == 4, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert (
        lines[0].startswith("sessiontool: error:")
        and "refused sessiontool's credentials" in (lines[0])
    )
    assert "token mismatch" in lines[0] and TOKEN not in proc.stdout + proc.stderr
    # Every connection it made echoed the code: the close handshake, not a dropped socket.
    assert got and set(got) == {close_payload(1008, "unauthorized: gateway token mismatch")}


def test_a_wrong_pin_sends_not_one_byte_after_the_tls_handshake(tmp_path: Path) -> None:
    cert, key, served = fake.self_signed(tmp_path / "tls")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(cert), str(key))
    srv = socket.create_server(("127.0.0.1", 0))
    port = srv.getsockname()[1]
    received: queue.Queue[bytes | BaseException] = queue.Queue()

    def serve() -> None:
        conn, _ = srv.accept()
        with ctx.wrap_socket(conn, server_side=True) as s:
            s.settimeout(20)
            data = b""
            try:
                while chunk := s.recv(65536):
                    data += chunk
            except (OSError, ssl.SSLError):
                pass
            received.put(data)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    url = f"wss://127.0.0.1:{port}"
    right = served.replace(":", "").lower()
    wrong = f"{int(right, 16) ^ 1:064x}"
    try:
        with pytest.raises(tls.PinMismatch) as info:
            connect(url, ssl_context=tls.context(url, wrong))
        assert info.value.got == right
        assert received.get(timeout=20) == b""
    finally:
        srv.close()
        t.join(10)


def test_cli_a_read_through_the_gateway_loads_no_http_or_logging_stack(
    tmp_path: Path, state: Path
) -> None:
    """The reason for websocket.py: `list --json --gateway URL` connects and answers without
    importing what `websockets` brought (~110 ms: urllib.request, http.client, email, logging,
    importlib.metadata)."""
    import subprocess
    import sys

    with fake.running(tmp_path / "gw", token=TOKEN) as gw:
        out = tmp_path / "modules.txt"
        url = f"ws://127.0.0.1:{gw.port}"
        proc = subprocess.run(
            [sys.executable, "-c", MODULES_PROBE, str(out), "--gateway", url, "list", "--json"],
            capture_output=True,
            text=True,
            env={**os.environ, **_env(tmp_path), "SESSIONTOOL_STATE_DIR": str(state)},
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert json.loads(proc.stdout)["count"] == 0
        assert [c["method"] for c in gw.calls("sessions.list")] == ["sessions.list"]
    modules = set(out.read_text().split())
    assert "sessiontool.openclaw.websocket" in modules  # the probe saw the connection's modules
    heavy = {
        "websockets",
        "urllib.request",
        "http.client",
        "email",
        "logging",
        "importlib.metadata",
    }
    assert not modules & heavy, modules & heavy
