"""The README's cron recipes run as cron runs them (issue 45 items 3 and 4): an empty environment
but the crontab's own lines (`env -i`: PATH, HOME, SHELL), no terminal (stdin /dev/null, its own
session, stdout and stderr captured: what cron would mail), `/bin/sh -c LINE`.

- The morning `send … --deliver` line mails nothing on a sessiontool-only state (it once warned
  "no delivery target" every morning) and its reply waits in the outbox.
- The bridge recipe (docs/recipes/bridge-follow, the script itself) forwards each record once,
  those written while it was down included, across a restart; its systemd user unit verifies."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT, run_json

from .runhelpers import poll, reap

README = ROOT / "README.md"
RECIPES = ROOT / "docs" / "recipes"
BIN = Path(sys.executable).parent  # where the installed `sessiontool` is
TIMEOUT = 300.0  # only a hung bridge reaches it (a 10x slower machine still passes)

BRIDGE = f"""#!{sys.executable}
import json, sys
seen_file = sys.argv[sys.argv.index("--seen") + 1]
seen = {{line.rstrip("\\n").split("\\t")[1] for line in open(seen_file) if "\\t" in line}}
for line in sys.stdin:
    rec = json.loads(line)
    if rec["id"] in seen:
        continue
    with open(seen_file.replace("seen", "forwarded"), "a") as out:
        out.write(rec["id"] + "\\n")
    with open(seen_file, "a") as s:
        s.write(rec["ts"] + "\\t" + rec["id"] + "\\n")
    seen.add(rec["id"])
"""


def _crontab() -> tuple[str, list[str]]:
    """The README's first cron block: its PATH line and its job lines."""
    block = re.search(r"## Cron and scripts\n\n```cron\n(.*?)```", README.read_text(), re.S)
    assert block
    lines = [x for x in block.group(1).splitlines() if x and not x.startswith("#")]
    path = next(x.split("=", 1)[1] for x in lines if x.startswith("PATH="))
    return path, [x for x in lines if not x.startswith("PATH=")]


def _cron_env(home: Path, extra_path: Path | None = None) -> dict[str, str]:
    path, _ = _crontab()
    path = path.replace("/home/me/.venv/bin", str(BIN))  # the README's placeholder
    if extra_path is not None:
        path = f"{extra_path}:{path}"
    return {"PATH": path, "HOME": str(home), "SHELL": "/bin/sh", "LOGNAME": "me"}


def _job(schedule: str) -> str:
    _, jobs = _crontab()
    line = next(j for j in jobs if j.startswith(schedule))
    return line[len(schedule) :].strip()


def _cron_run(command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["/bin/sh", "-c", command],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        start_new_session=True,  # no controlling terminal, as under cron
        timeout=120,
    )


def _default_state(home: Path) -> Path:
    return home / ".local" / "state" / "sessiontool"


def test_the_morning_send_line_mails_nothing_and_its_reply_waits_in_the_outbox(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    try:
        _mornings(home)
    finally:
        reap(_default_state(home))


def _mornings(home: Path) -> None:
    env = _cron_env(home)
    command = _job("0 8 * * *")
    assert "--deliver" in command and ">/dev/null" in command
    for _morning in range(2):  # the first morning creates the session, the next ones reuse it
        p = _cron_run(command, env)
        assert p.returncode == 0, p.stderr
        assert p.stdout == "" and p.stderr == "", "cron would mail: " + p.stderr
    state = _default_state(home)
    rc, data = run_json("--state-dir", str(state), "deliveries")
    assert rc == 0, data
    recs = data["deliveries"]
    assert len(recs) == 2 and {r["status"] for r in recs} == {"outbox"}, recs
    assert all(r["text"] for r in recs)


def _start_bridge(env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        ["/bin/sh", "-c", _job("@reboot")],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """The machine goes down: the whole job, sessiontool and the bridge."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=60)
    assert proc.stderr is not None
    proc.stderr.close()


def _deliver(env: dict[str, str], n: int) -> None:
    p = _cron_run(
        f"sessiontool send agent:main:telegram:group:ops 'note {n}' --deliver --timeout 5m -q",
        env,
    )
    assert p.returncode == 0, p.stderr


@pytest.mark.slow
def test_the_bridge_recipe_replays_what_was_written_while_it_was_down(tmp_path: Path) -> None:
    home = tmp_path / "home"
    try:
        _restarts(tmp_path, home)
    finally:
        reap(_default_state(home))


def _restarts(tmp_path: Path, home: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    shutil.copy(RECIPES / "bridge-follow", bindir / "bridge-follow")
    (bindir / "my-bridge").write_text(BRIDGE)
    for f in bindir.iterdir():
        f.chmod(0o755)
    env = _cron_env(home, bindir)
    forwarded = home / ".local" / "state" / "my-bridge" / "forwarded"

    def got() -> list[str]:
        return forwarded.read_text().split() if forwarded.exists() else []

    _deliver(env, 1)  # written before the bridge ever ran: the first start replays the last day
    bridge = _start_bridge(env)
    try:
        poll(lambda: len(got()) == 1, timeout=TIMEOUT)
        _deliver(env, 2)
        poll(lambda: len(got()) == 2, timeout=TIMEOUT)
    finally:
        _stop(bridge)
    _deliver(env, 3)  # while it is down
    _deliver(env, 4)
    bridge = _start_bridge(env)
    try:
        poll(lambda: len(got()) == 4, timeout=TIMEOUT)
        _deliver(env, 5)
        poll(lambda: len(got()) == 5, timeout=TIMEOUT)
    finally:
        _stop(bridge)
    state = _default_state(home)
    recs = run_json("--state-dir", str(state), "deliveries")[1]["deliveries"]
    ids = [r["id"] for r in recs]
    assert len(ids) == 5 and got() == ids  # each once, in the outbox's order


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_the_systemd_user_unit_verifies(tmp_path: Path) -> None:
    unit = tmp_path / "sessiontool-bridge.service"
    shutil.copy(RECIPES / "sessiontool-bridge.service", unit)
    p = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60
    )
    # Nothing but the one thing a test machine lacks: the script installed in the home.
    complaints = [
        x
        for x in (p.stdout + p.stderr).splitlines()
        if x.strip() and "/.local/bin/bridge-follow is not executable" not in x
    ]
    assert complaints == [], complaints
    text = unit.read_text()
    assert "ExecStart=%h/.local/bin/bridge-follow" in text
    assert "WantedBy=default.target" in text
    # the README names the unit and the script it runs
    assert "docs/recipes/bridge-follow" in README.read_text()
