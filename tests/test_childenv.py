"""What an agent or delivery command sees: a clean environment (PATH, HOME, locale, TZ, TMPDIR,
SESSIONTOOL_*) plus only what the config names; placeholders stay single arguments."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tests.helpers import run_json
from tests.runhelpers import runner_config

SECRETS = {
    "MY_SECRET_TOKEN": "s3cret",
    "OPENAI_API_KEY": "sk-test",
    "LLM_OPENAI_KEY": "llm-key",
    "AWS_SECRET_ACCESS_KEY": "aws",
    "TZ": "Europe/Berlin",
    "LANG": "C.UTF-8",
    "LC_TIME": "C",
}

DUMP = (
    "import json, os, sys; sys.stdin.read(); "
    "print(json.dumps({'env': sorted(os.environ), 'argv': sys.argv[1:]}))"
)


def seen(state: Path, runner_extra: dict[str, Any], key: str = "main") -> dict[str, Any]:
    runner = {"type": "command", "command": [sys.executable, "-c", DUMP, "{sessionKey}"]}
    runner.update(runner_extra)
    runner_config(state, runner)
    code, out = run_json("send", key, "hi", "--timeout", "30", env=SECRETS)
    assert code == 0, out
    return dict(json.loads(out["reply"]))


def test_agent_gets_a_clean_environment(state: Path, reap_workers: None) -> None:
    names = set(seen(state, {})["env"])
    for secret in ("MY_SECRET_TOKEN", "OPENAI_API_KEY", "LLM_OPENAI_KEY", "AWS_SECRET_ACCESS_KEY"):
        assert secret not in names
    assert {"PATH", "HOME", "TZ", "LANG", "LC_TIME", "SESSIONTOOL_SESSION_KEY"} <= names
    assert {"SESSIONTOOL_RUN_ID", "SESSIONTOOL_STATE_DIR"} <= names
    assert "NO_COLOR" not in names and "COLUMNS" not in names  # the caller's, not listed


def test_config_names_what_passes(state: Path, reap_workers: None) -> None:
    names = set(seen(state, {"env": ["OPENAI_API_KEY", "LLM_*"]})["env"])
    assert {"OPENAI_API_KEY", "LLM_OPENAI_KEY"} <= names
    assert "MY_SECRET_TOKEN" not in names and "AWS_SECRET_ACCESS_KEY" not in names


def test_pass_env_keeps_the_old_behaviour(state: Path, reap_workers: None) -> None:
    names = set(seen(state, {"passEnv": True})["env"])
    assert {"MY_SECRET_TOKEN", "AWS_SECRET_ACCESS_KEY", "NO_COLOR"} <= names


def test_env_object_still_sets_variables(state: Path, reap_workers: None) -> None:
    names = set(seen(state, {"env": {"AGENT_MODE": "x"}})["env"])
    assert "AGENT_MODE" in names and "MY_SECRET_TOKEN" not in names


def test_bad_env_setting_is_a_config_error(state: Path, reap_workers: None) -> None:
    runner_config(state, {"type": "command", "command": ["true"], "passEnv": "yes"})
    code, out = run_json("send", "main", "hi", "--timeout", "30")
    # Refused before any run starts (issue 42 item 3), no longer a run that fails.
    assert code == 2 and "agents.defaults.runner.passEnv: expected true or false" in out["error"]
    assert not list(state.glob("sessiontool/runs/*.json"))


def test_placeholder_stays_one_argument(state: Path, reap_workers: None) -> None:
    key = "x$(echo INJECTED) ;echo `id` two words"
    out = seen(state, {}, key=key)
    assert out["argv"] == [f"agent:main:{key}"]  # one argument, never through a shell


def test_delivery_command_gets_a_clean_environment(
    state: Path, tmp_path: Path, reap_workers: None
) -> None:
    dump = tmp_path / "delivery-env.json"
    code = f"import json, os, sys; sys.stdin.read(); open({str(dump)!r}, 'w').write(json.dumps(sorted(os.environ)))"
    runner_config(
        state,
        {"type": "echo"},
        sessiontool={"delivery": {"command": [sys.executable, "-c", code], "env": ["LLM_*"]}},
    )
    code_, out = run_json(
        "send", "agent:main:discord:group:42", "hi", "--deliver", "--timeout", "30", env=SECRETS
    )
    assert code_ == 0, out
    from tests.runhelpers import poll

    names = set(poll(lambda: dump.exists() and json.loads(dump.read_text()), message="delivery"))
    assert "LLM_OPENAI_KEY" in names and "PATH" in names
    assert "MY_SECRET_TOKEN" not in names and "OPENAI_API_KEY" not in names


def test_delivery_command_gets_the_delivery_id_and_is_not_a_worker(
    state: Path, tmp_path: Path, reap_workers: None
) -> None:
    """A bridge de-duplicates on the id (delivery is at least once); a nested sessiontool in
    the command is a foreground command, not the worker (issue 27, item 16)."""
    dump = tmp_path / "delivery-seen.json"
    code = (
        "import json, os, sys; rec = json.loads(sys.stdin.read()); "
        f"open({str(dump)!r}, 'w').write(json.dumps({{'input': rec, "
        "'envId': os.environ.get('SESSIONTOOL_DELIVERY_ID'), "
        "'worker': os.environ.get('SESSIONTOOL_WORKER')}))"
    )
    runner_config(
        state, {"type": "echo"}, sessiontool={"delivery": {"command": [sys.executable, "-c", code]}}
    )
    code_, out = run_json(
        "send", "agent:main:discord:group:42", "hi", "--deliver", "--timeout", "30"
    )
    assert code_ == 0, out
    from tests.runhelpers import poll

    seen_ = poll(lambda: dump.exists() and json.loads(dump.read_text()), message="delivery")
    run_id = out["runId"]
    assert seen_["envId"] == f"{run_id}:deliver", seen_
    assert seen_["input"]["id"] == seen_["envId"]
    assert seen_["worker"] is None
    rc, listed = run_json("deliveries")
    assert [d["id"] for d in listed["deliveries"]] == [seen_["envId"]], listed
