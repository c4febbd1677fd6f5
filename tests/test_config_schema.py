"""`sessiontool config schema` (issue 45 item 14): a JSON Schema for sessiontool.json5, generated
from the one config table, equal to the published copy (docs/sessiontool.schema.json), and in
step with the loader: a real JSON Schema validator and the loader refuse and accept the same
values, key by key. `$schema` in a file is accepted as before. And `paths` lists the search
index and each remote gateway's part (`gateways/<hash>/`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sessiontool.state.config_keys import KEYS
from tests.helpers import ROOT, run_cli, run_json, write_config

from .runhelpers import config_cases, valid_config_cases

jsonschema = pytest.importorskip("jsonschema")


def printed_schema() -> dict[str, Any]:
    proc = run_cli("config", "schema")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (ROOT / "docs" / "sessiontool.schema.json").read_text()
    data = json.loads(proc.stdout)
    assert isinstance(data, dict)
    return data


def test_config_schema_prints_the_published_schema() -> None:
    data = printed_schema()
    jsonschema.Draft202012Validator.check_schema(data)
    assert data["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    # `--json`: the same schema on one line.
    rc, one = run_json("config", "schema")
    assert rc == 0 and one == data
    proc = run_cli("config", "nope")
    assert proc.returncode == 2 and "unknown action 'nope' (valid: schema)" in proc.stderr


def test_every_key_of_the_table_is_in_the_schema() -> None:
    data = printed_schema()
    for k in KEYS:
        node: Any = data
        for part in k.path.split("."):
            name, items = (part[:-2], True) if part.endswith("[]") else (part, False)
            node = node["additionalProperties"] if name == "*" else node["properties"][name]
            if items:
                node = node["items"]
        assert node["description"].startswith(k.doc), k.path


@pytest.mark.parametrize(
    ("case", "cfg", "key", "what"), config_cases(), ids=[c[0] for c in config_cases()]
)
def test_the_schema_refuses_what_the_loader_refuses(
    case: str, cfg: dict[str, Any], key: str, what: str
) -> None:
    validator = jsonschema.Draft202012Validator(_schema())
    assert list(validator.iter_errors(cfg)), (case, cfg)


@pytest.mark.parametrize(
    ("case", "cfg"), valid_config_cases(), ids=[c[0] for c in valid_config_cases()]
)
def test_the_schema_accepts_what_the_loader_accepts(case: str, cfg: dict[str, Any]) -> None:
    validator = jsonschema.Draft202012Validator(_schema())
    assert [e.message for e in validator.iter_errors(cfg)] == [], case


def _schema() -> dict[str, Any]:
    from sessiontool.state.config_schema import schema

    return schema()


def test_the_real_openclaw_configs_shared_keys_hold_to_the_schema() -> None:
    """What OpenClaw itself wrote (the fixtures' configs) passes: the table never refuses a
    value OpenClaw takes."""
    from sessiontool.state.config import SHARED_TOP_KEYS
    from sessiontool.state.jsonio import loads_tolerant

    validator = jsonschema.Draft202012Validator(_schema())
    for name in ("clawdbot-2026.1.24/state/clawdbot.json", "openclaw-2026.9.6/state/openclaw.json"):
        raw = loads_tolerant((ROOT / "tests" / "fixtures" / name).read_bytes())
        shared = {k: v for k, v in raw.items() if k in SHARED_TOP_KEYS}
        assert shared and [e.message for e in validator.iter_errors(shared)] == [], name


def test_a_file_naming_the_schema_is_accepted(state: Path) -> None:
    schema_file = ROOT / "docs" / "sessiontool.schema.json"
    write_config(
        state,
        {
            "$schema": str(schema_file),
            "agents": {"defaults": {"runner": {"type": "echo"}, "sandbox": {"mode": "non-main"}}},
            "sessiontool": {"maxToolRounds": 3, "delivery": {"command": ["cat"], "env": ["X"]}},
        },
    )
    proc = run_cli("list")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    own = json.loads((state / "sessiontool.json5").read_text())
    jsonschema.Draft202012Validator(_schema()).validate(own)
    # An unknown key of sessiontool's own section: the loader warns, the schema refuses.
    own["sessiontool"]["colour"] = "red"
    write_config(state, own)
    proc = run_cli("list")
    assert proc.returncode == 0 and "unknown config key 'sessiontool.colour'" in proc.stderr
    assert list(jsonschema.Draft202012Validator(_schema()).iter_errors(own))


# -- paths -----------------------------------------------------------------------------------


def test_paths_lists_the_search_index_and_each_gateway_part(state: Path) -> None:
    """`paths` did not list the search index nor the `gateways/<hash>/` dirs (issue 45 item
    14): a user looking for what takes the disk, or what `gateway forget` removes, found
    neither."""
    state.mkdir(parents=True)
    part = state / "gateways" / "0123456789abcdef"
    part.mkdir(parents=True)
    (state / "gateways" / "not-a-dir").write_text("")
    rc, data = run_json("paths")
    assert rc == 0, data
    assert data["index"] == str(state / "sessiontool" / "index.sqlite")
    assert data["gateways"] == [{"dir": str(part), "url": None}]
    proc = run_cli("paths")
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    assert f"search index\t{state / 'sessiontool' / 'index.sqlite'}" in lines
    assert f"gateway part\t{part}" in lines


# -- the docs ----------------------------------------------------------------------------------


def test_the_reference_lists_every_key_of_the_table_as_the_table_says() -> None:
    """docs/reference.md's key table and runner-key table are the config table, row by row:
    a key added, or a range changed, without its line in the docs fails here."""
    from sessiontool.state.runnertable import RUNNERS

    doc = (ROOT / "docs" / "reference.md").read_text()
    for k in KEYS:
        what = "a runner object ([Runners](#runners))" if k.what == "runner" else k.what
        mark = " **Safety limit.**" if k.strict and k.what != "runner" else ""
        row = f"| `{k.path}` | {what.replace('|', chr(92) + '|')} | {k.default} | {k.doc}{mark} |"
        assert row in doc, row
    for name, (_m, _c, fields) in RUNNERS.items():
        for key, f in fields.items():
            req = " (required)" if f.required else ""
            assert f"| `{name}` | `{key}` | {f.what}{req} | {f.doc} |" in doc, (name, key)


def test_paths_names_the_url_of_the_gateway_part_it_works_in(tmp_path: Path, state: Path) -> None:
    from .fakes import gateway as fake

    token = "s3cret-T0ken-paths"
    env = {"OPENCLAW_GATEWAY_TOKEN": token, "SESSIONTOOL_OPENCLAW_BIN": ""}
    with fake.running(tmp_path / "gw", token=token, version="2026.9.6") as gw:
        url = f"ws://127.0.0.1:{gw.port}"
        rc, data = run_json("--gateway", url, "paths", env=env, timeout=120)
    assert rc == 0, data
    (part,) = data["gateways"]
    assert part["url"] == url and Path(part["dir"]).parent == state / "gateways"
    assert data["stateDir"] == part["dir"]  # the command works in that part
    assert data["index"] == str(Path(part["dir"]) / "sessiontool" / "index.sqlite")
