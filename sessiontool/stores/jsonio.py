"""JSON in and out: the fast standard parser first and JSON5 only when that fails (start-up time
and 100 MB stores), compact one-line output, and the atomic replace every rewritten file uses."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from sessiontool.errors import StorageError, UsageError


def loads_tolerant(text: str | bytes) -> Any:
    """Parse JSON, falling back to JSON5 (OpenClaw reads both). Raises ValueError."""
    try:
        return json.loads(text)
    except ValueError as first:
        try:
            import json5
        except ImportError:  # pragma: no cover - json5 is a dependency
            raise first from None
        if isinstance(text, bytes):
            try:
                text = text.decode("utf-8")
            except UnicodeDecodeError:
                raise first from None
        try:
            return json5.loads(text)
        except Exception:
            raise first from None


def dumps_compact(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def to_utf8(obj: Any, **dumps_kw: Any) -> bytes:
    """`json.dumps(obj, ensure_ascii=False)` as UTF-8. A string holding a lone surrogate (a
    `\\ud800` escape in a file another program wrote) has no UTF-8 form: the text is then
    written with ASCII escapes, which every JSON reader (OpenClaw's too) decodes to the same
    strings. Never a crash, never invalid UTF-8."""
    try:
        return json.dumps(obj, ensure_ascii=False, **dumps_kw).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(obj, ensure_ascii=True, **dumps_kw).encode("ascii")


def require_utf8(value: str, what: str) -> str:
    """Refuse text with no UTF-8 form. An argument or stdin holding undecodable bytes arrives
    as lone surrogates; written anyway it would become `\\udcff` escapes that OpenClaw shows
    as garbage, so it is a usage error instead (transcripts and the index are UTF-8)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise UsageError(f"{what} is not valid UTF-8 (character {exc.start + 1})") from None
    return value


def compact_utf8(obj: Any) -> bytes:
    """One compact JSON line's bytes (without the newline); see to_utf8."""
    return to_utf8(obj, separators=(",", ":"))


def atomic_write(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Write `<path>.<pid>.<rand>.tmp`, fsync, rename over `path`: readers see old or new, never
    half. On a full or read-only disk the temp file is removed and the original stays."""
    from sessiontool.stores import safefs

    safefs.ensure_dir(path.parent)  # confined: no link leads the temp file or the rename out
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
        try:
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise StorageError(f"cannot write {path}: {exc.strerror or exc}") from exc
