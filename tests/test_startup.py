"""Fast start-up: cron runs `list --json` every minute and completion on every Tab, so the read
path must not import rich (terminal rendering) or json5 (only for files plain JSON rejects)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import write_config

from .runhelpers import MODULES_PROBE

HEAVY = ("rich", "json5", "websockets", "cryptography", "textual", "markupsafe")


def loaded_modules(*args: str, state: Path, tmp: Path) -> set[str]:
    """Every module loaded by the real entry point (`python -m sessiontool`) by the time it
    exits. sys.modules, not -X importtime: the latter does not see modules loaded through
    importlib.import_module, which is how the command modules are loaded."""
    out = tmp / "modules.txt"
    env = dict(os.environ, SESSIONTOOL_STATE_DIR=str(state))
    proc = subprocess.run(
        [sys.executable, "-c", MODULES_PROBE, str(out), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    modules = set(out.read_text().split())
    # The probe sees importlib-loaded modules (a run loads only its own command's module).
    assert any(m.startswith("sessiontool.cli.commands.") for m in modules)
    return modules


def imported_modules(*args: str, state: Path, tmp: Path) -> set[str]:
    """Top-level names of `loaded_modules`."""
    return {m.split(".")[0] for m in loaded_modules(*args, state=state, tmp=tmp)}


@pytest.fixture
def populated(state: Path) -> Path:
    """A state dir with a plain-JSON config, a store and a transcript, so the list path reads
    everything it can (config, store, transcript tails)."""
    write_config(state, {"agents": {"list": [{"id": "main", "default": True}]}})
    d = state / "agents" / "main" / "sessions"
    d.mkdir(parents=True)
    (d / "sessions.json").write_text(
        json.dumps({f"agent:main:s{i}": {"sessionId": f"s{i}", "updatedAt": i} for i in range(10)})
    )
    line = {"type": "message", "message": {"role": "user", "content": "hi"}}
    for i in range(10):
        (d / f"s{i}.jsonl").write_text(json.dumps(line) + "\n")
    return state


@pytest.mark.parametrize(
    "args",
    [
        ("list", "--json"),
        ("list", "--json", "--message-limit", "3", "--kinds", "other"),
        ("history", "agent:main:s1", "--json"),
        ("list",),  # piped: TSV, no table
    ],
    ids=["list-json", "list-messages", "history-json", "list-tsv"],
)
def test_read_path_imports_neither_rich_nor_json5(
    populated: Path, tmp_path: Path, args: tuple[str, ...]
) -> None:
    names = imported_modules(*args, state=populated, tmp=tmp_path)
    for heavy in HEAVY:
        assert heavy not in names, f"{heavy} imported by {' '.join(args)}"


def test_list_imports_no_write_side_modules(populated: Path, tmp_path: Path) -> None:
    names = imported_modules("list", "--json", state=populated, tmp=tmp_path)
    assert "filelock" not in names
    assert "platformdirs" not in names  # the state dir came from the environment


@pytest.mark.parametrize(
    "args",
    [("send", "agent:main:s1", "hi", "--timeout", "0"), ("label", "agent:main:s2", "x")],
    ids=["send", "label"],
)
def test_result_types_stay_types_only(
    populated: Path, tmp_path: Path, args: tuple[str, ...]
) -> None:
    """The result TypedDicts (runs/ and flow/result_types.py) cost start-up to create: the
    modules that return them import them under TYPE_CHECKING only, so no command loads them."""
    modules = loaded_modules(*args, state=populated, tmp=tmp_path)
    assert "sessiontool.runs.submit" in modules or "sessiontool.operations.manage" in modules
    assert "sessiontool.runs.result_types" not in modules
    assert "sessiontool.flow.result_types" not in modules


def test_probe_sees_json5_when_the_config_needs_it(state: Path, tmp_path: Path) -> None:
    """The control: JSON5 beyond the common extras (a hex number) does load json5, so the probe
    is not blind; comments, unquoted keys and single quotes alone do not (the fast path)."""
    state.mkdir(parents=True)
    cfg = state / "sessiontool.json5"
    cfg.write_text(
        "{ // comment\n session: { mainKey: 'main', }, sessiontool: {maxToolRounds: 0x8} }"
    )
    assert "json5" in imported_modules("list", "--json", state=state, tmp=tmp_path)
    cfg.write_text(
        "{ // comment\n session: { mainKey: 'main', }, sessiontool: {maxToolRounds: 8} }"
    )
    assert "json5" not in imported_modules("list", "--json", state=state, tmp=tmp_path)


def test_only_the_command_run_is_registered(populated: Path, tmp_path: Path) -> None:
    probe_out = tmp_path / "modules.txt"
    env = dict(os.environ, SESSIONTOOL_STATE_DIR=str(populated))
    for args, module in ((("list", "--json"), "read"), (("--json", "paths"), "managecmd")):
        proc = subprocess.run(
            [sys.executable, "-c", MODULES_PROBE, str(probe_out), *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        loaded = {
            m.rsplit(".", 1)[1]
            for m in probe_out.read_text().split()
            if m.startswith("sessiontool.cli.commands.")
        }
        assert loaded <= {module, "completers"}, (args, loaded)


def test_help_still_lists_every_command(tmp_path: Path) -> None:
    from sessiontool.cli.commands import COMMANDS, MODULES

    out = subprocess.run(
        [sys.executable, "-m", "sessiontool", "--help"], capture_output=True, text=True, timeout=60
    ).stdout
    for name in ("list", "history", "send", "spawn", "agents", "policy", "doctor", "completion"):
        assert f" {name} " in out, name
        assert COMMANDS[name] in MODULES


def test_exit_code_and_output_survive_the_fast_exit(populated: Path) -> None:
    """The process ends with os._exit after flushing: the code and every byte are kept."""
    env = dict(os.environ, SESSIONTOOL_STATE_DIR=str(populated))
    proc = subprocess.run(
        [sys.executable, "-m", "sessiontool", "history", "agent:main:nope", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 3 and json.loads(proc.stdout)["code"] == 3
    assert proc.stderr.startswith("sessiontool: error:")
    proc = subprocess.run(
        [sys.executable, "-m", "sessiontool", "list"], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 0 and len(proc.stdout.splitlines()) == 10


def test_long_listings_stream_the_same_bytes(capfdbinary: pytest.CaptureFixture[bytes]) -> None:
    from sessiontool.cli import render

    rows = [{"key": f"agent:main:s{i}", "n": i, "t": "é\u2028"} for i in range(2 * 1000 + 7)]
    render.emit_json_rows({"count": len(rows)}, "sessions", rows)
    streamed = capfdbinary.readouterr().out
    expected = json.dumps({"count": len(rows), "sessions": rows}, ensure_ascii=False)
    # Line separators and other invisible controls are escaped in JSON output (cli/jsonout.py),
    # streamed or not; the rest stays UTF-8.
    expected = expected.replace("\u2028", "\\u2028")
    assert streamed == expected.replace(", ", ",").replace(": ", ":").encode() + b"\n"
    assert json.loads(streamed)["sessions"] == rows
