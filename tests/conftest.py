"""Shared test fixtures: every test gets its own state dir and home, and runs the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "clawdbot-2026.1.24"
FIXTURE_STATE = FIXTURES / "state"
AGENTS_DIR = Path(__file__).resolve().parent / "agents"


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl-C as a user's terminal delivers it, whatever started the suite: a runner started in
    the background by a non-interactive shell (`cmd &`) ignores SIGINT, every child inherits the
    ignore, and a test that sends SIGINT to `sessiontool send` then waits for nothing (found when
    the suite ran in the background: the Ctrl-C tests failed every time). A handled signal is
    reset to the default by exec, so the CLI processes start with Python's own handler."""
    import signal

    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_sessionstart(session: pytest.Session) -> None:
    """Compile the package once, up front: the suite starts the CLI thousands of times, and where
    PYTHONDONTWRITEBYTECODE is set (CI machines) every start would compile it again (~80 s).
    Under pytest-xdist only the controller compiles, before it starts the workers (its own
    sessionstart runs last), so no two processes write the same .pyc at once."""
    if hasattr(session.config, "workerinput"):  # an xdist worker: the controller did it
        return
    import compileall

    import sessiontool

    compileall.compile_dir(Path(sessiontool.__file__).parent, quiet=2)


@pytest.fixture(autouse=True)
def _isolate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Point every location at tmp_path, so no test can touch the real home or state."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".local" / "state"))
    monkeypatch.setenv("SESSIONTOOL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "200")
    for var in (
        "SESSIONTOOL_CONFIG",
        "SESSIONTOOL_SESSION_KEY",
        "SESSIONTOOL_SANDBOXED",
        "SESSIONTOOL_NOW_MS",
        "SESSIONTOOL_RUN_ID",
        "SESSIONTOOL_AGENT_ID",
        "SESSIONTOOL_WORKER",
        "SESSIONTOOL_DEBUG",
        "SESSIONTOOL_STORE",
        "SESSIONTOOL_GATEWAY_URL",
        "OPENCLAW_GATEWAY_URL",
        "OPENCLAW_CONFIG_PATH",
        "OPENCLAW_GATEWAY_TOKEN",
        "OPENCLAW_GATEWAY_PASSWORD",
        "OPENCLAW_GATEWAY_PORT",
        "OPENCLAW_SHELL",
    ):
        monkeypatch.delenv(var, raising=False)
    yield


# "internal error" is reserved for real bugs: any sessiontool run in a test that prints it fails
# the test, even when the test itself did not look (run_cli and direct subprocess.run calls).
_INTERNAL_ERRORS: list[str] = []


def note_output(args: Any, *streams: str | bytes | None) -> None:
    for stream in streams:
        if stream is None:
            continue
        text = stream.decode("utf-8", "replace") if isinstance(stream, bytes) else stream
        for line in text.splitlines():
            if line.startswith("sessiontool") and "internal error" in line:
                _INTERNAL_ERRORS.append(f"{args!r}: {line}")
                break


_real_subprocess_run = subprocess.run


def _watching_run(*args: Any, **kwargs: Any) -> Any:
    proc = _real_subprocess_run(*args, **kwargs)
    argv = args[0] if args else kwargs.get("args")
    if isinstance(argv, list | tuple) and any(
        os.fsdecode(a).endswith("sessiontool") for a in argv[:3] if isinstance(a, str | bytes)
    ):
        note_output(argv, proc.stdout, proc.stderr)
    return proc


@pytest.fixture(autouse=True)
def _no_internal_error(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    _INTERNAL_ERRORS.clear()
    monkeypatch.setattr(subprocess, "run", _watching_run)
    yield


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    result = yield
    if _INTERNAL_ERRORS:
        found = "\n".join(_INTERNAL_ERRORS)
        _INTERNAL_ERRORS.clear()
        pytest.fail(f"sessiontool printed 'internal error' (reserved for bugs):\n{found}")
    return result


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


def run_cli(
    *args: str,
    input: str | bytes | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 60,
    cwd: str | Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the real `sessiontool` program (same interpreter, so the installed package)."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    return _watching_run(
        [sys.executable, "-m", "sessiontool", *args],
        input=input.decode() if isinstance(input, bytes) else input,
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        cwd=cwd,
    )


def run_json(*args: str, **kw: Any) -> tuple[int, Any]:
    """Run with --json and parse stdout (one JSON line)."""
    proc = run_cli(*args, "--json", **kw) if "--json" not in args else run_cli(*args, **kw)
    out = proc.stdout.strip()
    try:
        data = json.loads(out) if out else None
    except ValueError as exc:
        raise AssertionError(
            f"not JSON (rc={proc.returncode}): {out!r}\nstderr: {proc.stderr}"
        ) from exc
    return proc.returncode, data


def write_config(state: Path, cfg: dict[str, Any]) -> Path:
    state.mkdir(parents=True, exist_ok=True)
    p = state / "sessiontool.json5"
    p.write_text(json.dumps(cfg))
    return p


@pytest.fixture
def reap_workers(state: Path) -> Iterator[None]:
    """For tests that start real background runs: wait for (or kill) every worker afterwards."""
    from tests.runhelpers import reap

    yield
    reap(state)


@pytest.fixture
def agent_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every request the scripted test agent receives, one JSON line each."""
    log = tmp_path / "agent-requests.jsonl"
    monkeypatch.setenv("SCRIPTED_AGENT_LOG", str(log))
    return log
