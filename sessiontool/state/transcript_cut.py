"""A JSONL transcript cut at one entry, for `fork --at` and `rewind` (OpenClaw's
`sessions.fork` / `sessions.rewind`: the state before one of the user's messages).

The work is byte copies, never a parse of the whole file: the entry is found by the fixed form
its line starts with (`{"type":"message","id":"<id>"`, as OpenClaw and sessiontool write
entries; a line-by-line parse only when that form is not found), and the parts are copied with
`os.copy_file_range` / `os.sendfile` (in the kernel), so a 100 MB transcript costs about a `cp`.

Every file is written to a temp name and renamed into place before anything points at it, and
a rewind keeps the transcript as it was under a second name (a hard link) before the shorter
copy replaces it: a crash or a full disk leaves the original whole, and at worst a temp file
(`doctor --fix` clears it) or a finished copy nobody points to yet.
"""

from __future__ import annotations

import json
import mmap
import os
from pathlib import Path
from typing import Any

from sessiontool.errors import StorageError, UsageError
from sessiontool.state import safefs
from sessiontool.structs import Value

COPY_CHUNK = 64 * 1024 * 1024


class Cut(Value):
    """Where the entry's line starts (`offset`), where the header line ends (`body`), the
    entry itself and the file's size when it was read."""

    __slots__ = ("offset", "body", "entry", "size")

    offset: int
    body: int
    entry: dict[str, Any] | None
    size: int

    def __init__(self, offset: int, body: int, entry: dict[str, Any] | None, size: int) -> None:
        self.offset, self.body, self.entry, self.size = offset, body, entry, size


def _header_end(mm: mmap.mmap | bytes) -> int:
    """The offset after the header line (`{"type":"session",...}`), 0 when there is none."""
    nl = mm.find(b"\n")
    first = mm[: nl if nl >= 0 else len(mm)]
    if b'"type":"session"' in first[:200] or b'"type": "session"' in first[:200]:
        return nl + 1 if nl >= 0 else len(mm)
    return 0


def header_end_of(path: Path) -> int:
    """`_header_end` of a file: the offset after its header line."""
    with open(path, "rb") as fh:
        return _header_end(fh.readline(1 << 20))


def _parse(line: bytes) -> dict[str, Any] | None:
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


def _scan(mm: mmap.mmap, entry_id: str, start: int) -> int:
    """Line by line from `start`: the offset of the line whose entry has this id, or -1."""
    pos = start
    while pos < len(mm):
        nl = mm.find(b"\n", pos)
        end = nl if nl >= 0 else len(mm)
        if entry_id.encode() in mm[pos:end]:
            obj = _parse(mm[pos:end])
            if obj is not None and obj.get("id") == entry_id:
                return pos
        pos = end + 1
    return -1


def find_entry(path: Path, entry_id: str) -> Cut:
    """The entry with this id (exit 3 when the transcript has none)."""
    from sessiontool.errors import NotFoundError

    if not entry_id or any(c in entry_id for c in '"\\\n'):
        raise UsageError(f"invalid message id {entry_id!r}")
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size == 0:
                raise NotFoundError(f"no message {entry_id} in {path.name} (it is empty)")
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                body = _header_end(mm)
                needle = b'{"type":"message","id":"' + entry_id.encode() + b'"'
                at = mm.find(needle, body)
                while at > 0 and mm[at - 1 : at] != b"\n":
                    at = mm.find(needle, at + 1)
                if at < 0:
                    at = _scan(mm, entry_id, body)
                if at < 0:
                    raise NotFoundError(
                        f"no message {entry_id} in the session's transcript",
                        hint="`sessiontool history KEY --json` lists them (messageIds)",
                    )
                nl = mm.find(b"\n", at)
                entry = _parse(mm[at : nl if nl >= 0 else size])
                return Cut(at, body, entry, size)
    except FileNotFoundError:
        raise NotFoundError(f"the session has no transcript ({path.name})") from None
    except OSError as exc:
        raise StorageError(f"cannot read transcript {path}: {exc.strerror}") from exc


def user_text(entry: dict[str, Any] | None) -> str | None:
    """The text of a user message entry (OpenClaw's `editorText`), None for any other entry."""
    msg = entry.get("message") if entry else None
    if not isinstance(msg, dict) or msg.get("role") != "user":
        return None
    content = msg.get("content")
    if isinstance(content, str):
        return content
    parts = (
        [b.get("text") for b in content if isinstance(b, dict)] if isinstance(content, list) else []
    )
    return "".join(p for p in parts if isinstance(p, str))


def _copy(src: int, dst: int, start: int, end: int) -> None:
    """Bytes [start, end) of src appended to dst, in the kernel where it can."""
    pos = start
    while pos < end:
        n = min(COPY_CHUNK, end - pos)
        try:
            done = os.copy_file_range(src, dst, n, pos)
        except OSError:
            os.lseek(src, pos, os.SEEK_SET)
            data = os.read(src, min(n, 8 * 1024 * 1024))
            done = os.write(dst, data)
        if done <= 0:
            raise StorageError("the transcript ended while it was copied")
        pos += done


def copy_to_temp(src: Path, dest: Path, header: bytes, start: int, end: int) -> Path:
    """`header` + bytes [start, end) of `src` in a new temp file beside `dest`
    (`<dest>.<pid>.<hex>.tmp`, the form `doctor --fix` clears after a kill), its path. Not
    fsynced: until it is renamed into place the source holds everything, and after, the
    source (or its archive) still does. On any failure (a full disk) the temp file is
    removed."""
    tmp = dest.with_name(f"{dest.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    try:
        fd = safefs.open_write(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        raise StorageError(f"cannot write {tmp}: {exc.strerror}") from exc
    try:
        try:
            with open(src, "rb") as fh:
                view = memoryview(header)
                while view:
                    view = view[os.write(fd, view) :]
                _copy(fh.fileno(), fd, start, end)
        finally:
            os.close(fd)
    except OSError as exc:
        _unlink(tmp)
        raise StorageError(f"cannot write {dest}: {exc.strerror}") from exc
    except BaseException:
        _unlink(tmp)
        raise
    return tmp


def write_copy(src: Path, dest: Path, header: bytes, start: int, end: int) -> None:
    """`dest` := `header` + bytes [start, end) of `src`, written whole under a temp name and
    renamed into place (`dest` is never seen half-written)."""
    tmp = copy_to_temp(src, dest, header, start=start, end=end)
    place(tmp, dest)


def place(tmp: Path, dest: Path) -> None:
    """Rename a finished temp file over `dest` (removed when that fails)."""
    try:
        os.rename(tmp, dest)
    except OSError as exc:
        _unlink(tmp)
        raise StorageError(f"cannot write {dest}: {exc.strerror}") from exc


def swap_into_place(tmp: Path, dest: Path) -> None:
    """Put a finished temp file in place of an existing `dest` whose content another name
    keeps (`keep_as`), as `place` does, but by exchanging the two names (Linux's
    `renameat2(RENAME_EXCHANGE)`) and then dropping the temp name, which is left on the old
    content. A plain rename over an existing file makes ext4 (`auto_da_alloc`, the default)
    write the new file's blocks out at the rename and the next fsync (the store's) wait for
    them: for a 100 MB transcript most of a rewind's time, a write to disk that `cp` never
    waits for (docs/decisions.md, "A rewind exchanges names"). Where the call is missing or
    the filesystem refuses it, a plain rename (`place`)."""
    if not _exchange(tmp, dest):
        place(tmp, dest)
        return
    _unlink(tmp)  # now the old content's second name; `keep_as` gave it its own


def _exchange(a: Path, b: Path) -> bool:
    """Atomically exchange two existing names; False when the system cannot."""
    import sys

    if not sys.platform.startswith("linux"):  # renameat2 is Linux's
        return False
    import ctypes

    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    import errno

    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
        return False
    _unlink(a)
    raise StorageError(f"cannot write {b}: {os.strerror(err)}")


def keep_as(src: Path, archive: Path) -> None:
    """A second name for the transcript as it is now (a hard link: no byte copied); the
    rename that replaces `src` afterwards leaves this name on the old content."""
    try:
        os.link(src, archive, follow_symlinks=False)
    except OSError as exc:
        raise StorageError(f"cannot archive {src}: {exc.strerror}") from exc


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
