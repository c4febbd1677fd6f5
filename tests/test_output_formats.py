"""cli/output.py, the one output path: which format a command's result is written in is one
rule for every command (`--json`, `-q`, SESSIONTOOL_OUTPUT_FORMAT, `--fields`, terminal or
pipe), and SESSIONTOOL_OUTPUT_FORMAT picks any row of its table for every command."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import run_cli, run_json

from .test_fixtures import copy_state


def test_one_format_for_every_command(tmp_path: Path) -> None:
    state = copy_state(tmp_path / "state")
    base = ("--state-dir", str(state))
    rc, listing = run_json(*base, "list")
    keys = [r["key"] for r in listing["sessions"]]
    piped = run_cli(*base, "list").stdout  # the rule: TSV into a pipe

    def out(fmt: str, *args: str) -> str:
        proc = run_cli(*base, *args, env={"SESSIONTOOL_OUTPUT_FORMAT": fmt})
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    table = out("table", "list")  # the terminal's table, into a pipe
    assert table.splitlines()[0].split()[:3] == ["KEY", "KIND", "CHANNEL"], table
    assert out("ids", "list").splitlines() == keys
    assert out("tsv", "list") == out("auto", "list") == out("text", "list") == piped
    assert json.loads(out("json", "list")) == listing
    assert json.loads(out("table", "list", "--json")) == listing  # --json still wins
    assert out("ids", "list", "--fields", "key") == out("ids", "list")  # -q's format
    # A result that is no listing has no ids: its text, as piped.
    assert out("ids", "paths") == run_cli(*base, "paths").stdout
    assert json.loads(out("json", "paths")) == run_json(*base, "paths")[1]


def test_html_is_one_table_with_every_cell_escaped(tmp_path: Path) -> None:
    state = copy_state(tmp_path / "state")
    base = ("--state-dir", str(state))
    assert run_cli(*base, "label", "main", "<b>x</b> & 'q'").returncode == 0
    env = {"SESSIONTOOL_OUTPUT_FORMAT": "html"}
    proc = run_cli(*base, "list", "--fields", "key,label", env=env)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[:3] == ["<table>", "<thead><tr><th>key</th><th>label</th></tr>", "</thead>"]
    assert "<tr><td>main</td><td>&lt;b&gt;x&lt;/b&gt; &amp; 'q'</td></tr>" in lines
    assert lines[-1] == "</table>"
    rc, listing = run_json(*base, "list")
    assert len([x for x in lines if x.startswith("<tr><td>")]) == listing["count"]
    # A result without rows writes its lines as the table's rows; only text stays text.
    paths = run_cli(*base, "paths", env=env).stdout
    assert f"<tr><td>state dir</td><td>{state}</td></tr>" in paths.splitlines()


def test_an_unknown_format_is_a_usage_error(tmp_path: Path) -> None:
    """The refusal names the table's rows, whatever they are (a new row welcomed: its name is
    valid as soon as it is in FORMATS; tests/test_tables.py adds one)."""
    from sessiontool.cli.output import FORMATS

    state = copy_state(tmp_path / "state")
    proc = run_cli("--state-dir", str(state), "list", env={"SESSIONTOOL_OUTPUT_FORMAT": "xml"})
    assert proc.returncode == 2 and proc.stdout == ""
    assert {"json", "tsv", "table"} <= set(FORMATS) and "xml" not in FORMATS
    assert f"unknown output format 'xml' (valid: auto, {', '.join(FORMATS)})" in proc.stderr


def test_the_global_flag_picks_the_format_and_wins_over_the_variable(tmp_path: Path) -> None:
    """`--output-format` is a global option (before or after the command); the environment
    variable is only its default (issue 46: a house rule had turned the flag into the variable)."""
    state = copy_state(tmp_path / "state")
    base = ("--state-dir", str(state))
    rc, listing = run_json(*base, "list")
    keys = [r["key"] for r in listing["sessions"]]
    before = run_cli("--output-format", "ids", *base, "list")
    after = run_cli(*base, "list", "--output-format", "ids")
    assert before.stdout.splitlines() == after.stdout.splitlines() == keys
    wins = run_cli(*base, "list", "--output-format=json", env={"SESSIONTOOL_OUTPUT_FORMAT": "ids"})
    assert json.loads(wins.stdout) == listing
    bad = run_cli(*base, "list", "--output-format", "xml")
    assert bad.returncode == 2 and bad.stdout == ""
    assert "unknown output format 'xml'" in bad.stderr


def test_history_is_written_by_the_one_rule_too(tmp_path: Path) -> None:
    """`history` was the one command with its own choice of format (issue 46 item 2): the
    variable and the global flag now pick its format as for every command; its own `--format`
    (asked for on the command line) still wins over both."""
    state = copy_state(tmp_path / "state")
    base = ("--state-dir", str(state))
    rc, want = run_json(*base, "history", "main")
    assert rc == 0 and want["messages"] and want["messageIds"], want
    text = run_cli(*base, "history", "main").stdout
    assert text.startswith("[") and not text.startswith("{"), text[:80]

    def out(fmt: str, *args: str) -> str:
        proc = run_cli(*base, *args, env={"SESSIONTOOL_OUTPUT_FORMAT": fmt})
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    assert json.loads(out("json", "history", "main")) == want
    assert json.loads(run_cli(*base, "--output-format", "json", "history", "main").stdout) == want
    assert json.loads(out("tsv", "--output-format", "json", "history", "main")) == want
    # A format that has no rows of its own for a transcript writes its text, as piped.
    assert out("ids", "history", "main") == out("text", "history", "main") == text
    # --fields under the variable's JSON: only those keys of each message, the rest kept.
    picked = json.loads(out("json", "history", "main", "--fields", "role"))
    assert picked["messages"] == [{"role": m["role"]} for m in want["messages"]]
    assert picked["messageIds"] == want["messageIds"]
    # history's own --format, asked for, wins over the variable.
    assert out("json", "history", "main", "--format", "text") == text
    md = out("json", "history", "main", "--format", "markdown")
    assert md.startswith("# Session main\n"), md[:80]
    # -o FILE writes what the rule picked (a file is no terminal).
    dest = tmp_path / "main.json"
    assert out("json", "history", "main", "-o", str(dest)) == ""
    assert json.loads(dest.read_text()) == want


def test_history_follow_writes_json_lines_under_the_json_format(tmp_path: Path) -> None:
    """`history --follow` with the variable's JSON: a JSON document cannot grow, so the page
    and then each message that arrives are JSON lines, through the same writer (`output.stream`),
    `--fields` applied to both."""
    import os
    import queue
    import subprocess
    import sys
    import threading

    from tests.helpers import generous

    state = copy_state(tmp_path / "state")
    rc, want = run_json("--state-dir", str(state), "history", "main")
    transcript = state / "agents/main/sessions" / f"{want['sessionId']}.jsonl"
    assert transcript.is_file()
    args = ["--state-dir", str(state), "history", "main", "-f", "--fields", "role,content"]
    env = {**os.environ, "SESSIONTOOL_OUTPUT_FORMAT": "json"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "sessiontool", *args], stdout=subprocess.PIPE, text=True, env=env
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout or ()], daemon=True).start()

    def line() -> dict[str, object]:
        got: dict[str, object] = json.loads(lines.get(timeout=generous(30)))
        return got

    try:
        first = [line() for _ in want["messages"]]
        assert first == [{"role": m["role"], "content": m["content"]} for m in want["messages"]]
        new = {"role": "user", "content": [{"type": "text", "text": "arrived"}], "timestamp": 1}
        entry = {"type": "message", "id": "new1", "parentId": None, "message": new}
        with transcript.open("a") as f:
            f.write(json.dumps(entry) + "\n")
        assert line() == {"role": "user", "content": new["content"]}
    finally:
        proc.terminate()
        proc.communicate(timeout=generous(10))
