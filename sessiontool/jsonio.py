"""JSON in and out: the fast standard parser first and JSON5 only when that fails (start-up time
and 100 MB stores), compact one-line output, and the atomic replace every rewritten file uses."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .errors import StorageError


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


def atomic_write(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Write `<path>.<pid>.<rand>.tmp`, fsync, rename over `path`: readers see old or new, never
    half. On a full or read-only disk the temp file is removed and the original stays."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
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
