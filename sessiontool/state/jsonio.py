"""JSON in and out: the C parser first, a fast JSON5 translation next and the json5 library only
when both fail (start-up time, 100 MB stores, hand-written configs); the indenting orjson encoder
for sessions.json (byte-identical to `json.dumps(indent=2, ensure_ascii=False)`), compact output,
and the atomic replace every rewritten file uses."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from sessiontool.errors import StorageError, UsageError

# -- reading -----------------------------------------------------------------------------------

_JSON5_POSITION = re.compile(r"^<string>:(\d+) (.*) at column (\d+)$", re.DOTALL)


def loads_tolerant(text: str | bytes) -> Any:
    """Parse JSON, or JSON5 (OpenClaw reads both). Raises ValueError; a parse error is a
    `json.JSONDecodeError` whose line and column point at the real problem (for a JSON5 file,
    where JSON5 fails, not the first comment plain JSON stumbles on)."""
    return _loads(text, {})


def loads_noting_nonfinite(text: str | bytes) -> tuple[Any, bool]:
    """loads_tolerant, and whether the value holds NaN or an infinity (`NaN`, `Infinity` or an
    overflowing `1e400`): such a store must be rewritten by the exact encoder. The check costs
    one Python call per float in the file, and nothing for the floats' absence."""
    value, nonfinite, _ = loads_noting_floats(text)
    return value, nonfinite


def loads_noting_floats(text: str | bytes) -> tuple[Any, bool, bool]:
    """loads_noting_nonfinite, and also whether the value holds a float that orjson writes
    differently from json.dumps (see `odd_float`): when it holds none, the store's orjson bytes
    need no scan for such floats (`store_bytes(plain=True)`)."""
    nonfinite = [False]
    odd = [False]

    def parse_float(s: str) -> float:
        v = float(s)
        if v - v != 0:
            nonfinite[0] = True
        elif odd_float(v):
            odd[0] = True
        return v

    def parse_constant(s: str) -> float:
        nonfinite[0] = True
        return float(s)

    value = _loads(text, {"parse_float": parse_float, "parse_constant": parse_constant})
    if value is _FROM_JSON5:
        value = _FROM_JSON5.value
        nonfinite[0], odd[0] = float_flags(value)
    return value, nonfinite[0], odd[0]


def odd_float(v: float) -> bool:
    """A float whose orjson text may differ from json.dumps's: a nonzero magnitude below 1e-4
    (`1e-05` vs `0.00001`), with a margin."""
    return v != 0 and -1e-3 < v < 1e-3


class _Json5Result:
    value: Any = None


_FROM_JSON5 = _Json5Result()


def float_flags(value: Any) -> tuple[bool, bool]:
    """(holds NaN or an infinity, holds an `odd_float`) for a parsed JSON value."""
    nonfinite = odd = False
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list | tuple):
            stack.extend(v)
        elif isinstance(v, float):
            if v - v != 0:
                nonfinite = True
            elif odd_float(v):
                odd = True
    return nonfinite, odd


def _loads(text: str | bytes, hooks: dict[str, Any]) -> Any:
    try:
        return json.loads(text, **hooks)
    except ValueError as first:
        if isinstance(text, bytes):
            try:
                text = text.decode("utf-8-sig")
            except UnicodeDecodeError:
                raise first from None
        fast = json5_to_json(text, first)
        if fast is not None:
            try:
                return json.loads(fast, **hooks)
            except ValueError:
                pass
        value = _json5_loads(text, first)
        if not hooks:
            return value
        _FROM_JSON5.value = value  # the caller walks it for what the hooks would have seen
        return _FROM_JSON5


def _json5_loads(text: str, first: ValueError) -> Any:
    try:
        import json5
    except ImportError:  # pragma: no cover - json5 is a dependency
        raise first from None
    try:
        return json5.loads(text)
    except RecursionError:
        raise
    except Exception as exc:
        raise _json5_error(str(exc), text, first) from None


def _json5_error(message: str, text: str, first: ValueError) -> ValueError:
    """json5's `<string>:LINE MSG at column COL` as a JSONDecodeError at that place."""
    m = _JSON5_POSITION.match(message)
    if not m:
        return first
    line, msg, col = int(m.group(1)), m.group(2), int(m.group(3))
    pos = 0
    for _ in range(line - 1):
        nl = text.find("\n", pos)
        if nl < 0:
            break
        pos = nl + 1
    return json.JSONDecodeError(msg, text, min(len(text), pos + col - 1))


# One token of JSON5 text that matters to the translation below: a double-quoted string (kept),
# a single-quoted string (re-quoted), a comment (blanked), a comma before a closing bracket
# (blanked), or an identifier used as an object key (quoted).
_COMMENT = r"//[^\n]*+|/\*(?>[\s\S]*?\*/)"  # atomic: a comment never stretches to fit
_GAP = r"(?:\s|" + _COMMENT + r")*"
_TOKENS = re.compile(
    r'(?P<dq>"[^"\\\n]*(?:\\[\s\S][^"\\\n]*)*")'
    r"|(?P<sq>'[^'\\\n]*(?:\\[\s\S][^'\\\n]*)*')"
    r"|(?P<comment>" + _COMMENT + ")"
    r"|(?P<comma>,)(?=" + _GAP + r"[\]}])"
    r"|(?P<ident>(?<![\w$])[A-Za-z_$][\w$]*)(?=" + _GAP + r":)"
)
_SQ_INNER = re.compile(r"\\(.)|\"", re.DOTALL)


def _requote(m: re.Match[str]) -> str:
    if m.group(0) == '"':
        return '\\"'
    return "'" if m.group(1) == "'" else m.group(0)


def _token(m: re.Match[str]) -> str:
    kind = m.lastgroup
    if kind == "dq":
        return m.group(0)
    if kind == "sq":
        return '"' + _SQ_INNER.sub(_requote, m.group(0)[1:-1]) + '"'
    if kind == "ident":
        return '"' + m.group(0) + '"'
    # a comment or a trailing comma: spaces (and the comment's newlines, so lines stay lines)
    return re.sub(r"[^\n]", " ", m.group(0))


def json5_to_json(text: str, error: ValueError | None = None) -> str | None:
    """The JSON form of JSON5 text that uses only the common extras (comments, trailing commas,
    unquoted keys, single-quoted strings), for the C parser: a JSON5 config or store then parses
    at near-JSON speed. None when there is nothing to translate. Whatever it gets wrong plain
    JSON rejects, and the caller falls back to the json5 parser (which also gives the error).

    With `error`, the position where plain JSON failed: everything before its line parsed as
    JSON, so no newline there is inside a string, and only the rest needs translating (a 100 MB
    store with one trailing comma near its end is not re-scanned from the start)."""
    start = 0
    if isinstance(error, json.JSONDecodeError) and error.doc is text:
        pos = error.pos
        back = pos - 1
        while back >= 0 and text[back] in " \t\r\n":
            back -= 1
        if back >= 0 and text[back] == ",":
            pos = back
        start = text.rfind("\n", 0, pos) + 1
    out = text[:start] + _TOKENS.sub(_token, text[start:]) if start else _TOKENS.sub(_token, text)
    return out if out != text else None


# -- writing -----------------------------------------------------------------------------------


def dumps_compact(obj: Any) -> str:
    return compact_utf8(obj).decode("utf-8")


def to_utf8(obj: Any, **dumps_kw: Any) -> bytes:
    """`json.dumps(obj, ensure_ascii=False)` as UTF-8. A string holding a lone surrogate (a
    `\\ud800` escape in a file another program wrote) has no UTF-8 form: the text is then
    written with ASCII escapes, which every JSON reader (OpenClaw's too) decodes to the same
    strings. Never a crash, never invalid UTF-8."""
    try:
        return json.dumps(obj, ensure_ascii=False, **dumps_kw).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(obj, ensure_ascii=True, **dumps_kw).encode("ascii")


# orjson and json.dumps agree on everything but floats below 1e-4 (fuzzed over millions of
# floats): Python writes `1e-05`, orjson `0.00001` or `1e-7`. So a number token that ends in a
# negative exponent, or starts `0.0000`, sends the data down the exact path. Both patterns begin
# with a literal, which the regex engine finds at memchr speed (~25 ms each over 57 MB); a UUID's
# "3e-4" is followed by a hex digit or a dash, so it does not match.
_SMALL_FLOAT = (
    re.compile(rb"e-[0-9]+(?:[,\n\]}]|\Z)"),
    re.compile(rb"0\.0000[0-9]*(?:[,\n\]}]|\Z)"),
)


def _orjson_differs(out: bytes) -> bool:
    """Whether orjson's bytes may differ from `json.dumps`'s (errs towards "may")."""
    return any(p.search(out) for p in _SMALL_FLOAT)


def store_bytes(obj: Any, *, exact: bool = False, plain: bool = False) -> bytes:
    """sessions.json as OpenClaw writes it (`JSON.stringify(store, null, 2)`): 2-space indent,
    raw UTF-8, keys in order; byte-identical to `to_utf8(obj, indent=2)`, ~15x faster. orjson
    refuses lone surrogates, integers beyond 64 bits and non-string keys: those (and `exact`,
    for data that held NaN or Infinity) take the json.dumps path. `plain`: the caller knows the
    data holds no `odd_float`, so orjson's bytes are not scanned for one (50 ms on 57 MB)."""
    if not exact:
        try:
            out = orjson.dumps(obj, option=orjson.OPT_INDENT_2)
        except TypeError:  # orjson.JSONEncodeError is a TypeError
            pass
        else:
            if plain or not _orjson_differs(out):
                return out
    return to_utf8(obj, indent=2)


def require_utf8(value: str, what: str) -> str:
    """Refuse text with no UTF-8 form. An argument or stdin holding undecodable bytes arrives
    as lone surrogates; written anyway it would become `\\udcff` escapes that OpenClaw shows
    as garbage, so it is a usage error instead (transcripts and stores are UTF-8)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise UsageError(f"{what} is not valid UTF-8 (character {exc.start + 1})") from None
    return value


def compact_utf8(obj: Any) -> bytes:
    """One compact JSON line's bytes (without the newline), as `json.dumps(obj,
    ensure_ascii=False, separators=(",", ":"))` writes it; see to_utf8."""
    try:
        out = orjson.dumps(obj)
    except TypeError:
        pass
    else:
        if not _orjson_differs(out):
            return out
    return to_utf8(obj, separators=(",", ":"))


def atomic_write(
    path: Path,
    data: bytes,
    mode: int = 0o600,
    before_rename: Callable[[Path], None] | None = None,
    *,
    durable: bool = True,
    temp_prefix: str = "",
) -> os.stat_result:
    """Write `<path>.<pid>.<rand>.tmp`, fsync, rename over `path`: readers see old or new, never
    half. On a full or read-only disk the temp file is removed and the original stays. Returns
    the written file's status as it was before the rename (its inode, size and mtime: what a
    cache of the parsed file needs to recognise it later). `before_rename` gets the finished
    temp file (the outbox links it for its followers, flow/follow.py). `durable=False` skips
    the fsync for files only sessiontool reads, whose loss to a power cut is detected and
    reported, never trusted (run records); `temp_prefix` names the temp file as that
    directory's cleaners expect it (repair.py)."""
    from sessiontool.state import safefs

    safefs.ensure_dir(path.parent)  # confined: no link leads the temp file or the rename out
    tmp = path.with_name(f"{temp_prefix}{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
        try:
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            if durable:
                os.fsync(fd)
            written = os.fstat(fd)
        finally:
            os.close(fd)
        if before_rename is not None:
            before_rename(tmp)
        os.replace(tmp, path)
    except OSError as exc:
        _discard(tmp)
        raise StorageError(f"cannot write {path}: {exc.strerror or exc}") from exc
    except BaseException:
        _discard(tmp)  # refused (a planted link in `before_rename`) or interrupted: no leftover
        raise
    return written


def _discard(tmp: Path) -> None:
    try:
        os.unlink(tmp)
    except OSError:
        pass


# `<name>.<pid>.<8 hex>.tmp`: the temp file atomic_write names (after `temp_prefix`).
_TEMP_NAME = re.compile(r"^(?P<base>.+)\.(?P<pid>[0-9]+)\.[0-9a-f]{8}\.tmp$")


def temp_file_of(name: str) -> tuple[str, int] | None:
    """(the file it was to replace, the writer's pid) when `name` is atomic_write's temp-file
    name; None otherwise. A writer killed mid-write leaves it behind (its pid no longer
    alive): what `doctor --fix` and a re-run export remove."""
    m = _TEMP_NAME.match(name)
    if m is None:
        return None
    return m.group("base"), int(m.group("pid"))
