"""`doctor` on a remote gateway (`--gateway URL` and the like, openclaw/target.py): one line each
for the connection, sessiontool's identity there (its device id), the pairing and the scopes
granted, and a problem for what stops commands from working there: nothing answers, the device
is not approved yet, a refused credential, a protocol sessiontool does not speak, no
operator.write."""

from __future__ import annotations

from typing import Any

from sessiontool.state.paths import StatePaths


def remote_checks(
    paths: StatePaths, info: dict[str, Any]
) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """doctor on a remote gateway: the connection, sessiontool's identity there, the pairing
    and the scopes granted, each a line (and, when it stops commands from working, a problem).
    Reads the device key without creating one: doctor never writes."""
    from sessiontool.openclaw import wsclient
    from sessiontool.openclaw.gateway import find

    g = find(paths)  # its handshake, made by describe(), is what is reported
    where = g.url
    problems: list[dict[str, str]] = []
    dev_id = _device_id(paths)
    hello = g._hello
    refusal = g._refusal
    out: dict[str, Any] = {
        "connection": "unreachable",
        "identity": f"device {dev_id}" if dev_id else "no device key yet",
        "deviceId": dev_id,
        "pairing": "unknown",
        "scopes": None,
    }
    if not info["reachable"]:
        problems.append(
            {
                "kind": "gateway-unreachable",
                "path": where,
                "detail": f"nothing answers at {where}: no command can reach the gateway",
                "hint": g.how_to_start(),
            }
        )
        return out, problems
    if hello is not None:
        out["connection"] = (
            f"connected: OpenClaw {hello.version or '(version unknown)'}, "
            f"protocol {hello.protocol}, auth {hello.auth}"
        )
        out["scopes"] = list(hello.scopes)
        if hello.identity.startswith("device "):
            out["pairing"] = "paired (the gateway issued a device token)"
        else:
            out["identity"] = "device-less cli (loopback with a shared secret)" + (
                f"; sessiontool's device {dev_id}" if dev_id else ""
            )
            out["pairing"] = "not needed (loopback with a shared secret)"
        granted = frozenset(hello.scopes)
        if not wsclient._covered(frozenset({wsclient.WRITE}), granted):
            problems.append(
                {
                    "kind": "gateway-scopes",
                    "path": where,
                    "detail": "the gateway granted sessiontool only "
                    f"{', '.join(sorted(granted)) or 'no scopes'}: send, spawn, label and abort "
                    "need operator.write (reset, delete and policy operator.admin)",
                    "hint": "approve sessiontool's device for operator.write on the gateway's "
                    "host (openclaw devices list / approve)",
                }
            )
        return out, problems
    if refusal is not None:
        request_id = refusal.extra.get("pairingRequestId")
        out["connection"] = f"refused: {refusal.message}"
        said = refusal.extra.get("pairing")  # the device without a shared secret (pairing.py)
        if isinstance(said, str):
            out["pairing"] = said
            kind = "gateway-refused" if said == "device token replaced" else "gateway-not-paired"
        elif request_id or "approve" in (refusal.hint or ""):
            out["pairing"] = f"pending approval (request {request_id or '?'})"
            kind = "gateway-not-paired"
        else:
            kind = "gateway-refused"
        problems.append(
            {
                "kind": kind,
                "path": where,
                "detail": refusal.message,
                "hint": refusal.hint or "check OPENCLAW_GATEWAY_TOKEN / OPENCLAW_GATEWAY_PASSWORD",
            }
        )
    elif g._transport == "cli":
        out["connection"] = f"refused: {g._refusal_text}"
        problems.append(
            {
                "kind": "gateway-protocol",
                "path": where,
                "detail": f"{g._refusal_text}",
                "hint": "update OpenClaw on the gateway's host",
            }
        )
    return out, problems


def spawn_line(paths: StatePaths, remote: dict[str, Any]) -> str | None:
    """Which way a spawn and an agent-to-agent send go on a remote gateway: OpenClaw's own
    tools where its tool policy lets sessiontool run them (asked as own_tools does, which
    needs operator.write), else the emulation, with where to lift the policy: the gateway's
    host (this machine has no openclaw.json of its own to edit). None when not connected
    (the connection line says why); unknown without operator.write (doctor asks no upgrade:
    that would leave a pairing request on the gateway)."""
    from sessiontool.openclaw import own_tools, wsclient

    scopes = remote.get("scopes")
    if scopes is None:
        return None
    if not wsclient._covered(frozenset({wsclient.WRITE}), frozenset(scopes)):
        return "unknown until the gateway grants sessiontool operator.write (spawn needs it)"
    own = all(own_tools.allowed(paths, t, "main") for t in (own_tools.SPAWN, own_tools.SEND))
    if own:
        return "OpenClaw's own sessions_spawn"
    return (
        "emulated; add sessions_spawn, sessions_send to gateway.tools.allow on the gateway's "
        "host for OpenClaw's own"
    )


def _device_id(paths: StatePaths) -> str | None:
    """sessiontool's device id for this state dir (the SHA-256 of its public key), when it has
    one; never creates it."""
    import base64
    import hashlib
    import json

    from sessiontool.openclaw import device

    try:
        data = json.loads((paths.tool_dir / device.FILE_NAME).read_bytes())
        raw = base64.urlsafe_b64decode(str(data["publicKey"]) + "==")
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return hashlib.sha256(raw).hexdigest() if len(raw) == 32 else None
