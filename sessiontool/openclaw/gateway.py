"""OpenClaw's running gateway: finding it, asking its version, calling its methods, and deciding
how sessiontool may write a state dir while it runs.

Found from the state dir's `openclaw.json` (or `clawdbot.json`): `gateway.port` (default 18789),
`gateway.bind`, `gateway.auth.token` (or OPENCLAW_GATEWAY_TOKEN). Reachability is a TCP connect
to that port (milliseconds; nothing is sent). Methods are called through the `openclaw` CLI
(`openclaw gateway call METHOD --params JSON --json`): SESSIONTOOL_OPENCLAW_BIN, else `openclaw`
on PATH. The CLI is the supported client, version-matched to the gateway it ships with; its
WebSocket protocol (connect handshake, device identity, scopes) changes between releases, and
re-implementing it here would break on each one.

Write modes, per agent (`write_mode`):
- SQLite store (2026.8+): `gateway` when a gateway answers and the CLI is there; otherwise
  refused (exit 4) with how to start it. sessiontool never writes the database.
- sessions.json store with a gateway of 2026.5.2–2026.7.x running (it no longer takes
  `sessions.json.lock`): `gateway` for label/reset/delete/policy when the CLI is there, refused
  (exit 4) for everything else: a file write would race it.
- otherwise (no gateway, or one that honours the lock, or one whose version cannot be asked):
  `files`, today's lock protocol.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sessiontool.errors import ExitCode, ForbiddenError, SessiontoolError
from sessiontool.stores.paths import StatePaths

DEFAULT_PORT = 18789
LOCKLESS_FROM = (2026, 5, 2)  # first release that serialises store writes in-process only
CREATED_AT_LOCK_FROM = (2026, 2, 0)  # store lock = session write lock {pid, createdAt, starttime}
SQLITE_FROM = (2026, 8, 0)
CONNECT_TIMEOUT_S = 0.5


class GatewayError(SessiontoolError):
    """The gateway answered with an error, or the CLI failed: exit 1."""

    code = ExitCode.FAILURE


@dataclass
class Gateway:
    host: str
    port: int
    token: str | None
    config: Path | None
    _reachable: bool | None = None
    _version: str | None = None
    _version_asked: bool = False

    @property
    def url(self) -> str:
        return f"ws://{self.host}:{self.port}"

    def reachable(self) -> bool:
        if self._reachable is None:
            import socket

            try:
                with socket.create_connection((self.host, self.port), CONNECT_TIMEOUT_S):
                    self._reachable = True
            except OSError:
                self._reachable = False
        return self._reachable

    def version(self, paths: StatePaths) -> str | None:
        """The running gateway's version (its `status` method's runtimeVersion), or None."""
        if not self._version_asked:
            self._version_asked = True
            if self.reachable() and cli() is not None:
                try:
                    st = call(paths, "status", {}, timeout_s=30)
                except SessiontoolError:
                    st = {}
                v = st.get("runtimeVersion") or st.get("version")
                self._version = v if isinstance(v, str) else None
        return self._version

    def how_to_start(self) -> str:
        return f"start it with `openclaw gateway --port {self.port}` (or `openclaw gateway start`)"

    def to_json(self, paths: StatePaths) -> dict[str, Any]:
        up = self.reachable()
        return {
            "url": self.url,
            "config": str(self.config) if self.config else None,
            "reachable": up,
            "version": self.version(paths) if up else None,
            "cli": " ".join(cli() or []) or None,
        }


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
    cfg_path = paths.openclaw_config()
    gw: dict[str, Any] = {}
    if cfg_path is not None:
        from sessiontool.stores.config import _load_file

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
    auth_section = gw.get("auth")
    auth: dict[str, Any] = auth_section if isinstance(auth_section, dict) else {}
    cfg_token = auth.get("token")
    token = os.environ.get("OPENCLAW_GATEWAY_TOKEN") or (
        cfg_token if isinstance(cfg_token, str) else None
    )
    g = Gateway(_host_for(gw.get("bind"), gw), port, token, cfg_path)
    _found[key] = g
    return g


def cli() -> list[str] | None:
    explicit = os.environ.get("SESSIONTOOL_OPENCLAW_BIN", "").strip()
    if explicit:
        return [explicit]
    import shutil

    found = shutil.which("openclaw")
    return [found] if found else None


def call(
    paths: StatePaths,
    method: str,
    params: dict[str, Any],
    *,
    timeout_s: float = 60,
    expect_final: bool = False,
    on_pid: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """One gateway method through the CLI; its JSON result (raises GatewayError).

    The CLI runs in its own process group, so that a run's `abort` (or our own timeout) can end
    it and whatever it started at once; `on_pid` learns its pid before it is waited for."""
    import signal
    import subprocess

    g = find(paths)
    exe = cli()
    if exe is None:
        raise ForbiddenError(
            "no `openclaw` CLI found to reach the gateway (put it on PATH or set "
            "SESSIONTOOL_OPENCLAW_BIN)"
        )
    argv = [
        *exe,
        "gateway",
        "call",
        method,
        "--params",
        json.dumps(params),
        "--json",
        "--timeout",
        str(int(timeout_s * 1000)),
        "--port",  # --url would need the token on the command line; --port reads it from env
        str(g.port),
    ]
    if expect_final:
        argv.append("--expect-final")
    env = dict(os.environ)
    env["OPENCLAW_STATE_DIR"] = str(paths.root)
    if g.config is not None:
        env["OPENCLAW_CONFIG_PATH"] = str(g.config)
    if g.token:
        env["OPENCLAW_GATEWAY_TOKEN"] = g.token  # never on the command line (ps shows it)
    try:
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError as exc:
        raise GatewayError(f"cannot run {exe[0]}: {exc.strerror or exc}") from exc

    def kill() -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    try:
        if on_pid is not None:
            on_pid(proc.pid)
        out, err = proc.communicate(timeout=timeout_s + 60)
    except subprocess.TimeoutExpired as exc:
        kill()
        proc.communicate()
        raise GatewayError(f"gateway {method}: no answer in {timeout_s:g}s") from exc
    except BaseException:
        kill()  # an abort (RunAborted), Ctrl-C, SIGTERM: the CLI goes with us
        proc.communicate()
        raise
    return _answer(method, proc.returncode, out.strip(), err)


def _answer(method: str, returncode: int, out: str, err: str) -> dict[str, Any]:
    data: Any = None
    if out:
        try:
            data = json.loads(out)
        except ValueError:
            start = out.find("{")
            try:
                data = json.loads(out[start:]) if start >= 0 else None
            except ValueError:
                data = None
    if isinstance(data, dict) and data.get("ok") is False:
        error = data.get("error")
        msg = error.get("message") if isinstance(error, dict) else error
        raise GatewayError(f"gateway {method}: {msg or 'failed'}")
    if returncode != 0 or not isinstance(data, dict):
        if returncode < 0:
            raise GatewayError(f"gateway {method}: the CLI was stopped (signal {-returncode})")
        last = (err.strip().splitlines() or [out[:200] or "no output"])[-1]
        raise GatewayError(f"gateway {method} failed (exit {returncode}): {last}")
    return data


def parse_version(v: str | None) -> tuple[int, int, int] | None:
    m = re.match(r"^v?(\d+)\.(\d+)\.(\d+)", v or "")
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def lockless(version: str | None) -> bool:
    """A JSON-era gateway that no longer takes sessions.json.lock (2026.5.2 to 2026.7.x)."""
    v = parse_version(version)
    return v is not None and v >= LOCKLESS_FROM


# -- write modes -----------------------------------------------------------------------------


def write_mode(paths: StatePaths, agent_ids: list[str], command: str, *, routable: bool) -> str:
    """`files` or `gateway` for a write touching these agents; raises ForbiddenError (exit 4)
    when neither is safe. `routable`: the command has a gateway form."""
    from sessiontool.stores.reader import gateway_agents

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
        if cli() is None:
            raise ForbiddenError(
                f"{command}: agent {sqlite[0]}'s store is written through OpenClaw's gateway, "
                "and no `openclaw` CLI was found to reach it (PATH or SESSIONTOOL_OPENCLAW_BIN)"
            )
        return "gateway"
    if paths.openclaw_config() is None or not g.reachable():
        return "files"
    version = g.version(paths)
    if not lockless(version):
        return "files"
    if routable and cli() is not None:
        return "gateway"
    raise ForbiddenError(
        f"{command}: OpenClaw {version}'s gateway is running at {g.host}:{g.port} and does not "
        "take sessions.json.lock, so a write here would race it; stop it, or let sessiontool "
        "route the write through it" + ("" if routable else f" (`{command}` has no gateway form)")
    )


def lock_form_for(version: str | None) -> str:
    """The store lock payload an OpenClaw version reads as a live lock (locks.STORE_LOCK_FORMS):
    `createdAt` for 2026.2 to 2026.4.x, `startedAt` (2026.1, Clawdbot) otherwise — including
    an unknown version, and the lockless 2026.5.2+ that take no lock at all."""
    v = parse_version(version)
    if v is not None and CREATED_AT_LOCK_FROM <= v < LOCKLESS_FROM:
        return "createdAt"
    return "startedAt"


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


def describe(paths: StatePaths) -> dict[str, Any]:
    """For doctor: the gateway found, its version and which write mode applies."""
    g = find(paths)
    info = g.to_json(paths)
    from sessiontool.stores.reader import agent_ids_on_disk, gateway_agents

    sqlite = gateway_agents(paths, agent_ids_on_disk(paths))
    if sqlite:
        mode = "gateway (SQLite store)" if info["reachable"] else "read-only (no gateway)"
    elif not info["reachable"] or paths.openclaw_config() is None:
        mode = "files (no gateway running)"
    elif lockless(info["version"]):
        mode = "gateway (its version does not take sessions.json.lock)"
    elif info["version"] is None:
        mode = "files (gateway version unknown: lock protocol)"
    else:
        mode = "files (the gateway honours sessions.json.lock)"
    info["mode"] = mode
    # Which payload sessiontool writes in sessions.json.lock here (None: it takes no store lock,
    # every write goes through the gateway or is refused).
    files = mode.startswith("files")
    form = lock_form_for(info["version"] if info["reachable"] else None) if files else None
    info["lockForm"] = LOCK_FORM_TEXT[form] if form else None
    return info
