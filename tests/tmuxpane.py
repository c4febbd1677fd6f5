"""A program in a tmux pane, driven as a person drives it: keys in (send-keys), the screen out
(capture-pane), and, when asked, every byte it wrote to the terminal (pipe-pane). One private
tmux server per pane (`-L`), killed with it. `measured` starts a program under a launcher that
records what it cost (peak RSS, CPU, exit code), `cpu_seconds` what it has cost so far."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.helpers import generous

# How long a screen may take to show a line (or lose one): waited for as an event, so a quiet
# machine passes at once and a busy one gets its time (issue 46, item 9).
SCREEN_WAIT = generous(5)


class Pane:
    def __init__(self, socket: str) -> None:
        self.socket = socket

    def tmux(self, *args: str) -> str:
        return subprocess.run(
            ["tmux", "-L", self.socket, *args],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "main")

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "main", *keys)

    def wait_for(self, text: str, timeout: float = SCREEN_WAIT) -> str:
        return self._wait(
            lambda screen: text in screen, f"{text!r} not on the screen within {timeout}s", timeout
        )

    def wait_gone(self, text: str, timeout: float = SCREEN_WAIT) -> str:
        """Until `text` has left the screen: a dialog closed, so the next key is the screen's
        below it (one sent while the dialog still shows would be the dialog's)."""
        return self._wait(
            lambda screen: text not in screen,
            f"{text!r} still on the screen after {timeout}s",
            timeout,
        )

    def _wait(self, done: Callable[[str], bool], failure: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if done(screen):
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"{failure}:\n{screen}")
            time.sleep(0.1)


@contextmanager
def pane(
    argv: Sequence[str],
    env: dict[str, str],
    *,
    after: str = "",
    size: tuple[int, int] = (80, 24),
    raw: Path | None = None,
) -> Iterator[Pane]:
    """`argv` in a new pane of `size`; `after` (shell) runs once it exits, and the pane stays
    (a minute) so that what is left on the screen can be looked at. With `raw`, every byte the
    program writes to the terminal is appended to that file, from its first one."""
    p = Pane(f"sessiontool-test-{os.getpid()}-{time.monotonic_ns()}")
    env = {k: v for k, v in env.items() if not k.startswith("TMUX")}
    env["TERM"] = "xterm-256color"
    command = f"{shlex.join(argv)}; {after or ':'}; sleep 60"
    go = None
    if raw is not None:  # the program starts once the pane's output is piped to `raw`
        go = raw.with_name(raw.name + ".go")
        command = f"while [ ! -e {shlex.quote(str(go))} ]; do sleep 0.05; done; {command}"
    subprocess.run(
        ["tmux", "-L", p.socket, "-f", "/dev/null", "new-session", "-d", "-s", "main",
         "-x", str(size[0]), "-y", str(size[1]), command],
        check=True, env=env, timeout=30,
    )  # fmt: skip
    try:
        if raw is not None and go is not None:
            p.tmux("pipe-pane", "-t", "main", "-o", f"cat >> {shlex.quote(str(raw))}")
            go.touch()
        yield p
    finally:
        subprocess.run(["tmux", "-L", p.socket, "kill-server"], capture_output=True, timeout=30)


_LAUNCHER = """
import json, os, subprocess, sys
out = sys.argv[1]
child = subprocess.Popen(sys.argv[2:])
with open(out + ".pid", "w") as fh:
    fh.write(str(child.pid))
_, status, usage = os.wait4(child.pid, 0)
with open(out + ".tmp", "w") as fh:
    json.dump({"rc": os.waitstatus_to_exitcode(status), "maxrss_kb": usage.ru_maxrss,
               "cpu_s": usage.ru_utime + usage.ru_stime}, fh)
os.replace(out + ".tmp", out)
"""


def measured(argv: Sequence[str], out: Path) -> list[str]:
    """`argv` started by a launcher that writes its pid to OUT.pid at once and, when it has
    exited, its exit code, peak RSS (kB) and CPU seconds to OUT (JSON, `measurement`)."""
    return [sys.executable, "-c", _LAUNCHER, str(out), *argv]


def launched_pid(out: Path, timeout: float = 30.0) -> int:
    pid_file = Path(f"{out}.pid")
    deadline = time.monotonic() + timeout
    while not pid_file.exists() or not pid_file.read_text():
        if time.monotonic() > deadline:
            raise AssertionError(f"{pid_file} not written within {timeout}s")
        time.sleep(0.05)
    return int(pid_file.read_text())


def measurement(out: Path, timeout: float) -> dict[str, Any]:
    """What `measured` wrote once its program exited (within `timeout` seconds, or the test
    fails)."""
    deadline = time.monotonic() + timeout
    while not out.exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"the program had not exited {timeout:.0f}s later")
        time.sleep(0.05)
    data: dict[str, Any] = json.loads(out.read_text())
    return data


def cpu_seconds(pid: int) -> float:
    """The user + system CPU time process `pid` has used so far."""
    with open(f"/proc/{pid}/stat", "rb") as fh:
        fields = fh.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
