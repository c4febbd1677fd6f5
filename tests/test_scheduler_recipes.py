"""The README's cluster-scheduler recipes ("Past one machine"), taken from the README itself and
run by a real `send` against stand-in `kubectl`, `sbatch` and `nomad` programs on PATH that record
their arguments and behave as the real ones do for what the recipe relies on (stdin and stdout
through `kubectl run -i`; `sbatch --wait` running `--wrap` with its output in `--output`;
`nomad job dispatch` taking the payload on stdin, `job status -short`, `alloc logs -job`)."""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from pathlib import Path
from typing import Any

import json5
import pytest

from tests.helpers import ROOT, run_json

from .runhelpers import reap, runner_config

README = ROOT / "README.md"

COMMON = """#!{py}
import json, os, sys
HERE = os.path.dirname(os.path.abspath(__file__))
def log(**kw):
    with open(os.path.join(HERE, "calls.jsonl"), "a") as fh:
        fh.write(json.dumps({{"prog": os.path.basename(sys.argv[0]), "argv": sys.argv[1:], **kw}}) + "\\n")
"""

STANDINS = {
    "my-agent": """
text = sys.stdin.read()
log(stdin=text)
print("agent says: " + text.strip())
""",
    "kubectl": """
assert sys.argv[1:2] == ["run"] and "-i" in sys.argv and "--" in sys.argv, sys.argv
text = sys.stdin.read()
log(stdin=text)
cmd = sys.argv[sys.argv.index("--") + 1:]
print("pod " + sys.argv[2] + " ran " + cmd[0] + ": " + text.strip())
""",
    "sbatch": """
import subprocess
args = sys.argv[1:]
opts = dict(a[2:].split("=", 1) for a in args if a.startswith("--") and "=" in a)
log()
if "--wait" not in args or "wrap" not in opts or "output" not in opts:
    sys.exit("sbatch stand-in: expected --wait --wrap=... --output=...")
with open(opts["output"], "w") as out:  # a batch job has no stdin; its stdout goes to a file
    rc = subprocess.call(["sh", "-c", opts["wrap"]], stdin=subprocess.DEVNULL, stdout=out)
sys.exit(rc)
""",
    "nomad": """
args = sys.argv[1:]
payload = os.path.join(HERE, "payload")
if args[:2] == ["job", "dispatch"]:
    text = sys.stdin.read() if args[-1] == "-" else ""
    log(stdin=text)
    with open(payload, "w") as fh:
        fh.write(text)
    print("Dispatched Job ID = " + args[-2] + "/dispatch-1795000000-0a1b2c3d")
    print("Evaluation ID     = 5f0e4c1a")
elif args[:3] == ["job", "status", "-short"]:
    log()
    print("ID            = " + args[3])
    print("Status        = dead")
elif args[:3] == ["alloc", "logs", "-job"]:
    log()
    print("agent says: " + open(payload).read().strip())
else:
    sys.exit("nomad stand-in: unexpected " + " ".join(args))
""",
}


def section() -> str:
    text = README.read_text()
    start = text.index("## Past one machine")
    return text[start : text.index("\n## ", start + 1)]


def blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", section(), re.DOTALL)


def script(name: str) -> str:
    found = [b for b in blocks("sh") if b.startswith(f"#!/bin/sh\n# {name} ")]
    assert len(found) == 1, f"README: no recipe script {name}"
    return found[0]


@pytest.fixture
def bindir(tmp_path: Path) -> Path:
    d = tmp_path / "bin"
    d.mkdir()
    for name, body in STANDINS.items():
        p = d / name
        p.write_text(COMMON.format(py=sys.executable) + body)
        p.chmod(p.stat().st_mode | stat.S_IXUSR)
    return d


def calls(bindir: Path) -> list[dict[str, Any]]:
    path = bindir / "calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def send(state: Path, bindir: Path, extra_env: dict[str, str] | None = None) -> dict[str, Any]:
    env = {"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}", **(extra_env or {})}
    try:
        rc, out = run_json("send", "main", "hello cluster", "--timeout", "60", env=env)
    finally:
        reap(state)
    assert rc == 0, out
    assert isinstance(out, dict)
    return out


def test_kubectl_recipe(state: Path, bindir: Path) -> None:
    cfg = json5.loads(blocks("json5")[0])
    runner = cfg["agents"]["defaults"]["runner"]
    assert runner["command"][:2] == ["kubectl", "run"]
    assert cfg["sessiontool"]["maxConcurrentRuns"] > 8  # the recipe raises the default
    runner_config(state, runner, sessiontool=cfg["sessiontool"])
    out = send(state, bindir)
    pod = f"st-{out['runId']}"
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", pod)  # a valid pod name
    assert out["reply"] == f"pod {pod} ran my-agent: hello cluster"
    (call,) = calls(bindir)
    assert call["argv"] == [
        "run", pod, "--rm", "-i", "--quiet", "--restart=Never",
        "--image=registry.example/agent:1", "--", "my-agent", "--model", "",
    ]  # fmt: skip
    assert call["stdin"].strip() == "hello cluster"


def _script_runner(state: Path, bindir: Path, name: str, env: list[str]) -> None:
    p = bindir / name
    p.write_text(script(name))
    p.chmod(p.stat().st_mode | stat.S_IXUSR)
    runner = {"type": "command", "command": [name, "{runId}"], "env": env}
    assert f'command: ["{name}", "{{runId}}"]' in section()  # the runner the README names
    runner_config(state, runner)


def test_sbatch_recipe(state: Path, bindir: Path, tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    _script_runner(state, bindir, "st-slurm", ["ST_SPOOL"])
    out = send(state, bindir, {"ST_SPOOL": str(spool)})
    assert out["reply"] == "agent says: hello cluster"
    sb = [c for c in calls(bindir) if c["prog"] == "sbatch"]
    assert len(sb) == 1
    argv = sb[0]["argv"]
    assert argv[:3] == ["--wait", "--quiet", f"--job-name=st-{out['runId']}"]
    (job_dir,) = {Path(a.split("=", 1)[1]).parent for a in argv if a.startswith("--output=")}
    assert job_dir.parent == spool
    assert argv[4] == f"--wrap=my-agent < {job_dir}/in"
    assert list(spool.iterdir()) == []  # the turn's files are removed afterwards


def test_nomad_recipe(state: Path, bindir: Path) -> None:
    _script_runner(state, bindir, "st-nomad", ["NOMAD_*"])
    out = send(state, bindir)
    assert out["reply"] == "agent says: hello cluster"
    seen = [c["argv"] for c in calls(bindir) if c["prog"] == "nomad"]
    job = "agent-turn/dispatch-1795000000-0a1b2c3d"
    assert seen == [
        ["job", "dispatch", "-detach", f"-idempotency-token={out['runId']}", "agent-turn", "-"],
        ["job", "status", "-short", job],
        ["alloc", "logs", "-job", job],
    ]
