"""Test agent that fails: `failing.py CODE [MESSAGE]`.

It writes plenty of noise to stderr first and MESSAGE last, so a test can check that the
error keeps the tail of stderr (where programs say what went wrong) and not the head."""

from __future__ import annotations

import sys


def main() -> int:
    code = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    message = sys.argv[2] if len(sys.argv) > 2 else "something went wrong"
    sys.stdin.read()
    for i in range(200):
        sys.stderr.write(f"noise line {i:03d} ....................\n")
    sys.stderr.write(message + "\n")
    sys.stdout.write("partial output\n")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
