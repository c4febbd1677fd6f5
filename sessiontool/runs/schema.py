"""The one schema of a run record, checked whenever a record is read.

A record is a file anyone with access to the state dir can edit, and a value of the wrong type
(a `status` that is an object, a `seq` that is a string) used to reach code that hashed or
compared it and killed the command, and with it the session's lane. Every field sessiontool
reads is checked here, by type and range, before any other module sees the record; a record
that fails is skipped and reported (listings, doctor), exit 5 when named, quarantined by
`doctor --fix`. Fields this version does not know are kept and not checked (a newer version's).
"""

from __future__ import annotations

from typing import Any

FINISHED_STATUSES = frozenset({"ok", "error", "timeout", "aborted", "lost"})
ACTIVE_STATUSES = frozenset({"queued", "running"})
STATUSES = FINISHED_STATUSES | ACTIVE_STATUSES
KINDS = frozenset({"send", "spawn", "step", "compact"})
# The record format this version writes (`version`); a record without one is version 1 (before
# the field existed) and reads the same. Raise it when a field changes meaning, not when one is
# added: readers keep fields they do not know.
RECORD_VERSION = 2
# A millisecond time past this (year 5138) is not one: a clock given in microseconds.
MAX_MS = 100_000_000_000_000
# Seconds past this (about 3,000 years) are not a timeout anyone meant.
MAX_SECONDS = 100_000_000_000


def _str(v: Any) -> bool:
    return isinstance(v, str)


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_ms(v: Any) -> bool:
    return _int(v) and 0 <= v <= MAX_MS


def _count(v: Any) -> bool:
    return _int(v) and 0 <= v < 2**63


def _pid(v: Any) -> bool:
    return _int(v) and 0 < v < 2**31


def _seconds(v: Any) -> bool:
    """A finite number of seconds (negative is "do not wait", as the CLI takes it)."""
    return (_int(v) or isinstance(v, float)) and -MAX_SECONDS <= v <= MAX_SECONDS


def _bool(v: Any) -> bool:
    return isinstance(v, bool)


def _dict(v: Any) -> bool:
    return isinstance(v, dict)


def _status(v: Any) -> bool:
    return isinstance(v, str) and v in STATUSES


def _follow_up(v: Any) -> bool:
    if not isinstance(v, dict):
        return False
    nxt = v.get("next")
    if nxt is not None and not isinstance(nxt, str):
        return False
    for k in ("latest", "incoming", "text", "to", "mode", "error"):
        if v.get(k) is not None and not isinstance(v[k], str):
            return False
    if v.get("delivering") is not None and not isinstance(v["delivering"], bool):
        return False
    n = v.get("announceAttempt")
    if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 1):
        return False
    return all(v.get(k) is None or is_ms(v[k]) for k in ("attemptAt", "injectAt"))


def _announce(v: Any) -> bool:
    return isinstance(v, dict) and all(
        x is None or isinstance(x, str)
        for x in (v.get(k) for k in ("round1", "latest", "childReply"))
    )


def _amount(v: Any) -> bool:
    import math

    return (_int(v) or isinstance(v, float)) and math.isfinite(v) and v >= 0


def _cost_limit(v: Any) -> bool:
    """`costLimit`: the USD a run may spend (`usd`), and the budget that set it."""
    return (
        isinstance(v, dict)
        and _amount(v.get("usd"))
        and all(v.get(k) is None or _amount(v[k]) for k in ("limit", "spend"))
        and all(v.get(k) is None or _str(v[k]) for k in ("budget", "window"))
    )


# field → (check, what it must be). `None` is accepted only where listed in NULLABLE.
FIELDS: dict[str, tuple[Any, str]] = {
    "status": (_status, "a run status"),
    "outcome": (_status, "a run status"),
    "sessionKey": (_str, "a string"),
    "agentId": (_str, "a string"),
    "requesterSessionKey": (_str, "a string"),
    "startedBy": (_str, "a string"),
    "parentRunId": (_str, "a string"),
    "sessionId": (_str, "a string"),
    "message": (_str, "a string"),
    "system": (_str, "a string"),
    "label": (_str, "a string"),
    "cleanup": (_str, "a string"),
    "via": (_str, "a string"),
    "tool": (_str, "a string"),
    "step": (_str, "a string"),
    "reply": (_str, "a string"),
    "error": (_str, "a string"),
    "model": (_str, "a string"),
    "modelProvider": (_str, "a string"),
    "channel": (_str, "a string"),
    "to": (_str, "a string"),
    "accountId": (_str, "a string"),
    "thinkingLevel": (_str, "a string"),
    "thinking": (_str, "a string"),  # thinkingLevel, as an older sessiontool wrote it
    "cwd": (_str, "a string"),
    "context": (_str, "a string"),
    "spawnMode": (_str, "a string"),
    "taskName": (_str, "a string"),
    "completion": (_str, "a string"),
    "sandbox": (_str, "a string"),
    "spawnDepth": (_count, "a count"),
    "maxSpawnDepth": (_count, "a count"),
    "attachments": (_dict, "an object"),
    "createdAt": (is_ms, "a time in milliseconds"),
    "startedAt": (is_ms, "a time in milliseconds"),
    "workerStartedAt": (is_ms, "a time in milliseconds"),
    "endedAt": (is_ms, "a time in milliseconds"),
    "announcedAt": (is_ms, "a time in milliseconds"),
    "recoveredAt": (is_ms, "a time in milliseconds"),
    "version": (_count, "a count"),
    "seq": (_count, "a count"),
    "turn": (_count, "a count"),
    "maxTurns": (_count, "a count"),
    "keep": (_count, "a count"),
    "compaction": (_dict, "an object"),
    "pid": (_pid, "a process id"),
    "agentPid": (_pid, "a process id"),
    "timeoutSeconds": (_seconds, "a number of seconds"),
    "runTimeoutSeconds": (_seconds, "a number of seconds"),
    "a2a": (_bool, "true or false"),
    "deliver": (_bool, "true or false"),
    "gatewayDeliver": (_bool, "true or false"),
    "skipIndex": (_bool, "true or false"),
    "provenance": (_dict, "an object"),
    "usage": (_dict, "an object"),
    "announce": (_announce, "an object of strings"),
    "followUp": (_follow_up, "a follow-up object"),
    "costLimit": (_cost_limit, "a cost limit (an object with usd)"),
    "abortReason": (_str, "a string"),
}
NULLABLE = frozenset({"label", "system", "reply", "error", "cleanup", "runTimeoutSeconds"})


def problem(data: Any, run_id: str) -> str | None:
    """Why `data` is not a usable run record named `run_id`, or None."""
    if not isinstance(data, dict):
        return "not a JSON object"
    if data.get("runId") != run_id:
        rid = data.get("runId")
        return f"runId {rid!r} does not match the file name" if _str(rid) else "no runId"
    kind = data.get("kind")
    if not (isinstance(kind, str) and kind in KINDS):
        return f"unknown kind {_show(kind)}"
    if "status" not in data:
        return "no status"
    if not data.get("sessionKey") or not _str(data.get("sessionKey")):
        return "no sessionKey"
    if "createdAt" not in data:
        return "no createdAt"
    for name, (check, what) in FIELDS.items():
        if name not in data:
            continue
        value = data[name]
        if value is None and name in NULLABLE:
            continue
        if not check(value):
            return f"{name} {_show(value)} is not {what}"
    return None


def _show(v: Any) -> str:
    """A short, safe rendering of a bad value (it may be huge or hold control characters)."""
    if isinstance(v, dict):
        return "(an object)"
    if isinstance(v, list):
        return "(a list)"
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."
