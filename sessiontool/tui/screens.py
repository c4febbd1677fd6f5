"""`top`'s dialogs (confirm an abort, type a message, read a result) and the transcript view that
follows a session live, as `history --follow` does: the same `history` read, then the same
`transcript.follow` (or, for a store written through OpenClaw's gateway, the gateway's
`session.message` events, as `history --follow` reads them)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen, Screen
from textual.widgets import Footer, Input, Label, RichLog, Static

from sessiontool.context import Context
from sessiontool.errors import SessiontoolError, from_os_error
from sessiontool.tui import fmt

DIALOG_CSS = """
ConfirmScreen, PromptScreen, MessageScreen { align: center middle; }
#dialog { width: 70; max-width: 95%; height: auto; max-height: 90%; border: round $accent;
          padding: 0 1; background: $surface; }
#dialog Static { height: auto; }
"""


class ConfirmScreen(ModalScreen[bool]):
    """A yes/no question: `y` or Enter yes, `n` or Escape no."""

    BINDINGS = [
        Binding("y,enter", "answer(True)", "yes"),
        Binding("n,escape", "answer(False)", "no"),
    ]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(Text(self.question))
            yield Label("y: yes   n: no")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class PromptScreen(ModalScreen[str | None]):
    """One line of text: Enter gives it, Escape gives None."""

    BINDINGS = [Binding("escape", "cancel", "cancel")]

    def __init__(self, title: str) -> None:
        super().__init__()
        self.title_text = title

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(Text(self.title_text))
            yield Input(id="prompt")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)


class MessageScreen(ModalScreen[None]):
    """A result to read (a reply, a run's end, an error): any of Enter, Escape, q closes it."""

    BINDINGS = [Binding("enter,escape,q", "close", "close")]

    def __init__(self, title: str, body: str) -> None:
        super().__init__()
        self.title_text, self.body = title, body

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(Text(self.title_text, style="bold"))
            yield Static(Text(fmt.body(self.body)), id="body")

    def action_close(self) -> None:
        self.dismiss(None)


Post = Callable[..., Any]
GATEWAY_POLL_S = 1.0
LOG_LINES = 10_000  # the screen lines the followed transcript keeps (the oldest go first)


def _identity(msg: dict[str, Any]) -> str:
    """A message as read twice: the same role, time and text."""
    import json

    return json.dumps([msg.get("role"), msg.get("timestamp"), msg.get("content")], default=str)


class TranscriptScreen(Screen[None]):
    """A session's last messages, then each new one as it lands, until Escape or q."""

    BINDINGS = [Binding("escape,q", "close", "back")]

    def __init__(
        self, ctx: Context, key: str, post: Post, guard: Callable[[], AbstractContextManager[Any]]
    ) -> None:
        super().__init__()
        self.ctx, self.key, self.post, self.guard = ctx, key, post, guard
        self.stopped = threading.Event()
        self.shown = 0

    def compose(self) -> ComposeResult:
        yield Label(Text(f"{fmt.esc(self.key)} — following (Esc: back)", style="bold"))
        yield RichLog(id="log", wrap=True, markup=False, highlight=False, max_lines=LOG_LINES)
        yield Footer()

    def on_mount(self) -> None:
        threading.Thread(target=self._feed, name="top-follow", daemon=True).start()

    def _feed(self) -> None:
        """The follow thread: each message made ready to draw here, off the screen's thread
        (its text taken, folded and escaped: a 10 MB message is a few kilobytes to draw), then
        drawn there. Nothing escapes it: what is not a read error is a bug, which ends the app
        (threads.py) instead of the thread."""
        try:
            for msg in self._messages():
                if self.stopped.is_set():
                    return
                self.post(self.add_message, *_drawn(msg))
        except SessiontoolError as exc:
            self.post(self.add_line, f"[{fmt.one_line(exc.message)}]")
        except OSError as exc:  # a transcript gone or unreadable while followed
            self.post(self.add_line, f"[{fmt.one_line(from_os_error(exc).message)}]")
        except Exception as exc:  # noqa: BLE001 - raised again on the screen's thread
            self.post(_raise, exc)

    def _messages(self) -> Iterator[dict[str, Any]]:
        """As `history --follow`: the last 200 messages, then what is appended after them
        (`transcript.follow`). A store written through OpenClaw's gateway is read again with
        `history` every GATEWAY_POLL_S instead of following the gateway's events as `history
        --follow` does: that holds the process's one gateway connection for as long as it
        follows, which the other panes need."""
        from sessiontool.sessions.history import history
        from sessiontool.state.envelopes import strip_envelope
        from sessiontool.state.transcript import file_size, follow

        with self.guard():
            h = history(self.ctx, self.key, limit=200)
        r = h.resolved
        start = file_size(h.path) if h.path is not None and not r.gateway_written else 0
        yield from (strip_envelope(m) for m in h.messages)
        if r.gateway_written:
            new: Iterator[dict[str, Any]] = self._polled(h.messages)
        elif h.path is not None:
            new = follow(h.path, start, stop=self.stopped.is_set)
        else:
            return
        for msg in new:
            if msg.get("role") != "toolResult":
                yield strip_envelope(msg)

    def _polled(self, shown: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        from sessiontool.sessions.history import history

        last = _identity(shown[-1]) if shown else None
        while not self.stopped.wait(GATEWAY_POLL_S):
            with self.guard():
                messages = history(self.ctx, self.key, limit=200).messages
            ids = [_identity(m) for m in messages]
            new = messages[ids.index(last) + 1 :] if last in ids else messages
            if last is not None and last not in ids and ids:
                new = messages[-1:]  # more than a page arrived: from the newest on
            if new:
                last = _identity(new[-1])
                yield from new

    def add_message(self, role: Text, body: Text) -> None:
        """One message, on the screen's thread; none once the screen is closing (a message
        that arrives as Escape is pressed: its log is gone)."""
        if self.stopped.is_set():
            return
        log = self.query_one(RichLog)
        log.write(role)
        log.write(body)
        self.shown += 1

    def add_line(self, line: str) -> None:
        if not self.stopped.is_set():
            self.query_one(RichLog).write(Text(line))

    def action_close(self) -> None:
        self.stopped.set()
        self.dismiss(None)

    def on_unmount(self) -> None:
        self.stopped.set()


def _drawn(msg: dict[str, Any]) -> tuple[Text, Text]:
    """A message as the transcript shows it: its role, styled, and its folded, escaped text."""
    role = msg.get("role", "?")
    style = {"user": "bold cyan", "assistant": "bold green"}.get(str(role), "bold")
    return Text(f"{fmt.esc(role)}:", style=style), Text(fmt.body(fmt.message_text(msg)))


def _raise(exc: BaseException) -> None:
    raise exc
