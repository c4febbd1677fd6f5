"""A program in a tmux pane, driven as a person drives it: keys in (send-keys), the screen out
(capture-pane). One private tmux server per pane (`-L`), killed with it."""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager


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

    def wait_for(self, text: str, timeout: float = 20.0) -> str:
        return self._wait(
            lambda screen: text in screen, f"{text!r} not on the screen within {timeout}s", timeout
        )

    def wait_gone(self, text: str, timeout: float = 20.0) -> str:
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
    argv: Sequence[str], env: dict[str, str], *, after: str = "", size: tuple[int, int] = (80, 24)
) -> Iterator[Pane]:
    """`argv` in a new pane of `size`; `after` (shell) runs once it exits, and the pane stays
    (a minute) so that what is left on the screen can be looked at."""
    p = Pane(f"sessiontool-test-{os.getpid()}-{time.monotonic_ns()}")
    env = {k: v for k, v in env.items() if not k.startswith("TMUX")}
    env["TERM"] = "xterm-256color"
    command = f"{shlex.join(argv)}; {after or ':'}; sleep 60"
    subprocess.run(
        ["tmux", "-L", p.socket, "-f", "/dev/null", "new-session", "-d", "-s", "main",
         "-x", str(size[0]), "-y", str(size[1]), command],
        check=True, env=env, timeout=30,
    )  # fmt: skip
    try:
        yield p
    finally:
        subprocess.run(["tmux", "-L", p.socket, "kill-server"], capture_output=True, timeout=30)
