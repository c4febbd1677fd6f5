"""What a transcript contributes to the search index: the text of each message by role (user
text without the channel envelope, assistant text, tool-call argument values, tool results) and
each assistant message's usage; never JSON keys or the transcript's own fields."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

CHUNK = 8 * 1024 * 1024
HIT = ("\x02", "\x03")  # snippet markers: never in text we index (replaced by spaces)

_UNSEGMENTED = (
    (0x0E00, 0x0EFF),  # Thai, Lao
    (0x1000, 0x109F),  # Myanmar
    (0x1780, 0x17FF),  # Khmer
    (0x2E80, 0x9FFF),  # CJK radicals, kana, ideographs
    (0xA960, 0xA97F),
    (0xAC00, 0xD7AF),  # Hangul syllables
    (0xF900, 0xFAFF),
    (0xFF66, 0xFF9F),
    (0x20000, 0x2FA1F),
)


_unsegmented_re: re.Pattern[str] | None = None


def has_unsegmented(text: str) -> bool:
    """Asked of every indexed message: ASCII is answered at once, the rest by one character
    class in C (compiled on first use: a command that meets only ASCII never builds it)."""
    global _unsegmented_re
    if text.isascii():
        return False
    if _unsegmented_re is None:
        ranges = "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in _UNSEGMENTED)
        _unsegmented_re = re.compile(f"[{ranges}]")
    return _unsegmented_re.search(text) is not None


def _clean(text: str) -> str:
    # The snippet markers must never occur in indexed text.
    return text.replace(HIT[0], " ").replace(HIT[1], " ")


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    out: list[str] = []
    if isinstance(content, list):
        for b in content:
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str):
                out.append(b["text"])
    return out


def _flat_values(v: Any, out: list[str], depth: int = 0) -> None:
    """A tool call's argument values (not its keys), for `--role tool` only."""
    if depth > 20:
        return
    if isinstance(v, str):
        out.append(v)
    elif isinstance(v, bool) or v is None:
        return
    elif isinstance(v, int | float):
        out.append(str(v))
    elif isinstance(v, list):
        for x in v:
            _flat_values(x, out, depth + 1)
    elif isinstance(v, dict):
        for x in v.values():
            _flat_values(x, out, depth + 1)


def _int(v: Any) -> int:
    return int(v) if isinstance(v, int | float) and not isinstance(v, bool) and v == v else 0


def _ts(msg: dict[str, Any], line: dict[str, Any]) -> int:
    t = msg.get("timestamp")
    if isinstance(t, int | float) and not isinstance(t, bool) and t == t:
        return int(t)
    s = line.get("timestamp")
    if isinstance(s, str):
        from sessiontool.clock import parse_iso_ms

        return parse_iso_ms(s) or 0
    return 0


def _lenient(raw: bytes) -> Any:
    import json

    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None


@dataclass
class Extracted:
    rows: list[tuple[int, str, str]]  # (ts, role, text)
    turn: tuple[Any, ...] | None  # (ts, provider, model, in, out, cr, cw, recorded cost)
    role: str | None


def extract(raw: bytes) -> Extracted | None:
    """Rows and usage of one transcript line; None for lines that are not messages."""
    if b'"message"' not in raw:  # session header, model changes, custom entries: never parsed
        return None
    try:
        obj = orjson.loads(raw)
    except ValueError:
        obj = _lenient(raw)  # what orjson refuses and `json` reads (NaN, huge integers, ...)
    if not isinstance(obj, dict) or obj.get("type") != "message":
        return None
    msg = obj.get("message")
    if not isinstance(msg, dict):
        return None
    return extract_message(msg, obj)


def extract_turn(raw: bytes) -> tuple[str | None, tuple[Any, ...] | None] | None:
    """What `usage` needs of one line, without its text: (the role the next message follows,
    the turn or None); None for lines that are not messages. The same role and turn as
    `extract`, read with one parse and no text extracted."""
    if b'"message"' not in raw:
        return None
    try:
        obj = orjson.loads(raw)
    except ValueError:
        obj = _lenient(raw)
    if not isinstance(obj, dict) or obj.get("type") != "message":
        return None
    msg = obj.get("message")
    if not isinstance(msg, dict):
        return None
    role = msg.get("role")
    if role != "assistant":
        return (role if isinstance(role, str) else None), None
    usage = msg.get("usage")
    if not isinstance(usage, dict):
        return role, None
    return role, _turn(msg, usage, _ts(msg, obj))


def _turn(msg: dict[str, Any], usage: dict[str, Any], ts: int) -> tuple[Any, ...]:
    cost = usage.get("cost")
    recorded = cost.get("total") if isinstance(cost, dict) else None
    return (
        ts,
        str(msg.get("provider") or ""),
        str(msg.get("model") or ""),
        _int(usage.get("input")),
        _int(usage.get("output")),
        _int(usage.get("cacheRead")),
        _int(usage.get("cacheWrite")),
        float(recorded)
        if isinstance(recorded, int | float) and not isinstance(recorded, bool)
        else None,
    )


def extract_message(msg: dict[str, Any], line: dict[str, Any] | None = None) -> Extracted:
    """Rows and usage of one message. A turn is an assistant message that carries `usage`."""
    role = msg.get("role")
    ts = _ts(msg, line or {})
    rows: list[tuple[int, str, str]] = []
    turn = None
    if role == "user":
        from sessiontool.state.envelopes import strip_envelope_text

        text = "\n".join(strip_envelope_text(t) for t in _texts(msg.get("content")))
        if not text and isinstance(msg.get("text"), str):
            text = strip_envelope_text(msg["text"])
        if text.strip():
            rows.append((ts, "user", _clean(text)))
    elif role == "assistant":
        content = msg.get("content")
        text = "\n".join(_texts(content))
        if text.strip():
            rows.append((ts, "assistant", _clean(text)))
        if isinstance(content, list):
            for b in content:
                if isinstance(b, dict) and b.get("type") == "toolCall":
                    vals: list[str] = [str(b.get("name") or "")]
                    _flat_values(b.get("arguments"), vals)
                    call = " ".join(v for v in vals if v)
                    if call.strip():
                        rows.append((ts, "toolCall", _clean(call)))
        usage = msg.get("usage")
        if isinstance(usage, dict):
            turn = _turn(msg, usage, ts)
    elif role == "toolResult":
        text = "\n".join(_texts(msg.get("content")))
        if text.strip():
            rows.append((ts, "toolResult", _clean(text)))
    else:
        return Extracted([], None, str(role) if isinstance(role, str) else None)
    return Extracted(rows, turn, role)


def iter_complete_lines(
    path: Path, start: int, end: int, crc: list[int] | None = None
) -> Iterator[tuple[int, bytes]]:
    """(offset after the line, line) for each newline-terminated line in [start, end). With
    `crc`, `crc[0]` is carried on (zlib.crc32) over every byte of the lines yielded: the
    search index's digest of what it read, without reading it twice."""
    import zlib

    with open(path, "rb") as fh:
        fh.seek(start)
        pos = start
        pending = b""
        while pos < end:
            block = fh.read(min(CHUNK, end - pos))
            if not block:
                break
            pos += len(block)
            data = pending + block if pending else block
            cut = data.rfind(b"\n")
            if cut < 0:
                pending = data
                continue
            base = pos - len(data)
            if crc is not None:
                crc[0] = zlib.crc32(memoryview(data)[: cut + 1], crc[0])
            i = 0
            while i <= cut:
                j = data.index(b"\n", i)
                yield base + j + 1, data[i:j]
                i = j + 1
            pending = data[cut + 1 :]
