"""OpenClaw's own session tools run through its gateway: `tools.invoke {name, sessionKey, args}`
(operator.write; the package's docs/gateway/protocol/operator-methods.md), "through the same
gateway policy path as /tools/invoke".

Why: a spawn or an agent-to-agent send made by OpenClaw's own `sessions_spawn` / `sessions_send`
leaves OpenClaw's traces (the child's row: `spawnedBy`, `createdVia: "spawn"`, its sub-agent
role and control scope; its first message "[Subagent Context] … [Subagent Task] …"; the
reply-back turns and the hidden announce step of an agent-to-agent send), which no other public
method writes ("written once by trusted creation paths", rpc-session-control.md).

That policy path denies both tools by default (docs/gateway/tools-invoke-http-api.md, the hard
deny list); the operator lifts it with `gateway: { tools: { allow: ["sessions_spawn",
"sessions_send"] } }`. Denied, `tools.invoke` answers the envelope `{ok: false, error: {code:
"not_found", message: "Tool not available: NAME"}}`; a gateway without the method (before it
existed) refuses the request. Either way sessiontool emulates the tool with the public methods
(runs/gateway_run.py): detected per gateway, never configured by hand.

Measured on the real 2026.9.6: allowed, a call without arguments answers `{ok: false, error:
{code: "internal_error", message: "task required"}}` (`"message required"` for sessions_send)
and changes nothing, so it is the probe; operator.write is enough for both tools.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from sessiontool.errors import ExitCode, SessiontoolError

if TYPE_CHECKING:
    from sessiontool.state.paths import StatePaths

SPAWN, SEND = "sessions_spawn", "sessions_send"
ALLOW_LINE = 'gateway: { tools: { allow: ["sessions_spawn", "sessions_send"] } }'
CALL_TIMEOUT_S = 60.0

# Per gateway (its URL) and tool: True allowed, False not, with when it was learnt. Kept for
# KNOWN_FOR_S only, so a long-lived process (the `mcp` server) sees a changed gateway config.
_known: dict[tuple[str, str], tuple[bool, float]] = {}
KNOWN_FOR_S = 60.0


def _learn(url: str, name: str, answer: bool) -> None:
    _known[(url, name)] = (answer, time.monotonic())


def _recall(url: str, name: str) -> bool | None:
    got = _known.get((url, name))
    if got is None or time.monotonic() - got[1] > KNOWN_FOR_S:
        return None
    return got[0]


class ToolRefused(SessiontoolError):
    """The tool ran and failed, or its policy refused it (`ok: false` other than not_found):
    exit 1 with OpenClaw's message."""


class ToolForbidden(ToolRefused):
    """The tool answered `status: "forbidden"` (2026.9.6's sessions_spawn for a `sandbox` or
    `cwd` its policy refuses): exit 4 and `status: forbidden`, as sessiontool's own refusal of
    the same spawn on its own store, so a caller tells a policy refusal from a failure the
    same way on both stores."""

    code = ExitCode.FORBIDDEN
    status = "forbidden"


def refusal(name: str, details: dict[str, Any], what: str) -> ToolRefused:
    """The error for a tool's answer that did not start what was asked: OpenClaw's words, and
    its `forbidden` kept as such."""
    why = details.get("error") or details.get("status") or what
    cls = ToolForbidden if details.get("status") == "forbidden" else ToolRefused
    return cls(f"OpenClaw's {name}: {why}")


def _gateway_url(paths: StatePaths) -> str:
    from sessiontool.openclaw import gateway

    return gateway.find(paths).url


def _unavailable(exc: SessiontoolError) -> bool:
    """The gateway refused the request before running anything: no `tools.invoke` (a release
    older than the method), or not for this client (its scopes). A call that timed out or a
    connection that dropped is not that: the tool may have run."""
    return "unknown method" in exc.message.lower() or exc.extra.get("gatewayCode") in (
        "INVALID_REQUEST",
        "FORBIDDEN",
    )


def invoke(
    paths: StatePaths,
    name: str,
    session_key: str,
    args: dict[str, Any],
    *,
    idempotency_key: str | None = None,
    timeout_s: float = CALL_TIMEOUT_S,
) -> dict[str, Any] | None:
    """Run OpenClaw's tool `name` for the session `session_key`: the tool's `details` (its
    JSON result), or None when this gateway does not offer the tool to sessiontool (denied by
    its tool policy, or no `tools.invoke`). Raises ToolRefused when the tool itself failed."""
    from sessiontool.openclaw import gateway

    params: dict[str, Any] = {"name": name, "sessionKey": session_key, "args": args}
    if idempotency_key:
        params["idempotencyKey"] = idempotency_key
    url = _gateway_url(paths)
    try:
        data = gateway.call(paths, "tools.invoke", params, timeout_s=timeout_s)
    except SessiontoolError as exc:
        if _unavailable(exc):
            _learn(url, name, False)
            return None
        raise
    if data.get("ok") is True:
        _learn(url, name, True)
        output = data.get("output")
        details = output.get("details") if isinstance(output, dict) else None
        return details if isinstance(details, dict) else {}
    raw = data.get("error")
    err: dict[str, Any] = raw if isinstance(raw, dict) else {}
    if err.get("code") == "not_found":
        _learn(url, name, False)
        return None
    _learn(url, name, True)
    message = err.get("message") if isinstance(err.get("message"), str) else "failed"
    raise ToolRefused(
        f"OpenClaw's {name} (tools.invoke): {message}",
        extra={"gatewayCode": str(err.get("code") or "")},
    )


def allowed(paths: StatePaths, name: str, session_key: str) -> bool:
    """Whether this gateway runs OpenClaw's tool `name` for sessiontool: asked with an
    argument-less call, which the tool refuses before doing anything, once per process and
    gateway (a long-lived process asks again after KNOWN_FOR_S)."""
    url = _gateway_url(paths)
    known = _recall(url, name)
    if known is not None:
        return known
    try:
        invoke(paths, name, session_key, {})
    except ToolRefused:
        pass  # it ran (and wanted its arguments): allowed
    except SessiontoolError:
        return False  # not reachable or refused: the caller's own call says why
    return bool(_recall(url, name))


def doctor_line(paths: StatePaths, info: dict[str, Any]) -> str | None:
    """doctor's line about the gateway `info` (gateway.describe) that writes go through and
    that let sessiontool in: which way a spawn and an agent-to-agent send go there."""
    mode, hs = str(info.get("mode") or ""), info.get("handshake")
    if not mode.startswith("gateway") or not isinstance(hs, dict) or hs.get("scopes") is None:
        return None
    return path_line(paths, "main")


def path_line(paths: StatePaths, session_key: str) -> str:
    """Which way a spawn and an agent-to-agent send go on this gateway."""
    if allowed(paths, SPAWN, session_key) and allowed(paths, SEND, session_key):
        return "OpenClaw's own sessions_spawn"
    return "emulated; add sessions_spawn, sessions_send to gateway.tools.allow for OpenClaw's own"
