"""A typo in one of sessiontool's own keys inside OpenClaw's config sections (issue 33 item
11): `runer` under `agents.defaults` (or an `agents.list` entry) is reported by every command,
as an unknown top-level key is, instead of leaving the demo agent quietly answering."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import run_cli, write_config


def test_a_runner_typo_under_agents_defaults_is_reported(state: Path) -> None:
    cfg = write_config(
        state,
        {
            "agents": {
                "defaults": {"runer": {"type": "command", "command": ["cat"]}, "model": "x/y"},
                "list": [{"id": "main", "default": True, "rnuner": {"type": "echo"}}],
            }
        },
    )
    send = run_cli("send", "main", "hi")
    assert send.returncode == 0
    assert (
        f"sessiontool: warning: {cfg}: unknown config key 'agents.defaults.runer' (ignored): "
        "did you mean 'runner'?" in send.stderr
    ), send.stderr
    assert "'agents.list[0].rnuner' (ignored): did you mean 'runner'?" in send.stderr
    listed = run_cli("list")
    assert listed.returncode == 0 and "agents.defaults.runer" in listed.stderr
    # OpenClaw's own keys (model) and the right spelling are not reported.
    write_config(state, {"agents": {"defaults": {"runner": {"type": "echo"}, "model": "x/y"}}})
    ok = run_cli("send", "main", "hi")
    assert ok.returncode == 0 and ok.stderr == "", ok.stderr
