"""Every config value is checked before a run starts, from the one config table (issue 42 items
2 and 3, issue 45 items 7 and 8): each key of `state/config_keys.py` and each runner key of
`state/runnertable.py` is walked with a value of the wrong type and one out of its range; each
is refused with exit 2 naming the file and the key, by every command, and reported by `doctor`
(a problem, exit 1). A safety limit (`sandbox.mode`) is refused from OpenClaw's file too, and
read as the strictest where it is read at all. A second agent of one id is a warning naming
both."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sessiontool.errors import ConfigError
from sessiontool.state.config import load_config
from sessiontool.state.config_keys import KEYS, is_strict
from sessiontool.state.paths import StatePaths
from sessiontool.state.runnertable import RUNNERS, Field
from tests.helpers import run_cli, write_config

from .runhelpers import config_cases, nested, samples, valid_config_cases

CASES = config_cases()


def state_with(tmp_path: Path, own: dict[str, Any] | None, openclaw: Any = None) -> StatePaths:
    root = tmp_path / "state"
    root.mkdir(exist_ok=True)
    for name, content in (("sessiontool.json5", own), ("openclaw.json", openclaw)):
        if content is not None:
            (root / name).write_text(json.dumps(content))
        elif (root / name).exists():
            (root / name).unlink()
    return StatePaths(root)


def test_the_walk_covers_every_key_and_every_runner_key() -> None:
    named = {c[0].rsplit("-", 1)[0] for c in CASES}
    for k in KEYS:
        if k.what != "runner":
            assert k.path in named, k.path
    for rtype, (_m, _c, fields) in RUNNERS.items():
        for name in fields:
            assert f"agents.defaults.runner.{rtype}.{name}" in named
            assert f"agents.list[].runner.{rtype}.{name}" in named
    # Every number with a bound and every enum has its out-of-range case.
    assert any(c[0] == "agents.defaults.runner.command.timeoutSeconds-range" for c in CASES)
    assert any(c[0] == "agents.defaults.sandbox.mode-range" for c in CASES)


@pytest.mark.parametrize(("case", "cfg", "key", "what"), CASES, ids=[c[0] for c in CASES])
def test_every_wrong_value_of_the_own_file_is_refused_naming_file_and_key(
    tmp_path: Path, case: str, cfg: dict[str, Any], key: str, what: str
) -> None:
    paths = state_with(tmp_path, cfg)
    with pytest.raises(ConfigError) as info:
        load_config(paths)
    assert int(info.value.code) == 2
    assert info.value.message.startswith(f"{paths.own_config_default}: {key}: expected {what}"), (
        info.value.message
    )


@pytest.mark.parametrize(
    ("case", "cfg"), valid_config_cases(), ids=[c[0] for c in valid_config_cases()]
)
def test_a_value_the_table_takes_is_accepted(
    tmp_path: Path, case: str, cfg: dict[str, Any]
) -> None:
    cfg_loaded = load_config(state_with(tmp_path, cfg))
    assert cfg_loaded.errors == [] and cfg_loaded.skipped == []


def test_wrong_values_of_openclaws_file_warn_but_safety_limits_are_refused(
    tmp_path: Path,
) -> None:
    """OpenClaw's file is only read: a wrong value there is skipped with a warning (one odd
    value must not stop every command), unless it is a safety limit (`strict`)."""
    from sessiontool import diag

    shared = [c for c in CASES if not c[2].startswith(("sessiontool.", "$schema"))]
    strict_seen = lax_seen = 0
    for case, cfg, key, _what in shared:
        paths = state_with(tmp_path, None, cfg)
        if is_strict(key):  # a safety limit, or an object on the way to one
            strict_seen += 1
            with pytest.raises(ConfigError) as info:
                load_config(paths)
            assert info.value.message.startswith(f"{paths.root / 'openclaw.json'}: {key}"), case
        else:
            lax_seen += 1
            got = load_config(paths)
            assert any(f"openclaw.json: {key}: expected" in w for w in got.skipped), case
        diag.drain()
    assert strict_seen > 10 and lax_seen > 10


# -- as a user runs it -----------------------------------------------------------------------


@pytest.mark.parametrize("value", ["900", -5])
def test_a_runner_timeout_of_the_wrong_type_or_range_starts_no_run(state: Path, value: Any) -> None:
    """`runner.timeoutSeconds: "900"` or `-5` started a run that failed (exit 1, a failed
    record) and doctor said "no problems found" (issue 42 item 3)."""
    cfg = write_config(
        state,
        {"agents": {"defaults": {"runner": {"type": "command", "command": ["cat"],
                                            "timeoutSeconds": value}}}},
    )  # fmt: skip
    key = "agents.defaults.runner.timeoutSeconds"
    for args in (["send", "main", "hello"], ["spawn", "a task"], ["list"], ["mcp"]):
        proc = run_cli(*args, input="")
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        (line,) = proc.stderr.splitlines()
        assert line.startswith(f"sessiontool: error: {cfg}: {key}: expected a positive"), line
    assert not list(state.glob("sessiontool/runs/*.json"))
    doctor = run_cli("doctor", "--json")
    assert doctor.returncode == 1, doctor.stdout
    (problem,) = [p for p in json.loads(doctor.stdout)["problems"] if p["kind"] == "bad-config"]
    assert problem["severity"] == "problem" and f"{cfg}: {key}" in problem["detail"]
    assert doctor.stderr == ""


@pytest.mark.parametrize("mode", ["everything", "ALL"])
@pytest.mark.parametrize("where", ["sessiontool.json5", "openclaw.json"])
def test_an_unknown_sandbox_mode_is_refused_by_every_command(
    state: Path, mode: str, where: str
) -> None:
    """`sandbox.mode: "everything"` (or `"ALL"`) was read as `off`: a sandboxed requester saw
    every session, no warning, doctor clean (issue 42 item 2). Now exit 2 naming the file and
    the key from every command, in OpenClaw's file too, and doctor reports it."""
    state.mkdir(parents=True)
    path = state / where
    path.write_text(json.dumps({"agents": {"defaults": {"sandbox": {"mode": mode}}}}))
    key = "agents.defaults.sandbox.mode"
    for args in (
        ["list"],
        ["--as", "agent:main:dm:bob", "list"],
        ["send", "main", "hi"],
        ["history", "main"],
        ["search", "x"],
        ["mcp", "--as", "agent:main:dm:bob"],
    ):
        proc = run_cli(*args, input="")
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        (line,) = proc.stderr.splitlines()
        assert line.startswith(f"sessiontool: error: {path}: {key}: expected"), line
        assert repr(mode) in line
    doctor = run_cli("doctor")
    assert doctor.returncode == 1
    assert f"problem: bad-config: config\n    {path}: {key}" in doctor.stdout, doctor.stdout


def test_a_sandbox_mode_read_anyway_is_the_strictest(tmp_path: Path) -> None:
    """Where a refused mode is read at all (doctor's lenient load), it is `all`, never `off`."""
    from sessiontool.context import build_context

    own = {
        "agents": {
            "defaults": {"sandbox": {"mode": "everything"}},
            "list": [{"id": "main"}, {"id": "ops", "sandbox": {"mode": 7}}],
        }
    }
    paths = state_with(tmp_path, own)
    cfg = load_config(paths, lenient=True)
    assert len(cfg.errors) == 2 and all("sandbox.mode" in e for e in cfg.errors)
    assert cfg.sandbox_mode("main") == cfg.sandbox_mode("ops") == "all"
    ctx = build_context(paths.root, None, None, "agent:main:dm:bob", cfg=cfg)
    assert ctx.requester.sandboxed


def test_doctor_reports_every_wrong_value_at_once(state: Path) -> None:
    """One config with a wrong value at every leaf key of the table: doctor names each, as
    a problem (exit 1), and says nothing twice; `list` refuses it (exit 2)."""
    leaves = [
        k
        for k in KEYS
        if k.what != "runner"
        and not any(o.path.startswith((k.path + ".", k.path + "[")) for o in KEYS)
    ]
    merged: dict[str, Any] = {}
    keys = []
    for k in leaves:
        cfg, key = nested(k.path, samples(k.schema)[0])
        _deep_merge(merged, cfg)
        keys.append(key)
    path = write_config(state, merged)
    assert run_cli("list").returncode == 2
    proc = run_cli("doctor", "--json")
    assert proc.returncode == 1, proc.stderr
    details = [
        p["detail"] for p in json.loads(proc.stdout)["problems"] if p["kind"] == "bad-config"
    ]
    for key in keys:
        assert any(d.startswith(f"{path}: {key}: expected") for d in details), key
    assert len(details) == len(set(details)) and proc.stderr == ""


def _deep_merge(into: dict[str, Any], other: dict[str, Any]) -> None:
    for k, v in other.items():
        if isinstance(v, dict) and isinstance(into.get(k), dict):
            _deep_merge(into[k], v)
        elif isinstance(v, list) and isinstance(into.get(k), list):
            _deep_merge(into[k][0], v[0])
        else:
            into[k] = v


def test_doctor_says_a_config_warning_once_and_a_file_that_does_not_parse_is_a_problem(
    state: Path,
) -> None:
    """doctor printed a config warning twice (stderr and the report) and exited 2, the
    "warnings only" code, for a config every other command refuses (issue 45 item 7)."""
    cfg = write_config(state, {"nonsense": 1})
    proc = run_cli("doctor")
    assert proc.returncode == 2  # warnings only
    assert "unknown config key 'nonsense'" in proc.stdout and proc.stderr == ""
    cfg.write_text("{ agents: [ }")
    proc = run_cli("doctor")
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert f"problem: bad-config: config\n    config file {cfg} is not valid JSON5" in proc.stdout
    assert proc.stderr == ""
    assert run_cli("list").returncode == 2


def test_a_duplicate_agent_id_is_a_warning_naming_both(state: Path) -> None:
    """The second `agents.list` entry of one id was dropped silently (issue 45 item 8)."""
    cfg = write_config(
        state,
        {"agents": {"list": [{"id": "ops", "name": "first"}, {"id": "main"},
                             {"id": "OPS", "name": "second"}]}},
    )  # fmt: skip
    proc = run_cli("agents")
    assert proc.returncode == 0
    (line,) = [ln for ln in proc.stderr.splitlines() if "agents.list" in ln]
    assert line == (
        f"sessiontool: warning: {cfg}: agents.list[2] (id 'OPS') has the id of agents.list[0] "
        "(id 'ops'): agents.list[2] is ignored"
    )
    # The first is used, with an OpenClaw file beside it too (the layers merge by id).
    (state / "openclaw.json").write_text(json.dumps({"agents": {"list": [{"id": "ops"}]}}))
    proc = run_cli("--json", "agents")
    assert "agents.list[2] (id 'OPS')" in proc.stderr
    from sessiontool.state.config import load_config as load

    assert load(StatePaths(state)).agent("ops").name == "first"
    doctor = run_cli("doctor", "--json")
    problems = json.loads(doctor.stdout)["problems"]
    assert any(p["kind"] == "config-warning" and "agents.list[2]" in p["detail"] for p in problems)
    assert "agents.list[2]" not in doctor.stderr


def test_runner_field_rows_are_fields() -> None:
    for _rtype, (_m, _c, fields) in RUNNERS.items():
        assert all(isinstance(f, Field) for f in fields.values())


def test_openclaws_raw_key_prefix_narrows_a_rule_instead_of_being_ignored(state: Path) -> None:
    """OpenClaw's send-policy rules also match `rawKeyPrefix`; ignored, a rule that names only
    it matched every session (an allow rule under `default: deny` allowed them all)."""
    write_config(
        state,
        {
            "session": {
                "sendPolicy": {
                    "rules": [
                        {"match": {"rawKeyPrefix": "Agent:Main:Discord:"}, "action": "allow"}
                    ],
                    "default": "deny",
                }
            }
        },
    )
    for key, effective in (
        ("agent:main:telegram:group:1", "deny"),
        ("agent:main:discord:group:1", "allow"),
    ):
        proc = run_cli("--json", "policy", key)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["effective"] == effective, (key, proc.stdout)


def test_a_sandbox_mode_of_openclaws_agents_entries_holds(state: Path) -> None:
    """OpenClaw 2026.9 sets per-agent overrides under `agents.entries.<id>` (the key is the
    agent's id); a `sandbox.mode` there was never read, so the agent ran unsandboxed."""
    state.mkdir(parents=True)
    (state / "openclaw.json").write_text(
        json.dumps(
            {
                "agents": {
                    "list": [{"id": "main"}],
                    "entries": {"main": {"sandbox": {"mode": "all"}}},
                }
            }
        )
    )
    paths = StatePaths(state)
    assert load_config(paths).sandbox_mode("main") == "all"
    (state / "openclaw.json").write_text(
        json.dumps({"agents": {"entries": {"main": {"sandbox": {"mode": "everything"}}}}})
    )
    proc = run_cli("list")
    assert proc.returncode == 2
    assert f"{state / 'openclaw.json'}: agents.entries.main.sandbox.mode: expected" in proc.stderr
