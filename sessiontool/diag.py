"""Warnings gathered by core code (which never prints) for the CLI to show once, on stderr."""

from __future__ import annotations

_warnings: list[str] = []


def warn(message: str) -> None:
    if message not in _warnings:
        _warnings.append(message)


def drain() -> list[str]:
    out = list(_warnings)
    _warnings.clear()
    return out
