"""The `openclaw` CLI as the gateway transport of last resort: only for a gateway whose protocol
sessiontool's own client does not speak (gateway.call decides). One Node process per call
(`openclaw gateway call METHOD --params JSON --json`), run in its own process group so that a
run's `abort` (or our own timeout) can end it and whatever it started at once. Which gateway it
reaches (`target` arguments, `env`: the token goes through the environment, never the command
line) is gateway.py's `_cli_target`."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any, NamedTuple

from sessiontool.openclaw.wsclient import GatewayError


class Route(NamedTuple):
    """How the CLI reaches the gateway: the program, its target arguments, its environment
    (the token in it), and the secret they carry (kept out of what the CLI prints back)."""

    exe: list[str]
    target: list[str]
    env: dict[str, str]
    secret: str | None


def call(
    route: Route,
    method: str,
    params: dict[str, Any],
    *,
    timeout_s: float,
    expect_final: bool,
    on_pid: Callable[[int], None] | None,
) -> dict[str, Any]:
    exe, target, env, secret = route
    import signal
    import subprocess

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
    ]
    argv += target
    if expect_final:
        argv.append("--expect-final")
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
    text = out.strip()
    if secret is not None:  # the CLI may echo it: never shown
        text, err = text.replace(secret, "***"), err.replace(secret, "***")
    return answer(method, proc.returncode, text, err)


def answer(method: str, returncode: int, out: str, err: str) -> dict[str, Any]:
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
