"""`top`'s daemon threads: whatever may block (a listing, a run's end, a reply, the gateway's
TCP connect, the index behind today's cost, a followed transcript) runs in one and hands its
result to the screen's own thread; the screen never waits.

No exception escapes one of these threads (issue 42): `background` hands what its work raised
to its `done` callback, and `post` runs a callback on the screen's thread where nothing it
raises comes back: a widget gone with its screen (a message that arrives as the transcript
closes: `NoMatches`) is dropped, anything else is a bug and ends the app as a bug in a key's
action does (its traceback shown once the terminal is restored, exit 1). Once the app has
ended, nothing more is run."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import CancelledError
from typing import Any

from textual.app import App
from textual.css.query import NoMatches

from sessiontool.errors import from_os_error


def post(app: App[Any], fn: Callable[..., Any], *args: Any) -> None:
    """Run `fn(*args)` on the screen's thread, from another thread, and wait until it has."""

    def run() -> None:
        try:
            fn(*args)
        except NoMatches:  # its screen closed meanwhile: nothing left to draw on
            pass
        except Exception as exc:  # noqa: BLE001 - a bug: the app ends on it, as on any
            app._handle_exception(exc)

    try:
        app.call_from_thread(run)
    except (RuntimeError, CancelledError, asyncio.CancelledError):  # the app ended (before it ran)
        pass


def background(app: App[Any], work: Callable[[], Any], done: Callable[[Any], None]) -> None:
    """`done(work())` with `work` in a daemon thread and `done` on the screen's thread; what
    `work` raises is `done`'s argument (an OSError as sessiontool's error for it)."""

    def run() -> None:
        try:
            result = work()
        except OSError as exc:
            result = from_os_error(exc)
        except BaseException as exc:  # noqa: BLE001 - handed to `done`, which raises a bug again
            result = exc
        post(app, done, result)

    threading.Thread(target=run, name="top-work", daemon=True).start()
