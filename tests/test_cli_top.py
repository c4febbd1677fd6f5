"""`sessiontool top` as a program: it refuses a pipe (exit 2, pointing at `list`/`runs --json`),
names the pip command when Textual is missing, is known to completion and the man page, and in
tmux, as a person runs it, shows the sessions, filters, follows a transcript and leaves with 0
and the terminal restored."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import FIXTURE_STATE, ROOT, run_cli

from .tmuxpane import cpu_seconds, launched_pid, measured, measurement, pane


def test_piped_stdout_is_refused_with_the_commands_for_scripts(state: Path) -> None:
    pytest.importorskip("textual")
    shutil.copytree(FIXTURE_STATE, state)
    proc = run_cli("top")
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("sessiontool: error: top is a full-screen")
    assert "sessiontool list --json" in lines[0] and "sessiontool runs --json" in lines[0]


def test_missing_textual_names_the_install_command(state: Path) -> None:
    code = (
        "import sys; sys.modules['textual'] = None; "
        "from sessiontool.cli.main import main; main(['top'])"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert "needs Textual" in lines[0] and "pip install '.[tui]'" in lines[0]


def test_a_bad_budget_is_a_usage_error() -> None:
    proc = run_cli("top", "--budget", "-1")
    assert proc.returncode == 2 and "--budget" in proc.stderr


def test_completion_and_man_page_know_top() -> None:
    env = dict(
        os.environ,
        _SESSIONTOOL_COMPLETE="complete_bash",
        COMP_WORDS="sessiontool to",
        COMP_CWORD="1",
    )
    proc = subprocess.run(
        [sys.executable, "-m", "sessiontool"], capture_output=True, text=True, env=env, timeout=60
    )
    assert "top" in proc.stdout.split()
    env.update(COMP_WORDS="sessiontool top --", COMP_CWORD="2")
    proc = subprocess.run(
        [sys.executable, "-m", "sessiontool"], capture_output=True, text=True, env=env, timeout=60
    )
    assert {"--budget", "--all-agents"} <= set(proc.stdout.split())
    man = (ROOT / "man" / "sessiontool.1").read_text()
    assert '.SS "top"' in man and "\\fB\\-\\-budget\\fR" in man


# -- in tmux, as a person ----------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_top_in_tmux_as_a_person_runs_it(state: Path, tmp_path: Path) -> None:
    pytest.importorskip("textual")
    shutil.copytree(FIXTURE_STATE, state)
    rc_file = tmp_path / "rc"
    argv = [sys.executable, "-m", "sessiontool", "--state-dir", str(state), "top"]
    after = f"echo top-exited=$? > {shlex.quote(str(rc_file))}; echo AFTER-TOP"
    with pane(argv, dict(os.environ), after=after) as p:
        screen = p.wait_for("agent:main:dm:alice")
        assert "Sessions (9)" in screen and "store: jsonl" in screen
        assert "Runs" in screen and "Deliveries" in screen
        # One key press at a time, as a person types (a burst is one paste).
        p.keys("/")
        p.wait_for("filter sessions")
        p.keys("tg-lounge")
        p.wait_for("Sessions (1 of 9 matching /tg-lounge)")
        p.wait_gone("agent:main:dm:alice")  # the table's rows may be drawn a frame after
        p.keys("Enter")  # keep the filter
        time.sleep(1.0)  # a person's pause: a key sent at once would still go to the filter
        p.keys("Enter")  # the one row left: its transcript
        screen = p.wait_for("following (Esc: back)")
        assert "agent:main:telegram:group:-100777 — following" in screen
        p.keys("Escape")
        p.wait_for("Sessions (1 of 9")
        p.keys("q")
        screen = p.wait_for("AFTER-TOP")
        assert rc_file.read_text().strip() == "top-exited=0"
        assert "Sessions (" not in screen  # the alternate screen is gone: the shell is back


# -- bounded, answering, escaped (issue 42) ------------------------------------------------------

tmux_only = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


def _top(state: Path, out: Path) -> list[str]:
    return measured([sys.executable, "-m", "sessiontool", "--state-dir", str(state), "top"], out)


@tmux_only
def test_a_10_mb_message_keeps_top_small_and_answering(state: Path, tmp_path: Path) -> None:
    """A session whose transcript holds one 10 MB message (100,000 lines): Escape pressed as
    its transcript opens is answered, the message shows folded ("99,980 more lines"), q leaves
    with 0, and top's peak RSS stays small (it was 1.34 GB). Deadlines are scaled by how long
    top took to start on this machine."""
    pytest.importorskip("textual")
    from tests.runhelpers import write_store, write_transcript

    big = "".join(f"line {i:06d} " + "x" * 88 + "\n" for i in range(100_000))
    write_store(
        state, {"agent:main:main": {"sessionId": "big", "updatedAt": int(time.time() * 1e3)}}
    )
    write_transcript(state, "big", [("user", big, 1), ("assistant", "short answer", 2)])
    out = tmp_path / "top.json"
    started = time.monotonic()
    with pane(_top(state, out), dict(os.environ), size=(120, 40)) as p:
        p.wait_for("Sessions (1)", timeout=120)
        patience = max(10.0, 5 * (time.monotonic() - started))
        p.keys("Enter")
        p.wait_for("following (Esc: back)", timeout=patience)
        p.keys("Escape")  # at once, as the 10 MB are read: the screen answers meanwhile
        p.wait_gone("following (Esc: back)", timeout=patience)
        p.keys("Enter")
        screen = p.wait_for("short answer", timeout=patience)
        assert "… 99,980 more lines (`sessiontool history` shows the whole message)" in screen
        p.keys("q")  # back to the panes
        p.wait_gone("following (Esc: back)", timeout=patience)
        p.keys("q")
        result = measurement(out, patience)
    assert result["rc"] == 0
    assert result["maxrss_kb"] < 200 * 1024, result  # the message is 10 MB; Textual ~50 MB


def _entry(i: int, now: int) -> dict[str, object]:
    """A store entry shaped as OpenClaw writes one (its fields, a delivery context, an origin,
    a skills list), smaller than a real one (~5.7 KB)."""
    return {
        "sessionId": f"s{i:06d}",
        "updatedAt": now - i,
        "chatType": "direct",
        "model": "gpt-5.1",
        "totalTokens": i,
        "deliveryContext": {"channel": "telegram", "to": f"user:{i}", "accountId": "default"},
        "origin": {"provider": "telegram", "surface": "telegram", "from": f"telegram:{i}"},
        "skills": [{"name": f"skill-{j}", "path": f"/skills/{j}/SKILL.md"} for j in range(6)],
    }


@tmux_only
@pytest.mark.slow
def test_q_leaves_at_once_with_100000_sessions(state: Path, tmp_path: Path) -> None:
    """100,000 sessions: after q the process is gone at the cost of a fraction of what showing
    them cost (it stayed, 644 MB, tearing the interpreter down beside top's threads)."""
    pytest.importorskip("textual")
    from tests.runhelpers import write_store

    now = int(time.time() * 1000)
    write_store(state, {f"agent:main:dm:u{i:06d}": _entry(i, now) for i in range(100_000)})
    out = tmp_path / "top.json"
    started = time.monotonic()
    with pane(_top(state, out), dict(os.environ), size=(120, 40)) as p:
        p.wait_for("Sessions (100000,", timeout=600)
        up = time.monotonic() - started
        pid = launched_pid(out)
        shown = cpu_seconds(pid)
        p.keys("q")
        result = measurement(out, max(10.0, up))
    assert result["rc"] == 0
    leaving = result["cpu_s"] - shown
    assert leaving < 0.2 * shown, (leaving, shown)


@tmux_only
def test_bidi_controls_never_reach_the_terminal(state: Path, tmp_path: Path) -> None:
    """Keys, labels, displayNames, messages and run replies holding U+202E, U+2066, U+200F
    (and a C1 CSI): every byte top writes to the terminal is free of them; the screen shows
    them escaped as the CLI does (`\\u202e`)."""
    pytest.importorskip("textual")
    from tests.runhelpers import py_command, runner_config, settle, write_store, write_transcript

    hostile = "\u202eevil\u2066iso\u200fmark\u009b"
    now = int(time.time() * 1000)
    write_store(
        state,
        {
            f"agent:main:dm:x{hostile}": {"sessionId": "s-key", "updatedAt": now, "label": hostile},
            "agent:main:dm:plain": {
                "sessionId": "s-plain",
                "updatedAt": now - 1,
                "displayName": hostile,
            },
        },
    )
    write_transcript(state, "s-plain", [("user", f"hi {hostile}", 1), ("assistant", hostile, 2)])
    runner_config(state, py_command(f"import sys; sys.stdin.read(); print({hostile!r})"))
    proc = run_cli(
        "--state-dir", str(state), "send", "agent:main:dm:plain", "go", "--timeout", "60"
    )
    assert proc.returncode == 0, proc.stderr
    settle(state)
    raw = tmp_path / "terminal.raw"
    out = tmp_path / "top.json"
    with pane(_top(state, out), dict(os.environ), size=(160, 40), raw=raw) as p:
        screen = p.wait_for("Sessions (2)", timeout=120)
        p.wait_for("runs: 0 running")
        assert "\\u202eevil\\u2066iso\\u200fmark\\x9b" in p.screen()
        p.keys("/")
        p.wait_for("filter sessions")
        p.keys("plain")
        p.wait_for("Sessions (1 of 2 matching /plain)")
        p.keys("Enter")  # keep the filter
        time.sleep(1.0)  # a person's pause: a key sent at once would still go to the filter
        p.keys("Enter")
        screen = p.wait_for("assistant:")
        assert "hi \\u202eevil" in screen
        p.keys("Escape")
        p.wait_gone("following (Esc: back)")
        p.keys("q")
        assert measurement(out, 60)["rc"] == 0
    written = raw.read_bytes().decode("utf-8", "replace")
    assert "evil" in written  # the pane's bytes were caught
    for ch in "\u202e\u2066\u200f\u009b":
        assert ch not in written, f"U+{ord(ch):04X} reached the terminal"
