"""A progress line for a long index catch-up (`search`, `usage`): files and MB done, the rate and
the time left, on stderr, only on a terminal and never with --json. Core code only calls the
function it is given (index/sync.py's `Progress`); this is the CLI's side of it."""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import Any

from sessiontool.cli import render

# A catch-up shorter than this shows nothing (a warm command must stay silent).
SHOW_AFTER_S = 1.0
REFRESH_S = 0.1


class BuildProgress:
    """Callable as a `Progress`; a context manager that clears the line when the command is
    done (or interrupted). rich is imported only once a line is shown, and refreshed from this
    thread only (no refresh thread: the index forks its worker processes only while this
    process has one thread)."""

    def __init__(self, enabled: bool, look: render.Look) -> None:
        self.enabled = enabled
        self.look = look
        self.start = time.monotonic()
        self.last = 0.0
        self.bar: Any = None
        self.task: Any = None

    def __call__(self, files: int, files_total: int, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.start < SHOW_AFTER_S or (now - self.last < REFRESH_S and files < files_total):
            return
        self.last = now
        if self.bar is None:
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
                TransferSpeedColumn,
            )

            self.bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                DownloadColumn(),
                TransferSpeedColumn(),
                TimeRemainingColumn(),
                console=render.console(self.look, sys.stderr),
                auto_refresh=False,
                transient=True,
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self.bar.start()
            self.task = self.bar.add_task("indexing", total=total)
        self.bar.update(
            self.task,
            completed=done,
            total=total,
            description=f"indexing transcripts: {files:,}/{files_total:,} files",
        )
        self.bar.refresh()

    def __enter__(self) -> BuildProgress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


def build_progress(as_json: bool, look: render.Look) -> BuildProgress:
    """On when stderr is a terminal and the output is not JSON."""
    return BuildProgress(not as_json and look.terminal(sys.stderr), look)


class PageProgress:
    """`export --html`'s line: pages done of all, the time left; on stderr, only on a terminal,
    never with --json, and only once the export has taken SHOW_AFTER_S (a re-run that finds
    nothing changed stays silent). Callable as `(done, total)`; a context manager that clears
    the line."""

    def __init__(self, enabled: bool, look: render.Look) -> None:
        self.inner = BuildProgress(enabled, look)

    def __call__(self, done: int, total: int) -> None:
        p = self.inner
        if not p.enabled:
            return
        now = time.monotonic()
        if now - p.start < SHOW_AFTER_S or (now - p.last < REFRESH_S and done < total):
            return
        p.last = now
        if p.bar is None:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
            )

            p.bar = Progress(
                TextColumn("writing pages"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeRemainingColumn(),
                console=render.console(p.look, sys.stderr),
                auto_refresh=False,
                transient=True,
                redirect_stdout=False,
                redirect_stderr=False,
            )
            p.bar.start()
            p.task = p.bar.add_task("pages", total=total)
        p.bar.update(p.task, completed=done, total=total)
        p.bar.refresh()

    def __enter__(self) -> PageProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.inner.__exit__(None, None, None)


def page_progress(as_json: bool, look: render.Look) -> PageProgress:
    return PageProgress(not as_json and look.terminal(sys.stderr), look)
