"""Small helpers shared by the interop tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def full_key(display: str, agent: str = "main") -> str:
    """sessiontool shows the requester agent's main key as `main`; the gateway always in full."""
    return f"agent:{agent}:main" if display == "main" else display


def text_of(msg: dict[str, Any]) -> str:
    c = msg.get("content")
    if isinstance(c, str):
        return c
    if isinstance(c, list):
        return "".join(
            b.get("text", "") for b in c if isinstance(b, dict) and b.get("type") == "text"
        )
    return ""


def assert_linear_chain(lines: list[dict[str, Any]]) -> None:
    """One header, then every entry's parentId is the id of the line before it (no branch): each
    writer saw the other's last entry when it appended."""
    assert lines and lines[0].get("type") == "session", lines[:1]
    assert sum(1 for ln in lines if ln.get("type") == "session") == 1
    prev = None
    for ln in lines[1:]:
        assert ln.get("parentId") == prev, (
            f"entry {ln.get('id')} has parentId {ln.get('parentId')}, expected {prev}"
        )
        assert isinstance(ln.get("id"), str)
        prev = ln["id"]


def poll(fn: Callable[[], T | None], timeout: float, what: str, interval: float = 0.2) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)
