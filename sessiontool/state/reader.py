"""The read interface over every session-store format (`SessionReader`) and the reader of
sessiontool's own format, sessions.json + JSONL (`JsonlReader`). Which format an agent's
sessions are in is `state/detect.py`; the reader chosen per agent (OpenClaw's SQLite store in
`state/openclaw_sqlite.py`, a gateway's in `openclaw/gateway_reader.py`) and the read scope
are `sessions/reading.py`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from sessiontool.state.detect import StoreInfo
from sessiontool.state.paths import StatePaths, is_plain_name
from sessiontool.state.sessions_json import Entry, Folded, Store, fold, lookup, read_store
from sessiontool.state.transcript import Message, ReadResult, read_tail


class SessionReader(Protocol):
    info: StoreInfo

    def sessions(self, fields: Sequence[str] | None = None) -> dict[str, Folded]:
        """Full key → session. `fields`: only these entry fields are needed (a reader may
        return just those, plus sessionId and updatedAt)."""
        ...

    def session(self, full_key: str) -> Folded | None:
        """One session by its full key, as `sessions()` has it (a reader may find it without
        building them all)."""
        ...

    def messages(
        self,
        full_key: str,
        entry: Entry,
        limit: int | None,
        keep: Callable[[Message], bool] | None = None,
        *,
        stop: Callable[[Message], bool] | None = None,
        skip_line: Callable[[bytes], bool] | None = None,
    ) -> ReadResult:
        """The last `limit` kept messages of the session's current transcript, oldest first.
        Reading goes from the newest back and ends at the first message for which `stop` holds
        (`--since`); `skip_line` drops a JSONL line unparsed (see transcript.read_tail)."""
        ...

    def close(self) -> None: ...


class JsonlReader:
    """sessions.json + `<sessionId>.jsonl`: the format sessiontool writes."""

    def __init__(self, paths: StatePaths, info: StoreInfo, *, as_openclaw: bool = False) -> None:
        """`as_openclaw`: the store is OpenClaw's JSON-era store (an `openclaw.json` state dir),
        whose messages are shown as its gateway's chat.history shows them (state/chat_display.py);
        `stored_messages` reads them as stored all the same (export)."""
        self.paths = paths
        self.info = info
        self.as_openclaw = as_openclaw
        self._sessions: dict[str, Folded] | None = None
        self._store: Store | None = None

    def _read(self) -> Store:
        if self._store is None:
            self._store = read_store(self.info.location)
        return self._store

    def store(self) -> Store:
        """The store as parsed, once per reader (a listing over 100,000 sessions that needs a
        few fields reads them from here, not from a fold of every entry)."""
        return self._read()

    def sessions(self, fields: Sequence[str] | None = None) -> dict[str, Folded]:
        if self._sessions is None:
            self._sessions = fold(self._read(), self.info.agent_id)
        return self._sessions

    def session(self, full_key: str) -> Folded | None:
        if self._sessions is not None:
            return self._sessions.get(full_key)
        # The stored forms of this one key, not a fold of every entry (10,000 in a big store).
        return lookup(self._read(), self.info.agent_id, full_key)

    def _path(self, entry: Entry) -> Path | None:
        from sessiontool.state.paths import transcript_path_for

        sid = entry.get("sessionId")
        if not isinstance(sid, str) or not is_plain_name(sid):
            return None
        return transcript_path_for(
            self.paths.sessions_dir(self.info.agent_id), sid, entry.get("sessionFile")
        )

    def messages(
        self,
        full_key: str,
        entry: Entry,
        limit: int | None,
        keep: Callable[[Message], bool] | None = None,
        *,
        stop: Callable[[Message], bool] | None = None,
        skip_line: Callable[[bytes], bool] | None = None,
    ) -> ReadResult:
        path = self._path(entry)
        if path is None:
            return ReadResult(exists=False)
        if self.as_openclaw:
            res = _shown_tail(path, limit, keep, stop=stop, skip_line=skip_line)
        else:
            res = read_tail(path, limit, keep, stop=stop, skip_line=skip_line)
        if res.bad_lines:
            from sessiontool import diag

            diag.warn(f"{path}: skipped {res.bad_lines} unreadable line(s)")
        return res

    def stored_messages(self, entry: Entry) -> list[Message]:
        """Every message of the session's transcript as stored (an export is a copy, not what
        a gateway would show of it)."""
        path = self._path(entry)
        return read_tail(path, None).messages if path is not None else []

    def close(self) -> None:
        if _kept is not None and self._sessions is not None:
            _kept.append(self._sessions)
        self._sessions = None
        self._store = None


def _shown_tail(
    path: Path,
    limit: int | None,
    keep: Callable[[Message], bool] | None,
    stop: Callable[[Message], bool] | None,
    skip_line: Callable[[bytes], bool] | None,
) -> ReadResult:
    """read_tail of the messages OpenClaw's chat.history shows, each as it shows it: `limit`
    and `keep` count the shown ones (a hidden REPLY_SKIP is no message of the page)."""
    from sessiontool.state.chat_display import display_message

    def shown(msg: Message) -> bool:
        d = display_message(msg)
        return d is not None and (keep is None or keep(d))

    res = read_tail(path, limit, shown, stop=stop, skip_line=skip_line)
    res.messages = [d for d in map(display_message, res.messages) if d is not None]
    return res


# A one-shot command (list, history) ends with os._exit: what its readers parsed (100 MB of
# objects for a big store) is left for the process's end instead of being freed object by
# object when the scope closes (a tenth of such a run). Long-lived processes never set it.
_kept: list[Any] | None = None


def keep_until_exit() -> None:
    global _kept
    if _kept is None:
        _kept = []
