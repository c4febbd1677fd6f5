"""sessiontool's own device identity for OpenClaw's gateway, used where the gateway does not grant
a device-less client its scopes (a remote gateway, no shared secret, scopes cleared).

An Ed25519 key of sessiontool's own (never the `openclaw` CLI's, whose key is that program's
secret), kept with the device tokens the gateway issues in `<state>/sessiontool/gateway-device.json`
(0600). `device.id` is the hex SHA-256 of the raw public key; the signature is over OpenClaw's
v3 payload (`buildDeviceAuthPayloadV3`). `cryptography` is imported only here, only when a device
is needed: it is the optional extra `gateway` (`pip install '.[gateway]'` from the checkout), which most
users (local state dirs, a gateway reached with its shared secret) never need; without it a
pairing stops with one line naming the extra (exit 2).
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sessiontool.state.paths import StatePaths

FILE_NAME = "gateway-device.json"
VERSION = 1
# The extra's one package, installed into sessiontool's own environment whichever way it was
# installed (pip from a checkout: `pip install '.[gateway]'`; pipx: `pipx inject sessiontool
# cryptography`; uv: `uv tool install --with cryptography .`).
EXTRA = (
    "install the `gateway` extra (pip install 'cryptography>=42' into sessiontool's environment)"
)


def _ed25519() -> Any:
    """cryptography's Ed25519 private-key class, or the one-line error naming the extra."""
    try:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    except ImportError:
        from sessiontool.errors import UsageError

        raise UsageError(
            "pairing with OpenClaw's gateway needs a device identity, signed with the "
            f"`cryptography` package, not installed: {EXTRA}"
        ) from None
    return Ed25519PrivateKey


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


@dataclass
class Device:
    path: Path
    private_raw: bytes
    public_raw: bytes
    # url -> {token, scopes, request}: the device token and the scopes it was issued with, and
    # the pairing request last named (a first pairing or a scope upgrade) until a token follows
    tokens: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def device_id(self) -> str:
        return hashlib.sha256(self.public_raw).hexdigest()

    def block(
        self,
        *,
        client_id: str,
        client_mode: str,
        role: str,
        scopes: list[str],
        signed_at: int,
        token: str,
        nonce: str,
        platform: str,
        device_family: str,
    ) -> dict[str, Any]:
        """connect.params.device for this challenge."""
        Ed25519PrivateKey = _ed25519()

        payload = "|".join(
            [
                "v3",
                self.device_id,
                client_id,
                client_mode,
                role,
                ",".join(scopes),
                str(signed_at),
                token,
                nonce,
                platform.lower(),
                device_family.lower(),
            ]
        )
        key = Ed25519PrivateKey.from_private_bytes(self.private_raw)
        return {
            "id": self.device_id,
            "publicKey": _b64url(self.public_raw),
            "signature": _b64url(key.sign(payload.encode("utf-8"))),
            "signedAt": signed_at,
            "nonce": nonce,
        }

    def token_for(self, url: str) -> str | None:
        t = self.tokens.get(url, {}).get("token")
        return t if isinstance(t, str) and t else None

    def scopes_for(self, url: str) -> list[str]:
        """The scopes the kept device token was issued with (what the gateway approved)."""
        got = self.tokens.get(url, {}).get("scopes")
        return [s for s in got if isinstance(s, str)] if isinstance(got, list) else []

    def request_for(self, url: str) -> str | None:
        """The pairing request the gateway last named for this device (first pairing or a
        scope upgrade), until a device token arrives after it."""
        r = self.tokens.get(url, {}).get("request")
        return r if isinstance(r, str) and r else None

    def remember(self, url: str, token: str, scopes: list[str]) -> None:
        """Keep a device token hello-ok issued (0600). A new token is kept with the scopes it
        came with; the token already kept keeps its scopes plus any this connection was
        granted (a read on a token approved for writes does not narrow it: the file's scopes
        follow what was approved). Either way the pairing request it answers is done."""
        entry = self.tokens.get(url, {})
        if self.token_for(url) == token:
            held = self.scopes_for(url)
            merged = held + [s for s in scopes if s not in held]
            if merged == held and "request" not in entry:
                return
            scopes = merged
        self.tokens[url] = {"token": token, "scopes": scopes}
        self._save()

    def note_request(self, url: str, request_id: str) -> None:
        """Keep the pairing request the gateway named (beside the token, if any), so that a
        later refusal can say that the approval is what it waits on."""
        if self.request_for(url) == request_id:
            return
        self.tokens[url] = {**self.tokens.get(url, {}), "request": request_id}
        self._save()

    def forget(self, url: str) -> None:
        if self.tokens.pop(url, None) is not None:
            self._save()

    def _save(self) -> None:
        from sessiontool.state.jsonio import atomic_write

        data = {
            "version": VERSION,
            "privateKey": _b64url(self.private_raw),
            "publicKey": _b64url(self.public_raw),
            "tokens": self.tokens,
        }
        atomic_write(self.path, json.dumps(data, indent=2).encode(), mode=0o600)


def load_or_create(paths: StatePaths) -> Device:
    """This state dir's device (created, 0600, on first use)."""
    path = paths.tool_dir / FILE_NAME
    try:
        data = json.loads(path.read_text())
        priv = base64.urlsafe_b64decode(data["privateKey"] + "==")
        pub = base64.urlsafe_b64decode(data["publicKey"] + "==")
        tokens = data.get("tokens") if isinstance(data.get("tokens"), dict) else {}
        if len(priv) == 32 and len(pub) == 32:
            return Device(path, priv, pub, tokens)
    except (OSError, ValueError, KeyError, TypeError):
        pass
    key = _ed25519().generate()
    from cryptography.hazmat.primitives import serialization

    raw = serialization.Encoding.Raw
    dev = Device(
        path,
        key.private_bytes(raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()),
        key.public_key().public_bytes(raw, serialization.PublicFormat.Raw),
    )
    dev._save()
    return dev
