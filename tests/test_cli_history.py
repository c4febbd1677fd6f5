"""`sessiontool history` end to end, against a copy of the real Clawdbot state and compared with
the real sessions_history results (message lists, tool-result filtering, envelope stripping)."""

from __future__ import annotations

import copy
import functools
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import run_cli, run_json

from .runhelpers import py_command, runner_config, sessiontool
from .test_fixtures import EXPECTED, copy_state, expected, key_file_part, main_store

# Every key of the main store (including the legacy bare one) and `main`.
HISTORY_KEYS = [*main_store().keys(), "main"]
WHATSAPP_ID = "ed5f1813-5bfc-4949-8877-9b52151c0848"


@pytest.fixture(scope="module")
def fx_state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One copy of the fixture state for the module: these tests only read it."""
    return copy_state(tmp_path_factory.mktemp("fixture") / "state")


def hist(state: Path, *args: str, agent: str | None = None) -> dict[str, Any]:
    """Run `history --json` once per distinct command line (the module's state is read-only)."""
    return copy.deepcopy(_hist(state, args, agent))


@functools.cache
def _hist(state: Path, args: tuple[str, ...], agent: str | None) -> dict[str, Any]:
    pre = ("--agent", agent) if agent else ()
    rc, data = run_json("--state-dir", str(state), *pre, "history", *args)
    assert rc == 0, data
    return data  # type: ignore[no-any-return]


def _expected_name(key: str, tools: bool) -> str:
    return f"sessions_history.{'tools.' if tools else ''}{key_file_part(key)}"


def test_every_key_has_an_expected_file() -> None:
    for key in HISTORY_KEYS:
        for tools in (False, True):
            assert (EXPECTED / f"{_expected_name(key, tools)}.json").is_file(), key


@pytest.mark.parametrize("tools", [False, True], ids=["no-tools", "tools"])
@pytest.mark.parametrize("key", HISTORY_KEYS)
def test_history_matches_the_real_tool(fx_state: Path, key: str, tools: bool) -> None:
    real = expected(_expected_name(key, tools))
    got = hist(fx_state, key, *(["--include-tools"] if tools else []))
    assert got["messages"] == real["messages"]
    sid = main_store()[key if key != "main" else "agent:main:main"]["sessionId"]
    assert got["sessionId"] == sid
    # Display form: the main key shows as `main`, every other key in full.
    if key in ("main", "agent:main:main"):
        assert got["sessionKey"] == "main"
    else:
        assert got["sessionKey"] == (key if key.startswith("agent:") else f"agent:main:{key}")


def test_without_tools_drops_tool_results_but_keeps_tool_calls(fx_state: Path) -> None:
    plain = hist(fx_state, "main")["messages"]
    full = hist(fx_state, "main", "--include-tools")["messages"]
    results = [m for m in full if m["role"] == "toolResult"]
    assert results, "the fixture's main session has tool results"
    assert all(m["role"] != "toolResult" for m in plain)
    assert plain == [m for m in full if m["role"] != "toolResult"]
    call_only = [
        m
        for m in plain
        if m["role"] == "assistant"
        and m["content"]
        and all(b.get("type") == "toolCall" for b in m["content"])
    ]
    assert call_only, "assistant messages made only of tool calls stay"
    narrated = [
        m
        for m in plain
        if m["role"] == "assistant"
        and {b.get("type") for b in m["content"]} == {"text", "toolCall"}
    ]
    assert narrated, "a message with text and a tool call stays whole"


def test_message_id_line_is_stripped_and_raw_keeps_it(fx_state: Path) -> None:
    key = "agent:main:discord:channel:987"
    users = [m for m in hist(fx_state, key)["messages"] if m["role"] == "user"]
    assert users[-1]["content"][0]["text"] == "Posting via webchat into the channel"
    raw_users = [m for m in hist(fx_state, key, "--raw")["messages"] if m["role"] == "user"]
    assert "[message_id: dev-chat-send-7]" in raw_users[-1]["content"][0]["text"]
    # The marker inside an assistant reply is not a line of its own and stays.
    last = hist(fx_state, key)["messages"][-1]
    assert last["content"][0]["text"].endswith("[message_id: dev-chat-s")


def test_injected_assistant_note_is_kept(fx_state: Path) -> None:
    msgs = hist(fx_state, "agent:main:whatsapp:group:1203@g.us")["messages"]
    assert [m.get("stopReason") for m in msgs if m["role"] == "assistant"][-1] == "injected"


def test_history_by_session_id(fx_state: Path) -> None:
    real = expected("sessions_history.by_sessionId")
    got = hist(fx_state, WHATSAPP_ID)
    assert got["sessionKey"] == real["sessionKey"] == "agent:main:whatsapp:group:1203@g.us"
    assert got["messages"] == real["messages"]


def test_history_by_non_uuid_session_id(tmp_path: Path) -> None:
    """A real id like `dev-orphan-42` that is not a key resolves as a sessionId."""
    state = copy_state(tmp_path / "state")
    store = state / "agents" / "main" / "sessions" / "sessions.json"
    data = json.loads(store.read_text())
    data["agent:main:orphan"] = {"sessionId": "dev-orphan-42", "updatedAt": 1}
    store.write_text(json.dumps(data))
    got = hist(state, "dev-orphan-42")
    assert got["sessionKey"] == "agent:main:orphan"
    assert got["messages"] and got["messages"][0]["role"] == "user"


def test_history_via_bare_key_uses_the_newer_entry(fx_state: Path) -> None:
    real = expected("sessions_history.hook_bare-one")
    got = hist(fx_state, "hook:bare-one")
    assert got["messages"] == real["messages"]
    assert got["sessionKey"] == "agent:main:hook:bare-one"
    assert got == hist(fx_state, "agent:main:hook:bare-one")


def test_other_agent_session_without_transcript(fx_state: Path) -> None:
    real = expected("sessions_history.as_research.agent_research_wipe-me")
    got = hist(fx_state, "agent:research:wipe-me", agent="research")
    assert got["messages"] == real["messages"] == []
    assert got["sessionId"] == "78db689b-0357-483d-a4a6-9d3fcaa84740"
    # The operator of agent main reaches it too: operators have no agent-to-agent limits.
    assert hist(fx_state, "agent:research:wipe-me")["messages"] == []


@pytest.mark.parametrize("tools", [False, True], ids=["no-tools", "tools"])
def test_research_main_as_research(fx_state: Path, tools: bool) -> None:
    real = expected(f"sessions_history.as_research.{'tools.' if tools else ''}agent_research_main")
    got = hist(fx_state, "main", *(["--include-tools"] if tools else []), agent="research")
    assert got["sessionKey"] == "main"
    assert got["messages"] == real["messages"]
    by_full_key = hist(fx_state, "agent:research:main", *(["--include-tools"] if tools else []))
    assert by_full_key["messages"] == real["messages"]


@pytest.mark.parametrize("key", ["agent:main:nope-not-here", "agent:main:scratch-pad", "nope"])
def test_unknown_key_is_exit_3(fx_state: Path, key: str) -> None:
    # Divergence: the real tool returns an empty list (sessions_history.missing / .deleted).
    assert expected("sessions_history.missing")["messages"] == []
    proc = run_cli("--state-dir", str(fx_state), "history", key)
    assert proc.returncode == 3
    assert proc.stdout == ""
    assert proc.stderr.startswith(f"sessiontool: error: Session not found: {key}")
    rc, data = run_json("--state-dir", str(fx_state), "history", key)
    assert rc == 3
    assert data["status"] == "error" and data["code"] == 3
    assert "Session not found" in data["error"]


def test_unknown_uuid_is_exit_3(fx_state: Path) -> None:
    proc = run_cli("--state-dir", str(fx_state), "history", "00000000-0000-4000-8000-000000000000")
    assert proc.returncode == 3
    assert "Session not found" in proc.stderr


def test_orphan_transcript_without_entry_is_not_found(fx_state: Path) -> None:
    assert (fx_state / "agents" / "main" / "sessions" / "dev-orphan-42.jsonl").is_file()
    assert run_cli("--state-dir", str(fx_state), "history", "dev-orphan-42").returncode == 3


def test_limit_counts_after_tool_filter(fx_state: Path) -> None:
    """Divergence: the real `limit 5` on alice gave 4 (it counted a tool result)."""
    real = expected("sessions_history.limit5.alice")
    assert len(real["messages"]) == 4
    full = hist(fx_state, "agent:main:dm:alice")["messages"]
    got = hist(fx_state, "agent:main:dm:alice", "--limit", "5")["messages"]
    assert len(got) == 5
    assert got == full[-5:]
    assert got[1:] == real["messages"]


def test_limit_with_tools(fx_state: Path) -> None:
    real = expected("sessions_history.limit4.tools.main")
    got = hist(fx_state, "main", "--limit", "4", "--include-tools")["messages"]
    assert got == real["messages"]
    full = hist(fx_state, "main", "--include-tools")["messages"]
    assert got == full[-4:]
    # A window that starts on a tool result: with tools, tool results count toward the limit.
    last_result = max(i for i, m in enumerate(full) if m["role"] == "toolResult")
    n = len(full) - last_result
    window = hist(fx_state, "main", "--limit", str(n), "--include-tools")["messages"]
    assert window[0]["role"] == "toolResult"
    assert window == full[-n:]


def test_limit_is_clamped_to_1000_and_must_be_positive(fx_state: Path) -> None:
    full = hist(fx_state, "main", "--include-tools")["messages"]
    assert hist(fx_state, "main", "--include-tools", "--limit", "5000")["messages"] == full
    rc, data = run_json("--state-dir", str(fx_state), "history", "main", "--limit", "0")
    assert rc == 2 and data["code"] == 2


def test_since_filters_messages(fx_state: Path) -> None:
    full = hist(fx_state, "agent:main:dm:alice")["messages"]
    cut = full[-3]["timestamp"]
    from datetime import UTC, datetime

    iso = datetime.fromtimestamp(cut / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    got = hist(fx_state, "agent:main:dm:alice", "--since", iso)["messages"]
    assert got == [m for m in full if m["timestamp"] >= cut]
    assert 3 <= len(got) < len(full)
    # A duration is measured back from the pinned clock.
    rc, data = run_json(
        "--state-dir",
        str(fx_state),
        "history",
        "agent:main:dm:alice",
        "--since",
        "1s",
        env={"SESSIONTOOL_NOW_MS": str(full[-1]["timestamp"] + 500)},
    )
    assert rc == 0 and data["messages"] == [
        m for m in full if m["timestamp"] >= full[-1]["timestamp"] - 500
    ]


def test_history_by_label(fx_state: Path) -> None:
    got = hist(fx_state, "--label", "tg-lounge")
    assert got["sessionKey"] == "agent:main:telegram:group:-100777"
    proc = run_cli("--state-dir", str(fx_state), "history", "--label", "no-such-label")
    assert proc.returncode == 3


def test_jsonl_format_is_one_message_per_line(fx_state: Path) -> None:
    proc = run_cli("--state-dir", str(fx_state), "history", "main", "--format", "jsonl")
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    assert [json.loads(line) for line in lines] == hist(fx_state, "main")["messages"]


def test_text_and_markdown_and_output_file(fx_state: Path, tmp_path: Path) -> None:
    text = run_cli("--state-dir", str(fx_state), "history", "agent:main:discord:channel:987")
    assert text.returncode == 0
    assert "Posting via webchat into the channel" in text.stdout
    assert "dev-chat-send-7" not in text.stdout
    md = run_cli("--state-dir", str(fx_state), "history", "main", "--format", "markdown")
    assert md.stdout.startswith("# Session main")
    assert md.stdout.count("\n## ") == len(hist(fx_state, "main")["messages"])
    out = tmp_path / "out.json"
    proc = run_cli("--state-dir", str(fx_state), "history", "main", "--json", "-o", str(out))
    assert proc.returncode == 0 and proc.stdout == ""
    assert json.loads(out.read_text()) == hist(fx_state, "main")


def test_since_reads_back_only_to_the_first_older_message(tmp_path: Path) -> None:
    """An unreadable line before the first older message is never reached (no warning), and
    a message older than --since ends the listing even if later ones are out of order."""
    state = tmp_path / "state"
    d = state / "agents" / "main" / "sessions"
    d.mkdir(parents=True)
    (d / "sessions.json").write_text(
        json.dumps({"agent:main:t": {"sessionId": "t1", "updatedAt": 1}})
    )
    now = 1_795_292_567_264

    def line(role: str, text: str, ts: int) -> str:
        msg = {"role": role, "content": [{"type": "text", "text": text}], "timestamp": ts}
        return json.dumps({"type": "message", "message": msg}) + "\n"

    (d / "t1.jsonl").write_text(
        "garbage line\n"
        + line("user", "ancient", now - 86_400_000 * 30)
        + line("user", "recent-1", now - 60_000)
        + line("toolResult", "tool out", now - 50_000)
        + line("assistant", "recent-2", now - 40_000)
    )
    env = {"SESSIONTOOL_NOW_MS": str(now)}
    proc = run_cli(
        "--state-dir", str(state), "history", "agent:main:t", "--since", "1h", "--json", env=env
    )
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    texts = [m["content"][0]["text"] for m in json.loads(proc.stdout)["messages"]]
    assert texts == ["recent-1", "recent-2"]
    proc = run_cli(
        "--state-dir",
        str(state),
        "history",
        "agent:main:t",
        "--since",
        "1h",
        "--include-tools",
        "--json",
        env=env,
    )
    texts = [m["content"][0]["text"] for m in json.loads(proc.stdout)["messages"]]
    assert texts == ["recent-1", "tool out", "recent-2"]
    # Without --since the whole file is read, and the bad line is reported.
    proc = run_cli("--state-dir", str(state), "history", "agent:main:t", "--json", env=env)
    assert "skipped 1 unreadable line" in proc.stderr


def test_output_dash_is_stdout(state: Path, tmp_path: Path) -> None:
    assert run_cli("send", "main", "hello").returncode == 0
    proc = run_cli("history", "main", "-o", "-", "--format", "markdown", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "echo: hello" in proc.stdout
    assert not (tmp_path / "-").exists()


def test_empty_results_one_rule_a_line_on_a_terminal_nothing_piped(state: Path) -> None:
    """`--color always` renders for a terminal (as `| less -R` wants): the empty line appears;
    piped, an empty history, search and run list print nothing at all."""
    d = state / "agents" / "main" / "sessions"
    d.mkdir(parents=True)
    (d / "sessions.json").write_text(json.dumps({"agent:main:main": {"sessionId": "s1"}}))
    (d / "s1.jsonl").write_text(
        json.dumps(
            {"type": "session", "version": 3, "id": "s1", "timestamp": "2026-01-01T00:00:00Z"}
        )
        + "\n"
    )
    for args in (["history", "main"], ["search", "nothing-here"], ["runs"]):
        piped = run_cli(*args)
        assert piped.returncode == 0, piped.stderr
        assert (piped.stdout, piped.stderr) == ("", ""), args
        shown = run_cli("--color", "always", *args)
        assert shown.returncode == 0 and shown.stdout == ""
        assert shown.stderr.startswith("No "), (args, shown.stderr)


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
