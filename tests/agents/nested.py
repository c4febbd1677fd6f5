"""Test agent that uses the session tools itself, as a real agent does: `nested.py` (runner
input and output "json").

When the run's message is a JSON array of argument lists, it runs `python -m sessiontool ARGS...`
for each one, in order, with exactly the environment the worker gave it (so each call acts as
this run's own session), and replies with one JSON object:
`{"env": {SESSIONTOOL_* variables}, "calls": [{"args", "rc", "stdout", "stderr"}]}`.
Any other message gets `nested: <message>`. A reply step answers `REPLY_SKIP` and an announce
step `ANNOUNCE_SKIP`, so the flows that follow a run stay short."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def main() -> int:
    request = json.loads(sys.stdin.read())
    step = request.get("step")
    if step == "reply":
        reply = "REPLY_SKIP"
    elif step == "announce":
        reply = "ANNOUNCE_SKIP"
    else:
        message = request.get("message", "")
        try:
            calls = json.loads(message)
        except ValueError:
            calls = None
        if not (isinstance(calls, list) and all(isinstance(c, list) for c in calls)):
            reply = f"nested: {message}"
        else:
            results = []
            for args in calls:
                proc = subprocess.run(
                    [sys.executable, "-m", "sessiontool", *map(str, args)],
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    text=True,
                    timeout=60,
                )
                results.append(
                    {
                        "args": args,
                        "rc": proc.returncode,
                        "stdout": proc.stdout,
                        "stderr": proc.stderr,
                    }
                )
            env = {k: v for k, v in os.environ.items() if k.startswith("SESSIONTOOL_")}
            reply = json.dumps({"env": env, "calls": results})
    print(json.dumps({"reply": reply}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
