"""`agents`: which agent ids a requester may spawn under (OpenClaw's agents_list)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.helpers import run_cli, run_json, write_config

AGENTS = [
    {"id": "main", "name": "Main"},
    {"id": "research", "name": "Research"},
    {"id": "writer"},
]


def _config(state: Path, allow: list[str] | None, extra: dict[str, Any] | None = None) -> None:
    main: dict[str, Any] = {"id": "main", "name": "Main"}
    if allow is not None:
        main["subagents"] = {"allowAgents": allow}
    write_config(state, {"agents": {"list": [main, *AGENTS[1:]]}, **(extra or {})})


def test_no_config_lists_only_main() -> None:
    assert run_json("agents") == (
        0,
        {"requester": "main", "allowAny": False, "agents": [{"id": "main", "configured": False}]},
    )


def test_no_allowlist_lists_only_the_requester(state: Path) -> None:
    _config(state, None)
    assert run_json("agents") == (
        0,
        {
            "requester": "main",
            "allowAny": False,
            "agents": [{"id": "main", "name": "Main", "configured": True}],
        },
    )


def test_explicit_allowlist(state: Path) -> None:
    _config(state, ["research", "Ghost", " "])
    code, data = run_json("agents")
    assert code == 0
    assert data == {
        "requester": "main",
        "allowAny": False,
        "agents": [
            {"id": "main", "name": "Main", "configured": True},
            {"id": "ghost", "configured": False},
            {"id": "research", "name": "Research", "configured": True},
        ],
    }


def test_star_lists_every_configured_agent(state: Path) -> None:
    _config(state, ["*"])
    code, data = run_json("agents")
    assert code == 0
    assert data["allowAny"] is True
    assert [a["id"] for a in data["agents"]] == ["main", "research", "writer"]
    assert data["agents"][2] == {"id": "writer", "configured": True}


def test_requester_comes_first_then_sorted(state: Path) -> None:
    write_config(
        state,
        {
            "agents": {
                "list": [
                    {"id": "main"},
                    {"id": "zeta", "subagents": {"allowAgents": ["main", "alpha", "mid"]}},
                    {"id": "alpha"},
                    {"id": "mid"},
                ]
            }
        },
    )
    code, data = run_json("--agent", "zeta", "agents")
    assert code == 0
    assert data["requester"] == "zeta"
    assert [a["id"] for a in data["agents"]] == ["zeta", "alpha", "main", "mid"]


def test_session_requester_uses_its_own_agent(state: Path) -> None:
    write_config(
        state,
        {
            "agents": {
                "list": [{"id": "main"}, {"id": "ops", "subagents": {"allowAgents": ["main"]}}]
            }
        },
    )
    code, data = run_json("--as", "agent:ops:main", "agents")
    assert code == 0
    assert data["requester"] == "ops"
    assert [a["id"] for a in data["agents"]] == ["ops", "main"]


def test_subagent_requester_is_refused(state: Path) -> None:
    _config(state, ["*"])
    code, data = run_json("--as", "agent:main:subagent:x", "agents")
    assert code == 4
    assert data == {
        "status": "forbidden",
        "error": "agents_list is not available to sub-agent sessions",
        "code": 4,
    }


def test_subagent_requester_allowed_by_config(state: Path) -> None:
    _config(state, ["research"], {"tools": {"subagents": {"tools": {"allow": ["agents_list"]}}}})
    code, data = run_json("--as", "agent:main:subagent:x", "agents")
    assert code == 0
    assert [a["id"] for a in data["agents"]] == ["main", "research"]


def test_subagent_env_requester_is_refused_too(state: Path) -> None:
    proc = run_cli("agents", env={"SESSIONTOOL_SESSION_KEY": "agent:main:subagent:y"})
    assert proc.returncode == 4
    assert "agents_list is not available to sub-agent sessions" in proc.stderr


def test_human_output_one_id_per_line(state: Path) -> None:
    _config(state, ["research", "ghost"])
    proc = run_cli("agents")
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    assert [ln.split("\t")[0] for ln in lines] == ["main", "ghost", "research"]
    assert "requester" in lines[0]
    assert "not configured" in lines[1]
    assert run_cli("agents", "-q").stdout == "main\nghost\nresearch\n"


def test_json_before_the_command(state: Path) -> None:
    _config(state, None)
    code, data = run_json("--json", "agents")
    assert code == 0
    assert data["requester"] == "main"
