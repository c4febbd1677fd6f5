"""`history KEY --follow` through OpenClaw's gateway: a session of its SQLite store, or of a
remote gateway, has no transcript file to watch, so the gateway's own events say what arrives.

The protocol, as the 2026.9.6 package documents it (docs/gateway/protocol/rpc-session-control.md,
rpc-bootstrap-and-events.md, clients.md "Recover state after reconnect"): `sessions.messages.
subscribe {key, agentId}` (operator.read) makes the connection receive `session.message` events
for that session, `{sessionKey, agentId, message, messageId, messageSeq, ...}`, where `message`
is the chat view `chat.history` returns; the subscription ends with the connection. So:

1. subscribe, then read `chat.history` once more: whatever landed between the page `history`
   printed and the subscription is caught up from it (nothing lost);
2. print each `session.message` of the session as it comes, mapped as the history page was
   (gateway_reader.message_of);
3. a dropped connection (closed, or silent for two tick intervals) is opened again and steps 1-2
   repeat, for up to RECONNECT_S (SESSIONTOOL_FOLLOW_RECONNECT, a duration); after that the
   follow ends with exit 4, naming the gateway.

A message is printed once: the ids already seen, and any seq at or below the printed page's
highest, are skipped.

Bounded whatever the gateway sends: the events that arrive while a request of the follow waits
for its answer are queued, at most FOLLOW_QUEUE of them and FOLLOW_QUEUE_BYTES of their frames
(another session's events and a message already queued are not kept at all; past the bound the
oldest are dropped, which the catch-up page most likely holds, and a warning says how many); the
ids remembered to print a message once are the last SEEN_IDS.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator
from typing import Any

from sessiontool.openclaw.wsclient import GatewayError
from sessiontool.state.paths import StatePaths
from sessiontool.state.transcript import Message

EVENT = "session.message"
RECONNECT_S = 60.0  # how long a dropped follow keeps trying to connect again
RETRY_PAUSE_S = 1.0
WAIT_S = 5.0  # one wait for an event; the loop goes on
FOLLOW_QUEUE = 10_000  # events queued while a request waits for its answer
FOLLOW_QUEUE_BYTES = 32 * 1024 * 1024  # their frames' text (one message of the gateway's at most)
SEEN_IDS = 10_000  # message ids remembered to print a message once


def follow(
    paths: StatePaths, agent_id: str, full_key: str, session_id: str | None
) -> Iterator[Message]:
    """New messages of `full_key` as the gateway reports them (see the module docstring).
    Ends only by the caller (Ctrl-C, SIGTERM: the connection is closed on the way out) or by a
    connection that cannot be made again (ForbiddenError, exit 4)."""
    from sessiontool.openclaw import gateway, gateway_reader, wsclient, wsconnection

    g = gateway.find(paths)
    client = g.client(paths)
    mark = gateway_reader.last_mark(paths, full_key)
    seen = Seen(mark[0] if mark else ())
    floor = mark[1] if mark else None
    lost_at: float | None = None
    try:
        while True:
            try:
                feed = _subscribe(client, full_key, agent_id, session_id)
                page = feed.request(
                    "chat.history",
                    {
                        "sessionKey": full_key,
                        "agentId": agent_id,
                        "limit": gateway_reader.HISTORY_MAX,
                        "maxChars": gateway_reader.MAX_CHARS,
                    },
                    gateway_reader.CALL_TIMEOUT_S,
                )
            except (wsconnection.Dropped, wsclient.GatewayTimeout):
                client.drop()
                lost_at = _pause(g, lost_at)
                continue
            except (Answered, wsconnection.BadFrame):
                raise
            except wsclient.ProtocolMismatch:
                raise
            except wsclient.GatewayError:
                # Not there (yet) again after a drop (it answered when the follow started,
                # require_up): keep trying for the reconnect budget.
                client.drop()
                lost_at = _pause(g, lost_at)
                continue
            lost_at = None
            if feed.dropped:
                _warn_dropped(feed)
            if floor is None:  # nothing printed came from the gateway: start at its tail
                ids, floor = gateway_reader.page_mark(page)
                seen.update(ids)
            elif page.get("sessionId") in (None, session_id):
                for raw in _messages(page):
                    msg = _fresh(raw, None, seen, floor)
                    if msg is not None:
                        yield msg
            try:
                while True:
                    frame = feed.next_event(WAIT_S)
                    if frame is None:
                        continue
                    payload = frame["payload"]  # a message of this session's (feed.ours)
                    event_msg = payload["message"]
                    seq = payload.get("messageSeq")
                    msg = _fresh(event_msg, seq if isinstance(seq, int) else None, seen, floor)
                    if msg is not None:
                        yield msg
            except wsconnection.Dropped:
                client.drop()
                lost_at = _pause(g, lost_at)
    finally:
        client.drop()


class Answered(GatewayError):
    """The gateway answered a follow's request with an error (not a lost connection): said
    at once, never retried."""


def _warn_dropped(feed: _Feed) -> None:
    from sessiontool import diag

    diag.warn(
        f"history --follow: {feed.dropped} of the gateway's events were dropped while it "
        f"answered (the queue holds {FOLLOW_QUEUE} events or {FOLLOW_QUEUE_BYTES // 2**20} MiB; "
        "the oldest went first, which the catch-up read most likely holds)"
    )
    feed.dropped = 0


class Seen:
    """The ids of the messages printed (or skipped as the page's), the last SEEN_IDS of them; a
    long id is kept as its digest."""

    def __init__(self, ids: Any = ()) -> None:
        self.order: deque[str] = deque()
        self.ids: set[str] = set()
        self.update(ids)

    @staticmethod
    def _key(mid: str) -> str:
        if len(mid) <= 128:
            return mid
        import hashlib

        return "#" + hashlib.sha256(mid.encode("utf-8", "surrogatepass")).hexdigest()

    def __contains__(self, mid: str) -> bool:
        return self._key(mid) in self.ids

    def add(self, mid: str) -> None:
        key = self._key(mid)
        if key in self.ids:
            return
        self.ids.add(key)
        self.order.append(key)
        if len(self.order) > SEEN_IDS:
            self.ids.discard(self.order.popleft())

    def update(self, ids: Any) -> None:
        for mid in ids:
            self.add(mid)


class _Feed:
    """One connection of the follow, subscribed to the session's messages: requests answered
    on it keep the events that arrive meanwhile (none lost between the subscribe and the
    catch-up read), and the next event waits for the gateway's word. Raises wsconnection.Dropped
    when the socket closes, or when not even the gateway's tick came for two tick intervals.

    The queue is bounded (the module docstring): an event of another session, or one already
    queued, is not kept; past the bound the oldest goes, counted in `dropped`."""

    def __init__(self, conn: Any, full_key: str, agent_id: str, session_id: str | None) -> None:
        self.conn = conn
        self.key, self.agent_id, self.session_id = full_key, agent_id, session_id
        self.inbox: deque[tuple[dict[str, Any], int, Any]] = deque()
        self.queued: dict[Any, int] = {}  # the identity of each queued message: how many
        self.size = 0
        self.dropped = 0
        self.heard = time.monotonic()

    def ours(self, frame: dict[str, Any]) -> bool:
        """A `session.message` event of the followed session that carries a message."""
        if frame.get("type") != "event" or frame.get("event") != EVENT:
            return False
        payload = frame.get("payload")
        if not isinstance(payload, dict) or payload.get("sessionKey") != self.key:
            return False
        if payload.get("agentId") not in (None, self.agent_id):
            return False
        sid = payload.get("sessionId")
        if self.session_id is not None and isinstance(sid, str) and sid != self.session_id:
            return False  # the key names another session now (a reset, a delete)
        return isinstance(payload.get("message"), dict)

    def _queue(self, frame: dict[str, Any], size: int) -> None:
        ident = _identity(frame["payload"])
        if ident is not None and ident in self.queued:
            return  # the same message twice: the first is enough
        while self.inbox and (
            len(self.inbox) >= FOLLOW_QUEUE or self.size + size > FOLLOW_QUEUE_BYTES
        ):
            self._pop()
            self.dropped += 1
        self.inbox.append((frame, size, ident))
        self.size += size
        if ident is not None:
            self.queued[ident] = self.queued.get(ident, 0) + 1

    def _pop(self) -> dict[str, Any]:
        frame, size, ident = self.inbox.popleft()
        self.size -= size
        if ident is not None:
            left = self.queued.pop(ident) - 1
            if left:
                self.queued[ident] = left
        return frame

    def _frame(self, until: float, where: str) -> tuple[dict[str, Any], int] | None:
        from sessiontool.openclaw import wsconnection
        from sessiontool.openclaw.websocket import ConnectionClosed, ProtocolError

        silence = 2 * self.conn.hello.tick_s + 5
        while True:
            now = time.monotonic()
            if now >= until:
                return None
            if now - self.heard > silence:
                self.conn.close()
                raise wsconnection.Dropped()
            try:
                raw = self.conn.ws.recv(timeout=min(until - now, silence))
            except TimeoutError:
                continue
            except ProtocolError as exc:  # no gateway's doing: said at once, not followed again
                raise wsconnection.BadFrame(f"{where}: {exc}") from None
            except ConnectionClosed as exc:
                raise wsconnection.Dropped() from exc
            self.heard = time.monotonic()
            return wsconnection.parse_frame(raw, where), len(raw)

    def request(self, method: str, params: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        import json
        import uuid

        from sessiontool.openclaw import wsclient, wsconnection
        from sessiontool.openclaw.websocket import ConnectionClosed

        rid = f"follow:{uuid.uuid4()}"
        frame_out = {"type": "req", "id": rid, "method": method, "params": params}
        until = time.monotonic() + timeout_s
        try:
            self.conn.ws.send(json.dumps(frame_out), until)
        except ConnectionClosed as exc:
            raise wsconnection.Dropped() from exc
        while True:
            got = self._frame(until, f"gateway {method}")
            if got is None:
                raise wsclient.GatewayTimeout(f"gateway {method}: no answer in {timeout_s:g}s")
            frame, size = got
            if self.ours(frame):
                self._queue(frame, size)
            elif frame.get("type") == "res" and frame.get("id") == rid:
                if frame.get("ok") is not True:
                    err = frame.get("error")
                    err = err if isinstance(err, dict) else {"message": str(err)}
                    raise Answered(
                        f"gateway {method}: {err.get('message') or 'failed'}",
                        extra=wsconnection.code_extra(wsconnection.RpcError(err)),
                    )
                payload = frame.get("payload")
                return payload if isinstance(payload, dict) else {}

    def next_event(self, timeout_s: float) -> dict[str, Any] | None:
        """The next event of the followed session's (`ours`), queued or within `timeout_s`."""
        if self.inbox:
            return self._pop()
        until = time.monotonic() + timeout_s
        while True:
            got = self._frame(until, f"gateway {EVENT} events")
            if got is None:
                return None
            if self.ours(got[0]):
                return got[0]


def _identity(payload: dict[str, Any]) -> Any:
    """What makes two events the same message: its id (the event's, else the message's own),
    else its seq; None when it has neither."""
    meta = payload["message"].get("__openclaw")
    mid = payload.get("messageId")
    if not isinstance(mid, str) and isinstance(meta, dict):
        mid = meta.get("id")
    if isinstance(mid, str):
        return ("id", Seen._key(mid))
    seq = payload.get("messageSeq")
    if isinstance(seq, int) and not isinstance(seq, bool):
        return ("seq", seq)
    return None


def _subscribe(client: Any, full_key: str, agent_id: str, session_id: str | None) -> _Feed:
    """A connection subscribed to the session's messages (events kept from here on)."""
    from sessiontool.openclaw import wsclient

    conn = client._connection(frozenset({wsclient.READ}))
    feed = _Feed(conn, full_key, agent_id, session_id)
    feed.request("sessions.messages.subscribe", {"key": full_key, "agentId": agent_id}, 30.0)
    return feed


def _messages(page: dict[str, Any]) -> list[dict[str, Any]]:
    raw = page.get("messages")
    return [m for m in raw if isinstance(m, dict)] if isinstance(raw, list) else []


def _fresh(raw: dict[str, Any], seq: int | None, seen: Seen, floor: int) -> Message | None:
    """The message as history shows it, unless it was printed already."""
    from sessiontool.openclaw.gateway_reader import message_of

    meta = raw.get("__openclaw")
    meta = meta if isinstance(meta, dict) else {}
    mid = meta.get("id")
    if seq is None and isinstance(meta.get("seq"), int):
        seq = meta["seq"]
    if isinstance(mid, str):
        if mid in seen:
            return None
        seen.add(mid)
    if seq is not None and seq <= floor:
        return None
    msg, _ = message_of(raw)
    return msg


def reconnect_s() -> float:
    import os

    raw = os.environ.get("SESSIONTOOL_FOLLOW_RECONNECT", "").strip()
    if not raw:
        return RECONNECT_S
    from sessiontool.durations import parse_duration

    return parse_duration(raw, option="SESSIONTOOL_FOLLOW_RECONNECT")


def _pause(g: Any, lost_at: float | None) -> float:
    """Wait before connecting again; past the reconnect budget since the loss, give up
    (exit 4)."""
    now = time.monotonic()
    lost_at = now if lost_at is None else lost_at
    budget = reconnect_s()
    if now - lost_at > budget:
        from sessiontool.errors import ForbiddenError

        raise ForbiddenError(
            f"history --follow: lost the connection to OpenClaw's gateway at {g.url} and could "
            f"not connect again in {budget:g}s",
            hint=g.how_to_start(),
        )
    time.sleep(RETRY_PAUSE_S)
    return lost_at
