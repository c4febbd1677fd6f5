"""Issue 45 item 16: the small things a user meets in week three, each run as a user runs it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.helpers import ROOT, run_cli, write_config

from .runhelpers import settle, write_store, write_transcript
from .test_gateway_runs import FakeGateway, fake_gateway  # noqa: F401 - the fixture

TS = 1_800_000_000_000


def test_a_page_of_one_message_says_1_message(state: Path) -> None:
    write_store(state, {"agent:main:one": {"sessionId": "s-one", "updatedAt": TS}})
    write_transcript(state, "s-one", [("user", "hello", TS)])
    p = run_cli("history", "agent:main:one", "--format", "html")
    assert p.returncode == 0, p.stderr
    assert "1 message<" in p.stdout or "1 message " in p.stdout
    assert "1 messages" not in p.stdout


def test_reference_names_spawn_model_not_send_model() -> None:
    """`send` has no --model (it is `spawn --model`): the reference says what --help says."""
    ref = (ROOT / "docs" / "reference.md").read_text()
    assert "send --model" not in ref
    assert "--model" not in run_cli("send", "--help").stdout
    assert "--model" in run_cli("spawn", "--help").stdout
    assert re.search(r"`spawn --model`", ref)


def test_a_bare_key_typo_gets_did_you_mean_in_runs_and_wait(state: Path) -> None:
    write_store(state, {"agent:main:daily": {"sessionId": "s-d", "updatedAt": TS}})
    for cmd in ("runs", "wait"):
        p = run_cli(cmd, "--session", "daly")
        assert p.returncode == 3, p.stderr
        assert "did you mean 'agent:main:daily'?" in p.stderr, p.stderr
        assert "use the full key from list" not in p.stderr
    # nothing near: no guess (the shared `agent:main:` is no likeness)
    p = run_cli("runs", "--session", "zzzzzz")
    assert p.returncode == 3 and "did you mean" not in p.stderr


@pytest.mark.usefixtures("reap_workers")
def test_a_text_history_names_the_agent_that_sent_a_message(state: Path) -> None:
    """An agent-to-agent target's transcript holds the other agent's message as a `user` turn
    with OpenClaw's `provenance`: the text and Markdown views name the sender, as the HTML page
    does ("from … via …"), and the session's own user turns stay plain `user:`."""
    target = "agent:main:telegram:group:9"
    write_store(state, {target: {"sessionId": "s-t", "updatedAt": TS}})
    write_transcript(state, "s-t", [("user", "a person wrote this", TS)])
    p = run_cli("--as", "main", "send", target, "hello from main")
    assert p.returncode == 0, p.stderr
    settle(state)
    text = run_cli("history", target).stdout  # piped: the plain text view
    assert "] user:\na person wrote this\n" in text, text
    assert "] user (from agent:main:main via sessions_send):\nhello from main\n" in text, text
    md = run_cli("history", target, "--format", "markdown").stdout
    assert "## user (from agent:main:main via sessions_send) — " in md, md
    page = run_cli("history", target, "--format", "html").stdout
    assert "from <code>agent:main:main</code> via sessions_send" in page


def test_the_agent_id_refusal_names_the_current_key_and_that_key_is_honoured(
    state: Path,
) -> None:
    """The hint named `agents.list`, which OpenClaw 2026.9 calls legacy: it names
    `agents.entries.<id>.subagents.allowAgents`, and a config that sets it there (or in
    `agents.defaults.subagents.allowAgents`) lets the spawn through."""
    write_config(state, {"agents": {"list": [{"id": "main"}, {"id": "ops"}]}})
    p = run_cli("spawn", "--agent-id", "ops", "a task")
    assert p.returncode == 4, p.stderr
    assert "agents.entries.main.subagents.allowAgents" in p.stderr, p.stderr
    assert "in agents.list" not in p.stderr
    for agents in (
        {"entries": {"main": {"subagents": {"allowAgents": ["ops"]}}}},
        {"defaults": {"subagents": {"allowAgents": ["*"]}}},
    ):
        write_config(state, {"agents": {"list": [{"id": "main"}, {"id": "ops"}], **agents}})
        p = run_cli("--json", "spawn", "--agent-id", "ops", "a task")
        assert p.returncode == 0, (agents, p.stderr)
        assert "warning" not in p.stderr, p.stderr  # a key of the table: no unknown-key warning
        settle(state)


def test_spawn_model_on_an_openclaw_store_lists_the_installs_models_not_echo(
    fake_gateway: FakeGateway,  # noqa: F811 - the fixture imported above
) -> None:
    """On a store OpenClaw's gateway runs, its agent answers: sessiontool's demo `echo` model
    is none of the install's models (on sessiontool's own store it is one)."""
    cfg = json.loads((fake_gateway.state / "openclaw.json").read_text())
    cfg["agents"] = {"defaults": {"model": {"primary": "fake/fake-model"}}}
    cfg["models"] = {"providers": {"fake": {"models": [{"id": "fake-model"}]}}}
    (fake_gateway.state / "openclaw.json").write_text(json.dumps(cfg))
    for name in ("nosuch", "echo"):
        p = fake_gateway.st("spawn", "--model", name, "a task")
        assert p.returncode == 2, p.stderr
        assert f"unknown model '{name}' (known: fake/fake-model)" in p.stderr, p.stderr
    assert fake_gateway.calls("agent") == []  # refused before any turn
