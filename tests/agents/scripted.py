"""Test agent that answers from a script: `scripted.py SCRIPT.json` (runner input and output
"json").

It reads the request from stdin and looks its reply up in the script (a JSON object), first
match wins: `"<step>:<turn>"` (`reply:1`), `"<step>"` (`reply`, `announce`),
`"message:<message>"`, `"<kind>"` (`send`, `spawn`, `step`), `"default"`. Without a match it
replies `scripted: <message>`. A value is the reply text, or an object with any of `reply`,
`usage`, `model`, `provider`, `cost`, `sleep` (seconds first), `exit` and `stderr` (fail with
that code and message). With env SCRIPTED_AGENT_LOG set, every request is appended to that file
as one JSON line, so tests can see exactly what the agent received."""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any


def lookup(script: dict[str, Any], request: dict[str, Any]) -> Any:
    step, turn = request.get("step"), request.get("turn")
    keys = []
    if step and turn is not None:
        keys.append(f"{step}:{turn}")
    if step:
        keys.append(str(step))
    keys.append(f"message:{request.get('message')}")
    if request.get("kind"):
        keys.append(str(request["kind"]))
    keys.append("default")
    for key in keys:
        if key in script:
            return script[key]
    return f"scripted: {request.get('message')}"


def main() -> int:
    with open(sys.argv[1], encoding="utf-8") as fh:
        script = json.load(fh)
    raw = sys.stdin.read()
    try:
        request = json.loads(raw)
    except ValueError:
        request = {"message": raw.rstrip("\n")}
    log = os.environ.get("SCRIPTED_AGENT_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(request) + "\n")
    entry = lookup(script, request)
    spec: dict[str, Any] = {"reply": entry} if isinstance(entry, str) else dict(entry)
    if spec.get("sleep"):
        time.sleep(float(spec["sleep"]))
    if spec.get("exit"):
        sys.stderr.write(str(spec.get("stderr", "scripted failure")) + "\n")
        return int(spec["exit"])
    out = {k: spec[k] for k in ("reply", "usage", "model", "provider", "cost") if k in spec}
    out.setdefault("reply", "")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
