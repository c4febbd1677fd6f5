"""The command runner passes the whole conversation to a text-mode program: `{system}` (the
system prompt as one argument), `{system_file}`, `{history_file}` (JSON) and
`{history_text_file}`; and the README's recipe for the `llm` CLI makes agent-to-agent turns and
spawn announces behave, run with a stand-in `llm` that obeys its system prompt and with the
real `llm` CLI."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import json5
import pytest

from tests.helpers import ROOT, run_json
from tests.runhelpers import outbox, poll, runner_config, settle, text_of

pytestmark = pytest.mark.usefixtures("reap_workers")

DUMP = r"""
import json, os, sys
files = {}
for a in sys.argv[1:]:
    if os.path.isfile(a):
        files[a] = open(a).read()
print(json.dumps({"argv": sys.argv[1:], "files": files, "stdin": sys.stdin.read()}))
"""


def _history(key: str) -> list[dict[str, Any]]:
    rc, out = run_json("history", key)
    assert rc == 0, out
    return list(out["messages"])


def test_system_and_history_reach_a_text_mode_command(state: Path) -> None:
    runner_config(
        state,
        {
            "type": "command",
            "command": [
                sys.executable,
                "-c",
                DUMP,
                "--system={system}",
                "{system_file}",
                "{history_file}",
                "{history_text_file}",
            ],
        },
        session={"agentToAgent": {"maxPingPongTurns": 0}},
    )
    bob = "agent:main:dm:bob"
    rc, first = run_json("send", bob, "first")
    assert rc == 0, first
    seen = json.loads(first["reply"])
    system_arg, system_file, history_file, text_file = seen["argv"]
    assert system_arg == "--system="
    assert seen["files"][history_file] == "[]\n"
    assert seen["files"][text_file] == ""
    # Second turn, agent to agent: a system prompt with newlines, and the first turn as history.
    rc, out = run_json("--as", "agent:main:dm:alice", "send", bob, "second {runId}")
    assert rc == 0, out
    seen = json.loads(out["reply"])
    system_arg, system_file, history_file, text_file = seen["argv"]
    assert len(seen["argv"]) == 4  # one argument each, whatever the values hold
    assert system_arg.startswith("--system=Agent-to-agent message context:\n")
    assert seen["files"][system_file] == system_arg.removeprefix("--system=")
    history = json.loads(seen["files"][history_file])
    assert history == [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": first["reply"]},
    ]
    text = seen["files"][text_file]
    assert text.startswith("Earlier messages of this conversation, oldest first:\n\nUser: first\n")
    assert "Assistant: " in text and text.rstrip().endswith("The new message follows.)")
    assert seen["stdin"] == "second {runId}\n"
    # The files are gone after the run.
    assert not any(os.path.exists(p) for p in seen["argv"][1:])


def test_a_placeholder_inside_the_system_prompt_is_not_substituted(state: Path) -> None:
    runner_config(
        state, {"type": "command", "command": [sys.executable, "-c", DUMP, "{system}", "{runId}"]}
    )
    rc, out = run_json("spawn", "print {runId} and {history_file} literally")
    assert rc == 0, out
    recs = settle(state)
    child = next(r for r in recs if r["runId"] == out["runId"])
    seen = json.loads(child["reply"])
    assert "print {runId} and {history_file} literally" in seen["argv"][0]
    assert seen["argv"][1] == out["runId"]


# -- the README recipe ------------------------------------------------------------------------

STAND_IN = r'''#!/usr/bin/env python3
"""A stand-in for the `llm` CLI that obeys its system prompt as a model would."""
import re, sys
args = sys.argv[1:]
model, system, fragments = "?", "", []
i = 0
while i < len(args):
    a = args[i]
    if a in ("-m", "--model"):
        model = args[i + 1]; i += 2
    elif a in ("-s", "--system"):
        system = args[i + 1]; i += 2
    elif a in ("-f", "--fragment"):
        fragments.append(open(args[i + 1]).read()); i += 2
    elif a in ("-n", "--no-log"):
        i += 1
    else:
        sys.exit(f"stand-in llm: unexpected argument {a!r}")
prompt = sys.stdin.read().strip()
if 'reply exactly "REPLY_SKIP"' in system:
    print("REPLY_SKIP")
elif system.startswith("Agent-to-agent announce step"):
    print("ANNOUNCE_SKIP")
elif system.startswith("Sub-agent announce step"):
    latest = re.search(r"^Latest reply: (.*)$", system, re.M)
    print(latest.group(1) if latest else "(nothing)")
else:
    earlier = [l[6:] for f in fragments for l in f.splitlines() if l.startswith("User: ")]
    memory = f" (earlier: {' | '.join(earlier)})" if earlier else ""
    print(f"[{model}] done: {prompt}{memory}")
'''


def readme_recipe() -> dict[str, Any]:
    """The README's `llm` CLI recipe, parsed from the README itself."""
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```json5\n(.*?)```", text, re.S)
    recipe = [b for b in blocks if '"llm"' in b and 'type: "command"' in b]
    assert len(recipe) == 1, "the README has one llm CLI recipe"
    return dict(json5.loads(recipe[0]))


def _use_recipe(state: Path, model: str | None = None) -> dict[str, Any]:
    cfg = readme_recipe()
    if model is not None:
        cfg["agents"]["defaults"]["model"] = model
    state.mkdir(parents=True, exist_ok=True)
    (state / "sessiontool.json5").write_text(json.dumps(cfg))
    return cfg


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "llm"
    exe.write_text(STAND_IN.replace("/usr/bin/env python3", sys.executable, 1))
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    return exe


def test_readme_recipe_agent_to_agent_stops_and_stays_silent(state: Path, stand_in: Path) -> None:
    cfg = _use_recipe(state)
    model = cfg["agents"]["defaults"]["model"]
    bob = "agent:main:dm:bob"
    rc, out = run_json("--as", "agent:main:dm:alice", "send", bob, "status report please")
    assert rc == 0, out
    assert out["reply"] == f"[{model}] done: status report please"
    recs = settle(state)
    reply_steps = [r for r in recs if r.get("kind") == "step" and r.get("step") == "reply"]
    announce_steps = [r for r in recs if r.get("kind") == "step" and r.get("step") == "announce"]
    # The requester's first reply turn answers REPLY_SKIP, so the ping-pong ends at once, and
    # the announce step stays silent: nothing reaches the channel.
    assert [r["reply"] for r in reply_steps] == ["REPLY_SKIP"]
    assert [r["reply"] for r in announce_steps] == ["ANNOUNCE_SKIP"]
    assert outbox(state) == []
    # A later turn gets the earlier ones.
    rc, out = run_json("send", bob, "and now?")
    assert rc == 0, out
    assert out["reply"].startswith(f"[{model}] done: and now? (earlier: status report please")


def test_readme_recipe_spawn_announces_the_childs_result(state: Path, stand_in: Path) -> None:
    cfg = _use_recipe(state)
    model = cfg["agents"]["defaults"]["model"]
    rc, out = run_json("spawn", "count the sheep")
    assert rc == 0, out

    def announced() -> str | None:
        for m in _history("main"):
            if text_of(m).startswith("Status:"):
                return text_of(m)
        return None

    text = poll(announced, message="the spawn's announce")
    assert text.startswith(f"Status: ok\nResult: [{model}] done: count the sheep\n"), text
    assert "announce step" not in text


@pytest.mark.slow
def test_readme_recipe_with_the_real_llm_cli(
    state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The recipe's arguments as the real `llm` CLI takes them (llm-echo shows what it got)."""
    exe = shutil.which("llm", path=os.path.dirname(sys.executable))
    assert exe is not None, "the test extra installs the llm CLI: pip install -e '.[test]'"
    import llm_echo  # noqa: F401 - the test extra installs it too

    monkeypatch.setenv("PATH", f"{os.path.dirname(exe)}{os.pathsep}{os.environ.get('PATH', '')}")
    llm_home = tmp_path / "llm-home"
    llm_home.mkdir()
    monkeypatch.setenv("LLM_USER_PATH", str(llm_home))
    # An alias, as `llm aliases set` writes it: "echo" alone is sessiontool's placeholder model.
    (llm_home / "aliases.json").write_text(json.dumps({"llm-echo": "echo"}))
    cfg = _use_recipe(state, model="llm-echo")
    cfg["session"] = {"agentToAgent": {"maxPingPongTurns": 0}}
    (state / "sessiontool.json5").write_text(json.dumps(cfg))
    bob = "agent:main:dm:bob"
    rc, out = run_json("send", bob, "first one")
    assert rc == 0 and out["status"] == "ok", out
    rc, out = run_json("--as", "agent:main:dm:alice", "send", bob, "second one")
    assert rc == 0 and out["status"] == "ok", out
    seen = json.loads(out["reply"])
    assert seen["system"].startswith("Agent-to-agent message context:")
    assert "User: first one" in seen["prompt"]
    assert seen["prompt"].rstrip().endswith("second one")
