"""The JSON that `--json` writes: one compact line, fast (orjson), with C1 and bidi controls
escaped, so a value that holds them is the same JSON and nothing raw reaches a terminal."""

from __future__ import annotations

import json
import re
from typing import Any

import orjson


def json_line(obj: Any) -> str:
    return _JSON_RAW.sub(
        _json_escape, json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n"
    )


# What json's UTF-8 output leaves raw of the characters the CLI escapes (termtext.UNSAFE: DEL,
# the C1 controls, the line separators and the bidi controls; json escapes C0 itself): written
# as `\u009b`, the same JSON. The UTF-8 form is the same set, spelled in bytes (a test checks
# the two agree).
_JSON_RAW = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_JSON_RAW_UTF8 = re.compile(
    b"\x7f|\xc2[\x80-\x9f]|\xd8\x9c|\xe2\x80[\x8e\x8f\xa8-\xae]|\xe2\x81[\xa6-\xa9]"
)


def _json_escape(m: re.Match[str]) -> str:
    return f"\\u{ord(m.group()):04x}"


def json_bytes(obj: Any) -> bytes:
    """One compact JSON line as UTF-8, by orjson (a 44 MB listing in ~50 ms instead of ~400).
    What orjson refuses (a lone surrogate, an integer beyond 64 bits, a non-string key) is
    written by json.dumps as before; NaN and Infinity, which JSON has no words for, are null.
    C1 and bidi controls are escaped (`\u202e`): the same JSON, nothing raw on a terminal."""
    try:
        data = orjson.dumps(obj, option=orjson.OPT_APPEND_NEWLINE)
    except TypeError:
        return json_line(obj).encode("utf-8", "backslashreplace")
    if b"\xc2" in data or b"\xe2" in data or b"\xd8" in data or b"\x7f" in data:
        data = _JSON_RAW_UTF8.sub(lambda m: _json_escape_utf8(m.group()), data)
    return data


def _json_escape_utf8(raw: bytes) -> bytes:
    return f"\\u{ord(raw.decode()):04x}".encode()
