"""The server of tests/forkserver.py: `python forkserver_serve.py SOCKET`. It imports what every
command imports first (`sessiontool.cli.main`), then forks a monitor per connection, which
forks the command. Its own modules (the socket, select) are dropped from the command's
`sys.modules`, so the command imports what the real program would, no more."""

import os
import sys

import sessiontool.cli.main  # noqa: F401

_BASELINE = frozenset(sys.modules)

import json  # noqa: E402
import select  # noqa: E402
import socket  # noqa: E402
import time  # noqa: E402


def _command(req, fds):  # pragma: no cover - the command
    """Become `python -m sessiontool ARGS` and run it. SystemExit (or an exception) goes up to
    the top level, so the interpreter exits as the program's own would."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    os.chdir(req["cwd"])
    os.umask(int(req["umask"]))
    os.environ.clear()
    os.environ.update(req["env"])
    time.tzset()
    sys.path[0] = req["cwd"]  # where `python -m` puts the working directory
    sys.argv = ["-m", *req["args"]]
    for name in [m for m in sys.modules if m not in _BASELINE]:
        del sys.modules[name]
    import runpy

    runpy.run_module("sessiontool", run_name="__main__", alter_sys=True)


def _monitor(conn):  # pragma: no cover - the monitor
    head, fds, _, _ = socket.recv_fds(conn, 8, 3)
    size = int.from_bytes(head, "big")
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            os._exit(1)
        data += chunk
    req = json.loads(data)
    pid = os.fork()
    if pid == 0:
        conn.close()
        _command(req, fds)
        return  # to the top level: the interpreter's own exit, code 0
    for fd in fds:
        os.close(fd)
    conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    _, status, usage = os.wait4(pid, 0)
    cpu = usage.ru_utime + usage.ru_stime
    conn.sendall(json.dumps({"status": status, "cpu": cpu}).encode() + b"\n")
    os._exit(0)


def _serve(path):  # pragma: no cover - the server
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(64)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)
    while True:
        while True:  # the monitors that ended
            try:
                done, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if done == 0:
                break
        ready, _, _ = select.select([srv, 0], [], [], 5)
        if 0 in ready and not os.read(0, 1):
            return  # the test process is gone (its end of stdin closed)
        if srv not in ready:
            continue
        conn, _ = srv.accept()
        if os.fork() == 0:
            srv.close()
            _monitor(conn)
            return
        conn.close()


if __name__ == "__main__":
    _serve(sys.argv[1])
