"""JSONL transcripts in OpenClaw's session format (version 3): the header, whole-line appends
under the transcript lock, and readers that tolerate torn and bad lines and read the last N
messages from the end without loading the file."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sessiontool.clock import iso, now_ms
from sessiontool.errors import StorageError
from sessiontool.state import safefs
from sessiontool.state.jsonio import compact_utf8
from sessiontool.state.locks import transcript_lock
from sessiontool.state.paths import ensure_dir
from sessiontool.structs import Value

if TYPE_CHECKING:
    from sessiontool.state.paths import StatePaths

SESSION_VERSION = 3
BLOCK = 64 * 1024

Message = dict[str, Any]


def new_entry_id() -> str:
    return os.urandom(4).hex()


def header_line(
    session_id: str, cwd: str | None = None, ts_ms: int | None = None
) -> dict[str, Any]:
    return {
        "type": "session",
        "version": SESSION_VERSION,
        "id": session_id,
        "timestamp": iso(now_ms() if ts_ms is None else ts_ms),
        "cwd": cwd if cwd is not None else os.getcwd(),
    }


def _parse(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None


def iter_lines_reverse(path: Path) -> Iterator[tuple[bytes, bool]]:
    """Lines from the last to the first, each with whether it was newline-terminated. Reads
    fixed-size blocks backwards, so the tail of a 1 GB file costs what the tail of 1 MB does.
    A line longer than a block is gathered as a list of pieces and joined once (re-joining it
    at every block made a 50 MB line, a pasted image, take seconds per block)."""
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        pos = fh.tell()
        pending: list[bytes] = []  # pieces of the line being gathered, last piece first
        pending_terminated = False  # the segment after the file's last '\n' is unterminated
        while pos > 0:
            size = min(BLOCK, pos)
            pos -= size
            fh.seek(pos)
            block = fh.read(size)
            if b"\n" not in block:
                pending.append(block)
                continue
            parts = block.split(b"\n")
            pending.append(parts[-1])
            last = b"".join(reversed(pending))
            if last:
                yield last, pending_terminated
            for line in reversed(parts[1:-1]):
                yield line, True
            pending = [parts[0]]
            pending_terminated = True
        rest = b"".join(reversed(pending))
        if rest:
            yield rest, pending_terminated


class ReadResult(Value):
    __slots__ = ("messages", "bad_lines", "exists", "ids")

    messages: list[Message]
    bad_lines: int
    exists: bool
    ids: list[str | None]  # each message's transcript entry id, where the reader knows it

    def __init__(
        self, messages: list[Message] | None = None, bad_lines: int = 0, exists: bool = True
    ) -> None:
        self.messages = [] if messages is None else messages
        self.bad_lines = bad_lines
        self.exists = exists
        self.ids = []


def _message_of(obj: Any) -> Message | None:
    if isinstance(obj, dict):
        msg = obj.get("message")
        if isinstance(msg, dict):
            return msg
    return None


# A tool result line as OpenClaw and sessiontool write it: the fixed prefix of a transcript
# entry, then a message whose role is toolResult. Quotes inside JSON strings are escaped, so the
# prefix cannot be text inside a string: such a line is a tool result without being parsed.
_TOOL_RESULT_LINE = re.compile(
    rb'\{"type":"message","id":"[^"\\]*","parentId":(?:null|"[^"\\]*"),'
    rb'"timestamp":"[^"\\]*","message":\{"role":"toolResult"'
)


def is_tool_result_line(raw: bytes) -> bool:
    """Whether a transcript line is certainly a tool result (False: parse it to know)."""
    return _TOOL_RESULT_LINE.match(raw) is not None


def read_tail(
    path: Path,
    limit: int | None,
    keep: Callable[[Message], bool] | None = None,
    *,
    stop: Callable[[Message], bool] | None = None,
    skip_line: Callable[[bytes], bool] | None = None,
) -> ReadResult:
    """The last `limit` kept messages in file order (None: all), read from the end: reading
    ends after `limit` kept messages, or at the first message (from the end) for which `stop`
    holds (`--since`: the first older message), so a 1 GB transcript costs what its tail costs.
    `skip_line` drops lines before parsing (tool results when they are not shown). Blank lines
    and a torn last line are skipped silently; other unparsable lines are counted."""
    result = ReadResult()
    if limit is not None and limit <= 0:
        result.exists = path.exists()
        return result
    try:
        lines = iter_lines_reverse(path)
        collected: list[Message] = []
        ids = result.ids
        for raw, terminated in lines:
            if not raw.strip() or (skip_line is not None and skip_line(raw)):
                continue
            obj = _parse(raw)
            if obj is None:
                if terminated:
                    result.bad_lines += 1
                continue
            msg = _message_of(obj)
            if msg is None:
                continue
            if stop is not None and stop(msg):
                break
            if keep is not None and not keep(msg):
                continue
            collected.append(msg)
            ids.append(obj.get("id") if isinstance(obj.get("id"), str) else None)
            if limit is not None and len(collected) >= limit:
                break
    except FileNotFoundError:
        result.exists = False
        return result
    except IsADirectoryError:
        result.exists = False
        return result
    collected.reverse()
    ids.reverse()
    result.messages = collected
    return result


def read_all(path: Path) -> ReadResult:
    return read_tail(path, None)


def read_with_ids(path: Path) -> list[tuple[str | None, Message]]:
    """Every message of a transcript in file order, each with its line's entry id (what a
    `search` hit names as `messageId`); a missing file is no messages."""
    out: list[tuple[str | None, Message]] = []
    try:
        with open(path, "rb") as fh:
            for raw in fh:
                obj = _parse(raw) if raw.strip() else None
                msg = _message_of(obj)
                if msg is not None and isinstance(obj, dict):
                    ident = obj.get("id")
                    out.append((ident if isinstance(ident, str) else None, msg))
    except (FileNotFoundError, IsADirectoryError):
        return []
    return out


def _last_entry_id(path: Path) -> str | None:
    try:
        for raw, _terminated in iter_lines_reverse(path):
            obj = _parse(raw)
            if (
                isinstance(obj, dict)
                and obj.get("type") != "session"
                and isinstance(obj.get("id"), str)
            ):
                return str(obj["id"])
            if isinstance(obj, dict) and obj.get("type") == "session":
                return None
    except FileNotFoundError:
        return None
    return None


def _needs_newline(fd: int) -> bool:
    size = os.fstat(fd).st_size
    if size == 0:
        return False
    return os.pread(fd, 1, size - 1) != b"\n"


def append_entries(
    path: Path,
    session_id: str,
    entries: list[dict[str, Any]],
    *,
    cwd: str | None = None,
    timeout: float | None = None,
) -> list[dict[str, Any]]:
    """Append transcript entries (each gets id, parentId, timestamp), writing the header first
    when the file is new. Each line is one os.write on an O_APPEND descriptor, under the
    transcript lock, so concurrent writers (OpenClaw included) never interleave bytes.

    A transcript that `delete` renamed aside (`<file>.deleted.<stamp>`, under this same lock)
    gets the lines instead of a fresh file no entry points to: whether the file is there is
    decided under the lock, so a turn is never split between the archive and a new file."""
    if path.parent.name == "sessions" and path.parent.parent.parent.name == "agents":
        from sessiontool.state.detect import require_writable
        from sessiontool.state.paths import StatePaths

        # Never beside OpenClaw 2026.8+'s database: its transcripts are written by its gateway.
        agent_dir = path.parent.parent
        require_writable(StatePaths(agent_dir.parent.parent), [agent_dir.name], "write")
    ensure_dir(path.parent)
    written: list[dict[str, Any]] = []
    with transcript_lock(path, timeout):
        if not os.path.lexists(path):
            path = archived_of(path) or path
        try:
            fd = safefs.open_write(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        except OSError as exc:
            raise StorageError(f"cannot open transcript {path}: {exc.strerror}") from exc
        try:
            new_file = os.fstat(fd).st_size == 0
            parent = None if new_file else _last_entry_id(path)
            prefix = b"\n" if _needs_newline(fd) else b""
            lines: list[bytes] = []
            if new_file:
                lines.append(compact_utf8(header_line(session_id, cwd)) + b"\n")
            for entry in entries:
                line = {
                    "type": entry.get("type", "message"),
                    "id": new_entry_id(),
                    "parentId": parent,
                    "timestamp": iso(now_ms()),
                }
                line.update({k: v for k, v in entry.items() if k != "type"})
                parent = line["id"]
                written.append(line)
                lines.append(compact_utf8(line) + b"\n")
            payload = prefix + b"".join(lines)
            _write_all(fd, payload, path)
        finally:
            os.close(fd)
    return written


def check_writable(paths: StatePaths, agent_id: str, entry: Mapping[str, Any] | None) -> None:
    """Refuse now (exit 5, in the foreground) when a session's transcript or its lock is a
    planted link: the run's worker would refuse it anyway, as the run's error, after the
    command had already said the run started."""
    from sessiontool.state.paths import is_plain_name, transcript_path_for

    sid = entry.get("sessionId") if entry is not None else None
    if entry is None or not isinstance(sid, str) or not is_plain_name(sid):
        return
    path = transcript_path_for(paths.sessions_dir(agent_id), sid, entry.get("sessionFile"))
    safefs.preflight(paths.root, [], [path, path.with_name(path.name + ".lock")])


def archived_of(path: Path) -> Path | None:
    """The newest plain archive of a transcript `delete` renamed aside, or None (a compressed
    one is never appended to)."""
    prefix = path.name + ".deleted."
    try:
        names = os.listdir(path.parent)
    except OSError:
        return None
    found = sorted(
        (_archive_order(n[len(prefix) :]), n)
        for n in names
        if n.startswith(prefix) and not n.endswith((".zst", ".gz", ".lock", ".tmp"))
    )
    return path.with_name(found[-1][1]) if found else None


def _archive_order(suffix: str) -> tuple[str, int]:
    """`<stamp>` then `<stamp>.1`, `<stamp>.2`, ... (a name taken gets a counter)."""
    stamp, dot, n = suffix.rpartition(".")
    if dot and n.isdigit() and stamp.endswith("Z"):
        return stamp, int(n)
    return suffix, 0


def _write_all(fd: int, payload: bytes, path: Path) -> None:
    start = os.fstat(fd).st_size
    try:
        view = memoryview(payload)
        while view:
            n = os.write(fd, view)
            view = view[n:]
    except OSError as exc:
        # Never leave half a line behind: cut back to where this append started.
        try:
            os.ftruncate(fd, start)
        except OSError:
            pass
        raise StorageError(f"cannot append to transcript {path}: {exc.strerror}") from exc


def append_message(path: Path, session_id: str, message: Message, **kw: Any) -> dict[str, Any]:
    return append_entries(path, session_id, [{"type": "message", "message": message}], **kw)[0]


def follow(
    path: Path,
    start_offset: int,
    poll: float = 0.25,
    stop: Callable[[], bool] | None = None,
) -> Iterator[Message]:
    """New messages appended after `start_offset`, as they arrive (a partial line waits).
    `stop`, asked before each look, ends it (`top`'s transcript view, closed)."""
    import time

    offset = start_offset
    pending = b""
    while stop is None or not stop():
        try:
            with open(path, "rb") as fh:
                fh.seek(offset)
                data = fh.read()
        except FileNotFoundError:
            data = b""
        if data:
            offset += len(data)
            pending += data
            *complete, pending = pending.split(b"\n")
            for raw in complete:
                obj = _parse(raw) if raw.strip() else None
                msg = _message_of(obj)
                if msg is not None:
                    yield msg
        else:
            time.sleep(poll)


def file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
