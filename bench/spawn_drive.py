"""One spawn with label + announce + cleanup through a live gateway, timed: `ours` (the
`sessiontool spawn` command and its detached worker) or `bare` (the same gateway calls from one
process on a connection opened before the clock). Prints one JSON line: wall, CPU, the child
turn's own time in the gateway (`turnMs`), the announce run to wait for, and (ours) where the
time went. Used by cases_spawn.py; run as `python spawn_drive.py ours|bare STATE ...`.

- ours: `python spawn_drive.py ours STATE CMD_JSON`. The clock starts right before the spawn
  command is started and stops when its run record says the follow-up is done (polled every
  5 ms). This process is a child subreaper (prctl PR_SET_CHILD_SUBREAPER), so the worker the
  command double-forks is re-parented here and its CPU is collected with the command's
  (RUSAGE_CHILDREN, after it exits; not in the wall).
- bare: `python spawn_drive.py bare STATE`. Imports, the config and the handshake come before
  the clock; then exactly the calls sessiontool makes for that spawn, made by sessiontool's own
  call builders so they cannot drift: `tools.invoke sessions_spawn` (the spawn command's); with
  the tool allowed, the child's run followed with `agent.wait` and the announce (a short wait
  for OpenClaw's own, then OpenClaw's form under OpenClaw's key); denied (not_found), the
  emulation: `sessions.create`, the child's `agent` turn to its final answer, the announce
  turn accepted, `sessions.delete`. CPU is this process's within the clock.
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

TASK = "bench spawn task"
REQUESTER = "agent:main:main"
RUN_TIMEOUT = 300


def ours(state: str, cmd: list[str]) -> dict[str, Any]:
    import ctypes
    import resource
    import subprocess

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
        sys.exit("prctl(PR_SET_CHILD_SUBREAPER) failed")
    cmd = [*cmd, "--label", "bench-" + uuid.uuid4().hex[:8]]
    t0 = time.perf_counter()
    t0_ms = time.time() * 1000
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    t_cmd = time.perf_counter() - t0
    cmd_cpu = _cpu(resource.getrusage(resource.RUSAGE_CHILDREN))
    if out.returncode != 0:
        sys.exit("spawn failed: " + out.stderr[-500:])
    run_id = json.loads(out.stdout)["runId"]
    path = os.path.join(state, "sessiontool", "runs", run_id + ".json")
    while True:
        try:
            with open(path, "rb") as fh:
                rec = json.loads(fh.read())
        except (OSError, ValueError):
            rec = {}
        if (rec.get("followUp") or {}).get("next") == "done":
            break
        if rec.get("status") in ("error", "timeout", "aborted", "lost"):
            sys.exit(f"spawn ended {rec.get('status')}: {rec.get('error')}")
        if time.perf_counter() - t0 > RUN_TIMEOUT:
            sys.exit("no announce in time")
        time.sleep(0.005)
    wall = time.perf_counter() - t0
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # the worker, re-parented here: its CPU when it exits
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            time.sleep(0.01)
    cpu = _cpu(resource.getrusage(resource.RUSAGE_CHILDREN))
    return {
        "wall": wall,
        "cpu": cpu,
        "turnMs": rec.get("gatewayDurationMs"),
        "announceRunId": rec["followUp"].get("announceRunId"),
        "tool": rec.get("tool"),
        "cmdWall": t_cmd,
        "cmdCpu": cmd_cpu,
        "toRecord": (rec["createdAt"] - t0_ms) / 1000,
        "queued": (rec["startedAt"] - rec["createdAt"]) / 1000,
        "runEnd": (rec["endedAt"] - t0_ms) / 1000,
    }


def _cpu(ru: Any) -> float:
    return float(ru.ru_utime + ru.ru_stime)


def bare(state: str) -> dict[str, Any]:
    os.environ["SESSIONTOOL_WORKER"] = "1"
    from sessiontool.openclaw import gateway, own_tools
    from sessiontool.state.config import load_config
    from sessiontool.state.paths import StatePaths

    p = StatePaths(Path(state))
    cfg = load_config(p)
    label = "bench-" + uuid.uuid4().hex[:8]
    rid = str(uuid.uuid4())
    args = {"task": TASK, "label": label, "runTimeoutSeconds": RUN_TIMEOUT, "cleanup": "delete"}
    # The scopes of every call, asked at the one connect (as the worker asks for its cleanup's).
    gateway.expect(p, "sessions.delete", {"key": REQUESTER})
    gateway.find(p).handshake(p)
    c0, t0 = time.process_time(), time.perf_counter()
    details = own_tools.invoke(p, own_tools.SPAWN, REQUESTER, args, idempotency_key=rid)
    rec: dict[str, Any] = {
        "runId": rid,
        "kind": "spawn",
        "via": "gateway",
        "requesterSessionKey": REQUESTER,
        "message": TASK,
        "label": label,
        "cleanup": "delete",
        "runTimeoutSeconds": float(RUN_TIMEOUT),
        "provenance": {
            "kind": "inter_session",
            "sourceSessionKey": REQUESTER,
            "sourceTool": "sessions_spawn",
        },
    }
    if details is not None:
        rec.update(sessionKey=details["childSessionKey"], gatewayRunId=details["runId"])
        took = _tool_path(p, cfg, rec)
    else:
        took = _emulation(p, cfg, rec)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"wall": wall, "cpu": cpu, "turnMs": took, "announceRunId": rec["announceRunId"]}


def _tool_path(p: Any, cfg: Any, rec: dict[str, Any]) -> float | None:
    from sessiontool.runs import gateway_tool_run as gtr
    from sessiontool.runs import steps
    from sessiontool.runs.turn import Outcome

    ended = gtr._follow(p, rec, rec["gatewayRunId"])
    out = Outcome()
    gtr._outcome(rec, ended, out)
    _ended(rec, out, ended.get("startedAt"), ended.get("endedAt"))
    done = gtr.announce(p, cfg, rec, steps.announce_text)
    rec["announceRunId"] = done["announceRunId"]
    took = out.result["result"]["meta"].get("durationMs")  # none when agent.wait had no start
    return float(took) if took is not None else None


def _emulation(p: Any, cfg: Any, rec: dict[str, Any]) -> float | None:
    from sessiontool.clock import now_ms
    from sessiontool.flow.announce import subagent_system_prompt
    from sessiontool.openclaw import gateway
    from sessiontool.runs import gateway_run, steps
    from sessiontool.runs.gateway_writer import GatewayWriter
    from sessiontool.runs.turn import Outcome

    child = f"agent:main:subagent:{uuid.uuid4()}"
    rec["sessionKey"] = child
    rec["system"] = subagent_system_prompt(
        task=TASK,
        label=rec["label"],
        requester_key=REQUESTER,
        requester_channel=None,
        child_key=child,
    )
    gateway_run.create_child(p, rec)
    started = now_ms()
    result = gateway.call(
        p, "agent", gateway_run.turn_params(rec), timeout_s=RUN_TIMEOUT + 30, expect_final=True
    )
    out = Outcome()
    out.result, out.reply = result, gateway_run.reply_text(result)
    meta = gateway_run.agent_meta(result)
    out.model, out.provider = meta.get("model"), meta.get("provider")
    _ended(rec, out, started, now_ms())
    writer = GatewayWriter()
    rec["announceRunId"] = writer.announce_to_requester(
        p, cfg, rec, steps.announce_text(p, cfg, rec)
    )
    writer.cleanup(p, rec)
    took = gateway_run.turn_duration_ms(result)
    return float(took) if took is not None else None


def _ended(rec: dict[str, Any], out: Any, started: Any, ended: Any) -> None:
    """What the worker's record holds when the announce is built from it."""
    rec.update(status=out.status, reply=out.reply, startedAt=started, endedAt=ended)
    if out.model:
        rec["model"] = out.model
    if out.provider:
        rec["modelProvider"] = out.provider
    sid = (out.result or {}).get("result", {}).get("meta", {}).get("agentMeta", {})
    if isinstance(sid.get("sessionId"), str):
        rec["sessionId"] = sid["sessionId"]


if __name__ == "__main__":
    mode, state = sys.argv[1], sys.argv[2]
    rep = ours(state, json.loads(sys.argv[3])) if mode == "ours" else bare(state)
    print(json.dumps(rep))
