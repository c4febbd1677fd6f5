"""OpenClaw's running gateway: finding it, asking its version, calling its methods, and deciding
how sessiontool may write a state dir while it runs.

Found from the state dir's `openclaw.json` (or `clawdbot.json`): `gateway.port` (default 18789,
or OPENCLAW_GATEWAY_PORT), `gateway.bind`, and the shared secret `gateway.auth` names
(secrets.py: token or password; literal, env, SecretRef). Reachability is a TCP connect to that
port (milliseconds; nothing is sent). Methods are called over sessiontool's own WebSocket client
(wsclient.py: one connection per process, reused); the version is the one `hello-ok` states.
The `openclaw` CLI (SESSIONTOOL_OPENCLAW_BIN, else on PATH; clicall.py) is only the fallback for
a gateway whose protocol sessiontool does not speak (before 2026.5.28, or a future wire break).

Write modes, per agent (`write_mode`):
- SQLite store (2026.8+): `gateway` when a gateway answers; otherwise refused (exit 4) with how
  to start it. sessiontool never writes the database.
- sessions.json store with a gateway of 2026.5.2–2026.7.x running (it no longer takes
  `sessions.json.lock`; found by connecting to it): `gateway` for what has a gateway form,
  refused (exit 4) for everything else: a file write would race it.
- otherwise (no gateway, or one that honours the lock): `files`, today's lock protocol.

OpenClaw 2026.9.6's exec-marker rule is honoured as its CLI honours it: inside an agent's `exec`
(`OPENCLAW_SHELL=exec`) a message to a session through the gateway is refused (exit 4).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sessiontool.errors import ForbiddenError, SessiontoolError, UsageError
from sessiontool.openclaw.wsclient import GatewayError  # noqa: F401 - re-exported
from sessiontool.openclaw_releases import STORE_LOCKS
from sessiontool.state.paths import StatePaths

if TYPE_CHECKING:
    from sessiontool.openclaw.secrets import Secret
    from sessiontool.openclaw.target import Target
    from sessiontool.openclaw.wsclient import Client, Hello
    from sessiontool.openclaw.wsconnection import TurnHooks

DEFAULT_PORT = 18789
CONNECT_TIMEOUT_S = 0.5
MESSAGE_METHODS = ("agent", "sessions.send", "sessions.steer", "chat.send")
# What each write command asks of the gateway, so its first connect asks for it all.
COMMAND_SCOPES = {
    "reset": "operator.admin",
    "delete": "operator.admin",
    "policy": "operator.admin",
}
EXEC_MARKER_REASON = (
    "would lose inter-session attribution. Use the attributed session-messaging tool available "
    "to this run, or return the result through normal subagent completion. Do not retry through "
    "another CLI route or remove the exec marker."
)


@dataclass
class Gateway:
    host: str
    port: int
    config: Path | None
    section: dict[str, Any] = field(default_factory=dict)
    raw_config: dict[str, Any] = field(default_factory=dict)
    _reachable: bool | None = None
    unreachable_why: str | None = None  # when the name did not resolve in time: said so
    _version: str | None = None
    _version_asked: bool = False
    _secret: list[Secret | None] = field(default_factory=list)
    _hello: Hello | None = None
    _refusal: SessiontoolError | None = None
    _transport: str | None = None  # "ws", or "cli" after a protocol mismatch
    _refusal_text: str | None = None
    _expected_protocol: Any = None
    remote: Target | None = None  # a remote gateway (openclaw/target.py), not the state dir's

    @property
    def url(self) -> str:
        if self.remote is not None:
            return self.remote.url
        return f"ws://{self.host}:{self.port}"

    @property
    def loopback(self) -> bool:
        return self.host in ("localhost", "::1") or self.host.startswith("127.")

    def reachable(self) -> bool:
        if self._reachable is None:
            from sessiontool.openclaw.websocket import open_socket
            from sessiontool.openclaw.wsconnection import connect_timeout_s

            # The name resolved within a connection attempt's deadline (a resolver that hangs
            # makes the gateway unreachable, a slow one does not), then connected within 0.5 s.
            try:
                with open_socket(self.host, self.port, CONNECT_TIMEOUT_S, connect_timeout_s()):
                    self._reachable = True
            except OSError as exc:
                self._reachable = False
                if str(exc).startswith("timed out resolving"):
                    self.unreachable_why = str(exc)
        return self._reachable

    def secret(self) -> Secret | None:
        """The shared secret (resolved once: an exec SecretRef runs a program)."""
        if not self._secret and self.remote is not None:
            from sessiontool.openclaw.secrets import Secret

            r = self.remote
            self._secret.append(
                Secret(r.auth_field, r.secret, r.auth_source or "")
                if r.auth_field and r.secret
                else None
            )
        if not self._secret:
            from sessiontool.openclaw import secrets

            self._secret.append(secrets.resolve(self.section, self.raw_config, self.config))
        return self._secret[0]

    def client(self, paths: StatePaths) -> Client:
        from sessiontool.openclaw import wsclient

        pin = self.remote.tls_fingerprint if self.remote is not None else None
        return wsclient.client(self.url, self.secret(), paths, loopback=self.loopback, pin=pin)

    def handshake(self, paths: StatePaths, scopes: frozenset[str] | None = None) -> Hello | None:
        """Connect (once per process; later calls reuse the connection) and return what
        hello-ok said; None when the gateway speaks a protocol sessiontool does not (then the
        CLI is the transport). Raises the refusal (auth, pairing) as ForbiddenError."""
        if self._transport == "cli":
            return None
        from sessiontool.openclaw import wsclient

        try:
            hello = self.client(paths).hello(scopes or frozenset({wsclient.WRITE}))
        except wsclient.ProtocolMismatch as exc:
            self._transport = "cli"
            self._refusal_text = exc.message
            self._expected_protocol = exc.expected
            return None
        except SessiontoolError as exc:
            self._refusal = exc  # kept for doctor's account; a long-lived process tries again
            raise
        self._refusal = None
        self._transport = "ws"
        self._hello = hello
        return hello

    def version(self, paths: StatePaths) -> str | None:
        """The running gateway's version: hello-ok's `server.version`; through the CLI's `status`
        only when the gateway speaks a protocol sessiontool does not."""
        if not self._version_asked:
            self._version_asked = True
            if self.reachable():
                try:
                    hello = self.handshake(paths)
                except SessiontoolError:
                    hello = None
                if hello is not None:
                    self._version = hello.version
                elif self._transport == "cli" and cli() is not None:
                    try:
                        st = call(paths, "status", {}, timeout_s=30)
                    except SessiontoolError:
                        st = {}
                    v = st.get("runtimeVersion") or st.get("version")
                    self._version = v if isinstance(v, str) else None
                elif self._transport == "cli" and isinstance(self._expected_protocol, int):
                    # An older gateway, no CLI of its own: ask it in its protocol, for its
                    # version only (to tell whether it takes sessions.json.lock).
                    self._version = self.client(paths).probe_version(self._expected_protocol)
        return self._version

    def how_to_start(self) -> str:
        if self.remote is not None:
            return f"check that the gateway at {self.remote.url} runs and is reachable from here"
        return f"start it with `openclaw gateway --port {self.port}` (or `openclaw gateway start`)"

    def to_json(self, paths: StatePaths) -> dict[str, Any]:
        up = self.reachable()
        info: dict[str, Any] = {
            "url": self.url,
            "config": str(self.config) if self.config else None,
            "reachable": up,
            "version": self.version(paths) if up else None,
            "cli": " ".join(cli() or []) or None,
        }
        try:
            secret = self.secret()
            info["auth"] = f"{secret.field} ({secret.source})" if secret else "none"
        except SessiontoolError as exc:
            info["auth"] = f"unresolved: {exc.message}"
        info["transport"] = None
        info["handshake"] = None
        if up:
            if self._hello is not None:
                info["transport"] = "websocket"
                info["handshake"] = self._hello.to_json()
            elif self._transport == "cli":
                info["transport"] = "openclaw CLI" if cli() else None
                info["handshake"] = {"refused": getattr(self, "_refusal_text", None)}
            elif self._refusal is not None:
                info["handshake"] = {"refused": self._refusal.message}
        return info


_found: dict[str, Gateway] = {}


def _host_for(bind: Any, gw: dict[str, Any]) -> str:
    if bind == "custom":
        h = gw.get("customBindHost") or gw.get("host")
        if isinstance(h, str) and h and h != "0.0.0.0":
            return h
    return "127.0.0.1"  # loopback, lan (0.0.0.0 listens on loopback too), auto, tailnet


def find(paths: StatePaths) -> Gateway:
    key = str(paths.root)
    if key in _found:
        return _found[key]
    from sessiontool.openclaw.target import bound_to

    remote = bound_to(paths.root)  # --gateway URL and the like: see openclaw/target.py
    if remote is not None:
        _found[key] = Gateway(remote.host, remote.port, None, remote=remote)
        return _found[key]
    cfg_path = paths.openclaw_config()
    gw: dict[str, Any] = {}
    raw: dict[str, Any] = {}
    if cfg_path is not None:
        from sessiontool.state.config import _load_file

        try:
            raw = _load_file(cfg_path)
        except SessiontoolError:
            raw = {}
        section = raw.get("gateway")
        gw = section if isinstance(section, dict) else {}
    port = gw.get("port")
    env_port = os.environ.get("OPENCLAW_GATEWAY_PORT", "").strip()
    if env_port.isdigit():
        port = int(env_port)
    if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
        port = DEFAULT_PORT
    g = Gateway(
        host=_host_for(gw.get("bind"), gw), port=port, config=cfg_path, section=gw, raw_config=raw
    )
    _found[key] = g
    return g


def cli() -> list[str] | None:
    explicit = os.environ.get("SESSIONTOOL_OPENCLAW_BIN", "").strip()
    if explicit:
        return [explicit]
    import shutil

    found = shutil.which("openclaw")
    return [found] if found else None


def check_exec_marker(method: str, params: dict[str, Any] | None = None) -> None:
    """OpenClaw 2026.9.6's rule (`assertGatewayCliMessageContext`): inside an agent's `exec`
    (OPENCLAW_SHELL=exec) a message to a session through the gateway loses who sent it."""
    if os.environ.get("OPENCLAW_SHELL") != "exec":
        return
    has_message = method == "sessions.create" and bool(
        params and isinstance(params.get("message") or params.get("task"), str)
    )
    if method in MESSAGE_METHODS or has_message:
        raise ForbiddenError(
            f"Gateway {method} from agent exec {EXEC_MARKER_REASON}",
            hint="from inside an OpenClaw agent, use its sessions_send / sessions_spawn tools "
            "(or `sessiontool mcp`, whose tools carry the attribution)",
        )


def expect(paths: StatePaths, method: str, params: dict[str, Any]) -> None:
    """Declare a call this process will make later (a spawn's cleanup), so that the one
    connection it opens first already has the scopes for it."""
    from sessiontool.openclaw import wsclient

    find(paths).client(paths).want(wsclient.scopes_for(method, params))


def call(
    paths: StatePaths,
    method: str,
    params: dict[str, Any],
    *,
    timeout_s: float = 60,
    expect_final: bool = False,
    on_pid: Callable[[int], None] | None = None,
    abort_turn: bool = False,
    hooks: TurnHooks | None = None,
) -> dict[str, Any]:
    """One gateway method; its result payload (raises GatewayError, exit 4 when refused).

    Over this process's WebSocket connection; through the `openclaw` CLI only when the gateway
    speaks a protocol sessiontool does not (`on_pid` learns that CLI's pid, so an abort can end
    its process group). For an `agent` turn (`hooks`, wsconnection.TurnHooks): `accepted` gets
    the gateway's `accepted` answer (its own run id); `abort_turn`: when the wait is given up
    (our deadline, an abort's RunAborted, Ctrl-C, what the hooks' `event` raised over a
    WebSocket) this connection, the run's owner, asks the gateway to stop the turn
    (`chat.abort`), and `aborted` learns whether it did."""
    if os.environ.get("SESSIONTOOL_WORKER") != "1":
        # A run's worker carries turns its command already let through (and its own
        # announce, attributed by inputProvenance), whatever environment it inherited.
        check_exec_marker(method, params)
    g = find(paths)
    if g._transport != "cli":
        from sessiontool.openclaw import wsclient

        g.handshake(paths, wsclient.scopes_for(method, params))
        if g._transport == "ws":
            return g.client(paths).call(
                method,
                params,
                timeout_s=timeout_s,
                expect_final=expect_final,
                abort_turn=abort_turn,
                hooks=hooks,
            )
    exe = cli()
    if exe is None:
        raise ForbiddenError(
            f"{g._refusal_text or 'the gateway refused the handshake'}; no `openclaw` "
            "CLI of that version was found to reach it instead (PATH or SESSIONTOOL_OPENCLAW_BIN)"
        )
    from sessiontool.openclaw import clicall

    target, env, secret = _cli_target(paths, g)
    route = clicall.Route(exe=exe, target=target, env=env, secret=secret)
    return clicall.call(
        route, method, params, timeout_s=timeout_s, expect_final=expect_final, on_pid=on_pid
    )


def _cli_target(paths: StatePaths, g: Gateway) -> tuple[list[str], dict[str, str], str | None]:
    """The `openclaw` CLI's arguments and environment that reach this gateway, and the secret
    they carry (kept out of what the CLI prints back)."""
    argv: list[str] = []
    if g.remote is None:  # --url would need the token on the command line; --port reads env
        argv += ["--port", str(g.port)]
    env = dict(os.environ)
    env["OPENCLAW_STATE_DIR"] = str(paths.root)
    if g.config is not None:
        env["OPENCLAW_CONFIG_PATH"] = str(g.config)
    secret = g.secret()
    if g.remote is not None:  # the CLI's own remote target: env URL, env credentials only
        env["OPENCLAW_GATEWAY_URL"] = g.remote.url
        env.pop("OPENCLAW_CONFIG_PATH", None)
        env.pop("OPENCLAW_GATEWAY_TOKEN", None)
        env.pop("OPENCLAW_GATEWAY_PASSWORD", None)
    if secret is not None:  # never on the command line (ps shows it)
        env[f"OPENCLAW_GATEWAY_{secret.field.upper()}"] = secret.value
    return argv, env, secret.value if secret is not None else None


def parse_version(v: str | None) -> tuple[int, int, int] | None:
    m = re.match(r"^v?(\d+)\.(\d+)\.(\d+)", v or "")
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def lockless(version: str | None) -> bool:
    """A JSON-era gateway that no longer takes sessions.json.lock (2026.5.2 to 2026.7.x)."""
    v = parse_version(version)
    return v is not None and v >= STORE_LOCKS[None]


# -- write modes -----------------------------------------------------------------------------


def write_mode(paths: StatePaths, agent_ids: list[str], command: str, *, routable: bool) -> str:
    """`files` or `gateway` for a write touching these agents; raises ForbiddenError (exit 4)
    when neither is safe. `routable`: the command has a gateway form. A `gateway` answer has
    already connected (the handshake a refusal would come from, exit 4 before anything is
    submitted); the command's calls reuse that connection."""
    from sessiontool.state.detect import gateway_agents

    g = find(paths)
    sqlite = gateway_agents(paths, agent_ids)
    if sqlite:
        if not g.reachable():
            raise ForbiddenError(
                f"{command}: agent {sqlite[0]}'s sessions are in OpenClaw's SQLite store, written "
                f"through OpenClaw's gateway only, and no gateway answers at {g.host}:{g.port}; "
                + g.how_to_start()
            )
        if not routable:
            raise ForbiddenError(
                f"{command}: agent {sqlite[0]}'s sessions are in OpenClaw's SQLite store, written "
                "through OpenClaw's gateway only, and sessiontool has no gateway form of "
                f"`{command}`"
            )
        ready(paths, command)
        return "gateway"
    if paths.openclaw_config() is None or not g.reachable():
        return "files"
    version = g.version(paths)
    if isinstance(g._refusal, UsageError):
        # Our own config stopped the handshake before anything was asked (a bad SecretRef
        # setting): that error as it is (exit 2, file and key), not a refusal of the gateway.
        raise g._refusal
    if version is None and g._refusal is not None:
        # It speaks protocol 4 (2026.5.28 or later: lockless) but refused sessiontool.
        raise ForbiddenError(
            f"{command}: a gateway of 2026.5.28 or later runs at {g.host}:{g.port}, which does "
            f"not take sessions.json.lock, and it refused sessiontool ({g._refusal.message}); "
            "nothing was written",
            hint=g._refusal.hint,
        )
    if not lockless(version):
        return "files"
    if routable:
        ready(paths, command)
        return "gateway"
    raise ForbiddenError(
        f"{command}: OpenClaw {version}'s gateway is running at {g.host}:{g.port} and does not "
        "take sessions.json.lock, so a write here would race it; stop it, or let sessiontool "
        "route the write through it" + ("" if routable else f" (`{command}` has no gateway form)")
    )


def ready(paths: StatePaths, command: str) -> None:
    """The gateway can take this command's writes: OpenClaw's exec-marker rule, then the
    handshake (with the scopes the command needs; a refusal is exit 4 before anything is
    submitted); the CLI only after a protocol mismatch."""
    from sessiontool.openclaw import wsclient

    g = find(paths)
    if command in ("send", "spawn"):
        check_exec_marker("agent")
    scopes = frozenset({COMMAND_SCOPES.get(command, wsclient.WRITE)})
    if g.handshake(paths, scopes) is None and cli() is None:
        raise ForbiddenError(
            f"{command}: {g._refusal_text}, and no `openclaw` CLI of that version was found to "
            "reach it instead (PATH or SESSIONTOOL_OPENCLAW_BIN)"
        )


def lock_form_for(version: str | None) -> str:
    """The store lock payload an OpenClaw version reads as a live lock (locks.STORE_LOCK_FORMS):
    `createdAt` for 2026.2 to 2026.4.x, `startedAt` (2026.1, Clawdbot) otherwise — including
    an unknown version, and the lockless 2026.5.2+ that take no lock at all (the forms and their
    releases: `openclaw_releases.STORE_LOCKS`)."""
    v = parse_version(version)
    taken = [(first, form) for form, first in STORE_LOCKS.items() if v is not None and first <= v]
    form = max(taken, key=lambda row: row[0])[1] if taken else None
    return form or "startedAt"


def lock_form(paths: StatePaths) -> str:
    """The store lock payload for this state dir: that of the running gateway's version (asked
    once per process), else the 2026.1 form."""
    if paths.openclaw_config() is None:
        return "startedAt"
    g = find(paths)
    if not g.reachable():
        return "startedAt"
    return lock_form_for(g.version(paths))


def guard_store_write(store_path: Path) -> str:
    """For every sessions.json write: refuse (exit 4) while a lockless gateway runs on the state
    dir that owns `store_path` (`<state>/agents/<id>/sessions/sessions.json`); otherwise the
    store lock payload to write (lock_form)."""
    try:
        root = store_path.parent.parent.parent.parent
    except IndexError:  # pragma: no cover
        return "startedAt"
    if store_path.parent.parent.parent.name != "agents":
        return "startedAt"
    paths = StatePaths(root)
    if paths.openclaw_config() is None:
        return "startedAt"
    write_mode(paths, [], "write", routable=False)
    return lock_form(paths)


LOCK_FORM_TEXT = {
    "startedAt": '{"pid", "startedAt"} (OpenClaw 2026.1 / Clawdbot form)',
    "createdAt": '{"pid", "createdAt", "starttime"} (OpenClaw 2026.2 to 2026.4.29 form)',
}


def doctor_agent_ids(paths: StatePaths, listing: Callable[[], list[str]]) -> list[str]:
    """The agents doctor checks: all of them; none for a remote gateway that cannot be asked
    (unreachable, refused: doctor's finding about the connection says why)."""
    try:
        return listing()
    except SessiontoolError:
        if find(paths).remote is None:
            raise
        return []


def describe(paths: StatePaths, agent_ids: list[str]) -> dict[str, Any]:
    """For doctor: the gateway found, its version (from the handshake), the auth, identity and
    scopes used, which write mode applies (for the state dir's agents, `agent_ids`), and
    `problems`: whatever stops writes from working."""
    g = find(paths)
    info = g.to_json(paths)
    from sessiontool.state.detect import gateway_agents

    if g.remote is not None:  # the gateway's own store: gateway_doctor.remote_checks
        info["mode"], info["lockForm"], info["problems"] = "gateway (remote)", None, []
        info["spawn"] = None
        return info
    sqlite = gateway_agents(paths, agent_ids)
    if sqlite:
        mode = "gateway (SQLite store)" if info["reachable"] else "read-only (no gateway)"
    elif not info["reachable"] or paths.openclaw_config() is None:
        mode = "files (no gateway running)"
    elif lockless(info["version"]):
        mode = "gateway (its version does not take sessions.json.lock)"
    elif info["version"] is None:
        mode = "refused (gateway version unknown)"
    else:
        mode = "files (the gateway honours sessions.json.lock)"
    info["mode"] = mode
    # Which payload sessiontool writes in sessions.json.lock here (None: it takes no store lock,
    # every write goes through the gateway or is refused).
    files = mode.startswith("files")
    form = lock_form_for(info["version"] if info["reachable"] else None) if files else None
    info["lockForm"] = LOCK_FORM_TEXT[form] if form else None
    info["problems"] = _problems(g, info, bool(sqlite) or not files)
    info["spawn"] = None  # which way spawn and send --as go (own_tools.doctor_line)
    return info


def _problems(g: Gateway, info: dict[str, Any], through_gateway: bool) -> list[dict[str, str]]:
    if not info["reachable"] or info["config"] is None:
        return []
    where = f"{g.url}"
    out: list[dict[str, str]] = []
    if g._refusal is not None:
        out.append(
            {
                "kind": "gateway-refused",
                "path": where,
                "detail": f"writes through the gateway cannot work: {g._refusal.message}",
                "hint": g._refusal.hint or "check gateway.auth in openclaw.json",
            }
        )
    elif g._transport == "cli" and cli() is None and through_gateway:
        out.append(
            {
                "kind": "gateway-protocol",
                "path": where,
                "detail": f"writes through the gateway cannot work: {g._refusal_text}, and no "
                "`openclaw` CLI was found to reach it instead",
                "hint": "put that gateway's `openclaw` on PATH (or SESSIONTOOL_OPENCLAW_BIN), or "
                "update OpenClaw",
            }
        )
    elif g._hello is not None and through_gateway:
        from sessiontool.openclaw import wsclient

        granted = frozenset(g._hello.scopes)
        if not (granted & {wsclient.WRITE, wsclient.ADMIN}):
            out.append(
                {
                    "kind": "gateway-scopes",
                    "path": where,
                    "detail": "writes through the gateway cannot work: it granted sessiontool "
                    f"only {sorted(granted) or 'no scopes'}",
                    "hint": "approve sessiontool's device for operator.write "
                    "(openclaw devices list / approve)",
                }
            )
    return out
