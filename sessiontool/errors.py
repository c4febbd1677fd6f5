"""One exception hierarchy: every failure carries its exit code, so the CLI has one place that
turns failures into a message, a JSON object and a process status."""

from __future__ import annotations

from enum import IntEnum
from typing import Any


class ExitCode(IntEnum):
    OK = 0
    FAILURE = 1
    USAGE = 2
    NOT_FOUND = 3
    FORBIDDEN = 4
    CORRUPT = 5
    OVER_BUDGET = 6  # usage --budget: the period's cost is over the budget
    BUSY = 75
    TIMEOUT = 124
    INTERRUPTED = 130
    TERMINATED = 143


class SessiontoolError(Exception):
    """Base of every expected failure; anything else reaching the CLI is a bug."""

    code: ExitCode = ExitCode.FAILURE
    status: str = "error"

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.extra = dict(extra or {})

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status, "error": self.message, "code": int(self.code)}
        out.update(self.extra)
        return out


class UsageError(SessiontoolError):
    code = ExitCode.USAGE


class ConfigError(UsageError):
    pass


class NotFoundError(SessiontoolError):
    code = ExitCode.NOT_FOUND


class ForbiddenError(SessiontoolError):
    code = ExitCode.FORBIDDEN
    status = "forbidden"


class CorruptStateError(SessiontoolError):
    code = ExitCode.CORRUPT


class BusyError(SessiontoolError):
    code = ExitCode.BUSY


class StorageError(SessiontoolError):
    """The disk refused a write (full, read-only, permissions): exit 1, nothing half-written."""

    code = ExitCode.FAILURE


def session_not_found(value: str) -> NotFoundError:
    return NotFoundError(f"Session not found: {value} (use the full key from list)")
