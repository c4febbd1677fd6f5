"""A real OpenClaw 2026.9.6 gateway on another "host": a network namespace joined to this one by a
veth pair (10.213.N.1 here, 10.213.N.2 there), the gateway bound to 10.213.N.2 (`bind: custom`),
its fake LLM beside it on the namespace's own loopback. For the interop tests and the bench.

Needs root and `ip` (iproute2); `why_not()` says what is missing. Everything made is undone by
`Netns.close()` (processes stopped by their process group, then the namespace deleted, which
takes the veth pair with it), whatever happened before.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import signal
import ssl
import subprocess
import sys
import time
from pathlib import Path

from .conftest import FAKE_LLM, START_TIMEOUT, TOKEN, copy_fixture, free_port, oc_env, openclaw_bin


def why_not() -> str | None:
    """Why this machine cannot run a namespace gateway (None: it can)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "network namespaces need root (ip netns add)"
    if shutil.which("ip") is None:
        return "no `ip` (iproute2) to make a network namespace"
    if not os.access(openclaw_bin(), os.X_OK):
        return f"no openclaw at {openclaw_bin()} (tests/fixtures/tools/setup-openclaw.sh)"
    probe = f"stprobe{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"`ip netns add` is not allowed here: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def _ip(*args: str) -> None:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {proc.stderr.strip()}")


def _free_subnet() -> int:
    used = subprocess.run(["ip", "-o", "addr"], capture_output=True, text=True).stdout
    for n in random.sample(range(1, 255), 254):
        if f"10.213.{n}." not in used:
            return n
    raise RuntimeError("no free 10.213.N.0/24")


class Netns:
    """One namespace "host" with its veth link; gateways started in it with `start`."""

    def __init__(self, base: Path, client_ns: bool = False) -> None:
        """With `client_ns`, this side of the link is a second namespace too (the bench: both
        of its commands then start through `ip netns exec`, paying the same cost)."""
        self.base = base
        n = _free_subnet()
        tag = f"{os.getpid() % 100000}x{n}"
        self.ns = f"st-gw-{tag}"
        self.client_ns = f"st-cl-{tag}" if client_ns else None
        self.host_ip, self.ns_ip = f"10.213.{n}.1", f"10.213.{n}.2"
        self.procs: list[subprocess.Popen[bytes]] = []
        self.made: list[str] = []
        here, there = f"sth{tag}"[:15], f"stn{tag}"[:15]
        self.link = here
        try:
            _ip("netns", "add", self.ns)
            self.made.append(self.ns)
            if self.client_ns:
                _ip("netns", "add", self.client_ns)
                self.made.append(self.client_ns)
            _ip("link", "add", here, "type", "veth", "peer", "name", there)
            _ip("link", "set", there, "netns", self.ns)
            if self.client_ns:
                _ip("link", "set", here, "netns", self.client_ns)
            for ns, dev, addr in (
                (self.client_ns, here, self.host_ip),
                (self.ns, there, self.ns_ip),
            ):
                at = ["-n", ns] if ns else []  # `ip -n NS`: in that namespace
                _ip(*at, "addr", "add", f"{addr}/24", "dev", dev)
                _ip(*at, "link", "set", dev, "up")
                if ns:
                    _ip(*at, "link", "set", "lo", "up")
        except BaseException:
            self.close()
            raise

    def exec_prefix(self, where: str) -> list[str]:
        """argv prefix that runs a program in the gateway's namespace ("gw") or on the near
        side ("client": the client namespace, or nothing)."""
        ns = self.ns if where == "gw" else self.client_ns
        return ["ip", "netns", "exec", ns] if ns else []

    def start(self, name: str, *, tls: bool = False) -> Gateway:
        """A copy of the fixture served by the real gateway on NS_IP:PORT (and, as `bind:
        custom` wants, the namespace's 127.0.0.1), token auth; `tls`: wss:// with the
        certificate the gateway generates itself (gateway.tls.autoGenerate)."""
        port, llm_port = free_port(), free_port()
        state = copy_fixture(self.base / name / "state", port, llm_port)
        cfg = state / "openclaw.json"
        text = cfg.read_text().replace(
            'bind: "loopback",', f'bind: "custom", customBindHost: "{self.ns_ip}",'
        )
        if tls:
            text = text.replace("port: ", "tls: { enabled: true },\n    port: ", 1)
        cfg.write_text(text)
        home = self.base / name / "home"
        home.mkdir()
        env = oc_env(state, home)
        log = self.base / name / "gateway.log"
        self._spawn([sys.executable, str(FAKE_LLM), str(llm_port)], env, self.base / name / "llm")
        gw = self._spawn(
            [openclaw_bin(), "gateway", "--port", str(port), "--bind", "custom"], env, log
        )
        return Gateway(self, state, env, port, log, gw, tls)

    def _spawn(self, argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [*self.exec_prefix("gw"), *argv],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=env,
            )
        self.procs.append(proc)
        return proc

    def close(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
        for ns in reversed(self.made):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        self.made.clear()
        # The pair goes with the namespace; said explicitly, should anything still hold it.
        subprocess.run(["ip", "link", "del", self.link], capture_output=True)


class Gateway:
    def __init__(
        self,
        net: Netns,
        state: Path,
        env: dict[str, str],
        port: int,
        log: Path,
        proc: subprocess.Popen[bytes],
        tls: bool,
    ) -> None:
        self.net, self.state, self.env, self.port = net, state, env, port
        self.log, self.proc, self.tls = log, proc, tls

    @property
    def url(self) -> str:
        return f"{'wss' if self.tls else 'ws'}://{self.net.ns_ip}:{self.port}"

    def wait_listening(self, deadline: float | None = None) -> None:
        deadline = deadline or time.monotonic() + START_TIMEOUT
        while b"listening" not in self.log.read_bytes():
            if self.proc.poll() is not None:
                raise RuntimeError(f"openclaw gateway exited: {self.log.read_text()[-2000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"openclaw gateway did not start in {START_TIMEOUT:.0f}s")
            time.sleep(1)

    def oc(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        """`openclaw ARGS` on the gateway's host (in its namespace, on its state dir)."""
        return subprocess.run(
            [*self.net.exec_prefix("gw"), openclaw_bin(), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def fingerprint(self) -> str:
        """SHA-256 of the certificate the gateway generated, as OpenClaw prints it (AA:BB:...)."""
        pem = (self.state / "gateway" / "tls" / "gateway-cert.pem").read_text()
        digest = hashlib.sha256(ssl.PEM_cert_to_DER_cert(pem)).hexdigest().upper()
        return ":".join(digest[i : i + 2] for i in range(0, 64, 2))


__all__ = ["TOKEN", "Gateway", "Netns", "why_not"]
