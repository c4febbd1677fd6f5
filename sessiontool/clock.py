"""The one clock: every "now" reads it, so SESSIONTOOL_NOW_MS can pin all of them at once."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime


def now_ms() -> int:
    pinned = os.environ.get("SESSIONTOOL_NOW_MS")
    if pinned:
        try:
            return int(pinned)
        except ValueError:
            pass
    return int(time.time() * 1000)


def iso(ms: int | float) -> str:
    """ISO-8601 with milliseconds and Z, as OpenClaw writes timestamps."""
    dt = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{int(ms) % 1000:03d}Z"


def iso_now() -> str:
    return iso(now_ms())


def archive_stamp(ms: int | None = None) -> str:
    """The suffix of an archived transcript: ISO time with ':' made '-' (file-name safe)."""
    return iso(now_ms() if ms is None else ms).replace(":", "-")


def parse_iso_ms(text: str) -> int | None:
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)
