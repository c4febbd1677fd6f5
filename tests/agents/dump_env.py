"""Test agent that shows what it was given: prints one JSON object with its arguments, its
stdin and every SESSIONTOOL_* / AGENT_* environment variable (text output mode: the reply is
that JSON)."""

from __future__ import annotations

import json
import os
import sys


def main() -> int:
    stdin = sys.stdin.read()
    env = {k: v for k, v in os.environ.items() if k.startswith(("SESSIONTOOL_", "AGENT_"))}
    print(json.dumps({"argv": sys.argv[1:], "stdin": stdin, "env": env, "pgid": os.getpgid(0)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
