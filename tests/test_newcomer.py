"""A newcomer's first hour (issue 15): each wrong or rough behaviour found by trying the README
and every command on a fresh state dir, as the real CLI shows it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import run_cli, run_json, write_config
from .runhelpers import py_command, read_store, records, runner_config, sessiontool, wait_until

GROUP = "agent:main:discord:group:42"


# -- the program with no arguments, global options ---------------------------------------------


def test_bare_sessiontool_prints_help_and_exits_0() -> None:
    proc = run_cli()
    assert proc.returncode == 0
    assert "Usage: sessiontool" in proc.stdout and "list" in proc.stdout
    assert proc.stderr == ""


@pytest.mark.slow
def test_global_options_also_work_after_the_command(tmp_path: Path) -> None:
    other = tmp_path / "other"
    rc, data = run_json("--state-dir", str(other), "send", "main", "hi")
    assert rc == 0 and data["reply"] == "echo: hi"
    for args in (
        ["list", "--state-dir", str(other), "-q"],
        ["list", "-q", f"--state-dir={other}"],
        ["list", "--color", "never", "--state-dir", str(other), "-q"],
    ):
        proc = run_cli(*args)
        assert proc.returncode == 0, (args, proc.stderr)
        assert proc.stdout == "main\n", args
    # A message that merely looks like an option after `--` is left alone.
    proc = run_cli("--state-dir", str(other), "send", "main", "--", "--state-dir")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "echo: --state-dir\n"


@pytest.mark.slow
def test_sigterm_exits_143(state: Path, reap_workers: None) -> None:
    runner_config(state, py_command("import sys,time; sys.stdin.read(); time.sleep(20)"))
    proc = sessiontool("send", "main", "slow", "--timeout", "60")
    wait_until(lambda: bool(records(state)))
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=20)
    assert proc.returncode == 143
    for rec in records(state):
        run_cli("abort", rec["runId"])


# -- state dir, --agent, config -------------------------------------------------------------------


def test_state_dir_that_is_a_regular_file(tmp_path: Path) -> None:
    f = tmp_path / "not-a-dir"
    f.write_text("")
    for args in (["list"], ["send", "main", "hi"], ["history", "main"]):
        proc = run_cli("--state-dir", str(f), *args)
        assert proc.returncode == 2, args
        assert proc.stderr.startswith(f"sessiontool: error: state dir {f} is not a directory\n")
    proc = run_cli("--state-dir", str(f), "doctor")
    assert proc.returncode == 1
    assert "state-dir-not-a-directory" in proc.stdout


def test_missing_state_dir_is_an_error_for_reads(tmp_path: Path) -> None:
    typo = tmp_path / ".openclw"
    proc = run_cli("--state-dir", str(typo), "list")
    assert proc.returncode == 3
    assert f"state dir {typo} does not exist" in proc.stderr
    assert not typo.exists()
    proc = run_cli("--state-dir", str(typo), "doctor")
    assert proc.returncode == 2 and "missing-state-dir" in proc.stdout
    assert not typo.exists()


def test_unknown_agent_is_an_error_for_reads(state: Path) -> None:
    assert run_cli("send", "main", "hi").returncode == 0
    proc = run_cli("--agent", "mian", "list")
    assert proc.returncode == 3
    assert "unknown agent 'mian'" in proc.stderr and "main" in proc.stderr
    assert run_cli("--agent", "main", "list", "-q").stdout == "main\n"
    write_config(state, {"agents": {"list": [{"id": "main"}, {"id": "ops"}]}})
    proc = run_cli("--agent", "ops", "list")  # configured, no sessions yet: fine
    assert proc.returncode == 0, proc.stderr


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


# -- colour -----------------------------------------------------------------------------------------


def test_color_always_colours_piped_output(state: Path) -> None:
    assert run_cli("send", "main", "hi").returncode == 0
    proc = run_cli("--color", "always", "history", "main")
    assert "\x1b[" in proc.stdout
    proc = run_cli("list", "--color", "always")
    assert "\x1b[" in proc.stdout and "KEY" in proc.stdout
    # The control: piped without it stays plain.
    assert "\x1b[" not in run_cli("history", "main").stdout


# -- labels, typos ---------------------------------------------------------------------------------


def test_spawn_label_in_use_is_refused(state: Path, reap_workers: None) -> None:
    proc = run_cli("spawn", "research X", "--label", "research", "-q")
    assert proc.returncode == 0
    run_id = proc.stdout.strip()
    assert "\t" not in run_id and len(run_id) == 36  # -q: the run id only
    holder = next(k for k, e in read_store(state).items() if e.get("label") == "research")
    before = read_store(state)
    proc = run_cli("spawn", "again", "--label", "research")
    assert proc.returncode == 2
    assert f"label already in use: research (by {holder})" in proc.stderr
    assert set(read_store(state)) == set(before)
    rc, data = run_json("history", "--label", "research")
    assert rc == 0 and data["sessionKey"] == holder


def test_send_to_a_new_key_says_it_created_it(state: Path) -> None:
    assert run_cli("send", "main", "hi").stderr == ""  # the main session always exists
    proc = run_cli("send", "mian", "hello")
    assert proc.returncode == 0
    assert proc.stdout == "echo: hello\n"
    assert proc.stderr == "created session agent:main:mian\n"
    assert run_cli("send", "mian", "again").stderr == ""  # it exists now
    proc = run_cli("send", "other", "x", "-q")
    assert proc.returncode == 0 and proc.stderr == ""
    proc = run_cli("send", "nosuch", "x", "--no-create")
    assert proc.returncode == 3
    assert "Session not found: nosuch" in proc.stderr
    assert "agent:main:nosuch" not in read_store(state)
    assert not [r for r in records(state) if r.get("sessionKey") == "agent:main:nosuch"]


# -- Ctrl-C -----------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("as_json", [False, True])
def test_ctrl_c_during_send_names_the_run(state: Path, reap_workers: None, as_json: bool) -> None:
    runner_config(state, py_command("import sys,time; sys.stdin.read(); time.sleep(20)"))
    proc = sessiontool("send", "main", "slow", "--timeout", "60", *(["--json"] if as_json else []))
    wait_until(lambda: bool(records(state)))
    run_id = records(state)[0]["runId"]
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 130
    assert f"sessiontool wait {run_id}" in err
    if as_json:
        data = json.loads(out)
        assert data["runId"] == run_id and data["status"] == "interrupted"
        assert data["code"] == 130
    else:
        assert out == ""
    assert run_cli("abort", run_id[:8]).returncode == 0


def test_failed_run_shows_its_error_in_history(state: Path) -> None:
    runner_config(
        state, py_command("import sys; sys.stdin.read(); sys.stderr.write('model down'); exit(3)")
    )
    proc = run_cli("send", "main", "hi")
    assert proc.returncode == 1
    text = run_cli("history", "main").stdout
    assert "assistant:" in text
    assert "[error: " in text and "model down" in text
    md = run_cli("history", "main", "--format", "markdown").stdout
    assert "model down" in md and "_(empty)_" not in md


# -- list, durations, sweep, completion ----------------------------------------------------------


def test_list_message_limit_in_text_mode(state: Path) -> None:
    assert run_cli("send", "main", "first words").returncode == 0
    proc = run_cli("list", "--message-limit", "2", "--color", "always")
    assert proc.returncode == 0
    assert "first words" in proc.stdout and "echo: first words" in proc.stdout
    proc = run_cli("list", "--message-limit", "2")  # piped: TSV cannot hold them
    assert proc.returncode == 2 and "--json" in proc.stderr


@pytest.mark.slow
def test_compound_durations(state: Path) -> None:
    rc, data = run_json("send", "main", "x", "--timeout", "1m30s")
    assert rc == 0 and data["status"] == "ok"
    for good in ("1h30m", "2d 4h", "1m30s"):
        assert run_cli("prune", "--older-than", good, "--dry-run").returncode == 0, good
    for bad in ("1h30", "h30m", "30x"):
        proc = run_cli("prune", "--older-than", bad, "--dry-run")
        assert proc.returncode == 2, bad
        assert "1h30m" in proc.stderr


@pytest.mark.slow
def test_prune_quiet_and_dry_run_wording(state: Path) -> None:
    assert run_cli("send", "main", "x").returncode == 0
    proc = run_cli("prune", "--older-than", "0", "--dry-run")
    assert "would delete 1 run record(s)" in proc.stdout and "dry run" in proc.stdout
    proc = run_cli("prune", "--older-than", "0", "-q")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    assert run_cli("runs", "-q").stdout == ""


def complete(line: str, cword: int) -> list[str]:
    env = dict(os.environ, _SESSIONTOOL_COMPLETE="complete_bash", COMP_WORDS=line)
    env["COMP_CWORD"] = str(cword)
    out = subprocess.run(
        [sys.executable, "-m", "sessiontool"], env=env, capture_output=True, text=True
    ).stdout
    return out.split()


@pytest.mark.slow
def test_completion_offers_main_once_and_option_values(state: Path) -> None:
    assert run_cli("send", "main", "x").returncode == 0
    assert run_cli("send", GROUP, "x").returncode == 0
    keys = complete("sessiontool history ", 2)
    assert keys.count("main") == 1 and "agent:main:main" not in keys
    assert GROUP in keys
    assert complete("sessiontool list --kinds g", 3) == ["group"]
    assert complete("sessiontool history main --format j", 4) == ["json", "jsonl"]
    assert sorted(complete("sessiontool --color a", 2)) == ["always", "auto"]
    assert complete("sessiontool spawn x --cleanup ", 4) == ["keep", "delete"]
    assert complete("sessiontool policy main ", 3) == ["allow", "deny", "inherit", "on", "off"]


@pytest.mark.slow
def test_announce_after_cleanup_delete_names_the_archive(state: Path, reap_workers: None) -> None:
    rc, data = run_json("spawn", "do it", "--cleanup", "delete")
    assert rc == 0
    rc, done = run_json("wait", data["runId"], "--timeout", "30")
    assert rc == 0
    sdir = state / "agents" / "main" / "sessions"

    def announced() -> str | None:
        rc, hist = run_json("history", "main")
        texts = [
            b.get("text", "")
            for m in (hist or {}).get("messages", [])
            for b in (m.get("content") if isinstance(m.get("content"), list) else [])
        ]
        return next((t for t in texts if "Stats:" in t), None)

    wait_until(lambda: announced() is not None and list(sdir.glob("*.deleted.*")) != [])
    text = announced()
    assert text is not None
    archived = next(sdir.glob("*.deleted.*"))
    stem = archived.name.split(".deleted.")[0]
    assert f"{stem}.deleted.<time> (archived: --cleanup delete)" in text
    assert not (sdir / stem).exists()


@pytest.mark.slow
def test_history_follow_keeps_one_style(state: Path) -> None:
    """The terminal view (forced with --color always) is kept for messages that arrive while
    following, instead of switching to the plain `[time] role:` lines mid-stream."""
    assert run_cli("send", "main", "before").returncode == 0
    proc = sessiontool("--color", "always", "history", "main", "--follow")
    try:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        os.set_blocking(fd, False)  # raw reads: a text-mode read of an empty pipe raises
        time.sleep(1.0)
        assert run_cli("send", "main", "after").returncode == 0
        raw, out = b"", ""
        deadline = time.monotonic() + 20
        while "echo: after" not in out and time.monotonic() < deadline:
            time.sleep(0.1)
            try:
                raw += os.read(fd, 1 << 16)
            except BlockingIOError:
                continue
            out = raw.decode("utf-8", "replace")
    finally:
        proc.terminate()
        proc.communicate(timeout=10)
    assert "echo: after" in out
    tail = out[out.index("echo: before") :]
    assert "] user:" not in tail and "] assistant:" not in tail  # never the plain style
    assert out.count("\x1b[1;36muser") == 2  # both user turns in the same coloured view
    assert "\x1b[1;32massistant" in tail
