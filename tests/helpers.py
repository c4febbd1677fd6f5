"""What tests share: the real CLI run as a user runs it, its JSON parsed, and the fixture paths.

Kept apart from conftest.py so test modules import plain functions from a plain module (pytest's
conftest is for fixtures and hooks; importing from it couples every test file to pytest's loading
of it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests import forkserver

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "clawdbot-2026.1.24"
FIXTURE_STATE = FIXTURES / "state"
AGENTS_DIR = Path(__file__).resolve().parent / "agents"

# How many times slower than a quiet machine the suite must still pass on (issue 46, item 9):
# the README's test command at load 20 on 2 cores runs about ten times slower. A test proves a
# deadline by its logic (a lower bound, an exit code, an error naming the rule); an end-to-end
# upper bound, where one is kept, is its quiet-machine time scaled by this.
SLOWNESS = float(os.environ.get("SESSIONTOOL_TEST_SLOWNESS") or 10)


def generous(seconds: float) -> float:
    """An upper bound of `seconds` on a quiet machine, scaled for a busy one (SLOWNESS)."""
    return seconds * SLOWNESS


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


_real_subprocess_run = subprocess.run  # before conftest patches it


def _watching_run(*args: Any, **kwargs: Any) -> Any:
    proc = _real_subprocess_run(*args, **kwargs)
    argv = args[0] if args else kwargs.get("args")
    if isinstance(argv, list | tuple) and any(
        os.fsdecode(a).endswith("sessiontool") for a in argv[:3] if isinstance(a, str | bytes)
    ):
        note_output(argv, proc.stdout, proc.stderr)
    return proc


def run_cli(
    *args: str,
    input: str | bytes | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 60,
    cwd: str | Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the real `sessiontool` program (same interpreter, so the installed package): a
    process forked from one that imported it already (tests/forkserver.py), or started the
    ordinary way where that cannot be the same program."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    if forkserver.usable(full_env):
        ran = forkserver.run(
            list(args),
            input=input.decode() if isinstance(input, bytes) else input,
            env=full_env,
            timeout=timeout,
            cwd=cwd,
        )
        note_output(ran.args, ran.stdout, ran.stderr)
        return ran
    proc: subprocess.CompletedProcess[str] = _watching_run(
        [sys.executable, "-m", "sessiontool", *args],
        input=input.decode() if isinstance(input, bytes) else input,
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        cwd=cwd,
    )
    return proc


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
