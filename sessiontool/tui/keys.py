"""What `top`'s keys do to the selected row, through the functions the commands call: `a`
(`abort`), `s` (`send`, then `wait`), `w` (`wait`). Each asks (a dialog, screens.py), runs the
call off the screen's thread (threads.py) and shows its result; the keys' own job, apart from
what the panes show (panes.py) and how it is kept current (live.py)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from functools import partial
from typing import TYPE_CHECKING, Any

from textual.app import App

from sessiontool.context import Context
from sessiontool.errors import SessiontoolError
from sessiontool.tui import fmt, model, threads
from sessiontool.tui.live import Live
from sessiontool.tui.screens import ConfirmScreen, MessageScreen, PromptScreen

if TYPE_CHECKING:
    from sessiontool.runs.result_types import AbortResult, SendResult


class Keys:
    """The actions of `app`'s bindings on the rows `live.panes` shows."""

    def __init__(self, app: App[Any], live: Live) -> None:
        self.app, self.live, self.ctx = app, live, live.ctx
        self.panes = live.panes

    def abort(self) -> None:
        rid = self.panes.selected("runs")
        run = next((r for r in self.live.shown.snap.runs if r["runId"] == rid), None)
        if rid is None or run is None or run.get("status") not in model.ACTIVE:
            self.app.notify(
                "select a running or queued run (Tab to the runs pane)", severity="warning"
            )
            return
        question = f"Abort run {rid[:8]} of {run.get('sessionKey')}? Its agent is killed."

        def answered(yes: bool | None) -> None:
            if yes:
                self.background(lambda: self.live.locked(_abort, rid), self.aborted)

        self.app.push_screen(ConfirmScreen(fmt.esc(question)), answered)

    def aborted(self, result: dict[str, Any] | BaseException) -> None:
        if self.reported(result):
            return
        assert isinstance(result, dict)
        self.app.notify(fmt.esc(f"run {result['runId'][:8]}: {result['status']}"), markup=False)
        self.live.forget()  # re-read at the next tick

    def send(self) -> None:
        key = self.panes.selected("sessions")
        if key is None:
            self.app.notify("no session selected", severity="warning")
            return

        def typed(text: str | None) -> None:
            if text and text.strip():
                self.app.notify(f"sending to {fmt.esc(key)}…", markup=False)
                job = partial(_send_and_wait, self.ctx, self.live.guard, key=key, text=text)
                self.background(job, self.replied)

        self.app.push_screen(PromptScreen(fmt.esc(f"Message to {key} (Enter: send)")), typed)

    def replied(self, result: dict[str, Any] | BaseException) -> None:
        if self.reported(result):
            return
        assert isinstance(result, dict)
        self.app.push_screen(MessageScreen(*_result_text(result)))

    def wait(self) -> None:
        rid = self.panes.selected("runs")
        if rid is None:
            self.app.notify("no run selected (Tab to the runs pane)", severity="warning")
            return
        self.app.notify(f"waiting for run {fmt.esc(rid[:8])}…", markup=False)
        self.background(lambda: _wait(self.ctx, rid), self.replied)

    def reported(self, result: object) -> bool:
        """An expected failure (SessiontoolError, OSError) is a notice; anything else is a bug
        and is raised here, so it ends the app as any bug does."""
        if isinstance(result, SessiontoolError):
            self.app.notify(fmt.one_line(result.message), severity="error", markup=False)
            return True
        if isinstance(result, BaseException):
            raise result
        return False

    def background(self, work: Callable[[], Any], done: Callable[[Any], None]) -> None:
        threads.background(self.app, work, done)


def _abort(ctx: Context, run_id: str) -> AbortResult:
    """`sessiontool abort RUN_ID`."""
    from sessiontool.runs.control import abort_run

    return abort_run(ctx, run_id)


def _send_and_wait(
    ctx: Context, guard: Callable[[], AbstractContextManager[Any]], *, key: str, text: str
) -> SendResult:
    """`sessiontool send KEY TEXT --timeout 0`, then `sessiontool wait RUN_ID` (the wait reads
    run records only: the gateway is free for the panes meanwhile)."""
    from sessiontool.runs.submit import send
    from sessiontool.state import safefs

    dirs, files = ctx.paths.written_paths()
    safefs.preflight(ctx.paths.root, dirs, files)
    with guard():
        result, _ = send(ctx, key, text, timeout=0)
    if result.get("status") != "accepted":
        return result
    return _wait(ctx, str(result["runId"]))


def _wait(ctx: Context, run_id: str) -> SendResult:
    """`sessiontool wait RUN_ID`: until the run ends."""
    from sessiontool.runs.control import full_run_id
    from sessiontool.runs.submit import get_run, run_result
    from sessiontool.runs.wait import wait_for

    run_id = full_run_id(ctx, run_id)
    get_run(ctx, run_id)
    result, _ = run_result(ctx, wait_for(ctx.paths, run_id, None))
    return result


def _result_text(result: dict[str, Any]) -> tuple[str, str]:
    """A MessageScreen's title (escaped here) and body (escaped and folded there)."""
    rid = str(result.get("runId", ""))[:8]
    if result.get("status") == "ok" and "reply" in result:
        return fmt.esc(f"Reply from {result.get('sessionKey')} (run {rid})"), str(result["reply"])
    if "sendPolicy" in result:
        return "Send policy", f"{result.get('sessionKey')}: {result['sendPolicy'] or 'inherit'}"
    title = f"Run {rid}: {result.get('runStatus') or result.get('status')}"
    return fmt.esc(title), str(result.get("error") or "")
