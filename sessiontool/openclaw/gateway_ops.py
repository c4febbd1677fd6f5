"""sessiontool's writes in their gateway form (`gateway.write_mode` said `gateway`): label,
reset, delete and send-policy through `sessions.patch` / `sessions.reset` / `sessions.delete`.
Sends and spawns are ordinary runs whose worker hands the turn to the gateway's `agent` method
(runs/gateway_run.py). Nothing here writes the session store: the gateway does."""

from __future__ import annotations

from typing import Any

from sessiontool.context import Context
from sessiontool.openclaw import gateway


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
