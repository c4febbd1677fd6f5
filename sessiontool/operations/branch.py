"""`fork` and `rewind`: a session's transcript taken back to an earlier point, into a new
session (fork) or in place (rewind), as OpenClaw's `sessions.fork` / `sessions.rewind` do: the
state just before one of the user's messages, whose text comes back (`editorText`). Written by
the session's writer (runs/files_branch.py on sessiontool's store; the gateway on OpenClaw's).

The lane rule: a rewind under a queued or running run is refused (exit 4, naming the run), as
it would cut the transcript that run is writing; a fork only reads, under the transcript lock,
so it is taken at once (a run's turn then lands after the copy, not in it).
"""

from __future__ import annotations

from typing import Any

from sessiontool.context import Context
from sessiontool.runs.sessionlife import check_generation, locate, refuse_busy


def fork(
    ctx: Context,
    value: str | None,
    *,
    at: str | None = None,
    label: str | None = None,
    by_label: str | None = None,
) -> dict[str, Any]:
    """A new session, KEY's transcript up to just before the user message `at` (all of it
    without), its lineage in `forkSource`; `label` names the new one."""
    from sessiontool.operations.manage import validate_label

    new_label = validate_label(label) if label is not None else None
    r, writer = locate(ctx, "fork", value, by_label)
    return writer.fork(ctx, r, _message_id(at) if at is not None else None, new_label)


def rewind(
    ctx: Context,
    value: str | None,
    at: str,
    *,
    label: str | None = None,
    expect: str | None = None,
) -> dict[str, Any]:
    """The session continues from just before the user message `at`; what followed is kept
    in an archive (`<transcript>.rewound.<time>`; OpenClaw keeps it as a branch)."""
    r, writer = locate(ctx, "rewind", value, label)
    check_generation(ctx, r, expect)
    refuse_busy(ctx, r, "rewind")
    return writer.rewind(ctx, r, _message_id(at))


def _message_id(text: str) -> str:
    from sessiontool.errors import UsageError

    mid = text.strip()
    if not mid or len(mid) > 200 or any(c in mid for c in '"\\/') or not mid.isprintable():
        raise UsageError(f"invalid message id {text!r} (history --json lists them: messageIds)")
    return mid


def compact(
    ctx: Context,
    value: str | None,
    *,
    keep: int | None = None,
    timeout: float = 300.0,
    label: str | None = None,
) -> tuple[dict[str, Any], int]:
    """Summarize the session's older turns into one `compaction` entry, keeping the last
    `keep` turns (and its code: 0, 1 failed, 124 still running). On sessiontool's store a run
    of kind `compact`, queued in the session's lane behind the runs there; on OpenClaw's the
    gateway's `sessions.compact`, which refuses a session with work queued or running (exit 4)."""
    from sessiontool.errors import UsageError

    if keep is not None and keep < 0:
        raise UsageError("--keep must not be negative")
    if timeout < 0:
        raise UsageError("--timeout must not be negative")
    r, writer = locate(ctx, "compact", value, label)
    if writer.kind == "gateway":
        if keep is not None:
            raise UsageError(
                "--keep is sessiontool's own: OpenClaw's compaction keeps its recent-token "
                "budget (agents.defaults.compaction.keepRecentTokens)"
            )
        refuse_busy(ctx, r, "compact")
        return _gateway_compact(ctx, r), 0
    from sessiontool.runs import compaction

    return compaction.submit(ctx, r, compaction.DEFAULT_KEEP if keep is None else keep, timeout)


def _gateway_compact(ctx: Context, r: Any) -> dict[str, Any]:
    from sessiontool.errors import ForbiddenError, SessiontoolError
    from sessiontool.openclaw import gateway

    try:
        data = gateway.call(ctx.paths, "sessions.compact", {"key": r.key}, timeout_s=600.0)
    except SessiontoolError as exc:
        if "active run" in exc.message or "queued work" in exc.message:
            raise ForbiddenError(f"compact: {exc.message}") from exc
        raise
    out: dict[str, Any] = {
        "status": "ok",
        "sessionKey": ctx.display(r.key),
        "compaction": {"compacted": data.get("compacted") is True},
        "via": "gateway",
    }
    if isinstance(data.get("reason"), str):
        out["compaction"]["reason"] = data["reason"]
    return out
