"""Test agent that takes its time: `sleepy.py SECONDS [PIDFILE]`.

With PIDFILE it first starts a grandchild `sleep SECONDS` (in the agent's own process group)
and writes the grandchild's pid there, so a test can check that killing the agent's process
group also killed what the agent started."""

from __future__ import annotations

import os
import subprocess
import sys
import time


def main() -> int:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 30.0
    if len(sys.argv) > 2:
        child = subprocess.Popen(["sleep", str(seconds)])
        tmp = sys.argv[2] + ".tmp"
        with open(tmp, "w") as fh:
            fh.write(str(child.pid))
        os.replace(tmp, sys.argv[2])
    time.sleep(seconds)
    print("woke up")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
