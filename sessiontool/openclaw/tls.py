"""`wss://` to OpenClaw's gateway as its own client does it (packages/gateway-client
`websocket-transport`): without a pin, the certificate checked against the system's trust store
(SSL_CERT_FILE adds one) and the host name; with `gateway.remote.tlsFingerprint`, OpenClaw's
rule: the chain is not checked, the leaf certificate's SHA-256 must equal the pin. The pin is
compared inside the TLS wrap, before websocket.py sends its HTTP upgrade, so a wrong certificate
never receives a token, a password, a device token or a device signature.

Imported only to connect to a wss:// URL (or one with a pin): `list` on a local state dir never
builds a TLS context.
"""

from __future__ import annotations

import hashlib
import re
import ssl
from typing import Any, NoReturn

from sessiontool.errors import ForbiddenError, UsageError

HEX = re.compile(r"[0-9a-fA-F]{64}")
COLONS = re.compile(r"(?:[0-9a-fA-F]{2}:){31}[0-9a-fA-F]{2}")


class PinMismatch(ssl.SSLError):
    """The gateway's certificate is not the pinned one (raised inside the TLS wrap)."""

    def __init__(self, got: str) -> None:
        super().__init__("gateway tls fingerprint mismatch")
        self.got = got


def normalize_fingerprint(raw: str) -> str | None:
    """OpenClaw's `normalizeTlsFingerprint`: 64 hex digits, or 32 colon-separated pairs, with an
    optional `sha256:` prefix, any case → lower-case hex; None for anything else."""
    value = re.sub(r"^sha256:", "", raw.strip(), flags=re.IGNORECASE)
    if HEX.fullmatch(value):
        return value.lower()
    if COLONS.fullmatch(value):
        return value.replace(":", "").lower()
    return None


def context(url: str, pin: str | None) -> ssl.SSLContext:
    """The TLS context for `url`; a pin on a ws:// URL, or one that is no SHA-256, is exit 2
    (OpenClaw refuses both too)."""
    if not url.startswith("wss://"):
        raise UsageError(
            f"a TLS fingerprint is configured for {url}, which is not a wss:// URL",
            hint="use wss:// (gateway.tls.enabled on the gateway), or drop "
            "gateway.remote.tlsFingerprint",
        )
    if pin is None:
        return ssl.create_default_context()
    want = normalize_fingerprint(pin)
    if want is None:
        raise UsageError(
            f"the TLS fingerprint configured for {url} is not a SHA-256 fingerprint",
            hint="gateway.remote.tlsFingerprint: 64 hex digits, or AA:BB:... (32 pairs)",
        )

    class Pinned(ssl.SSLContext):
        def wrap_socket(self, sock: Any, *args: Any, **kwargs: Any) -> ssl.SSLSocket:
            wrapped = super().wrap_socket(sock, *args, **kwargs)
            der = wrapped.getpeercert(binary_form=True)
            got = hashlib.sha256(der).hexdigest() if der else ""
            if got != want:
                wrapped.close()
                raise PinMismatch(got)
            return wrapped

    ctx = Pinned(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def refuse(url: str, exc: BaseException) -> None:
    """Raise a certificate that was not accepted as a refusal (exit 4, one line); anything else
    (a host that does not answer, a plain-text server) is left to the caller."""
    if isinstance(exc, PinMismatch):
        _forbid(
            f"OpenClaw's gateway at {url} presented a TLS certificate with SHA-256 fingerprint "
            f"{exc.got or 'none'}, not the pinned one (gateway.remote.tlsFingerprint); "
            "nothing was sent"
        )
    if isinstance(exc, ssl.SSLCertVerificationError):
        why = exc.verify_message or str(exc)
        _forbid(
            f"OpenClaw's gateway at {url}: its TLS certificate is not trusted ({why}); nothing "
            "was sent. Pin it with gateway.remote.tlsFingerprint, or trust its CA (SSL_CERT_FILE)"
        )


def _forbid(message: str) -> NoReturn:
    raise ForbiddenError(message) from None
