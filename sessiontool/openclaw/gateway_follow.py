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
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from sessiontool.openclaw.wsclient import GatewayError
from sessiontool.state.paths import StatePaths
from sessiontool.state.transcript import Message

EVENT = "session.message"
RECONNECT_S = 60.0  # how long a dropped follow keeps trying to connect again
RETRY_PAUSE_S = 1.0
WAIT_S = 5.0  # one wait for an event; the loop goes on


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
    seen: set[str] = set(mark[0]) if mark else set()
    floor = mark[1] if mark else None
    lost_at: float | None = None
    try:
        while True:
            try:
                feed = _subscribe(client, full_key, agent_id)
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
            if floor is None:  # nothing printed came from the gateway: start at its tail
                ids, floor = gateway_reader.page_mark(page)
                seen |= ids
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
                    payload = frame.get("payload")
                    if not isinstance(payload, dict) or payload.get("sessionKey") != full_key:
                        continue
                    if payload.get("agentId") not in (None, agent_id):
                        continue
                    sid = payload.get("sessionId")
                    if session_id is not None and isinstance(sid, str) and sid != session_id:
                        continue  # the key names another session now (a reset, a delete)
                    event_msg = payload.get("message")
                    if not isinstance(event_msg, dict):
                        continue
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


class _Feed:
    """One connection of the follow, subscribed to the session's messages: requests answered
    on it keep the events that arrive meanwhile (none lost between the subscribe and the
    catch-up read), and the next event waits for the gateway's word. Raises wsconnection.Dropped
    when the socket closes, or when not even the gateway's tick came for two tick intervals."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.inbox: list[dict[str, Any]] = []
        self.heard = time.monotonic()

    def _frame(self, until: float, where: str) -> dict[str, Any] | None:
        from sessiontool.openclaw import wsconnection
        from sessiontool.openclaw.websocket import ConnectionClosed

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
            except ConnectionClosed as exc:
                raise wsconnection.Dropped() from exc
            self.heard = time.monotonic()
            return wsconnection.parse_frame(raw, where)

    def request(self, method: str, params: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        import json
        import uuid

        from sessiontool.openclaw import wsclient, wsconnection
        from sessiontool.openclaw.websocket import ConnectionClosed

        rid = f"follow:{uuid.uuid4()}"
        frame_out = {"type": "req", "id": rid, "method": method, "params": params}
        try:
            self.conn.ws.send(json.dumps(frame_out))
        except ConnectionClosed as exc:
            raise wsconnection.Dropped() from exc
        until = time.monotonic() + timeout_s
        while True:
            frame = self._frame(until, f"gateway {method}")
            if frame is None:
                raise wsclient.GatewayTimeout(f"gateway {method}: no answer in {timeout_s:g}s")
            if frame.get("type") == "event" and frame.get("event") == EVENT:
                self.inbox.append(frame)
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
        if self.inbox:
            return self.inbox.pop(0)
        until = time.monotonic() + timeout_s
        while True:
            frame = self._frame(until, f"gateway {EVENT} events")
            if frame is None:
                return None
            if frame.get("type") == "event" and frame.get("event") == EVENT:
                return frame


def _subscribe(client: Any, full_key: str, agent_id: str) -> _Feed:
    """A connection subscribed to the session's messages (events kept from here on)."""
    from sessiontool.openclaw import wsclient

    feed = _Feed(client._connection(frozenset({wsclient.READ})))
    feed.request("sessions.messages.subscribe", {"key": full_key, "agentId": agent_id}, 30.0)
    return feed


def _messages(page: dict[str, Any]) -> list[dict[str, Any]]:
    raw = page.get("messages")
    return [m for m in raw if isinstance(m, dict)] if isinstance(raw, list) else []


def _fresh(raw: dict[str, Any], seq: int | None, seen: set[str], floor: int) -> Message | None:
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
