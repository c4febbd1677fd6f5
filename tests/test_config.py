"""Config: OpenClaw's file (read-only, shared keys) under sessiontool's own, merged key by key,
agents merged by id; JSON5; warnings for unknown keys; errors that name file and key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sessiontool.errors import ConfigError
from sessiontool.state import config_models
from sessiontool.state.config import load_config
from sessiontool.state.paths import StatePaths
from tests.helpers import FIXTURE_STATE, run_cli, write_config

OPENCLAW = """{
  // OpenClaw's own config: comments, unquoted keys, trailing commas
  gateway: { port: 19391, auth: { token: "secret" } },
  session: { mainKey: "home", agentToAgent: { maxPingPongTurns: 3 } },
  agents: {
    defaults: { model: { primary: "fake/fake-model" }, sandbox: { mode: "off" } },
    list: [
      { id: "main", default: true, model: "fake/a", subagents: { allowAgents: ["research"] } },
      { id: "research", workspace: "/srv/x" },
    ],
  },
  tools: { agentToAgent: { enabled: true, allow: ["main", "research"] } },
}
"""


def state_with(
    tmp_path: Path, openclaw: str | None = None, own: str | None = None, name: str = "clawdbot.json"
) -> StatePaths:
    root = tmp_path / "state"
    root.mkdir(exist_ok=True)
    if openclaw is not None:
        (root / name).write_text(openclaw)
    if own is not None:
        (root / "sessiontool.json5").write_text(own)
    return StatePaths(root)


def test_defaults_without_any_file(tmp_path: Path) -> None:
    cfg = load_config(state_with(tmp_path))
    assert cfg.files == [] and cfg.warnings == []
    assert cfg.main_key == "main" and cfg.scope == "per-sender"
    assert cfg.default_agent_id == "main"
    assert cfg.known_agent_ids() == ["main"]
    assert cfg.max_ping_pong_turns == 5
    assert cfg.a2a_enabled is False
    assert cfg.runner_for("main") == {"type": "echo"}
    assert cfg.sandbox_mode("main") == "off"
    assert cfg.sandbox_visibility == "spawned"
    assert cfg.archive_after_minutes == 60


def test_openclaw_layer_only_shared_keys(tmp_path: Path) -> None:
    paths = state_with(tmp_path, OPENCLAW)
    cfg = load_config(paths)
    assert cfg.files == [paths.root / "clawdbot.json"]
    assert "gateway" not in cfg.raw  # not a shared key: never read
    assert cfg.main_key == "home"
    assert cfg.max_ping_pong_turns == 3
    assert cfg.known_agent_ids() == ["main", "research"]
    assert cfg.agent("main").model == "fake/a"
    assert cfg.agent("main").allow_agents == ("research",)
    assert cfg.a2a_enabled and cfg.a2a_allows("research") and not cfg.a2a_allows("ops")
    assert cfg.warnings == []  # OpenClaw's own keys are not ours to warn about


def test_openclaw_json_is_preferred_over_clawdbot_json(tmp_path: Path) -> None:
    paths = state_with(tmp_path, '{"session": {"mainKey": "from-clawdbot"}}')
    (paths.root / "openclaw.json").write_text('{"session": {"mainKey": "from-openclaw"}}')
    cfg = load_config(paths)
    assert cfg.main_key == "from-openclaw"
    assert cfg.files == [paths.root / "openclaw.json"]


def test_two_layers_merge_key_by_key(tmp_path: Path) -> None:
    own = """{
      session: { agentToAgent: { maxPingPongTurns: 1 } },
      agents: {
        defaults: { runner: { type: "command", command: ["cat"] } },
        list: [
          { id: "research", runner: { type: "echo" }, model: "fake/r" },
          { id: "Ops Team" },
        ],
      },
      tools: { agentToAgent: { allow: ["ops-*"] } },
      sessiontool: { maxToolRounds: 3 },
    }"""
    paths = state_with(tmp_path, OPENCLAW, own)
    cfg = load_config(paths)
    assert cfg.files == [paths.root / "clawdbot.json", paths.root / "sessiontool.json5"]
    # objects merge key by key: mainKey from OpenClaw, turns from ours
    assert cfg.main_key == "home" and cfg.max_ping_pong_turns == 1
    assert cfg.get("agents.defaults.model") == {"primary": "fake/fake-model"}
    assert cfg.get("agents.defaults.runner") == {"type": "command", "command": ["cat"]}
    # agents.list merges by id: research extended, main untouched, a new agent appended
    assert cfg.known_agent_ids() == ["main", "research", "ops-team"]
    research = cfg.agent("research")
    assert research.model == "fake/r" and research.runner == {"type": "echo"}
    assert cfg.get("agents.list")[1]["workspace"] == "/srv/x"
    assert cfg.agent("main").default and cfg.default_agent_id == "main"
    assert cfg.runner_for("main") == {"type": "command", "command": ["cat"]}
    assert cfg.runner_for("research") == {"type": "echo"}
    # any other array in the second layer replaces the first's
    assert cfg.a2a_allow == ["ops-*"]
    assert cfg.a2a_enabled is True
    assert cfg.max_tool_rounds == 3
    assert cfg.warnings == []


def test_agents_list_entry_merges_nested_objects(tmp_path: Path) -> None:
    own = '{"agents": {"list": [{"id": "MAIN", "subagents": {"model": "fake/small"}}]}}'
    cfg = load_config(state_with(tmp_path, OPENCLAW, own))
    main = cfg.agent("main")
    assert main.allow_agents == ("research",)  # from OpenClaw's entry
    assert main.subagent_model == "fake/small"  # from ours
    assert cfg.known_agent_ids() == ["main", "research"]


def test_default_agent_rules(tmp_path: Path) -> None:
    cfg = load_config(
        state_with(
            tmp_path, own='{"agents": {"list": [{"id": "a"}, {"id": "b", "default": true}]}}'
        )
    )
    assert cfg.default_agent_id == "b"
    cfg = load_config(
        state_with(tmp_path, own='{"agents": {"list": [{"id": "First"}, {"id": "b"}]}}')
    )
    assert cfg.default_agent_id == "first"


def test_model_object_and_known_models(tmp_path: Path) -> None:
    cfg = load_config(state_with(tmp_path, FIXTURE_STATE.joinpath("clawdbot.json").read_text()))
    assert cfg.defaults_model == ("fake/fake-model", ())
    assert config_models.is_known_model(cfg, "fake/fake-model")
    assert config_models.is_known_model(cfg, "fake-model")
    assert config_models.is_known_model(cfg, "echo")
    assert not config_models.is_known_model(cfg, "gpt-9")
    assert config_models.model_cost(cfg, "fake", "fake-model") == {"input": 0.0, "output": 0.0}


@pytest.mark.parametrize("price", ["Infinity", "NaN", "1e400", "-1", '"x"', "true"])
def test_a_price_that_is_no_number_gives_no_estimate(tmp_path: Path, price: str) -> None:
    """A model's `cost.input` of Infinity (valid JSON5, as issue 37 item 6's timeoutMs was)
    made a spawn's announce say "est $inf"; like `usage`, an unusable price is no estimate."""
    from sessiontool.flow.announce import stats_line

    openclaw = (
        "{ models: { providers: { p: { models: "
        f"[{{ id: 'm', cost: {{ input: {price}, output: 2 }} }}] }} }} }} }}"
    )
    # In OpenClaw's file (only read): skipped with a warning. In sessiontool's own: refused.
    with pytest.raises(ConfigError, match=r"models\.providers\.p\.models\[0\]\.cost\.input"):
        load_config(state_with(tmp_path, own=openclaw))
    (tmp_path / "state" / "sessiontool.json5").unlink()
    cfg = load_config(state_with(tmp_path, openclaw=openclaw))
    assert any("cost.input: expected a price, 0 or more" in w for w in cfg.skipped)
    cost = config_models.model_cost(cfg, "p", "m")
    assert cost is None
    line = stats_line(
        started_at=0,
        ended_at=1000,
        usage={"input": 10**6, "output": 10**6},
        cost=cost,
        child_key="agent:main:subagent:x",
        session_id=None,
        transcript=None,
    )
    assert "est" not in line and "inf" not in line and "nan" not in line
    good = load_config(state_with(tmp_path, own=openclaw.replace(f"input: {price}", "input: 1.5")))
    assert config_models.model_cost(good, "p", "m") == {"input": 1.5, "output": 2.0}


def test_unknown_keys_warn_with_their_names(tmp_path: Path) -> None:
    own = '{"sesion": {}, "sessiontool": {"delivery": {}, "colour": "red"}, "$schema": "x"}'
    paths = state_with(tmp_path, own=own)
    cfg = load_config(paths)
    assert len(cfg.warnings) == 2
    assert any("'sesion'" in w and str(paths.own_config_default) in w for w in cfg.warnings)
    assert any("sessiontool.colour" in w for w in cfg.warnings)
    assert "sesion" not in cfg.raw


def test_unknown_key_warning_reaches_stderr_once(state: Path) -> None:
    write_config(state, {"nonsense": 1})
    proc = run_cli("list", "--json")
    assert proc.returncode == 0
    warnings = [line for line in proc.stderr.splitlines() if "nonsense" in line]
    assert len(warnings) == 1 and warnings[0].startswith("sessiontool: warning:")


def test_explicit_config_wins_over_env_and_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = state_with(tmp_path, own='{"session": {"mainKey": "default-file"}}')
    env_file = tmp_path / "env.json5"
    env_file.write_text('{"session": {"mainKey": "env-file"}}')
    flag_file = tmp_path / "flag.json5"
    flag_file.write_text('{"session": {"mainKey": "flag-file"}}')
    assert load_config(paths).main_key == "default-file"
    monkeypatch.setenv("SESSIONTOOL_CONFIG", str(env_file))
    assert load_config(paths).main_key == "env-file"
    assert load_config(paths, str(flag_file)).main_key == "flag-file"


def test_plain_json_config_does_not_need_json5(tmp_path: Path) -> None:
    cfg = load_config(state_with(tmp_path, own=json.dumps({"session": {"mainKey": "k"}})))
    assert cfg.main_key == "k"


def test_empty_config_file_is_fine(tmp_path: Path) -> None:
    assert load_config(state_with(tmp_path, own="  \n")).raw == {}


@pytest.mark.parametrize(
    ("own", "key"),
    [
        ('{"agents": {"list": {"id": "x"}}}', "agents.list"),
        ('{"agents": {"list": ["x"]}}', "agents.list[0]"),
        ('{"session": {"mainKey": 5}}', "session.mainKey"),
        (
            '{"session": {"agentToAgent": {"maxPingPongTurns": "many"}}}',
            "session.agentToAgent.maxPingPongTurns",
        ),
        ('{"agents": {"defaults": {"runner": {"type": "magic"}}}}', "agents.defaults.runner.type"),
        (
            '{"agents": {"list": [{"id": "a", "runner": {"type": "command"}}]}}',
            "agents.list[0].runner.command",
        ),
        ('{"agents": {"list": [{"id": "a", "runner": "echo"}]}}', "agents.list[0].runner"),
    ],
)
def test_errors_name_file_and_key(tmp_path: Path, own: str, key: str) -> None:
    paths = state_with(tmp_path, own=own)
    with pytest.raises(ConfigError) as info:
        load_config(paths)
    assert str(paths.own_config_default) in info.value.message
    assert key in info.value.message
    assert "expected" in info.value.message
    assert int(info.value.code) == 2


def _nested(dotted: str, value: str) -> str:
    """`{ a: { b: VALUE } }` for `a.b`, as JSON5 text."""
    text = value
    for part in reversed(dotted.split(".")):
        text = f"{{ {part}: {text} }}"
    return text + "\n"


@pytest.mark.parametrize(
    ("key", "value", "fixed"),
    [
        ("sessiontool.maxConcurrentRuns", '"eight"', "3"),
        ("sessiontool.maxConcurrentRuns", "-3", "3"),
        ("sessiontool.maxConcurrentRuns", "0", "3"),
        ("sessiontool.maxConcurrentRuns", "1e9", "3"),
        ("sessiontool.maxToolRounds", "-1", "3"),
        ("sessiontool.delivery", "{command: 5}", "{}"),
        ("agents.defaults.subagents.archiveAfterMinutes", "-3", "0"),
        ("tools.agentToAgent.allow", '"main"', '["main"]'),
        ("tools.subagents.tools.allow", "5", "[]"),
        ("session.sendPolicy", '"deny"', '{default: "allow"}'),
    ],
)
def test_a_wrong_own_setting_is_refused_by_every_command(
    state: Path, key: str, value: str, fixed: str
) -> None:
    """`sessiontool.maxConcurrentRuns: "eight"` was accepted by `send` (only the background
    worker read it, and took the default) and only `doctor` reported it; `-3` was quietly
    taken as 1 and reported by nothing (issue 33, item 3); so were the other values read only
    now and then (a worker's tool call, the archive sweep). Now every command says so: exit 2,
    one line naming the file and the key, and `send` starts no run."""
    own = state / "sessiontool.json5"
    state.mkdir(parents=True, exist_ok=True)
    own.write_text(_nested(key, value))
    for args in (
        ["send", "main", "hello"],
        ["spawn", "a task"],
        ["list"],
        ["runs"],
        ["deliveries", "retry"],
    ):
        proc = run_cli(*args)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        (line,) = proc.stderr.splitlines()
        assert line.startswith(f"sessiontool: error: {own}: {key}"), line
        assert "expected" in line
    # doctor reports it as a problem (exit 1, issue 45 item 7), once, and checks the rest.
    proc = run_cli("doctor")
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert f"problem: bad-config: config\n    {own}: {key}" in proc.stdout, proc.stdout
    assert proc.stderr == ""
    assert not list(state.glob("sessiontool/runs/*.json"))
    own.write_text(_nested(key, fixed))
    assert run_cli("list").returncode == 0


def test_values_read_now_and_then_are_checked_on_load(tmp_path: Path) -> None:
    """Once checked only when read (a worker's tool call): the user's own file is refused when
    it is loaded, so the command that starts the worker says so."""
    with pytest.raises(ConfigError, match=r"tools\.agentToAgent\.allow"):
        load_config(state_with(tmp_path, own='{"tools": {"agentToAgent": {"allow": "main"}}}'))


@pytest.mark.parametrize("text", ["{ agents: [ }", "[1, 2]", "{'a': }"])
def test_unparsable_file_names_the_file(tmp_path: Path, text: str) -> None:
    paths = state_with(tmp_path, own=text)
    with pytest.raises(ConfigError) as info:
        load_config(paths)
    assert str(paths.own_config_default) in info.value.message


def test_unparsable_openclaw_file_names_it(tmp_path: Path) -> None:
    paths = state_with(tmp_path, openclaw="{ nope")
    with pytest.raises(ConfigError) as info:
        load_config(paths)
    assert str(paths.root / "clawdbot.json") in info.value.message


def test_missing_explicit_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_config(state_with(tmp_path), str(tmp_path / "missing.json5"))


def test_the_fixture_config_is_never_written(tmp_path: Path) -> None:
    paths = state_with(tmp_path, OPENCLAW, '{"session": {"mainKey": "x"}}')
    before = (paths.root / "clawdbot.json").read_bytes()
    load_config(paths)
    assert (paths.root / "clawdbot.json").read_bytes() == before
    assert sorted(p.name for p in paths.root.iterdir()) == ["clawdbot.json", "sessiontool.json5"]


def test_error_names_the_file_that_set_the_key(tmp_path: Path) -> None:
    """With both layers present, an error names the layer holding the bad value, not both."""
    paths = state_with(tmp_path, OPENCLAW, '{"agents": {"defaults": {"runner": {"type": "x"}}}}')
    with pytest.raises(ConfigError) as info:
        load_config(paths)
    assert str(paths.root / "sessiontool.json5") in info.value.message
    assert "clawdbot.json" not in info.value.message
    # A bad value in OpenClaw's file (only read by sessiontool) is skipped with a warning naming
    # that file, not an error: the default is used.
    bad_openclaw = OPENCLAW.replace('mainKey: "home"', "mainKey: 7")
    paths = state_with(tmp_path, bad_openclaw, '{"agents": {"list": [{"id": "main"}]}}')
    from sessiontool import diag

    diag.drain()
    cfg = load_config(paths)
    assert cfg.main_key == "main"
    (warning,) = diag.drain()
    assert str(paths.root / "clawdbot.json") in warning and "session.mainKey" in warning
    assert "sessiontool.json5" not in warning and cfg.skipped == [warning]
    paths = state_with(
        tmp_path, OPENCLAW, '{"agents": {"list": [{"id": "research", "runner": 1}]}}'
    )
    with pytest.raises(ConfigError, match=r"sessiontool\.json5: agents\.list\[1\]\.runner"):
        load_config(paths)


def test_json5_config_error_names_the_right_line(state: Path) -> None:
    state.mkdir()
    (state / "sessiontool.json5").write_text(
        "// sessiontool config\n{\n  agents: {\n    defaults: {\n      model: 'x',\n"
        "      runner: {type: 'echo'} sandbox: {mode: 'off'},\n    },\n  },\n}\n"
    )
    proc = run_cli("list")
    assert proc.returncode == 2
    assert "line 6 column 30" in proc.stderr, proc.stderr  # where `sandbox` starts
    assert "line 1 column 1" not in proc.stderr
