"""One exception hierarchy: every failure carries its exit code, so the CLI has one place that
turns failures into a message, a JSON object and a process status."""

from __future__ import annotations

import re
from enum import IntEnum
from typing import Any


class ExitCode(IntEnum):
    OK = 0
    FAILURE = 1
    USAGE = 2
    NOT_FOUND = 3
    FORBIDDEN = 4
    CORRUPT = 5
    OVER_BUDGET = 6  # usage --budget, a run refused or stopped by a budget (sessiontool.budgets)
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


class OverBudgetError(SessiontoolError):
    """A run refused before it starts: its budget's spend is at or over the limit (exit 6)."""

    code = ExitCode.OVER_BUDGET
    status = "over_budget"


class PermissionDeniedError(SessiontoolError):
    """The operating system refused access (another user's state dir or file): exit 4."""

    code = ExitCode.FORBIDDEN


class UnsafePathError(CorruptStateError):
    """A link planted in the state dir would make a write land outside it: refused (exit 5)."""


def _blocking_dir(path: str) -> str | None:
    """The first directory on the way to `path` that we may not enter (the real culprit when a
    state dir belongs to someone else), or None."""
    import os

    parts = os.path.abspath(path).split(os.sep)
    cur = os.sep
    for part in parts[1:-1]:
        cur = os.path.join(cur, part)
        if os.path.isdir(cur) and not os.access(cur, os.X_OK | os.R_OK):
            return cur
    return None


def from_os_error(exc: OSError, what: str = "") -> SessiontoolError:
    """The one wording of an OS failure, on one line: which path, what went wrong, what to do,
    and the documented exit code (permission 4, missing 3, a wrong kind of file or a link 5, the
    rest 1). Used by the CLI funnel for any OSError that core code did not word itself."""
    import errno as E

    path = exc.filename if exc.filename is not None else ""
    if isinstance(path, bytes):
        path = path.decode("utf-8", "backslashreplace")
    path = str(path)
    reason = exc.strerror or type(exc).__name__
    on = f" {path}" if path else ""
    lead = f"cannot {what}{on}" if what else f"cannot use{on}" if path else "operating system error"
    extra: dict[str, Any] = {"path": path} if path else {}
    code = exc.errno
    if code in (E.EACCES, E.EPERM):
        blocked = _blocking_dir(path) if path else None
        if blocked:
            return PermissionDeniedError(
                f"permission denied: {blocked} (needed for {path}); it belongs to another user"
                f" or is not readable: run as its owner or fix its mode (ls -ld {blocked})",
                extra={"path": blocked},
            )
        return PermissionDeniedError(
            f"permission denied: {path or reason}; run as its owner or fix its mode (ls -l)",
            extra=extra,
        )
    if code == E.ENOENT:
        return NotFoundError(f"{lead}: {reason}", extra=extra)
    if code == E.EROFS:
        return StorageError(
            f"{lead}: {reason}; use a writable state dir (--state-dir)", extra=extra
        )
    if code in (E.ENOSPC, getattr(E, "EDQUOT", E.ENOSPC)):
        return StorageError(f"{lead}: {reason}; free some and retry", extra=extra)
    if code in (E.EMFILE, E.ENFILE):
        return StorageError(f"{lead}: {reason}; raise the limit (ulimit -n) and retry", extra=extra)
    if code in (E.EISDIR, E.ENOTDIR):
        kind = "a directory where a file" if code == E.EISDIR else "a file where a directory"
        return CorruptStateError(f"{lead}: {reason} ({kind} should be; move it aside)", extra=extra)
    if code in (E.ELOOP, getattr(E, "EMLINK", E.ELOOP)):
        return UnsafePathError(f"{lead}: {reason} (a link is in the way; remove it)", extra=extra)
    return StorageError(f"{lead}: {reason}", extra=extra)


def refused_by_os(exc: SessiontoolError) -> SessiontoolError:
    """A failure core code worded itself (`cannot write X: Permission denied`, exit 1) whose
    cause is the OS refusing access is the documented exit 4, worded by the one funnel."""
    import errno as E

    cause = exc.__cause__
    if (
        exc.code == ExitCode.FAILURE
        and isinstance(cause, OSError)
        and cause.errno in (E.EACCES, E.EPERM)
    ):
        if cause.filename is None and isinstance(exc.extra.get("path"), str):
            cause.filename = exc.extra["path"]
        return from_os_error(cause)
    return exc


def describe(exc: BaseException) -> str:
    """The one wording of a failure recorded as a run's error (never a raw `[Errno 13]`)."""
    if isinstance(exc, SessiontoolError):
        return refused_by_os(exc).message
    if isinstance(exc, OSError):
        return from_os_error(exc).message
    if isinstance(exc, OverflowError):
        return f"a number too large to use: {exc}"
    return f"{type(exc).__name__}: {exc}"


def session_not_found(value: str) -> NotFoundError:
    """Exit 3 for a session nobody has. "Use the full key" helps only where the key was not
    full: a full key or a sessionId that matches nothing is just not there."""
    text = value.strip()
    if text.startswith("agent:") or _UUID_SHAPED.match(text):
        return NotFoundError(
            f"Session not found: {value}", hint="sessiontool list shows the sessions there are"
        )
    return NotFoundError(f"Session not found: {value} (use the full key from list)")


_UUID_SHAPED = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)
