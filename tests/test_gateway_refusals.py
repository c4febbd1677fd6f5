"""What a refused handshake says (wsconnection.refused): a sentence naming what happened and
what to run, for the refusals OpenClaw 2026.9.6 sends a device or a shared secret
(its connect-error detail codes)."""

from __future__ import annotations

from typing import Any

from sessiontool.openclaw.secrets import Secret
from sessiontool.openclaw.wsconnection import RpcError, refused

URL = "wss://gw.example:18789"


def err(code: str, message: str = "unauthorized", **details: Any) -> RpcError:
    return RpcError(
        {"code": "INVALID_REQUEST", "message": message, "details": {"code": code, **details}}
    )


def test_a_read_approved_device_asked_to_write_names_the_scopes() -> None:
    e = refused(URL, None, err("AUTH_SCOPE_MISMATCH", requestedScopes=["operator.write"]))
    assert "approved sessiontool's device for fewer scopes" in e.message
    assert "operator.write" in e.message and "gateway.auth" not in (e.hint or "")
    assert "openclaw devices approve" in (e.hint or "")


def test_a_replaced_device_token_says_what_to_run() -> None:
    e = refused(URL, None, err("AUTH_DEVICE_TOKEN_MISMATCH"))
    assert "no longer takes the device token" in e.message
    assert "OPENCLAW_GATEWAY_TOKEN" in (e.hint or "")


def test_no_shared_secret_is_a_sentence_and_no_openclaw_json_is_assumed() -> None:
    e = refused(URL, None, err("AUTH_TOKEN_MISSING"))
    assert "sessiontool found no shared secret to send" in e.message
    assert "the secret came from" not in e.message
    assert "openclaw.json" not in (e.hint or "")
    env = refused(
        URL, Secret("token", "x", "env OPENCLAW_GATEWAY_TOKEN"), err("AUTH_TOKEN_MISMATCH")
    )
    assert "the secret came from env OPENCLAW_GATEWAY_TOKEN" in env.message
    assert "openclaw.json" not in (env.hint or "")
    conf = refused(
        URL, Secret("token", "x", "config gateway.auth.token"), err("AUTH_TOKEN_MISMATCH")
    )
    assert "check gateway.auth.token in openclaw.json" in (conf.hint or "")
