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
from tests.helpers import FIXTURE_STATE, run_json  # noqa: E402

from .runhelpers import alive, py_command, records, runner_config  # noqa: E402

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


async def until(pilot: Pilot[int], cond: Callable[[], object], timeout: float = 15.0) -> None:
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
        started = time.monotonic()
        await until(pilot, lambda: "agent:main:dm:newcomer" in keys_of(app, "sessions"), 5.0)
        assert time.monotonic() - started < 5.0
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

    def log_text() -> str:
        return "\n".join(line.text for line in app.screen.query_one(RichLog).lines)

    async def script(pilot: Pilot[int]) -> None:
        await until(pilot, lambda: keys_of(app, "sessions"))
        assert keys_of(app, "sessions")[0] == "main"  # shown as `list` shows it
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, TranscriptScreen))
        screen = app.screen
        assert isinstance(screen, TranscriptScreen)
        await until(pilot, lambda: screen.shown > 0)
        await pilot.pause(0.3)
        before = screen.shown
        append_message(
            sdir / f"{entry['sessionId']}.jsonl",
            entry["sessionId"],
            {"role": "user", "content": "a line written while top follows", "timestamp": 1},
        )
        await until(pilot, lambda: screen.shown == before + 1, 5.0)
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
