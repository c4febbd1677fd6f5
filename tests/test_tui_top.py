"""`top` driven headless by Textual's own pilot (`App.run_test`): the panes show the fixture's
sessions and a running run, a session written meanwhile appears without a key press, and abort,
send, wait and the followed transcript act through the commands' own code on real runs."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("textual", reason="top needs the tui extra (textual)")

from textual.pilot import Pilot  # noqa: E402
from textual.widgets import DataTable, RichLog  # noqa: E402

from sessiontool.clock import now_ms  # noqa: E402
from sessiontool.context import build_context  # noqa: E402
from sessiontool.tui.app import TopApp  # noqa: E402
from sessiontool.tui.model import Options  # noqa: E402
from sessiontool.tui.screens import ConfirmScreen, MessageScreen, TranscriptScreen  # noqa: E402
from tests.helpers import FIXTURE_STATE, generous, run_json  # noqa: E402

from .runhelpers import alive, py_command, records, runner_config, settle  # noqa: E402

pytestmark = pytest.mark.usefixtures("reap_workers")

SIZE = (120, 40)


@pytest.fixture
def fixture_state(state: Path) -> Path:
    shutil.copytree(FIXTURE_STATE, state)
    return state


def make_app(state: Path) -> TopApp:
    return TopApp(build_context(str(state), None, None, None), Options())


def drive(app: TopApp, script: Callable[[Pilot[int]], Awaitable[None]]) -> Any:
    """Run `script` against the app headless; the app's exit value when it left."""

    async def main() -> None:
        async with app.run_test(size=SIZE) as pilot:
            await script(pilot)

    asyncio.run(main())
    return app.return_value


async def until(
    pilot: Pilot[int], cond: Callable[[], object], timeout: float = generous(1.5)
) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {cond}")
        await pilot.pause(0.05)


def keys_of(app: TopApp, name: str) -> list[str]:
    table: DataTable[Any] = app.query_one(f"#{name}", DataTable)
    return [str(k.value) for k in table.rows]


def row(app: TopApp, name: str, key: str) -> list[str]:
    table: DataTable[Any] = app.query_one(f"#{name}", DataTable)
    return [str(c) for c in table.get_row(key)]


def listed_keys(state: Path) -> list[str]:
    rc, out = run_json("list", "--limit", "all", "--state-dir", str(state))
    assert rc == 0
    return [s["key"] for s in out["sessions"]]


def add_session(state: Path, key: str) -> None:
    """Another writer adds a session: sessions.json replaced whole, as every writer does."""
    path = state / "agents" / "main" / "sessions" / "sessions.json"
    store = json.loads(path.read_text())
    store[key] = {"sessionId": "newcomer-0001", "updatedAt": now_ms()}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(store))
    os.replace(tmp, path)


def test_panes_show_the_sessions_live_and_q_leaves_with_0(fixture_state: Path) -> None:
    app = make_app(fixture_state)
    expected = listed_keys(fixture_state)
    assert len(expected) >= 5

    async def script(pilot: Pilot[int]) -> None:
        await until(pilot, lambda: keys_of(app, "sessions"))
        assert keys_of(app, "sessions") == expected  # newest first, as `list` orders them
        assert row(app, "sessions", "agent:main:telegram:group:-100777")[3] == "tg-lounge"
        status = str(app.query_one("#status").render())
        assert "store: jsonl" in status
        add_session(fixture_state, "agent:main:dm:newcomer")
        await until(
            pilot, lambda: "agent:main:dm:newcomer" in keys_of(app, "sessions"), generous(1)
        )
        assert keys_of(app, "sessions")[0] == "agent:main:dm:newcomer"  # the newest
        await pilot.press("slash", *"alice", "enter")
        assert keys_of(app, "sessions") == ["agent:main:dm:alice"]
        await pilot.press("escape")
        assert len(keys_of(app, "sessions")) == len(expected) + 1
        await pilot.press("q")

    assert drive(app, script) == 0
    assert not app.is_running


def _sleeper(state: Path, seconds: float) -> None:
    runner_config(state, py_command(f"import sys,time; sys.stdin.read(); time.sleep({seconds})"))


def test_a_running_run_is_shown_with_its_memory_and_a_aborts_it(fixture_state: Path) -> None:
    _sleeper(fixture_state, 60)
    rc, out = run_json("send", "main", "long job", "--timeout", "0")
    assert rc == 0, out
    run_id = out["runId"]
    app = make_app(fixture_state)

    def agent_pid() -> int | None:
        rec = next((r for r in records(fixture_state) if r["runId"] == run_id), {})
        pid = rec.get("agentPid")
        return pid if isinstance(pid, int) else None

    async def script(pilot: Pilot[int]) -> None:
        await until(pilot, lambda: run_id in keys_of(app, "runs") and agent_pid())
        await until(pilot, lambda: row(app, "runs", run_id)[2] == "running")
        await until(pilot, lambda: row(app, "runs", run_id)[6].endswith("M"))  # its RSS
        assert keys_of(app, "runs")[0] == run_id  # running first
        await pilot.press("tab", "a")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await until(pilot, lambda: row(app, "runs", run_id)[2] == "aborted")
        await pilot.press("q")

    assert drive(app, script) == 0
    rec = next(r for r in records(fixture_state) if r["runId"] == run_id)
    assert rec["status"] == "aborted" and rec["error"] == "aborted by user"
    pid = rec["agentPid"]
    deadline = time.monotonic() + 5
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid)


def test_s_sends_to_the_selected_session_and_shows_the_reply(fixture_state: Path) -> None:
    code = "import sys; print('got ' + sys.stdin.read().strip()[-40:])"
    runner_config(fixture_state, py_command(code))
    app = make_app(fixture_state)

    async def script(pilot: Pilot[int]) -> None:
        await until(pilot, lambda: keys_of(app, "sessions"))
        await pilot.press("slash", *"alice", "enter", "s")
        await pilot.press(*"hellotop", "enter")
        await until(pilot, lambda: isinstance(app.screen, MessageScreen), 30.0)
        screen = app.screen
        assert isinstance(screen, MessageScreen)
        assert "agent:main:dm:alice" in screen.title_text
        assert "got" in screen.body and "hellotop" in screen.body
        await pilot.press("enter", "q")

    assert drive(app, script) == 0
    sends = [r for r in records(fixture_state) if r.get("kind") == "send"]
    assert len(sends) == 1 and sends[0]["sessionKey"] == "agent:main:dm:alice"
    assert sends[0]["message"] == "hellotop" and sends[0]["status"] == "ok"


def test_w_waits_for_the_selected_run(fixture_state: Path) -> None:
    code = "import sys,time; sys.stdin.read(); time.sleep(1.5); print('slow answer')"
    runner_config(fixture_state, py_command(code))
    rc, out = run_json("send", "main", "take your time", "--timeout", "0")
    assert rc == 0, out
    app = make_app(fixture_state)

    async def script(pilot: Pilot[int]) -> None:
        await until(pilot, lambda: out["runId"] in keys_of(app, "runs"))
        await pilot.press("tab", "w")
        await until(pilot, lambda: isinstance(app.screen, MessageScreen), 30.0)
        assert isinstance(app.screen, MessageScreen)
        assert "slow answer" in app.screen.body
        await pilot.press("escape", "q")

    assert drive(app, script) == 0


def test_enter_follows_the_transcript_live(fixture_state: Path) -> None:
    from sessiontool.state.transcript import append_message

    app = make_app(fixture_state)
    sdir = fixture_state / "agents" / "main" / "sessions"
    entry = json.loads((sdir / "sessions.json").read_text())["agent:main:main"]
    rc, out = run_json("history", "main", "--json", "--state-dir", str(fixture_state))
    assert rc == 0 and out["messages"], out
    before = len(out["messages"])  # what the screen shows first, as `history` lists them

    def log_text() -> str:
        return "\n".join(line.text for line in app.screen.query_one(RichLog).lines)

    async def script(pilot: Pilot[int]) -> None:
        await until(pilot, lambda: keys_of(app, "sessions"))
        assert keys_of(app, "sessions")[0] == "main"  # shown as `list` shows it
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, TranscriptScreen))
        screen = app.screen
        assert isinstance(screen, TranscriptScreen)
        await until(pilot, lambda: screen.shown == before)  # the last messages, all drawn
        append_message(
            sdir / f"{entry['sessionId']}.jsonl",
            entry["sessionId"],
            {"role": "user", "content": "a line written while top follows", "timestamp": 1},
        )
        await until(pilot, lambda: screen.shown == before + 1)
        await until(pilot, lambda: "a line written while top follows" in log_text())
        await pilot.press("escape")
        assert screen.stopped.is_set()
        assert not isinstance(app.screen, TranscriptScreen)
        await pilot.press("q")

    assert drive(app, script) == 0


def test_ctrl_c_leaves_with_0(fixture_state: Path) -> None:
    app = make_app(fixture_state)

    async def script(pilot: Pilot[int]) -> None:
        await until(pilot, lambda: keys_of(app, "sessions"))
        await pilot.press("ctrl+c")

    assert drive(app, script) == 0
    assert not app.is_running


def test_color_follows_the_choice_and_no_color(
    fixture_state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--color never` (or NO_COLOR, which conftest sets) makes Textual draw without colour;
    `--color always` draws in colour despite NO_COLOR; the environment is left as it was."""
    from sessiontool.tui.app import make_app as make

    ctx = build_context(str(fixture_state), None, None, None)
    assert os.environ.get("NO_COLOR") == "1"
    assert make(ctx, Options(), colored=True).no_color is False
    assert os.environ.get("NO_COLOR") == "1"
    monkeypatch.delenv("NO_COLOR")
    assert make(ctx, Options(), colored=False).no_color is True
    assert "NO_COLOR" not in os.environ


def test_an_unreadable_store_is_said_in_the_footer_and_the_panes_stay(
    fixture_state: Path,
) -> None:
    app = make_app(fixture_state)
    path = fixture_state / "agents" / "main" / "sessions" / "sessions.json"
    good = path.read_text()

    def status() -> str:
        return str(app.query_one("#status").render())

    async def script(pilot: Pilot[int]) -> None:
        await until(pilot, lambda: keys_of(app, "sessions"))
        shown = keys_of(app, "sessions")
        path.write_text("{ not json")
        await until(pilot, lambda: "error:" in status(), 5.0)
        assert keys_of(app, "sessions") == shown  # what it showed stays
        path.write_text(good)
        await until(pilot, lambda: "error:" not in status(), 5.0)
        assert keys_of(app, "sessions") == shown
        await pilot.press("q")

    assert drive(app, script) == 0


# -- the clocks, the race, the rules shared with the CLI (issues 42, 45, 47) ---------------------


def _line_text(table: DataTable[Any], y: int) -> str:
    return table.render_line(y).text


def test_a_running_runs_clock_is_drawn_again_in_its_row_alone(fixture_state: Path) -> None:
    """ELAPSED ticks each second in the rendered line of the run's row, and a tick renders that
    row again, not the pane's other rows (DataTable's own update_cell renders them all)."""
    from sessiontool.tui.tables import LiveTable

    finished = []
    runner_config(fixture_state, py_command("import sys; sys.stdin.read(); print('done')"))
    for i in range(3):  # finished runs below the running one: rows a tick must leave alone
        rc, out = run_json("send", f"bench:done-{i}", "x", "--timeout", "60")
        assert rc == 0, out
        finished.append(out["runId"])
    settle(fixture_state)
    _sleeper(fixture_state, 60)
    rc, out = run_json("send", "main", "long job", "--timeout", "0")
    assert rc == 0, out
    run_id = out["runId"]
    app = make_app(fixture_state)
    rendered: list[str] = []

    async def script(pilot: Pilot[int]) -> None:
        await until(
            pilot, lambda: run_id in keys_of(app, "runs") and len(keys_of(app, "runs")) == 4
        )
        await until(pilot, lambda: row(app, "runs", run_id)[2] == "running")
        table = app.query_one("#runs", LiveTable)
        assert keys_of(app, "runs")[0] == run_id
        await pilot.pause(0.3)
        first = row(app, "runs", run_id)[5]
        original = table._compute_row_renderables  # called for a row not cached

        def counting(index: int) -> Any:
            rendered.append(keys_of(app, "runs")[index] if index >= 0 else "header")
            return original(index)

        table._compute_row_renderables = counting  # type: ignore[method-assign]
        await until(pilot, lambda: row(app, "runs", run_id)[5] != first, 10.0)
        await pilot.pause(0.2)
        table._compute_row_renderables = original  # type: ignore[method-assign]
        now = row(app, "runs", run_id)[5]
        assert now.endswith("s") and now in _line_text(table, 1)  # drawn, in its row's line
        for y, rid in enumerate(finished[::-1], start=2):
            assert rid[:8] in _line_text(table, y)
        await pilot.press("q")

    assert drive(app, script) == 0
    assert rendered and set(rendered) <= {run_id}, rendered
    rc, out = run_json("abort", run_id)  # the 60 s sleeper is not waited for by the reaper
    assert rc == 0 and out["status"] == "aborted", out


def test_a_message_that_arrives_as_the_transcript_closes_is_dropped(
    fixture_state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The follow thread posts a message to a transcript screen that has just closed (its log
    gone: textual's NoMatches): nothing escapes the thread, the app goes on and q leaves 0."""
    import threading

    from rich.text import Text

    escaped: list[BaseException] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: escaped.append(args.exc_value))
    app = make_app(fixture_state)

    async def script(pilot: Pilot[int]) -> None:
        await until(pilot, lambda: keys_of(app, "sessions"))
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, TranscriptScreen))
        screen = app.screen
        assert isinstance(screen, TranscriptScreen)
        await until(pilot, lambda: screen.shown > 0)
        await app.pop_screen()  # closed by other means than its own Escape
        await pilot.pause(0.2)
        for fn in (screen.add_message, screen.add_line, lambda *a: screen.query_one(RichLog)):
            args = (Text("user:"), Text("late")) if fn == screen.add_message else ("late",)
            t = threading.Thread(target=screen.post, args=(fn, *args), daemon=True)
            t.start()
            while t.is_alive():
                await pilot.pause(0.05)
        assert app.is_running and keys_of(app, "sessions")
        await pilot.press("q")

    assert drive(app, script) == 0
    assert escaped == []
    assert app.return_code == 0


def test_a_bug_in_a_threads_callback_ends_the_app_not_the_thread(
    fixture_state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug raised where a thread's result is drawn ends the app with it (exit 1, its
    traceback), as a bug in a key's action does; the thread itself ends cleanly."""
    import threading

    escaped: list[BaseException] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: escaped.append(args.exc_value))
    app = make_app(fixture_state)

    def broken(result: object) -> None:
        raise ZeroDivisionError(f"drawing {result!r}")

    async def script(pilot: Pilot[int]) -> None:
        await until(pilot, lambda: keys_of(app, "sessions"))
        app.background(lambda: 42, broken)
        await until(pilot, lambda: not app.is_running)

    with pytest.raises(ZeroDivisionError, match="drawing 42"):
        drive(app, script)
    assert app.return_code == 1
    assert escaped == []


def test_keys_are_cut_in_the_middle_and_labels_shown_as_list_shows_them(state: Path) -> None:
    """One rule for `top` and `list`: a key too long for its column loses its middle to "…"
    (never cut without a mark), and LABEL is the label, else OpenClaw's displayName."""
    from tests.runhelpers import write_store

    long_key = "agent:main:telegram:group:-1001234567890123:topic:42"
    write_store(
        state,
        {
            long_key: {"sessionId": "s-long", "updatedAt": now_ms(), "displayName": "tg:ops"},
            "agent:main:dm:bob": {"sessionId": "s-bob", "updatedAt": now_ms() - 1, "label": "b"},
            "agent:main:dm:eve": {"sessionId": "s-eve", "updatedAt": now_ms() - 2},
        },
    )
    from sessiontool.tui.rows import SESSION_WIDTHS

    key_width = SESSION_WIDTHS[0]
    app = make_app(state)
    cells: dict[str, list[str]] = {}

    async def script(pilot: Pilot[int]) -> None:
        await until(pilot, lambda: len(keys_of(app, "sessions")) == 3)
        for key in keys_of(app, "sessions"):
            cells[key] = row(app, "sessions", key)
        await pilot.press("q")

    assert drive(app, script) == 0
    shown = cells[long_key][0]
    head, _, tail = shown.partition("…")
    assert len(shown) == key_width and long_key.startswith(head) and long_key.endswith(tail)
    assert len(head) >= 10 and len(tail) >= 10
    assert [cells[k][3] for k in (long_key, "agent:main:dm:bob", "agent:main:dm:eve")] == [
        "tg:ops",
        "b",
        "",
    ]
    # `list`'s table, on a terminal, shows the same three labels.
    from tests.helpers import run_cli

    proc = run_cli("--state-dir", str(state), "list", "--color", "always", env={"COLUMNS": "200"})
    listed = {ln.split()[0]: ln for ln in proc.stdout.splitlines()[1:] if ln.strip()}
    assert "tg:ops" in listed[long_key] and " b " in listed["agent:main:dm:bob"]
    assert "tg:ops" not in listed["agent:main:dm:eve"]


def test_a_10_mb_message_is_folded_in_the_followed_transcript(state: Path) -> None:
    """One 10 MB message of 100,000 lines: its first 20 lines and "99,980 more lines", as the
    HTML page folds it, then the next message whole."""
    from sessiontool.reports.html import FOLD_CHARS, FOLD_KEEP, FOLD_LINES
    from sessiontool.termtext import FOLD_CHARS as T_CHARS
    from sessiontool.termtext import FOLD_KEEP as T_KEEP
    from sessiontool.termtext import FOLD_LINES as T_LINES
    from tests.runhelpers import write_store, write_transcript

    assert (T_CHARS, T_KEEP, T_LINES) == (FOLD_CHARS, FOLD_KEEP, FOLD_LINES)  # one rule
    big = "".join(f"line {i:06d} " + "x" * 88 + "\n" for i in range(100_000))
    write_store(state, {"agent:main:main": {"sessionId": "big", "updatedAt": now_ms()}})
    write_transcript(state, "big", [("user", big, 1), ("assistant", "short answer", 2)])
    app = make_app(state)

    def log_text() -> str:
        return "\n".join(line.text for line in app.screen.query_one(RichLog).lines)

    async def script(pilot: Pilot[int]) -> None:
        await until(pilot, lambda: keys_of(app, "sessions"))
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, TranscriptScreen))
        screen = app.screen
        assert isinstance(screen, TranscriptScreen)
        await until(pilot, lambda: screen.shown == 2, 60.0)
        text = log_text()
        assert "line 000019" in text and "line 000020" not in text
        assert "… 99,980 more lines (`sessiontool history` shows the whole message)" in text
        assert "short answer" in text
        assert len(screen.query_one(RichLog).lines) < 100
        await pilot.press("escape", "q")

    assert drive(app, script) == 0
