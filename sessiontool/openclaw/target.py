"""Which OpenClaw gateway a command talks to when it is not the one beside the state dir: a
remote gateway (a home server, a VPS, a container) named by URL.

Precedence, first found wins (OpenClaw's own rules for a remote client, docs/gateway/remote.md
"Credential precedence"; an explicit URL never borrows credentials or a TLS pin that were
configured for another target):

1. `--gateway URL` (global option), then SESSIONTOOL_GATEWAY_URL: credentials from
   OPENCLAW_GATEWAY_TOKEN / OPENCLAW_GATEWAY_PASSWORD; the config's `gateway.remote.token`,
   `.password` and `.tlsFingerprint` only when the URL is exactly `gateway.remote.url`.
2. OPENCLAW_GATEWAY_URL: env credentials only (as OpenClaw's CLI).
3. `gateway.remote.url` of OpenClaw's config when `gateway.mode` is `remote`: token
   `gateway.remote.token` → OPENCLAW_GATEWAY_TOKEN → `gateway.auth.token`; password
   OPENCLAW_GATEWAY_PASSWORD → `gateway.remote.password` → `gateway.auth.password`; the pin
   `gateway.remote.tlsFingerprint`.
4. none: the state dir's own (local) gateway, as `gateway.find` has always found it.

OpenClaw's config is the state dir's `openclaw.json` (`clawdbot.json`), else the file
OPENCLAW_CONFIG_PATH names. Config secrets may be literal or the `${VAR}` shorthand.

With a remote target, sessiontool's own files (run records, lanes, outbox, search index) live
under `<state>/gateways/<urlhash>/` of the local state dir, so two gateways never share a run
record; the session store is the gateway's. The device identity sessiontool presents to that
gateway, and the device token it issues, are kept in
`<state>/gateways/<urlhash>/sessiontool/gateway-device.json` (0600); `sessiontool gateway forget
URL` removes them (the next connection pairs again). `<urlhash>` is `url_hash(URL)`: the first 16 hex digits of the SHA-256 of the
normalised URL.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from sessiontool.errors import UsageError
from sessiontool.state.paths import StatePaths

ENV_URL = "SESSIONTOOL_GATEWAY_URL"
SHORTHAND = re.compile(r"^\$\{?([A-Z][A-Z0-9_]{0,127})\}?$")

_bound: dict[str, Target] = {}


class Target:
    """A remote gateway: where, how sessiontool proves who it is, and what certificate to expect.
    `secret` never appears in repr, output, records or errors. (A plain class: a dataclass costs
    every command its code generation at import, and this module is imported by all of them.)"""

    __slots__ = ("url", "source", "auth_field", "secret", "auth_source", "tls_fingerprint")

    def __init__(
        self,
        url: str,
        source: str,  # where the URL came from: --gateway, an env var name, gateway.remote.url
        auth_field: str | None,  # "token" | "password" | None (none configured)
        secret: str | None,
        auth_source: str | None,
        tls_fingerprint: str | None,
    ) -> None:
        self.url = url
        self.source = source
        self.auth_field = auth_field
        self.secret = secret
        self.auth_source = auth_source
        self.tls_fingerprint = tls_fingerprint

    def __repr__(self) -> str:
        return f"Target(url={self.url!r}, source={self.source!r}, auth={self.auth_source!r})"

    @property
    def host(self) -> str:
        from urllib.parse import urlsplit

        return urlsplit(self.url).hostname or "127.0.0.1"

    @property
    def port(self) -> int:
        from urllib.parse import urlsplit

        parts = urlsplit(self.url)
        return parts.port or (443 if parts.scheme == "wss" else 80)

    @property
    def key(self) -> str:
        return url_hash(self.url)

    @property
    def token(self) -> str | None:
        return self.secret if self.auth_field == "token" else None

    @property
    def password(self) -> str | None:
        return self.secret if self.auth_field == "password" else None

    def to_json(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "source": self.source,
            "auth": self.auth_field,
            "authSource": self.auth_source,
            "tlsFingerprint": self.tls_fingerprint,
            "key": self.key,
        }


def normalize_url(url: str) -> str:
    """`ws://` or `wss://` with a host; scheme and host lower-cased, a trailing `/` dropped.
    Anything else is a usage error (exit 2): an http URL or a bare host is a typo, not a target."""
    from urllib.parse import urlsplit

    text = url.strip()
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        raise UsageError(f"gateway URL {url!r} is not a URL") from None
    if parts.scheme.lower() not in ("ws", "wss") or not parts.hostname:
        raise UsageError(
            f"gateway URL {url!r} must be ws://HOST[:PORT] or wss://HOST[:PORT]",
            hint="e.g. --gateway ws://127.0.0.1:18789 or --gateway wss://gw.example.net",
        )
    if parts.username or parts.password:
        raise UsageError("a gateway URL must not carry credentials; use OPENCLAW_GATEWAY_TOKEN")
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{port}" if port is not None else "")
    path = parts.path.rstrip("/")
    query = f"?{parts.query}" if parts.query else ""
    return f"{parts.scheme.lower()}://{netloc}{path}{query}"


def url_hash(url: str) -> str:
    import hashlib

    return hashlib.sha256(normalize_url(url).encode("utf-8")).hexdigest()[:16]


def explicit_url(url: str | None) -> str | None:
    """The `--gateway` global option checked at once (a bad URL is exit 2) and normalized; the
    caller keeps it in its context's options and hands it to `resolve`/`select`."""
    return normalize_url(url) if url else None


def _config_path(paths: StatePaths) -> Path | None:
    cfg_path = paths.openclaw_config()
    if cfg_path is None:
        env = os.environ.get("OPENCLAW_CONFIG_PATH", "").strip()
        if env and Path(env).expanduser().is_file():
            cfg_path = Path(env).expanduser()
    return cfg_path


def _config(paths: StatePaths) -> dict[str, Any]:
    """OpenClaw's config, parsed only when it can name a remote gateway: a file without the word
    `remote` costs one read, not a JSON5 parse (every command asks, list and history included)."""
    cfg_path = _config_path(paths)
    if cfg_path is None:
        return {}
    try:
        if b"remote" not in cfg_path.read_bytes():
            return {}
    except OSError:
        return {}
    from sessiontool.errors import SessiontoolError
    from sessiontool.state.config import _load_file

    try:
        raw = _load_file(cfg_path)
    except SessiontoolError:
        return {}
    return raw if isinstance(raw, dict) else {}


def _section(d: Any, name: str) -> dict[str, Any]:
    v = d.get(name) if isinstance(d, dict) else None
    return v if isinstance(v, dict) else {}


def _secret(raw: Any, where: str) -> str | None:
    """A config secret: a literal, or `${VAR}` / `$VAR`. A SecretRef object is OpenClaw's to
    resolve: refused with how to pass the secret instead."""
    if raw is None or raw == "":
        return None
    if isinstance(raw, str):
        m = SHORTHAND.match(raw.strip())
        if m:
            return os.environ.get(m.group(1)) or None
        return raw
    from sessiontool.errors import ForbiddenError

    raise ForbiddenError(
        f"{where} in OpenClaw's config is not a literal secret",
        hint="set OPENCLAW_GATEWAY_TOKEN (or OPENCLAW_GATEWAY_PASSWORD) for sessiontool",
    )


def _env_auth() -> tuple[str | None, str | None, str | None]:
    for name, field in (
        ("OPENCLAW_GATEWAY_TOKEN", "token"),
        ("OPENCLAW_GATEWAY_PASSWORD", "password"),
    ):
        v = os.environ.get(name, "")
        if v:
            return field, v, f"env {name}"
    return None, None, None


def _remote_auth(
    remote: dict[str, Any], local: dict[str, Any]
) -> tuple[str | None, str | None, str | None]:
    """OpenClaw's remote-mode order: token remote → env → local; password env → remote → local."""
    token = _secret(remote.get("token"), "gateway.remote.token")
    if token:
        return "token", token, "config gateway.remote.token"
    env = os.environ.get("OPENCLAW_GATEWAY_TOKEN", "")
    if env:
        return "token", env, "env OPENCLAW_GATEWAY_TOKEN"
    token = _secret(local.get("token"), "gateway.auth.token")
    if token:
        return "token", token, "config gateway.auth.token"
    env = os.environ.get("OPENCLAW_GATEWAY_PASSWORD", "")
    if env:
        return "password", env, "env OPENCLAW_GATEWAY_PASSWORD"
    for raw, where in (
        (remote.get("password"), "gateway.remote.password"),
        (local.get("password"), "gateway.auth.password"),
    ):
        pw = _secret(raw, where)
        if pw:
            return "password", pw, f"config {where}"
    return None, None, None


def _fingerprint(remote: dict[str, Any]) -> str | None:
    fp = remote.get("tlsFingerprint")
    return fp.strip() if isinstance(fp, str) and fp.strip() else None


def resolve(paths: StatePaths, explicit: str | None = None) -> Target | None:
    """The remote gateway this command talks to, or None for the state dir's own. `explicit`:
    the `--gateway` URL (normalized, `explicit_url`), passed down, never kept."""
    cfg = _config(paths)
    gw = _section(cfg, "gateway")
    remote = _section(gw, "remote")
    local_auth = _section(gw, "auth")
    cfg_url = remote.get("url") if isinstance(remote.get("url"), str) else None
    source = "--gateway"
    if explicit is None and os.environ.get(ENV_URL, "").strip():
        explicit, source = normalize_url(os.environ[ENV_URL]), ENV_URL
    if explicit is not None:
        field, secret, auth_source = _env_auth()
        fp = None
        if cfg_url and _same(cfg_url, explicit):
            field, secret, auth_source = _remote_auth(remote, local_auth)
            fp = _fingerprint(remote)
        return Target(
            explicit,
            source,
            auth_field=field,
            secret=secret,
            auth_source=auth_source,
            tls_fingerprint=fp,
        )
    env_url = os.environ.get("OPENCLAW_GATEWAY_URL", "").strip()
    if env_url:
        field, secret, auth_source = _env_auth()
        return Target(
            normalize_url(env_url),
            "OPENCLAW_GATEWAY_URL",
            auth_field=field,
            secret=secret,
            auth_source=auth_source,
            tls_fingerprint=None,
        )
    if cfg_url and gw.get("mode") == "remote":
        field, secret, auth_source = _remote_auth(remote, local_auth)
        return Target(
            normalize_url(cfg_url),
            "gateway.remote.url",
            auth_field=field,
            secret=secret,
            auth_source=auth_source,
            tls_fingerprint=_fingerprint(remote),
        )
    return None


def _same(a: str, b: str) -> bool:
    try:
        return normalize_url(a) == normalize_url(b)
    except UsageError:
        return False


# -- the per-gateway part of the local state dir ---------------------------------------------


def gateway_root(base: StatePaths, t: Target) -> Path:
    """Where sessiontool keeps its own files for this gateway inside the local state dir."""
    return base.root / "gateways" / t.key


def local_root(root: Path) -> Path:
    """The local state dir `root` belongs to: a remote gateway's part (`<state>/gateways/<key>`,
    bound to it) lies inside it, so a write that must stay out of the state dir (an export's
    DIR) stays out of all of it, not only out of that gateway's part."""
    return root.parent.parent if bound_to(root) is not None else root


def bind(root: Path, t: Target) -> None:
    """`root` (a gateway_root) belongs to remote target `t`: `gateway.find` asks `bound_to`, the
    store detection `detect.gateway_url`."""
    from sessiontool.state import detect

    _bound[str(root)] = t
    detect.bind_gateway(root, t.url)


def select(base: StatePaths, explicit: str | None = None) -> StatePaths:
    """The state paths a command works in: `base` itself, or, with a remote target, the part of
    it kept for that gateway (created 0700), bound to it."""
    t = resolve(base, explicit)
    if t is None:
        return base
    from sessiontool.state.paths import ensure_dir

    root = ensure_dir(gateway_root(base, t))
    bind(root, t)
    return StatePaths(root)


def bound_to(root: Path) -> Target | None:
    return _bound.get(str(root))


WORKER_ENV = "SESSIONTOOL_WORKER_GATEWAY"  # the URL (never a secret) an exec'd worker rebinds


def rebind_worker(paths: StatePaths) -> None:
    """In a worker started by exec (not forked: the binding did not come along in memory), bind
    its state dir, `<base>/gateways/<hash>`, to the remote gateway its command used, resolved
    again from the same environment and the base state dir's config."""
    url = os.environ.get(WORKER_ENV, "").strip()
    if not url or paths.root.parent.name != "gateways":
        return
    t = resolve(StatePaths(paths.root.parent.parent), normalize_url(url))
    if t is not None and t.key == paths.root.name:
        bind(paths.root, t)


# -- device tokens ---------------------------------------------------------------------------


def device_token_path(base: StatePaths, url: str) -> Path:
    """Where the device token a gateway issued to this state dir's identity is kept (0600)."""
    return base.tool_dir / "gateway" / f"{url_hash(url)}.json"


def forget(base: StatePaths, url: str) -> dict[str, Any]:
    """Forget `url` on this machine: its device token, and the device identity sessiontool made
    for that gateway (`gateways/<hash>/sessiontool/gateway-device.json`, a key only that gateway
    ever saw), so the next connection asks to be paired again, as after a fresh install. A token
    kept beside the state dir's own key (its local gateway's device) is dropped, that key stays."""
    from sessiontool.state.safefs import check_inside, remove_file

    norm = normalize_url(url)
    own = (
        gateway_root(
            base,
            Target(norm, "", auth_field=None, secret=None, auth_source=None, tls_fingerprint=None),
        )
        / "sessiontool"
    )
    token = device_token_path(base, url)
    # Nothing is removed through a link planted on the way (`gateways/<hash>`): refused
    # (exit 5) before any of the three places is touched.
    check_inside(own, base.root)
    check_inside(token.parent, base.root)
    removed = remove_file(token, base.root)
    device_id = _device_id(own / IDENTITY_FILE)
    gone = remove_file(own / IDENTITY_FILE, base.root)
    removed = _forget_in_identity_file(base, norm) or removed or gone
    return {
        "url": norm,
        "removed": removed,
        "path": str(own / IDENTITY_FILE),
        "deviceId": device_id,
    }


def _device_id(path: Path) -> str | None:
    """The id the gateway knows the forgotten device by (for `openclaw devices remove ID`)."""
    import base64
    import hashlib
    import json

    try:
        pub = json.loads(path.read_bytes()).get("publicKey")
        return hashlib.sha256(base64.urlsafe_b64decode(pub + "==")).hexdigest()
    except (OSError, ValueError, AttributeError, TypeError):
        return None


IDENTITY_FILE = "gateway-device.json"  # the device key file, when it also keeps tokens by URL


def _forget_in_identity_file(base: StatePaths, norm: str) -> bool:
    """A device token kept beside the key, in the identity file's `tokens` (keyed by URL), is
    dropped too; the key itself stays."""
    import json

    path = base.tool_dir / IDENTITY_FILE
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return False
    tokens = data.get("tokens") if isinstance(data, dict) else None
    if not isinstance(tokens, dict):
        return False
    gone = [k for k in tokens if isinstance(k, str) and _same(k, norm)]
    if not gone:
        return False
    for k in gone:
        del tokens[k]
    from sessiontool.state.jsonio import atomic_write

    atomic_write(path, json.dumps(data, indent=2).encode(), mode=0o600)
    return True
