"""`history KEY --follow` through a remote gateway (openclaw/gateway_follow.py), against the
scripted fake (tests/fakes/gateway.py) for what the real one does only by accident: a connection
that drops between two events (followed again, nothing lost, nothing printed twice) and a
gateway that goes away for good (exit 4 after the reconnect budget, naming it). The real
2026.9.6 gateway's events are covered in tests/interop_openclaw/test_remote_commands.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from .fakes import gateway as fake

TOKEN = "s3cret-T0ken-follow"
KEY = "agent:main:room"


def msg(seq: int, role: str, text: str) -> dict[str, Any]:
    return {
        "role": role,
        "content": text,
        "timestamp": 1_795_000_000_000 + seq * 1000,
        "__openclaw": {"id": f"m{seq}", "seq": seq},
    }


class Follower:
    def __init__(self, port: int, state: Path, *args: str, **env: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sessiontool", "--gateway", f"ws://127.0.0.1:{port}"]
            + ["history", KEY, "--follow", *args],
            env={
                **os.environ,
                "SESSIONTOOL_STATE_DIR": str(state),
                "OPENCLAW_GATEWAY_TOKEN": TOKEN,
                "SESSIONTOOL_OPENCLAW_BIN": "",
                **env,
            },
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def until(self, n: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while len(self.lines) < n:
            assert self.proc.poll() is None, self.finish()
            assert time.monotonic() < deadline, self.lines
            time.sleep(0.05)

    def finish(self, sig: int | None = None, timeout: float = 60) -> tuple[int, str]:
        if sig is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
        rc = self.proc.wait(timeout=timeout)
        self._t.join(timeout=10)
        assert self.proc.stderr is not None and self.proc.stdout is not None
        err = self.proc.stderr.read()
        self.proc.stderr.close()
        self.proc.stdout.close()
        assert "internal error" not in err and "Traceback" not in err, err
        return rc, err


def test_a_dropped_connection_is_followed_again_with_nothing_lost_or_twice(
    tmp_path: Path,
) -> None:
    history = [msg(1, "user", "one"), msg(2, "assistant", "two")]
    events = [msg(3, "user", "three"), msg(4, "assistant", "four"), msg(5, "user", "five")]
    with fake.running(
        tmp_path / "gw", token=TOKEN, history=history, events=events, drop_after_event=2
    ) as gw:
        f = Follower(gw.port, tmp_path / "state", "--json")
        try:
            f.until(5)
            time.sleep(1.5)  # nothing more: no message printed twice after the two drops
        finally:
            rc, err = f.finish(signal.SIGTERM)
        subscribes = gw.calls("sessions.messages.subscribe")
    assert [json.loads(x)["content"] for x in f.lines] == ["one", "two", "three", "four", "five"]
    # printed as history prints a message: the gateway's bookkeeping left out
    assert json.loads(f.lines[2]) == {
        "role": "user",
        "content": "three",
        "timestamp": 1795000003000,
    }
    assert len(subscribes) == 3 and subscribes[0]["params"] == {"key": KEY, "agentId": "main"}
    assert rc == 143 and err == ""


def test_a_gateway_gone_for_good_ends_the_follow_with_exit_4(tmp_path: Path) -> None:
    with fake.running(tmp_path / "gw", token=TOKEN, history=[msg(1, "user", "one")]) as gw:
        f = Follower(gw.port, tmp_path / "state", SESSIONTOOL_FOLLOW_RECONNECT="2s")
        f.until(1)
        deadline = time.monotonic() + 60
        while not gw.calls("sessions.messages.subscribe"):  # following: then the gateway goes
            assert time.monotonic() < deadline
            time.sleep(0.05)
        url = f"ws://127.0.0.1:{gw.port}"
    # the fake is stopped: the connection drops and nothing answers any more
    rc, err = f.finish(timeout=60)
    assert rc == 4, err
    lines = err.strip().splitlines()
    assert lines[0] == (
        f"sessiontool: error: history --follow: lost the connection to OpenClaw's gateway at "
        f"{url} and could not connect again in 2s"
    )
    assert TOKEN not in err
    assert "one" in "\n".join(f.lines)


def test_follow_with_a_gateway_that_does_not_answer_is_exit_4_at_once(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    f = Follower(port, tmp_path / "state")
    rc, err = f.finish(timeout=60)
    assert rc == 4 and f"no OpenClaw gateway answers at ws://127.0.0.1:{port}" in err
