"""The CLI started by fork from an interpreter that has imported it already: `run_cli`'s
process, without Python's start-up and the CLI's imports (~0.2 CPU s a command, most of the
suite's CPU; the README's suite starts the CLI thousands of times on two cores).

It is still the real program in a process of its own: `python -m sessiontool ARGS` as run by
`runpy` (what `-m` does) in a child forked from a server that imported `sessiontool.cli.main`
and nothing else, with the command's own argv, environment, working directory, umask and
standard streams (the caller's pipes, passed over a Unix socket), its exit code or signal, and
the interpreter's own exit (atexit, flushing, threads joined). What it cannot give a process it
did not exec is the start-up's own reading of the environment, so a command whose `PYTHON*` or
locale variables differ from the server's is started the ordinary way; so is every command
when `SESSIONTOOL_TEST_FORKSERVER=0`. Tests of start-up itself (a module probe, a broken
install, `sessiontool` on PATH) start their own processes and never come here.

The server runs one per test process (an xdist worker), started at the first command and
stopped at exit. Each command is two forks: a monitor that reports the command's pid and then
its wait status (with its CPU seconds: the command is not the caller's child, so
`RUSAGE_CHILDREN` does not count it; `CHILD_CPU` does, for tests/cputime.py), and the command.
"""

from __future__ import annotations

import atexit
import json
import locale
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

# Variables read by the interpreter as it starts (flags, warnings, paths, the streams'
# encoding): a command whose values differ from the server's cannot be forked from it.
_STARTUP_PREFIXES = ("PYTHON", "LC_")
_STARTUP_NAMES = frozenset({"LANG", "LANGUAGE"})

CHILD_CPU = [0.0]  # CPU seconds of the commands run here (tests/cputime.py adds them)

_lock = threading.Lock()
_server: dict[str, Any] = {}


def _startup_env(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(_STARTUP_PREFIXES) or k in _STARTUP_NAMES}


def _enabled() -> bool:
    return os.environ.get("SESSIONTOOL_TEST_FORKSERVER", "1") != "0"


def _start() -> dict[str, Any] | None:
    """The server for this process, started on first use; None where it cannot run."""
    with _lock:
        if _server.get("pid") == os.getpid():
            return _server if _server.get("sock") else None
        _server.clear()
        _server["pid"] = os.getpid()
        tmp = Path(tempfile.mkdtemp(prefix="st-fork-"))
        sock = tmp / "s"
        env = dict(os.environ)
        proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("forkserver_serve.py")), str(sock)],
            stdin=subprocess.PIPE,  # its end is the server's: it stops when this process goes
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd="/",
        )
        assert proc.stdout is not None
        ready = proc.stdout.readline()
        proc.stdout.close()
        if ready.strip() != b"ready":
            proc.kill()
            proc.wait()
            return None
        _server.update(sock=str(sock), proc=proc, env=_startup_env(env), dir=tmp)
        atexit.register(_stop, proc, tmp)
        return _server


def _stop(proc: subprocess.Popen[bytes], tmp: Path) -> None:
    if proc.stdin is not None:
        proc.stdin.close()
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    for p in tmp.iterdir():
        p.unlink()
    tmp.rmdir()


def usable(env: dict[str, str]) -> bool:
    """Whether a command with this environment can be forked from the server."""
    if not _enabled():
        return False
    server = _start()
    return server is not None and server["env"] == _startup_env(env)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def run(
    args: list[str],
    *,
    input: str | None,
    env: dict[str, str],
    timeout: float,
    cwd: str | Path | None,
) -> subprocess.CompletedProcess[str]:
    """`subprocess.run([python, -m, sessiontool, *args], capture_output=True, text=True)`,
    the process forked from the server (call `usable(env)` first)."""
    server = _server
    argv = [sys.executable, "-m", "sessiontool", *args]
    request = json.dumps(
        {
            "args": args,
            "env": env,
            "cwd": os.path.abspath(cwd if cwd is not None else os.getcwd()),
            "umask": _umask(),
        }
    ).encode()
    encoding = locale.getpreferredencoding(False)
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(server["sock"])
        stdin_fd = in_r if input is not None else 0
        socket.send_fds(conn, [len(request).to_bytes(8, "big")], [stdin_fd, out_w, err_w])
        conn.sendall(request)
    finally:
        for fd in (in_r, out_w, err_w):
            os.close(fd)
    if input is None:
        os.close(in_w)
    pending = input.encode(encoding) if input is not None else b""
    out: dict[int, list[bytes]] = {out_r: [], err_r: [], conn.fileno(): []}
    sel = selectors.DefaultSelector()
    sel.register(out_r, selectors.EVENT_READ)
    sel.register(err_r, selectors.EVENT_READ)
    sel.register(conn, selectors.EVENT_READ)
    if input is not None:
        os.set_blocking(in_w, False)
        sel.register(in_w, selectors.EVENT_WRITE)
    deadline = time.monotonic() + timeout
    pid: int | None = None
    status: dict[str, Any] | None = None
    timed_out = False
    try:
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0 and not timed_out:
                timed_out = True
                if pid is not None:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                deadline = time.monotonic() + 5  # what is left to read after the kill
                continue
            if left <= 0:
                break
            for key, _ in sel.select(left):
                fd = key.fd
                if fd == in_w:
                    try:
                        sent = os.write(in_w, pending[:65536])
                    except BrokenPipeError:
                        sent = len(pending)
                    pending = pending[sent:]
                    if not pending:
                        sel.unregister(in_w)
                        os.close(in_w)
                    continue
                chunk = os.read(fd, 65536) if fd != conn.fileno() else conn.recv(65536)
                if not chunk:
                    sel.unregister(fd)
                    continue
                out[fd].append(chunk)
                if fd == conn.fileno():
                    lines = b"".join(out[fd]).split(b"\n")
                    for line in lines[:-1]:
                        msg = json.loads(line)
                        pid = msg.get("pid", pid)
                        if "status" in msg:
                            status = msg
    finally:
        sel.close()
        for fd in (out_r, err_r) + ((in_w,) if input is not None and pending else ()):
            try:
                os.close(fd)
            except OSError:
                pass
        conn.close()
    stdout = _text(b"".join(out[out_r]), encoding)
    stderr = _text(b"".join(out[err_r]), encoding)
    if timed_out or status is None:
        raise subprocess.TimeoutExpired(argv, timeout, output=stdout, stderr=stderr)
    CHILD_CPU[0] += float(status.get("cpu", 0.0))
    code = os.waitstatus_to_exitcode(int(status["status"]))
    return subprocess.CompletedProcess(argv, code, stdout, stderr)


def _text(data: bytes, encoding: str) -> str:
    """As subprocess's text mode decodes a stream: the locale's encoding, universal newlines."""
    return data.decode(encoding).replace("\r\n", "\n").replace("\r", "\n")
