"""What a transcript contributes to the search index: the text of each message by role (user
text without the channel envelope, assistant text, tool-call argument values, tool results) and
each assistant message's usage; never JSON keys or the transcript's own fields."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from sessiontool.protocol import INJECTED

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
    return text.replace("\x02", " ").replace("\x03", " ")


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


# SQLite's INTEGER is 64 bits: a number past it (JSON has no bound; a hostile gateway's rows,
# a corrupt line) is no count or time, and would stop the insert with OverflowError.
_I64 = 1 << 63


def _int(v: Any) -> int:
    """A count: a number that fits SQLite's INTEGER, else 0 (also NaN and ±Infinity, which
    `json` reads and int() refuses)."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return 0
    if isinstance(v, float) and not abs(v) < _I64:
        return 0
    n = int(v)
    return n if -_I64 <= n < _I64 else 0


def _ts(msg: dict[str, Any], line: dict[str, Any]) -> int:
    t = msg.get("timestamp")
    if isinstance(t, int | float) and not isinstance(t, bool) and abs(t) < _I64:
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


# What a model turn used: (provider, model, ts, input, output, cache read, cache write tokens,
# the recorded cost (None: none), the tool names it called).
Usage = tuple[str, str, int, int, int, int, int, float | None, list[str]]
# A model turn as the index is given it: (file id, *Usage, 1 when it starts a run, else 0).
Turn = tuple[int, str, str, int, int, int, int, int, float | None, list[str], int]
# A failed tool result, carried among the turns (index/tool_shares.py counts it): (file id,
# tool name, ts). Plain tuples, not named ones: a cold `usage` of 1 GB makes a million.
Failed = tuple[int, str, int]
Turns = list[Turn | Failed]


class Extracted:
    """What one message gives the index. A plain class: a dataclass's creation was a third of
    this module's import, which the budgets' check pays (reports/spend_cache.py)."""

    __slots__ = ("rows", "turn", "role", "failed")

    def __init__(
        self,
        rows: list[tuple[int, str, str]],  # (ts, role, text)
        turn: Usage | None,
        role: str | None,
        failed: tuple[str, int] | None = None,  # a failed tool result: (tool name, ts)
    ) -> None:
        self.rows, self.turn, self.role, self.failed = rows, turn, role, failed


def failed_tool(msg: dict[str, Any], ts: int) -> tuple[str, int] | None:
    """(tool name, ts) of a toolResult that says it failed (`isError`), else None."""
    if msg.get("isError") is not True:
        return None
    name = msg.get("toolName")
    return (name if isinstance(name, str) and name else "?", ts)


def extract(raw: bytes) -> Extracted | None:
    """Rows and usage of one transcript line; None for lines that are not messages."""
    got = _message(raw)
    return None if got is None else extract_message(*got)


def _turn(msg: dict[str, Any], usage: dict[str, Any], ts: int) -> Usage:
    """(provider, model, ts, in, out, cache read, cache write, recorded cost, tool names called)
    of a message with `usage` (`_turn_row` without the file and the run start)."""
    row = _turn_row(0, msg, usage, ts=ts, start=0)
    return row[1:10]


def _turn_row(
    file_id: int, msg: dict[str, Any], usage: dict[str, Any], ts: int, start: int
) -> Turn:
    """The Turn of a message with `usage`, built in one tuple (as `add_turn` adds it: file id
    first, whether it starts a run last); a count that is an int within 64 bits (all of them,
    nearly always) skips `_int`; the tool names its toolCall blocks call, in order (`usage --by
    tool`, docs/search-usage.md), are read in the same call."""
    cost = usage.get("cost")
    recorded: Any = cost.get("total") if isinstance(cost, dict) else None
    i, o, cr, cw = (
        usage.get("input"),
        usage.get("output"),
        usage.get("cacheRead"),
        usage.get("cacheWrite"),
    )
    p, m = msg.get("provider"), msg.get("model")
    kind = type(recorded)
    content = msg.get("content")
    called: list[str] = []
    if type(content) is list:
        for b in content:
            if type(b) is dict and b.get("type") == "toolCall":
                called.append(str(b.get("name") or "?"))
    return (
        file_id,
        p if type(p) is str else str(p or ""),
        m if type(m) is str else str(m or ""),
        ts,
        i if type(i) is int and -_I64 <= i < _I64 else _int(i),
        o if type(o) is int and -_I64 <= o < _I64 else _int(o),
        cr if type(cr) is int and -_I64 <= cr < _I64 else _int(cr),
        cw if type(cw) is int and -_I64 <= cw < _I64 else _int(cw),
        # JSON numbers are exactly int or float (a bool is neither): the recorded cost
        float(recorded) if (kind is float or kind is int) and abs(recorded) < _I64 else None,
        called,
        start,
    )


def _message(raw: bytes) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(message, line) of a transcript line that is a message; None for any other line."""
    if b'"message"' not in raw:  # session header, model changes, custom entries: never parsed
        return None
    try:
        obj = orjson.loads(raw)
    except ValueError:
        obj = _lenient(raw)  # what orjson refuses and `json` reads (NaN, huge integers, ...)
    if not isinstance(obj, dict) or obj.get("type") != "message":
        return None
    msg = obj.get("message")
    return (msg, obj) if isinstance(msg, dict) else None


_IN_RUN = ("assistant", "toolResult")


def scan_lines(
    file_id: int,
    lines: Iterator[tuple[int, bytes]],
    start: tuple[int, str | None, int],
    rows: list[tuple[int, int, str, int, int, int, str]],
    turns: Turns,
) -> tuple[int, str | None]:
    """One pass over (offset after the line, line) pairs: each message parsed once; its text
    rows added to `rows` and its turn to `turns` when the line starts at `turns_from` or later
    (the turns alone, for `usage`: `scan_turns`). `start` is (offset, role the first message follows,
    turns_from); returns the offset after the last line and the role the next one follows.
    The rows, turns and roles are those `extract_message` and `collect` give, in one call per
    line instead of four."""
    off, last_role, turns_from = start
    loads = orjson.loads
    for end, raw in lines:
        at, off = off, end
        if b'"message"' not in raw:  # as `_message`, inline: once per line
            continue
        try:
            line = loads(raw)
        except ValueError:
            line = _lenient(raw)
        if not isinstance(line, dict) or line.get("type") != "message":
            continue
        msg = line.get("message")
        if not isinstance(msg, dict):
            continue
        role = msg.get("role")
        ex = extract_message(msg, line)
        for part, (ts, kind, text) in enumerate(ex.rows):
            cjk = 0 if text.isascii() else int(has_unsegmented(text))
            rows.append((file_id, ts, kind, cjk, at, part, text))
        if at >= turns_from:
            add_turn(turns, file_id, ex, last_role)
        if isinstance(role, str):
            last_role = role
    return off, last_role


def add_turn(turns: Turns, file_id: int, ex: Extracted, last_role: str | None) -> None:
    """A message's turn (with whether it starts a run: it follows neither an assistant nor a
    tool message), or its failed tool result's marker (index/tool_shares.py)."""
    if ex.turn is not None:
        turns.append((file_id, *ex.turn, int(last_role not in _IN_RUN)))
    elif ex.failed is not None:
        turns.append((file_id, *ex.failed))


def scan_turns(
    file_id: int,
    blocks: Iterator[tuple[int, list[bytes]]],
    start: tuple[int, str | None],
    turns: Turns,
) -> tuple[int, str | None]:
    """`scan_lines` without text rows (a `usage` build), of every line from the start: the
    lines come in blocks (`iter_complete_blocks`: split in C, no offset per line). `start` is
    (offset, role the first message follows); returns the offset after the last line and the
    role the next one follows."""
    off, last_role = start
    for off, lines in blocks:  # noqa: B007 - the offset after the last block is returned
        last_role = _block_turns(file_id, lines, last_role, turns)
    return off, last_role


def _block_turns(
    file_id: int, lines: list[bytes], last_role: str | None, turns: Turns
) -> str | None:
    """The turns of a block's lines added to `turns`; returns the role the next line follows.
    `_message` and the turn's timestamp inline, one call per turn (they were half of what a
    cold `usage` cost beyond parsing)."""
    loads = orjson.loads
    append = turns.append
    for raw in lines:
        if b'"message"' not in raw:  # session header, model changes, custom entries
            continue
        try:
            obj = loads(raw)
        except ValueError:
            obj = _lenient(raw)
        if not isinstance(obj, dict) or obj.get("type") != "message":
            continue
        msg = obj.get("message")
        if not isinstance(msg, dict):
            continue
        role = msg.get("role")
        if role == "assistant":
            usage = msg.get("usage")
            if isinstance(usage, dict) and msg.get("stopReason") != INJECTED:
                t = msg.get("timestamp")
                ts = t if type(t) is int and -_I64 <= t < _I64 else _ts(msg, obj)
                start = int(last_role not in _IN_RUN)
                append(_turn_row(file_id, msg, usage, ts=ts, start=start))
        elif role == "toolResult" and msg.get("isError") is True:
            _failed_marker(file_id, msg, obj, turns)
        if isinstance(role, str):
            last_role = role
    return last_role


def _failed_marker(file_id: int, msg: dict[str, Any], line: dict[str, Any], turns: Turns) -> None:
    """A failed tool result's marker among the turns: (file id, tool name, ts)."""
    got = failed_tool(msg, _ts(msg, line))
    if got is not None:
        turns.append((file_id, *got))


def extract_message(msg: dict[str, Any], line: dict[str, Any] | None = None) -> Extracted:
    """Rows and usage of one message. A turn is an assistant message that carries `usage` and
    that a model wrote (an injected note, with its zero usage, is none). (`text.isspace()`
    where `strip()` would copy the text to say the same; per message, it shows.)"""
    role = msg.get("role")
    t = msg.get("timestamp")
    ts = t if type(t) is int and -_I64 <= t < _I64 else _ts(msg, line or {})
    rows: list[tuple[int, str, str]] = []
    turn = None
    if role == "assistant":
        content = msg.get("content")
        text = "\n".join(_texts(content))
        if text and not text.isspace():
            rows.append((ts, "assistant", _clean(text)))
        if isinstance(content, list):
            for b in content:
                if isinstance(b, dict) and b.get("type") == "toolCall":
                    vals: list[str] = [str(b.get("name") or "")]
                    _flat_values(b.get("arguments"), vals)
                    call = " ".join(v for v in vals if v)
                    if call and not call.isspace():
                        rows.append((ts, "toolCall", _clean(call)))
        usage = msg.get("usage")
        if isinstance(usage, dict) and msg.get("stopReason") != INJECTED:
            turn = _turn(msg, usage, ts)
    elif role == "user":
        # Imported here: its patterns' compiling was a third of this module's import, which
        # the budgets' check pays for the turns alone (reports/spend_cache.py).
        from sessiontool.state.envelopes import strip_envelope_text

        text = "\n".join(strip_envelope_text(t) for t in _texts(msg.get("content")))
        if not text and isinstance(msg.get("text"), str):
            text = strip_envelope_text(msg["text"])
        if text and not text.isspace():
            rows.append((ts, "user", _clean(text)))
    elif role == "toolResult":
        text = "\n".join(_texts(msg.get("content")))
        if text and not text.isspace():
            rows.append((ts, "toolResult", _clean(text)))
        return Extracted(rows, None, role, failed_tool(msg, ts))
    else:
        return Extracted([], None, str(role) if isinstance(role, str) else None)
    return Extracted(rows, turn, role)


def iter_complete_blocks(
    path: Path, start: int, end: int, crc: list[int] | None = None
) -> Iterator[tuple[int, list[bytes]]]:
    """(offset after the block's last line, its lines) for the newline-terminated lines in
    [start, end), a block per read of up to CHUNK bytes, its lines split by `bytes.split` (in
    C: a loop over each line's end in Python was a tenth of a cold `usage`). With `crc`,
    `crc[0]` is carried on (zlib.crc32) over every byte of the lines yielded: the search
    index's digest of what it read, without reading it twice."""
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
            lines = data.split(b"\n")
            pending = lines.pop()  # after the last newline: the start of a line not complete
            if not lines:
                continue
            done = len(data) - len(pending)
            if crc is not None:
                crc[0] = zlib.crc32(memoryview(data)[:done], crc[0])
            yield pos - len(pending), lines


def iter_complete_lines(
    path: Path, start: int, end: int, crc: list[int] | None = None
) -> Iterator[tuple[int, bytes]]:
    """(offset after the line, line) for each newline-terminated line in [start, end)
    (`iter_complete_blocks`, line by line; `crc` as there)."""
    at = start
    for _end, lines in iter_complete_blocks(path, start, end, crc):
        for line in lines:
            at += len(line) + 1
            yield at, line
