"""`top` through a remote gateway: there is no file to stat, so the gateway says when its
sessions changed. `sessions.subscribe` (OpenClaw 2026.9.6, operator.read) makes a connection
receive a `sessions.changed` event for each session created, changed, deleted or written to.

The subscription has a connection of its own (a second `wsclient.Client`, not the process's
shared one the panes' reads use): it only listens, in a daemon thread. A gateway that refuses
the method, or a connection that drops, leaves `live` False, and `top` lists again every few
seconds as before; a dropped connection is made again after RETRY_S."""

from __future__ import annotations

import json
import threading

from sessiontool.errors import SessiontoolError
from sessiontool.state.paths import StatePaths

EVENT = "sessions.changed"
RETRY_S = 5.0
REQUEST_ID = "top:sessions.subscribe"


class Refused(Exception):
    """The gateway answered the subscribe with an error: it will not say; do not ask again."""


class Subscription:
    def __init__(self, paths: StatePaths) -> None:
        self.paths = paths
        self.changed = threading.Event()  # set by each event, cleared by the one who looks
        self.stopped = threading.Event()
        self.live = False
        self.count = 0

    def generation(self) -> int:
        """How many times the sessions changed, as far as this one has heard (for the marker)."""
        if self.changed.is_set():
            self.changed.clear()
            self.count += 1
        return self.count

    def start(self) -> None:
        threading.Thread(target=self._run, name="top-subscribe", daemon=True).start()

    def stop(self) -> None:
        self.stopped.set()

    def _run(self) -> None:
        from sessiontool.openclaw.websocket import WebSocketError
        from sessiontool.openclaw.wsconnection import Dropped, RpcError

        while not self.stopped.is_set():
            try:
                self._listen()
            except Refused:
                return
            except (SessiontoolError, OSError, WebSocketError, Dropped, RpcError):
                pass
            self.live = False
            self.changed.set()  # what changed while it was away: read again
            self.stopped.wait(RETRY_S)

    def _listen(self) -> None:
        import time

        from sessiontool.openclaw import gateway, wsclient, wsconnection

        g = gateway.find(self.paths)
        pin = g.remote.tls_fingerprint if g.remote is not None else None
        client = wsclient.Client(g.url, g.secret(), self.paths, g.loopback, tls_fingerprint=pin)
        try:
            conn = client._connection(frozenset({wsclient.READ}))
            frame = {"type": "req", "id": REQUEST_ID, "method": "sessions.subscribe", "params": {}}
            conn.ws.send(json.dumps(frame), time.monotonic() + 30)
            # Not even the gateway's tick for two of its intervals: the connection is gone.
            silence, heard = 2 * conn.hello.tick_s + 5, time.monotonic()
            while not self.stopped.is_set():
                try:
                    raw = conn.ws.recv(timeout=1.0)
                except TimeoutError:
                    if time.monotonic() - heard > silence:
                        raise wsconnection.Dropped() from None
                    continue
                heard = time.monotonic()
                got = wsconnection.parse_frame(raw, f"gateway {EVENT} events")
                if got.get("type") == "res" and got.get("id") == REQUEST_ID:
                    if got.get("ok") is not True:
                        raise Refused()
                    self.live = True
                elif got.get("type") == "event" and got.get("event") == EVENT:
                    self.changed.set()
        finally:
            client.drop()
