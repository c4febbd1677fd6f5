"""What a refused handshake says (wsconnection.refused; pairing.refused when a device came): a
sentence naming what happened and what to run, for the refusals OpenClaw 2026.9.6 sends a device
or a shared secret (its connect-error detail codes)."""

from __future__ import annotations

from pathlib import Path
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


def test_a_pairing_request_to_a_gateway_that_asks_no_secret_says_run_again(
    tmp_path: Path,
) -> None:
    """No shared secret to mention (auth mode none): after the approval the next command is
    let in with the device alone. The request is kept with the device for a later refusal."""
    from sessiontool.openclaw import device, pairing
    from sessiontool.state.paths import StatePaths

    paths = StatePaths(tmp_path)
    asked = frozenset({"operator.read"})
    e = pairing.refused(URL, None, err("PAIRING_REQUIRED", requestId="r-1"), asked, paths)
    assert (
        e.hint
        == "on the gateway's host run: openclaw devices approve r-1, then run the command again"
    )
    assert device.load_or_create(paths).request_for(URL) == "r-1"
    with_secret = pairing.refused(
        URL,
        Secret("token", "x", "env OPENCLAW_GATEWAY_TOKEN"),
        err("PAIRING_REQUIRED", requestId="r-2"),
        asked,
        paths,
    )
    assert "again with the shared secret set: it fetches the device token" in (
        with_secret.hint or ""
    )
