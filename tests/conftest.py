"""Shared test fixtures: every test gets its own state dir and home, and runs the real CLI."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import _INTERNAL_ERRORS, _watching_run


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
    monkeypatch.delenv("FORCE_COLOR", raising=False)  # each means --color always
    monkeypatch.delenv("CLICOLOR_FORCE", raising=False)
    monkeypatch.setenv("COLUMNS", "200")
    # The CLI processes a test starts turn a DeprecationWarning into an error as pytest does
    # (filterwarnings = error): the 3.12+ fork-with-threads warning of a child is seen, not lost
    # on a stderr nobody reads (issue 46, item 8).
    monkeypatch.setenv("PYTHONWARNINGS", "error::DeprecationWarning")
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
