"""A hostile or broken gateway against the real CLI (issue 37, items 5, 9, 10, 11): a raw socket
server on 127.0.0.1 whose every frame is written by hand (tests/fakes/rawgateway.py) plays the
gateway a command reads through, and sends what OpenClaw's never does: a frame nested 100,000
deep, a ping flood it never reads the pongs of, masked and RSV1 frames, text that is not UTF-8,
an impossible length, a 300 MB answer, empty continuation frames without end, an event flood
during a follow, and controls in its close reasons and error messages. Each case is one
documented error line (never `internal error`), within the documented bounds of time and memory
(docs/reference.md, "Bounds against a gateway"), measured on the command's own process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sessiontool.openclaw import wsconnection

from .conftest import note_output
from .fakes.rawgateway import (
    OP_TEXT,
    Peer,
    nested,
    serving,
    sframe,
)

TOKEN = "s3cret-H0stile"
KEY = "agent:main:main"
Answer = Callable[[Peer, dict[str, Any]], None]


def row(key: str = KEY, **more: Any) -> dict[str, Any]:
    return {"key": key, "agentId": "main", "sessionId": "s1", "updatedAt": 1_795_000_000_000} | more


def listed(*rows: dict[str, Any]) -> dict[str, Any]:
    return {"count": len(rows), "sessions": list(rows)}


def history(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"sessionKey": KEY, "sessionId": "s1", "messages": list(messages), "sessionInfo": row()}


def gateway(**answers: Answer) -> Callable[[Peer], None]:
    """A gateway script: the handshake, then each request answered by `answers[method]`
    (`config.get` with nothing, `sessions.list` with one session, `chat.history` with one
    message, unless the test says otherwise), until the client closes."""
    plain: dict[str, Any] = {
        "config.get": {},
        "sessions.list": listed(row()),
        "chat.history": history({"role": "user", "content": "hi", "timestamp": 1}),
    }

    def script(p: Peer) -> None:
        p.hello()
        while True:
            req = p.read_request_frame()
            method = req["method"]
            if method in answers:
                answers[method](p, req)
            else:
                p.answer(req, plain.get(method, {}))

    return script


def raw_answer(body: bytes) -> Answer:
    """Answer with these bytes as the `res` frame's text, the request's id put in."""

    def answer(p: Peer, req: dict[str, Any]) -> None:
        p.send_raw(
            sframe(OP_TEXT, body.replace(b'"id":"x"', b'"id":' + json.dumps(req["id"]).encode()))
        )

    return answer


class Ran:
    """A finished command: its exit code, output, wall time and peak memory (VmHWM, KiB)."""

    def __init__(self, rc: int, out: str, err: str, wall: float, peak_kib: int) -> None:
        self.rc, self.out, self.err, self.wall, self.peak_kib = rc, out, err, wall, peak_kib

    @property
    def error(self) -> str:
        """The one error line (every other stderr line is a `hint:`)."""
        lines = [ln for ln in self.err.splitlines() if not ln.startswith("hint: ")]
        assert len(lines) == 1 and lines[0].startswith("sessiontool: error: "), self.err
        return lines[0].removeprefix("sessiontool: error: ")


def env(tmp_path: Path) -> dict[str, str]:
    state = tmp_path / "local-state"
    state.mkdir(exist_ok=True)
    cfg = tmp_path / "openclaw.json"
    cfg.write_text("{}")
    return {
        **os.environ,
        "SESSIONTOOL_STATE_DIR": str(state),
        "OPENCLAW_CONFIG_PATH": str(cfg),
        "OPENCLAW_GATEWAY_TOKEN": TOKEN,
        "SESSIONTOOL_OPENCLAW_BIN": "",
    }


def cli(tmp_path: Path, port: int, *args: str, timeout: float = 120) -> Ran:
    """The real CLI against the gateway at `port`, its peak memory read from its own
    /proc/PID/status just before it exits (a wrapper would measure itself: ru_maxrss of
    RUSAGE_CHILDREN is the largest child of the whole test process, not this one)."""
    probe = (
        "import atexit, runpy, sys\n"
        "def peak():\n"
        "    for line in open('/proc/self/status'):\n"
        "        if line.startswith('VmHWM:'):\n"
        "            sys.stderr.write('@@peak ' + line.split()[1] + '\\n')\n"
        "atexit.register(peak)\n"
        "sys.argv = ['sessiontool', *sys.argv[1:]]\n"
        "runpy.run_module('sessiontool', run_name='__main__')\n"
    )
    argv = [sys.executable, "-c", probe, "--gateway", f"ws://127.0.0.1:{port}", *args]
    start = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env(tmp_path), timeout=timeout)
    wall = time.monotonic() - start
    note_output(["sessiontool", *args], proc.stdout, proc.stderr)
    lines = proc.stderr.splitlines()
    peaks = [int(ln.split()[1]) for ln in lines if ln.startswith("@@peak ")]
    err = "".join(ln + "\n" for ln in lines if not ln.startswith("@@peak "))
    assert "internal error" not in err and "Traceback" not in err, err
    return Ran(proc.returncode, proc.stdout, err, wall, peaks[0] if peaks else 0)


# -- item 5: a frame nested 100,000 deep ------------------------------------------------------


DEEP = nested(100_000)


@pytest.mark.parametrize(
    ("args", "method"),
    [
        (("list",), "sessions.list"),
        (("list", "--json"), "sessions.list"),
        (("history", "main"), "chat.history"),
    ],
    ids=["list", "list-json", "history"],
)
def test_a_frame_nested_100000_deep_is_one_gateway_error(
    tmp_path: Path, args: tuple[str, ...], method: str
) -> None:
    with serving(gateway(**{method: raw_answer(DEEP)})) as port:
        ran = cli(tmp_path, port, *args)
    assert ran.rc == 1, ran.err
    want = f"gateway {method}: a message nested more than {wsconnection.MAX_DEPTH} levels deep"
    assert ran.error.startswith(want), ran.err
    if "--json" in args:
        assert json.loads(ran.out) == {"status": "error", "error": ran.error, "code": 1}


def test_nesting_just_past_the_bound_is_refused_and_just_under_it_is_read(
    tmp_path: Path,
) -> None:
    """The bound is the documented one, not wherever Python's recursion happens to stop: an
    answer nested 990 deep (which json.loads reads, and a later json.dumps may not) is refused,
    one within the bound is shown."""

    def deep_origin(depth: int) -> Answer:
        def answer(p: Peer, req: dict[str, Any]) -> None:
            body = json.dumps(
                {"type": "res", "id": req["id"], "ok": True, "payload": listed(row(origin="@@"))}
            ).encode()
            p.send_raw(sframe(OP_TEXT, body.replace(b'"@@"', b"[" * depth + b"]" * depth)))

        return answer

    with serving(gateway(**{"sessions.list": deep_origin(990)})) as port:
        ran = cli(tmp_path, port, "list", "--json")
    assert ran.rc == 1 and "nested more than" in ran.error, ran.err
    with serving(gateway(**{"sessions.list": deep_origin(wsconnection.MAX_DEPTH - 10)})) as port:
        ran = cli(tmp_path, port, "list", "--json")
    assert ran.rc == 0, ran.err
    assert [s["sessionId"] for s in json.loads(ran.out)["sessions"]] == ["s1"]


def test_mcp_over_a_gateway_that_nests_too_deep_starts_and_answers(tmp_path: Path) -> None:
    """`--gateway URL mcp` used to die at start-up (the gateway's config read); now it starts,
    a tool call is answered with the gateway error, and a line of its own stdin nested too
    deep is answered `nested too deep`, not `not JSON`."""
    pytest.importorskip("mcp")
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    }
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "sessions_list", "arguments": {}},
    }
    lines = [
        json.dumps(init),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json.dumps(call),
        "[" * 100_000 + "]" * 100_000,
        json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}),
    ]
    answers: list[dict[str, Any]] = []
    script = gateway(**{"config.get": raw_answer(DEEP), "sessions.list": raw_answer(DEEP)})
    with (
        serving(script) as port,
        subprocess.Popen(
            [sys.executable, "-m", "sessiontool", "--gateway", f"ws://127.0.0.1:{port}", "mcp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env(tmp_path),
        ) as proc,
    ):
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write("\n".join(lines) + "\n")
            proc.stdin.flush()
            while not {2, 3} <= {a.get("id") for a in answers}:
                line = proc.stdout.readline()
                if not line:
                    break
                answers.append(json.loads(line))
        finally:
            proc.stdin.close()
            try:
                proc.wait(timeout=60)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            assert proc.stderr is not None
            err = proc.stderr.read()
    note_output(["sessiontool", "mcp"], err)
    by_id = {a.get("id"): a for a in answers}
    assert set(by_id) == {1, 2, None, 3}, (answers, err)
    assert by_id[None]["error"] == {
        "code": -32700,
        "message": "Parse error: the line is JSON nested too deep to read",
    }
    tool = by_id[2]["result"]
    assert tool["isError"] is True, tool
    assert "gateway sessions.list: a message nested more than" in tool["content"][0]["text"]
    assert by_id[3]["result"]["tools"], by_id[3]
    assert proc.returncode == 0, err
