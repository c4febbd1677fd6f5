"""Interop tests against the real program: Clawdbot 2026.1.24-3 (the last sessions.json release),
its gateway on loopback, and a deterministic fake LLM.

They run only with `SESSIONTOOL_INTEROP=1` (otherwise they are skipped, with that reason) and need
the program that `tests/fixtures/tools/setup-peers.sh` installs: env `CLAWDBOT_BIN`, else
`$PEERS_DIR/clawdbot` (default `/opt/peers/clawdbot`). Without it they are skipped, unless
`SESSIONTOOL_INTEROP_STRICT=1` (CI sets it once the install succeeded): then a missing piece fails.

One fake LLM and one gateway serve the whole run (the gateway takes seconds to start), over one
temporary HOME and state dir that sessiontool writes too; each test uses its own session keys. Both
processes run in their own process group and are stopped by PID in the teardown, whatever happens.
Gateway calls go through Clawdbot's own client code (`gwcall.mjs`, the code behind `clawdbot
gateway call`), several per Node start-up; `cli_call` runs the real `clawdbot gateway call`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ..runhelpers import reap

INTEROP_DIR = Path(__file__).resolve().parent
ROOT = INTEROP_DIR.parent.parent
TOOLS = ROOT / "tests" / "fixtures" / "tools"
FAKE_LLM = TOOLS / "fake_llm_server.py"
GWCALL = INTEROP_DIR / "gwcall.mjs"
TOKEN = "interop-token-7f3a"
QA_FAILING_AGENT = "import sys; sys.stderr.write('qa agent fails on purpose\\n'); sys.exit(3)"
START_TIMEOUT = 120.0  # a cold first start of the gateway has taken 30 s on a 2-core machine


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    enabled = os.environ.get("SESSIONTOOL_INTEROP") == "1"
    skip = pytest.mark.skip(
        reason="interop tests need SESSIONTOOL_INTEROP=1 and the real clawdbot "
        "(tests/fixtures/tools/setup-peers.sh)"
    )
    for item in items:
        if INTEROP_DIR not in Path(str(item.fspath)).parents:
            continue
        item.add_marker(pytest.mark.interop)
        if not enabled:
            item.add_marker(skip)


def unavailable(reason: str) -> None:
    if os.environ.get("SESSIONTOOL_INTEROP_STRICT") == "1":
        pytest.fail(f"interop: {reason}", pytrace=False)
    pytest.skip(reason)


# -- locating the real program ---------------------------------------------------------------


@dataclass
class Peer:
    bin: Path  # the `clawdbot` command
    node: str  # the Node it runs on
    dist: Path  # clawdbot's dist/ (for gwcall.mjs)


_WRAPPER_EXEC = re.compile(r'exec\s+"([^"]+)"\s+"([^"]+/dist/entry\.js)"')


def find_peer() -> Peer:
    explicit = os.environ.get("CLAWDBOT_BIN")
    path = (
        Path(explicit)
        if explicit
        else Path(os.environ.get("PEERS_DIR") or "/opt/peers") / "clawdbot"
    )
    if not (path.is_file() and os.access(path, os.X_OK)):
        if explicit:
            pytest.fail(f"CLAWDBOT_BIN={explicit} is not an executable file", pytrace=False)
        unavailable(
            f"no clawdbot at {path} (run tests/fixtures/tools/setup-peers.sh or set CLAWDBOT_BIN)"
        )
    # setup-peers.sh writes a wrapper: exec "<node>" "<peers>/cb/node_modules/clawdbot/dist/entry.js" "$@"
    try:
        text = path.read_text(errors="replace")[:4096]
    except OSError:
        text = ""
    m = _WRAPPER_EXEC.search(text)
    if m:
        return Peer(path, m.group(1), Path(m.group(2)).parent)
    # An npm install's bin: a link into the package (dist/entry.js); Node from PATH.
    real = path.resolve()
    for parent in real.parents:
        pkg = parent / "package.json"
        if pkg.is_file():
            try:
                name = json.loads(pkg.read_text()).get("name")
            except ValueError:
                name = None
            if name == "clawdbot" and (parent / "dist" / "gateway" / "call.js").is_file():
                node = shutil.which("node")
                if node:
                    return Peer(path, node, parent / "dist")
            break
    unavailable(f"cannot find Node and clawdbot's dist/ from {path}")
    raise AssertionError("unreachable")


# -- processes -------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def start(argv: list[str], log: Path, env: dict[str, str], cwd: Path) -> subprocess.Popen[bytes]:
    """A child in its own process group (so that stopping it by PID takes its children too)."""
    with open(log, "ab") as fh:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=fh,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )


def stop(proc: subprocess.Popen[bytes] | None) -> None:
    """SIGTERM the process group led by this PID, SIGKILL after 10 s, and reap it."""
    if proc is None:
        return
    for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(timeout=grace)
            # the leader is gone; make sure nothing of its group outlives it
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            return
        except subprocess.TimeoutExpired:
            continue


def tail(path: Path, n: int = 40) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(re.sub(r"\x1b\[[0-9;]*m", "", ln) for ln in lines[-n:])


def wait_port(
    proc: subprocess.Popen[bytes], port: int, timeout: float, what: str, log: Path
) -> None:
    deadline = time.monotonic() + timeout
    while not port_open(port):
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited ({proc.returncode}) before listening:\n{tail(log)}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} not listening on {port} after {timeout:.0f}s:\n{tail(log)}")
        time.sleep(0.1)


# -- the harness -----------------------------------------------------------------------------


class GatewayError(AssertionError):
    pass


@dataclass
class Harness:
    peer: Peer
    root: Path
    state: Path
    env: dict[str, str]  # for clawdbot (gateway, CLI, gwcall.mjs)
    st_env: dict[str, str]  # for sessiontool
    gw_port: int
    llm_port: int
    llm_log: Path
    gw_log: Path
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    # gateway ------------------------------------------------------------------------------
    def gw(
        self, calls: list[dict[str, Any]], *, parallel: bool = False, timeout: float = 180
    ) -> list[dict[str, Any]]:
        """Run gateway calls through Clawdbot's client; [{"ok", "result"|"error"}] in order."""
        proc = subprocess.run(
            [self.peer.node, str(GWCALL), str(self.peer.dist)],
            input=json.dumps({"parallel": parallel, "calls": calls}),
            capture_output=True,
            text=True,
            env=self.env,
            cwd=self.root,
            timeout=timeout,
        )
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("[")]
        if proc.returncode != 0 or not lines:
            raise GatewayError(
                f"gwcall failed ({proc.returncode}): {proc.stderr[-2000:]}\n{proc.stdout[-2000:]}"
            )
        out: list[dict[str, Any]] = json.loads(lines[-1])
        return out

    def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        expect_final: bool = False,
        timeout_ms: int = 30_000,
    ) -> Any:
        res = self.gw(
            [
                {
                    "method": method,
                    "params": params or {},
                    "expectFinal": expect_final,
                    "timeoutMs": timeout_ms,
                }
            ],
            timeout=timeout_ms / 1000 + 60,
        )[0]
        if not res["ok"]:
            raise GatewayError(
                f"{method} {params}: {res['error']}\ngateway log:\n{tail(self.gw_log)}"
            )
        return res["result"]

    def cli_call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """`clawdbot gateway call METHOD --params JSON --json`, the public command."""
        proc = subprocess.run(
            [
                str(self.peer.bin),
                "gateway",
                "call",
                method,
                "--params",
                json.dumps(params or {}),
                "--json",
            ],
            capture_output=True,
            text=True,
            env=self.env,
            cwd=self.root,
            timeout=120,
        )
        if proc.returncode != 0:
            raise GatewayError(
                f"clawdbot gateway call {method}: rc={proc.returncode}\n{proc.stderr[-2000:]}"
            )
        return json.loads(proc.stdout)

    def agent_turn(self, key: str, message: str, idem: str, timeout_ms: int = 120_000) -> Any:
        res = self.call(
            "agent",
            {"sessionKey": key, "message": message, "idempotencyKey": idem},
            expect_final=True,
            timeout_ms=timeout_ms,
        )
        assert res.get("status") == "ok", res
        return res

    def history(self, key: str) -> Any:
        return self.call("chat.history", {"sessionKey": key, "limit": 1000})

    # sessiontool --------------------------------------------------------------------------
    def st(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "sessiontool", "--state-dir", str(self.state), *args],
            capture_output=True,
            text=True,
            env=self.st_env,
            cwd=self.root,
            timeout=timeout,
        )

    def st_json(self, *args: str, ok: bool = True, timeout: float = 120) -> Any:
        proc = self.st(*args, "--json", timeout=timeout)
        if ok and proc.returncode != 0:
            raise AssertionError(
                f"sessiontool {' '.join(args)}: rc={proc.returncode}\n{proc.stderr}\n{proc.stdout}"
            )
        return json.loads(proc.stdout)

    # disk ---------------------------------------------------------------------------------
    def sessions_dir(self, agent: str = "main") -> Path:
        return self.state / "agents" / agent / "sessions"

    def store(self, agent: str = "main") -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.sessions_dir(agent) / "sessions.json").read_text())
        return data

    def transcript_lines(self, key: str, agent: str = "main") -> list[dict[str, Any]]:
        sid = self.store(agent)[key]["sessionId"]
        path = self.sessions_dir(agent) / f"{sid}.jsonl"
        return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]

    def llm_requests(self) -> list[dict[str, Any]]:
        if not self.llm_log.exists():
            return []
        return [
            json.loads(ln)["request"] for ln in self.llm_log.read_text().splitlines() if ln.strip()
        ]


def clawdbot_config(root: Path, gw_port: int, llm_port: int) -> dict[str, Any]:
    """Like tests/fixtures/tools/cb_config.json5, on our ports and paths; agents main, ops, qa."""
    return {
        "gateway": {
            "mode": "local",
            "bind": "loopback",
            "port": gw_port,
            "auth": {"mode": "token", "token": TOKEN},
        },
        "logging": {"file": str(root / "clawdbot.log")},
        "agents": {
            "defaults": {
                "workspace": str(root / "workspace"),
                "model": {"primary": "fake/fake-model"},
                "models": {"fake/fake-model": {"alias": "Fake"}},
                "heartbeat": {"every": "0m"},
            },
            "list": [
                {"id": "main", "default": True},
                {"id": "ops", "workspace": str(root / "workspace-ops")},
                {"id": "qa", "workspace": str(root / "workspace-qa")},
            ],
        },
        "models": {
            "mode": "replace",
            "providers": {
                "fake": {
                    "baseUrl": f"http://127.0.0.1:{llm_port}/v1",
                    "apiKey": "dummy-key",
                    "api": "openai-completions",
                    "models": [
                        {
                            "id": "fake-model",
                            "name": "Fake Model",
                            "reasoning": False,
                            "input": ["text"],
                            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                            "contextWindow": 128000,
                            "maxTokens": 4096,
                        }
                    ],
                }
            },
        },
    }


def _base_env(home: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CLAWDBOT_", "OPENCLAW_", "SESSIONTOOL_", "NODE_OPTIONS", "XDG_"))
    }
    env.update(HOME=str(home), TZ="UTC", NO_COLOR="1", LC_ALL="C.UTF-8")
    return env


@pytest.fixture(scope="session")
def cb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    if os.environ.get("SESSIONTOOL_INTEROP") != "1":  # pragma: no cover - items are skipped first
        pytest.skip("SESSIONTOOL_INTEROP=1 not set")
    peer = find_peer()
    if not FAKE_LLM.is_file():
        unavailable(f"fake LLM server not found: {FAKE_LLM}")
    root = tmp_path_factory.mktemp("interop")
    home, state = root / "home", root / "state"
    for d in (home, state, root / "workspace", root / "workspace-ops", root / "workspace-qa"):
        d.mkdir(mode=0o700)
    gw_port, llm_port = free_port(), free_port()
    while llm_port == gw_port:
        llm_port = free_port()
    config = state / "clawdbot.json"
    config.write_text(json.dumps(clawdbot_config(root, gw_port, llm_port), indent=2))
    # sessiontool's own config: agent qa's runner always fails; the others use the echo runner,
    # named here: on a state dir of Clawdbot's the demo agent answers only when asked for.
    (state / "sessiontool.json5").write_text(
        json.dumps(
            {
                "agents": {
                    "defaults": {"runner": {"type": "echo"}},
                    "list": [
                        {
                            "id": "qa",
                            "runner": {
                                "type": "command",
                                "command": [sys.executable, "-c", QA_FAILING_AGENT],
                            },
                        }
                    ],
                }
            }
        )
    )
    env = _base_env(home)
    env["PATH"] = os.path.dirname(peer.node) + os.pathsep + env.get("PATH", "")
    env.update(
        CLAWDBOT_STATE_DIR=str(state),
        CLAWDBOT_CONFIG_PATH=str(config),
        CLAWDBOT_GATEWAY_TOKEN=TOKEN,
        CLAWDBOT_GATEWAY_PORT=str(gw_port),
        CLAWDBOT_SKIP_CHANNELS="1",
        CLAWDBOT_DISABLE_BONJOUR="1",
        CLAWDBOT_SKIP_BROWSER_CONTROL_SERVER="1",
        CLAWDBOT_SKIP_CANVAS_HOST="1",
        CLAWDBOT_SKIP_GMAIL_WATCHER="1",
        CLAWDBOT_SKIP_CRON="1",
        CLAWDBOT_NO_RESPAWN="1",  # one gateway process, not a launcher plus a child
    )
    st_env = _base_env(home)
    h = Harness(
        peer,
        root,
        state,
        env,
        st_env,
        gw_port,
        llm_port,
        root / "fake-llm.jsonl",
        root / "gateway.out",
    )
    try:
        llm_env = dict(env, FAKE_LLM_LOG=str(h.llm_log))
        llm = start(
            [sys.executable, str(FAKE_LLM), str(llm_port)], root / "fake-llm.out", llm_env, root
        )
        h.procs.append(llm)
        wait_port(llm, llm_port, 20, "fake LLM", root / "fake-llm.out")
        gw = start(
            [str(peer.bin), "gateway", "--port", str(gw_port), "--bind", "loopback", "--verbose"],
            h.gw_log,
            env,
            root,
        )
        h.procs.append(gw)
        wait_port(gw, gw_port, START_TIMEOUT, "clawdbot gateway", h.gw_log)
        deadline = time.monotonic() + 60
        while True:  # the port opens before the gateway answers
            res = h.gw([{"method": "health", "timeoutMs": 5000}])[0]
            if res["ok"]:
                break
            if time.monotonic() > deadline or gw.poll() is not None:
                raise RuntimeError(f"gateway not answering: {res['error']}\n{tail(h.gw_log)}")
            time.sleep(0.5)
        yield h
    finally:
        reap(state)
        for proc in reversed(h.procs):
            stop(proc)
