"""One parser for every time option (`30`, `30s`, `5m`, `2h`, `1d`, and compounds such as
`1h30m` or `2d 4h`), so they all agree."""

from __future__ import annotations

import re

from sessiontool.clock import now_ms, parse_iso_ms
from sessiontool.errors import UsageError

_UNITS = {"": 1.0, "ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?\s*$", re.IGNORECASE)
_PART = r"\d+(?:\.\d+)?\s*(?:ms|s|m|h|d|w)"
_COMPOUND = re.compile(rf"^\s*(?:{_PART}\s*){{2,}}$", re.IGNORECASE)
_PARTS = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)", re.IGNORECASE)


def _is_duration(text: str) -> bool:
    return bool(_DURATION.match(text) or _COMPOUND.match(text))


def parse_duration(text: str | int | float, *, option: str = "duration") -> float:
    """Seconds in a duration; a bare number is seconds."""
    if isinstance(text, int | float):
        if text < 0:
            raise UsageError(f"{option} must not be negative: {text}")
        return float(text)
    m = _DURATION.match(str(text))
    if m:
        seconds = float(m.group(1)) * _UNITS[(m.group(2) or "").lower()]
    elif _COMPOUND.match(str(text)):
        seconds = sum(float(n) * _UNITS[u.lower()] for n, u in _PARTS.findall(str(text)))
    else:
        raise UsageError(
            f"invalid {option}: {text!r} (expected e.g. 30, 30s, 5m, 2h, 1d, 1h30m)",
        )
    if seconds == float("inf"):  # four hundred nines: no time a clock can hold
        raise UsageError(f"invalid {option}: {text!r} is too large")
    return seconds


def parse_since(text: str, *, option: str = "--since") -> int:
    """Epoch ms of a `--since` value: a duration ago, or an ISO date/time."""
    if _is_duration(text):
        return now_ms() - int(parse_duration(text, option=option) * 1000)
    ms = parse_iso_ms(text)
    if ms is None:
        raise UsageError(f"invalid {option}: {text!r} (expected 30m, 2h, 1d or an ISO date)")
    return ms
