"""The errors a connection to OpenClaw's gateway ends in (wsconnection.py opens it, wsclient.py
decides what to retry): what the gateway answered, that it could not be reached in time, that a
frame was no gateway's, that the socket dropped. Their own module so that what only catches one
(the TUI's subscription, the gateway writer) need not read the protocol's code."""

from __future__ import annotations

from typing import Any

from sessiontool.errors import ExitCode, SessiontoolError

MAX_RETRY_AFTER_S = 10.0


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


class HandshakeTimeout(GatewayTimeout):
    """A connection attempt ran out its deadline (CONNECT_TIMEOUT_S)."""


class BadFrame(GatewayError):
    """The gateway sent what no OpenClaw gateway sends (a WebSocket protocol error, a message
    nested too deep): said at once, never retried as a dropped connection is."""


class Dropped(Exception):
    """The socket closed under a request."""


class RpcError(Exception):
    """An error answer of the gateway: its `code`, details and whether to retry it."""

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
