"""Which reader an agent's sessions are read through, and one snapshot per command.

`state/reader.py` declares the read interface and the file formats' readers; the reader of a
remote or schema-foreign store is OpenClaw's gateway (`openclaw/gateway_reader.py`), which
sits above the stores, so the choice among them is made here, above both. The whole interface
for the commands, runs and reports:

    with read_scope():                       # one snapshot per command / per tool call
        for s in iter_sessions(paths, agent_ids):          # SessionRow(agent_id, key, entry)
            ...  # s.entry has sessionId, updatedAt, label, tokens, ... (fields=... to slim it)
        msgs = read_messages(paths, agent_id, full_key, entry, limit=20, keep=None)

`raw_events(paths, agent_id, entry)` gives a non-JSONL session's stored events, oldest first
(`search`/`usage` index them); `reader_for(paths, agent_id)` the agent's `SessionReader`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from sessiontool.errors import SessiontoolError
from sessiontool.state.detect import StoreInfo, detect, gateway_url, local_agent_ids
from sessiontool.state.paths import StatePaths
from sessiontool.state.reader import JsonlReader, SessionReader
from sessiontool.state.sessions_json import Entry
from sessiontool.state.transcript import Message
from sessiontool.structs import Value


def agent_ids_on_disk(paths: StatePaths) -> list[str]:
    """Agents with a sessions dir or an OpenClaw database, sorted (a remote gateway's: the
    agents it has sessions for)."""
    if gateway_url(paths) is not None:
        from sessiontool.openclaw.gateway_reader import agent_ids

        return agent_ids(paths)
    return local_agent_ids(paths)


_scopes: list[dict[tuple[str, str], SessionReader]] = []


@contextmanager
def read_scope() -> Iterator[None]:
    """Readers opened inside share one snapshot (one read transaction per database) and are
    closed at the end. Nested scopes reuse the outermost one."""
    if _scopes:
        yield
        return
    _scopes.append({})
    try:
        yield
    finally:
        for r in _scopes.pop().values():
            r.close()


def reader_for(paths: StatePaths, agent_id: str) -> SessionReader:
    info = detect(paths, agent_id)
    cache_key = (str(paths.root), agent_id)
    if _scopes and cache_key in _scopes[0]:
        return _scopes[0][cache_key]
    reader: SessionReader
    if info.format == "gateway":
        from sessiontool.openclaw.gateway_reader import GatewayReader

        reader = GatewayReader(paths, info)
    elif info.format == "openclaw-sqlite":
        reader = _sqlite_or_gateway(paths, info)
    else:
        from sessiontool.state.chat_display import openclaw_state

        reader = JsonlReader(paths, info, as_openclaw=openclaw_state(paths.root))
    if _scopes:
        _scopes[0][cache_key] = reader
    return reader


def _sqlite_or_gateway(paths: StatePaths, info: StoreInfo) -> SessionReader:
    """OpenClaw's database read directly; when its schema is one sessiontool cannot read and
    the state dir's gateway runs, the same store read through the gateway (OpenClaw's own code
    reads any schema it wrote), with one warning naming the schema. No gateway: exit 5."""
    from sessiontool.state.openclaw_sqlite import SqliteReader, UnsupportedStoreError

    direct = SqliteReader(paths, info)
    try:
        direct.conn()
    except UnsupportedStoreError as exc:
        from sessiontool.openclaw import gateway

        g = gateway.find(paths)
        if not g.reachable():
            raise
        from sessiontool import diag
        from sessiontool.openclaw.gateway_reader import GatewayReader

        diag.warn(f"{exc.message}; reading it through the gateway at {g.url} instead")
        return GatewayReader(paths, info)
    except SessiontoolError:
        pass  # unreadable for another reason: raised again where the store is read
    return direct


class SessionRow(Value):
    __slots__ = ("agent_id", "key", "entry")

    agent_id: str
    key: str  # the full key, `agent:<id>:<rest>`
    entry: Entry

    def __init__(self, agent_id: str, key: str, entry: Entry) -> None:
        self.agent_id = agent_id
        self.key = key
        self.entry = entry


def iter_sessions(
    paths: StatePaths, agent_ids: Iterable[str], fields: Sequence[str] | None = None
) -> Iterator[SessionRow]:
    """Every session of these agents (call inside `read_scope()` for one snapshot)."""
    for agent_id in agent_ids:
        for full_key, f in reader_for(paths, agent_id).sessions(fields).items():
            yield SessionRow(agent_id, full_key, f.entry)


def read_messages(
    paths: StatePaths,
    agent_id: str,
    full_key: str,
    entry: Entry,
    *,
    limit: int | None = None,
    keep: Callable[[Message], bool] | None = None,
) -> list[Message]:
    """A session's messages as stored (envelopes kept), oldest first, the last `limit`."""
    return reader_for(paths, agent_id).messages(full_key, entry, limit, keep).messages


def raw_events(paths: StatePaths, agent_id: str, entry: Entry) -> list[Any] | None:
    """Every stored event of the session's transcript (what a JSONL line holds: messages and
    the entries between them), oldest first, for a reader that keeps them somewhere other than
    a JSONL file (OpenClaw's SQLite store); None for a JSONL store (read the file) or a session
    without a usable sessionId. `usage` needs every assistant message, not the chat view
    `messages` gives (a silent reply cost tokens too)."""
    rdr = reader_for(paths, agent_id)
    sid = entry.get("sessionId")
    events = getattr(rdr, "events_newest_first", None)
    if events is None or not isinstance(sid, str):
        return None
    out = [ev for ev in events(sid) if isinstance(ev, dict)]
    out.reverse()
    return out
