"""Terminal tables never wrap a session key (issue 33 item 15): a half key copied is no key.
Where the table is wider than the terminal a key is shortened in the middle with "…" (its
agent and its id stay), a line under the table says so, and piped or --json output has every
key whole."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from tests.helpers import FIXTURE_STATE, run_cli

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _terminal(state: Path, columns: int, *args: str) -> list[str]:
    proc = run_cli(
        "--state-dir", str(state), "--color", "always", *args, env={"COLUMNS": str(columns)}
    )
    assert proc.returncode == 0, proc.stderr
    return [ANSI.sub("", ln).rstrip() for ln in proc.stdout.splitlines()]


def test_list_at_a_narrow_terminal_shortens_keys_in_the_middle(tmp_path: Path) -> None:
    state = tmp_path / "state"
    shutil.copytree(FIXTURE_STATE, state)
    proc = run_cli("--state-dir", str(state), "list", "--all-agents", "--json")
    keys = [r["key"] for r in json.loads(proc.stdout)["sessions"]]
    long_keys = [k for k in keys if len(k) > 30]
    assert long_keys
    lines = _terminal(state, 100, "list", "--all-agents")
    firsts = [ln.split("  ")[0] for ln in lines[1:] if ln and not ln.startswith((" ", "("))]
    assert len(firsts) == len(keys), lines  # one row line per session
    for key, shown in zip(keys, firsts, strict=True):
        assert len(shown) <= max(len(key), 30)
        if shown != key:  # shortened: start and end kept around one "…"
            head, _, tail = shown.partition("…")
            assert key.startswith(head) and key.endswith(tail) and len(head) >= 10, (key, shown)
    assert any("…" in s for s in firsts)
    # No key continues on the next line: continuation lines start with spaces under KEY.
    for ln in lines[1:]:
        if ln.startswith(" "):
            assert ln[: len(firsts[0])].strip() == "", ln
    assert lines[-1] == "(keys shortened with … to fit; --json or piped output has them whole)"
    # Wide enough: every key whole, and no note.
    wide = _terminal(state, 250, "list", "--all-agents")
    assert all(any(ln.startswith(k + " ") for ln in wide) for k in keys)
    assert not any("shortened" in ln for ln in wide)
    # Piped: TSV with whole keys.
    piped = run_cli("--state-dir", str(state), "list", "--all-agents", env={"COLUMNS": "60"})
    assert [ln.split("\t")[0] for ln in piped.stdout.splitlines()] == keys


def test_runs_at_100_columns_cut_each_result_on_its_one_line(state: Path) -> None:
    """`runs` on a 100-column terminal: one line per run, a long result cut at its end with
    "…" (as a key is cut in the middle), never folded word by word; piped and --json, whole."""
    from tests.runhelpers import py_command, runner_config, settle

    shutil.copytree(FIXTURE_STATE, state)
    reply = " ".join(f"word{i}" for i in range(40))  # 40 words, ~280 characters
    runner_config(state, py_command(f"import sys; sys.stdin.read(); print({reply!r})"))
    for key in ("main", "agent:main:dm:alice"):
        proc = run_cli("--state-dir", str(state), "send", key, "go", "--timeout", "60")
        assert proc.returncode == 0, proc.stderr
    settle(state)
    lines = [ln for ln in _terminal(state, 100, "runs") if ln]
    assert lines[0].split() == ["RUN", "KIND", "STEP", "STATUS", "SESSION", "CREATED", "RESULT"]
    assert len(lines) == 3, lines  # the header and one line per run
    for ln in lines[1:]:
        assert len(ln) <= 100 and ln.endswith("…"), ln
        shown = ln[lines[0].index("RESULT") :].removesuffix("…")
        assert reply.startswith(shown) and len(shown) >= 12, ln
    piped = run_cli("--state-dir", str(state), "runs", env={"COLUMNS": "100"})
    assert [ln.split("\t")[-1] for ln in piped.stdout.splitlines()] == [reply, reply]
    rc_json = run_cli("--state-dir", str(state), "runs", "--json", env={"COLUMNS": "100"})
    assert [r["reply"] for r in json.loads(rc_json.stdout)["runs"]] == [reply, reply]
