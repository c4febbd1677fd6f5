"""Run one command and report its wall time and peak RSS as JSON on stdout.

Started fresh (python -I -S) by the harness, so the measured command is forked from this small
process: on Linux a child's ru_maxrss starts from its parent's RSS at fork (the high-water mark
survives exec), so forking from the big harness process would inflate every reading.
"""

import json
import os
import resource
import sys
import time


def main() -> int:
    argv = sys.argv[1:]
    devnull = os.open(os.devnull, os.O_WRONLY)
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # the command: stdout thrown away, stderr passed through
        os.dup2(devnull, 1)
        try:
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    _, status = os.waitpid(pid, 0)
    elapsed = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    # Linux reports ru_maxrss in KiB, macOS in bytes.
    rss = usage.ru_maxrss if sys.platform == "darwin" else usage.ru_maxrss * 1024
    code = os.waitstatus_to_exitcode(status)
    cpu = usage.ru_utime + usage.ru_stime
    sys.stdout.write(
        json.dumps({"elapsed": elapsed, "cpu": cpu, "maxrss": rss, "code": code}) + "\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
