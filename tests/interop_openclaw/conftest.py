"""Interop tests against the real OpenClaw 2026.9.6 (SQLite session store) and its gateway.

They run only with `SESSIONTOOL_INTEROP=1` and the program `tests/fixtures/tools/setup-openclaw.sh`
installs (env `OPENCLAW_BIN`, else `$PEERS_DIR/openclaw-bin`, default `/opt/peers/openclaw-bin`);
otherwise they are skipped with that reason, unless `SESSIONTOOL_INTEROP_STRICT=1` (CI, once the
install succeeded): then a missing piece fails. The gateway and a deterministic fake LLM run in
their own process groups on free loopback ports and are stopped by PID in the teardown.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
OC_FIXTURE = ROOT / "tests" / "fixtures" / "openclaw-2026.9.6" / "state"
FAKE_LLM = ROOT / "tests" / "fixtures" / "tools" / "oc" / "fake_llm_server.py"
TOKEN = "test-token-123"  # the fixture's openclaw.json
START_TIMEOUT = 240.0
MODEL_REQUESTS = "llm.jsonl"  # beside the state: every request the fake model answered


def openclaw_bin() -> str:
    peers = os.environ.get("PEERS_DIR", "/opt/peers")
    return os.environ.get("OPENCLAW_BIN") or os.path.join(peers, "openclaw-bin")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    enabled = os.environ.get("SESSIONTOOL_INTEROP") == "1"
    skip = pytest.mark.skip(
        reason="OpenClaw interop tests need SESSIONTOOL_INTEROP=1 and the real openclaw "
        "(tests/fixtures/tools/setup-openclaw.sh)"
    )
    for item in items:
        if HERE not in Path(str(item.fspath)).parents:
            continue
        item.add_marker(pytest.mark.interop)
        if not enabled:
            item.add_marker(skip)


def unavailable(reason: str) -> None:
    if os.environ.get("SESSIONTOOL_INTEROP_STRICT") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def oc_env(state: Path, home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        HOME=str(home),
        OPENCLAW_STATE_DIR=str(state),
        OPENCLAW_CONFIG_PATH=str(state / "openclaw.json"),
        OPENCLAW_GATEWAY_TOKEN=TOKEN,
        OPENCLAW_SKIP_CHANNELS="1",
        OPENCLAW_DISABLE_BONJOUR="1",
        OPENCLAW_SKIP_BROWSER_CONTROL_SERVER="1",
        OPENCLAW_SKIP_CANVAS_HOST="1",
        OPENCLAW_SKIP_GMAIL_WATCHER="1",
        OPENCLAW_SKIP_CRON="1",
        OPENCLAW_SKIP_STARTUP_MODEL_PREWARM="1",
        TZ="UTC",
        # sessiontool reaches the gateway with its own client: no `openclaw` for it to find
        # (the tests drive and inspect the gateway through openclaw_bin() themselves).
        SESSIONTOOL_OPENCLAW_BIN="",
        PATH=os.pathsep.join(
            d
            for d in env.get("PATH", "").split(os.pathsep)
            if d and not os.access(os.path.join(d, "openclaw"), os.X_OK)
        ),
    )
    return env


def copy_fixture(dest: Path, gw_port: int, llm_port: int) -> Path:
    shutil.copytree(OC_FIXTURE, dest)
    cfg = dest / "openclaw.json"
    cfg.write_text(
        cfg.read_text()
        .replace("port: 18893", f"port: {gw_port}")
        .replace("127.0.0.1:18890", f"127.0.0.1:{llm_port}")
    )
    return dest


def _stop(proc: subprocess.Popen[bytes]) -> None:
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


@dataclass
class Live:
    state: Path
    env: dict[str, str]
    port: int

    def model_requests(self) -> list[dict[str, Any]]:
        """Every request the fake model has answered so far (its messages, the system prompt
        first), oldest first."""
        log = self.state.parent / MODEL_REQUESTS
        if not log.exists():
            return []
        return [json.loads(line)["request"] for line in log.read_text().splitlines() if line]

    def oc(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [openclaw_bin(), *args], env=self.env, capture_output=True, text=True, timeout=timeout
        )


ALLOW_OWN_TOOLS = 'gateway: {\n    tools: { allow: ["sessions_spawn", "sessions_send"] },'


@contextmanager
def running(
    base: Path, *, allow_own_tools: bool = False, more_config: str = "", agent_defaults: str = ""
) -> Iterator[Live]:
    """A copy of the fixture with the real gateway running on it; `allow_own_tools`: its config
    has `gateway.tools.allow: ["sessions_spawn", "sessions_send"]` (OpenClaw's own session tools
    through `tools.invoke`); `more_config`: top-level JSON5 entries added to its config;
    `agent_defaults`: entries added to its `agents.defaults` (a second top-level `agents` would
    replace the fixture's)."""
    if not os.access(openclaw_bin(), os.X_OK):
        unavailable(f"no openclaw at {openclaw_bin()} (tests/fixtures/tools/setup-openclaw.sh)")
    gw_port, llm_port = free_port(), free_port()
    state = copy_fixture(base / "state", gw_port, llm_port)
    if allow_own_tools:
        cfg = state / "openclaw.json"
        cfg.write_text(cfg.read_text().replace("gateway: {", ALLOW_OWN_TOOLS, 1))
    if more_config:
        cfg = state / "openclaw.json"
        cfg.write_text(cfg.read_text().replace("gateway: {", more_config + "\n  gateway: {", 1))
    if agent_defaults:
        cfg = state / "openclaw.json"
        cfg.write_text(cfg.read_text().replace("defaults: {", "defaults: {\n" + agent_defaults, 1))
    home = base / "home"
    home.mkdir()
    env = oc_env(state, home)
    with open(base / "llm.log", "wb") as out:
        llm = subprocess.Popen(
            [sys.executable, str(FAKE_LLM), str(llm_port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**env, "FAKE_LLM_LOG": str(base / MODEL_REQUESTS)},
        )
    log = base / "gateway.log"
    with open(log, "wb") as out:
        gw = subprocess.Popen(
            [openclaw_bin(), "gateway", "--port", str(gw_port), "--bind", "loopback"],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if b"listening" in log.read_bytes():
                break
            if gw.poll() is not None:
                pytest.fail(f"openclaw gateway exited: {log.read_text()[-2000:]}")
            time.sleep(1)
        else:
            pytest.fail(f"openclaw gateway did not start in {START_TIMEOUT:.0f}s")
        yield Live(state, env, gw_port)
    finally:
        _stop(gw)
        _stop(llm)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """A copy of the fixture with the real gateway running on it."""
    with running(tmp_path_factory.mktemp("oc-live")) as it:
        yield it
