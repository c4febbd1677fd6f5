"""What a refused handshake says when sessiontool came with its device and no shared secret
(a `--gateway URL` laptop after pairing): what happened to the device, and what to run.

Measured on the real 2026.9.6 gateway (tests/interop_openclaw/test_remote_netns.py): a device
token reaches sessiontool only in a `hello-ok`, and the gateway lets a device without a valid
token in only with its shared secret. So after `openclaw devices approve` (a first pairing, or a
scope upgrade, which replaces the device's token) the next command without the secret cannot
work: it is refused AUTH_TOKEN_MISSING (no token kept yet) or AUTH_TOKEN_MISMATCH (the token kept
was replaced), and one command with OPENCLAW_GATEWAY_TOKEN fetches the token; every later one
needs no secret. A device token asked for more scopes than it was approved for is refused
AUTH_SCOPE_MISMATCH, and no upgrade request is made: that too needs a command with the secret.
Everything else is worded by wsconnection.refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sessiontool.errors import ForbiddenError, SessiontoolError
from sessiontool.openclaw.wsconnection import RpcError
from sessiontool.openclaw.wsconnection import refused as _refused

if TYPE_CHECKING:
    from sessiontool.openclaw.device import Device
    from sessiontool.openclaw.secrets import Secret
    from sessiontool.state.paths import StatePaths

WITH_SECRET = "run this command once with OPENCLAW_GATEWAY_TOKEN (or OPENCLAW_GATEWAY_PASSWORD)"


def refused(
    url: str,
    secret: Secret | None,
    exc: RpcError,
    asked: frozenset[str],
    device_of: StatePaths | None,
) -> SessiontoolError:
    """The refusal of a handshake that asked for `asked`, as the error to show; `device_of`:
    the state dir whose device came with it (None: a device-less attempt). A pairing request
    the gateway names is kept with the device (device.note_request), so that the refusal after
    its approval can say so."""
    if device_of is None:
        return _refused(url, secret, exc)
    from sessiontool.openclaw import device

    dev = device.load_or_create(device_of)
    details = exc.error.get("details")
    request = details.get("requestId") if isinstance(details, dict) else None
    if exc.detail_code == "PAIRING_REQUIRED" and isinstance(request, str) and request:
        dev.note_request(url, request)
        return _pairing_required(url, secret, exc, request=request, asked=asked)
    if secret is not None:
        return _refused(url, secret, exc)
    return _without_secret(url, exc, dev, asked) or _refused(url, secret, exc)


def _pairing_required(
    url: str, secret: Secret | None, exc: RpcError, request: str, asked: frozenset[str]
) -> SessiontoolError:
    """A request to approve: the approve line, and that the next command fetches the device
    token only with the shared secret (every later one needs none)."""
    details = exc.error.get("details")
    details = details if isinstance(details, dict) else {}
    approved = details.get("approvedScopes")
    out = _refused(url, secret, exc)
    if isinstance(approved, list) and details.get("reason") == "scope-upgrade":
        held = [s for s in approved if isinstance(s, str)]
        lacking = sorted(asked - _implied(held)) or sorted(asked)
        out = ForbiddenError(
            f"OpenClaw's gateway at {url} approved sessiontool's device for "
            f"{', '.join(held) or 'no scopes'}; this command also needs {', '.join(lacking)} "
            f"(pairing request {request})",
            hint=out.hint,
            extra={**out.extra, "lackingScopes": lacking},
        )
    if out.hint and secret is not None:
        out.hint += (
            ", then run the command again with the shared secret set: it fetches the device "
            "token, and later commands need no secret"
        )
    elif out.hint:  # a gateway that asks no secret (auth mode none) lets the device in after
        out.hint += ", then run the command again"
    return out


def _without_secret(
    url: str, exc: RpcError, dev: Device, asked: frozenset[str]
) -> SessiontoolError | None:
    code = exc.detail_code
    kept = dev.token_for(url)
    request = dev.request_for(url)
    then = "; later commands need no secret"
    if code == "AUTH_SCOPE_MISMATCH" and kept:
        held = dev.scopes_for(url)
        lacking = sorted(asked - _implied(held)) or sorted(asked)
        return ForbiddenError(
            f"OpenClaw's gateway at {url} approved sessiontool's device for "
            f"{', '.join(held) or 'fewer scopes'}; this command also needs {', '.join(lacking)}",
            hint=f"the gateway asks for a scope upgrade only with its shared secret: {WITH_SECRET} "
            "set, approve the request it names on the gateway's host (openclaw devices approve "
            "REQUEST_ID), then run it once more with the secret to fetch the new device token"
            + then,
            extra={"lackingScopes": lacking, "pairing": "approved for fewer scopes"},
        )
    if code in ("AUTH_TOKEN_MISMATCH", "AUTH_DEVICE_TOKEN_MISMATCH") and kept:
        why = f"pairing request {request}" if request else "a scope upgrade, or a rotation"
        return ForbiddenError(
            f"OpenClaw's gateway at {url} no longer takes the device token sessiontool kept for "
            f"it: an `openclaw devices approve` ({why}) replaced it, and the gateway hands the new "
            "one only to a connection that also sends its shared secret",
            hint=f"{WITH_SECRET} set to the gateway's secret: the new device token is kept{then}",
            extra={"pairing": "device token replaced"},
        )
    if code != "AUTH_TOKEN_MISSING" or kept:
        return None
    if request:
        return ForbiddenError(
            f"OpenClaw's gateway at {url} has no device token for sessiontool yet (pairing "
            f"request {request}): it hands one out only to a connection that also sends its "
            "shared secret, after `openclaw devices approve`",
            hint=f"once the request is approved on the gateway's host (openclaw devices approve "
            f"{request}), {WITH_SECRET} set to the gateway's secret: the device token is kept"
            + then,
            extra={"pairing": f"requested (request {request})", "pairingRequestId": request},
        )
    return ForbiddenError(
        f"OpenClaw's gateway at {url} needs its shared secret: sessiontool has none for it, "
        "and no device token from an earlier pairing",
        hint="set OPENCLAW_GATEWAY_TOKEN (or OPENCLAW_GATEWAY_PASSWORD) to the gateway's secret: "
        "the gateway then asks to pair sessiontool's device (openclaw devices approve on its "
        "host), and after one more command with the secret the device token sessiontool keeps "
        "is enough",
        extra={"pairing": "not paired"},
    )


def _implied(held: list[str]) -> frozenset[str]:
    """The scopes a grant covers (admin covers all; write covers read), as the gateway checks."""
    got = set(held)
    if "operator.write" in got:
        got.add("operator.read")
    if "operator.admin" in got:
        got |= {"operator.read", "operator.write"}
    return frozenset(got)
