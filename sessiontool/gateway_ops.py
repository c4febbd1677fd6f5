"""sessiontool's writes in their gateway form (`gateway.write_mode` said `gateway`): label,
reset, delete and send-policy through `sessions.patch` / `sessions.reset` / `sessions.delete`,
and send through the gateway's `agent` method (`--expect-final`) with sessiontool's timeout
(exit 124), JSON shapes and exit codes on top. Nothing here writes the session store: the gateway does."""

from __future__ import annotations

import uuid
from typing import Any

from sessiontool import gateway
from sessiontool.context import Context

AGENT_TIMEOUT_S = 600.0  # how long a worker waits for the gateway's final answer at most


def _entry(data: dict[str, Any]) -> dict[str, Any] | None:
    e = data.get("entry")
    return e if isinstance(e, dict) else None


def set_label(ctx: Context, full_key: str, label: str) -> dict[str, Any]:
    data = gateway.call(ctx.paths, "sessions.patch", {"key": full_key, "label": label})
    return {"sessionKey": ctx.display(full_key), "entry": _entry(data), "via": "gateway"}


def reset(ctx: Context, full_key: str, previous: str | None) -> dict[str, Any]:
    data = gateway.call(ctx.paths, "sessions.reset", {"key": full_key})
    return {
        "sessionKey": ctx.display(full_key),
        "entry": _entry(data),
        "previousSessionId": previous,
        "via": "gateway",
    }


def delete(ctx: Context, full_key: str) -> dict[str, Any]:
    data = gateway.call(ctx.paths, "sessions.delete", {"key": full_key, "deleteTranscript": True})
    archived = data.get("archived")
    first = archived[0] if isinstance(archived, list) and archived else None
    return {
        "sessionKey": ctx.display(full_key),
        "entry": None,
        "archived": first if isinstance(first, str) else None,
        "via": "gateway",
    }


def set_send_policy(ctx: Context, full_key: str, wanted: str | None) -> dict[str, Any] | None:
    """sessions.patch with sendPolicy allow|deny, or null to clear; the entry afterwards."""
    data = gateway.call(ctx.paths, "sessions.patch", {"key": full_key, "sendPolicy": wanted})
    return _entry(data)


# -- send ------------------------------------------------------------------------------------


def reply_text(result: dict[str, Any]) -> str:
    """The reply of an `agent` final answer: its payloads' text, joined."""
    res = result.get("result") if isinstance(result.get("result"), dict) else result
    payloads = res.get("payloads") if isinstance(res, dict) else None
    texts = []
    for p in payloads if isinstance(payloads, list) else []:
        if isinstance(p, dict) and isinstance(p.get("text"), str):
            texts.append(p["text"])
    return "\n\n".join(texts)


def send(
    ctx: Context, full_key: str, agent_id: str, message: str, timeout: float
) -> tuple[dict[str, Any], int]:
    """Hand the turn to the gateway's `agent` method and wait up to `timeout` for its final
    answer. The gateway's own run id (the idempotency key) is returned; a timeout (exit 124)
    leaves the run going in the gateway, and `history` shows its reply when it lands.
    `--timeout 0` returns at once (the call goes on in a detached process)."""
    import subprocess
    import sys

    from sessiontool.errors import ExitCode

    run_id = f"sessiontool-{uuid.uuid4()}"
    display = ctx.display(full_key)
    params = {"sessionKey": full_key, "message": message, "idempotencyKey": run_id}
    if timeout <= 0:
        code = (
            "import json, sys; from sessiontool import gateway; "
            "from sessiontool.stores.paths import StatePaths; "
            "gateway.call(StatePaths(sys.argv[1]), 'agent', json.loads(sys.argv[2]), "
            f"timeout_s={AGENT_TIMEOUT_S}, expect_final=True)"
        )
        import json

        subprocess.Popen(
            [sys.executable, "-c", code, str(ctx.paths.root), json.dumps(params)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        return {"runId": run_id, "status": "accepted", "sessionKey": display, "via": "gateway"}, 0
    try:
        result = gateway.call(ctx.paths, "agent", params, timeout_s=timeout, expect_final=True)
    except gateway.GatewayError as exc:
        if "no answer" in exc.message or "timeout" in exc.message.lower():
            return {
                "runId": run_id,
                "status": "timeout",
                "error": "still running in OpenClaw's gateway after the wait timed out; "
                "its reply will show in `sessiontool history`",
                "sessionKey": display,
                "via": "gateway",
            }, int(ExitCode.TIMEOUT)
        return {
            "runId": run_id,
            "status": "error",
            "error": exc.message,
            "sessionKey": display,
            "via": "gateway",
        }, int(ExitCode.FAILURE)
    if result.get("status") == "ok":
        return {
            "runId": run_id,
            "status": "ok",
            "reply": reply_text(result),
            "sessionKey": display,
            "via": "gateway",
        }, 0
    return {
        "runId": run_id,
        "status": "error",
        "error": f"the gateway's run ended with status {result.get('status')}",
        "sessionKey": display,
        "via": "gateway",
    }, int(ExitCode.FAILURE)
