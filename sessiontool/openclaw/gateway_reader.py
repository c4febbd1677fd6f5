"""The store reader (state/reader.py's `SessionReader`) answered by OpenClaw's gateway instead of
files: `sessions.list` for the sessions, `chat.history` for a transcript. Used for a remote gateway
(`--gateway URL`, openclaw/target.py) and, on a local state dir, for an OpenClaw database whose
schema sessiontool cannot read (the gateway reads it with OpenClaw's own code).

What comes back is mapped to what the local read of the same state gives (the same entry fields,
the same chat view: the gateway's chat.history applies the display rules state/openclaw_sqlite.py
copies). Where the gateway shows less than the database holds, the difference is named, never
hidden (README, "Past one machine"):
- chat.history cuts a text at `maxChars` (8,000 by default; sessiontool asks for the maximum,
  500,000) and replaces a message over its byte budget with a placeholder: such a message
  carries `truncated: true`;
- `displayName` of a labelled session is its label (the gateway does not return the stored one):
  left out;
- `model` / `contextTokens` of a session that has none stored are the gateway's defaults;
- a session's own model (`modelOverride` / `providerOverride`, `session --model`) is not in a
  `sessions.list` row: `list` through a gateway shows the resolved `model` only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sessiontool.state.detect import StoreInfo
from sessiontool.state.paths import StatePaths
from sessiontool.state.sessions_json import Entry, Folded, normalize_entry
from sessiontool.state.transcript import Message, ReadResult

PAGE = 1000  # sessions.list rows per call
HISTORY_MAX = 1000  # chat.history's largest page (CHAT_HISTORY_MAX_ENTRIES)
MAX_CHARS = 500_000  # chat.history's largest text cap
DEFAULT_MAX_CHARS = 8_000  # its default
TRUNCATED_TAIL = "\n...(truncated)..."
CALL_TIMEOUT_S = 60.0

# Entry fields a sessions.list row carries with the stored meaning (the rest of a row is the
# gateway's own projection: kind, status, placement, ...).
ROW_FIELDS = (
    "sessionId",
    "updatedAt",
    "label",
    "displayName",
    "model",
    "modelProvider",
    "contextTokens",
    "totalTokens",
    "inputTokens",
    "outputTokens",
    "thinkingLevel",
    "verboseLevel",
    "systemSent",
    "abortedLastRun",
    "sendPolicy",
    "lastChannel",
    "lastTo",
    "lastAccountId",
    "deliveryContext",
    "chatType",
    "spawnedBy",
    "parentSessionKey",
    "spawnDepth",
    "status",  # OpenClaw's run status of the session, as its own rows (and list --json) show it
    "room",
    "space",
    "subject",
    "groupId",
    "origin",
    "pinnedAt",
    "modelOverride",
    "providerOverride",
    "forkSource",
)
# What chat.history adds to a message that the stored event does not hold: keys of the message
# (who forwarded an inter-session message) and of its `__openclaw` (ids, positions, the cut).
ADDED_KEYS = ("senderLabel", "senderSession")
ADDED_META = ("id", "seq", "recordTimestampMs", "transcriptPosition", "truncated", "reason")

# Every session row of the gateway, per state-dir root, for one read scope (one sessions.list
# walk serves every agent's reader; the last reader to close drops it).
_rows: dict[str, list[dict[str, Any]]] = {}
# The last chat.history page read of a session (per root and key): the message ids it held and
# its highest seq, where `history --follow` starts (gateway_follow.py). Outlives the read scope.
_marks: dict[tuple[str, str], tuple[frozenset[str], int]] = {}


def page_mark(page: dict[str, Any]) -> tuple[frozenset[str], int]:
    """The ids of a chat.history page's messages and its highest `seq` (0 for none)."""
    ids: set[str] = set()
    top = 0
    raw = page.get("messages")
    for m in raw if isinstance(raw, list) else []:
        meta = m.get("__openclaw") if isinstance(m, dict) else None
        if not isinstance(meta, dict):
            continue
        if isinstance(meta.get("id"), str):
            ids.add(meta["id"])
        seq = meta.get("seq")
        if isinstance(seq, int) and not isinstance(seq, bool) and seq > top:
            top = seq
    return frozenset(ids), top


def last_mark(paths: StatePaths, full_key: str) -> tuple[frozenset[str], int] | None:
    return _marks.get((str(paths.root), full_key))


def _call(paths: StatePaths, method: str, params: dict[str, Any]) -> dict[str, Any]:
    from sessiontool.openclaw import gateway

    return gateway.call(paths, method, params, timeout_s=CALL_TIMEOUT_S)


def require_up(paths: StatePaths) -> None:
    """Exit 4 at once, naming the gateway, when nothing listens there (a TCP connect)."""
    from sessiontool.openclaw import gateway

    g = gateway.find(paths)
    if not g.reachable():
        from sessiontool.errors import ForbiddenError

        why = f" ({g.unreachable_why})" if g.unreachable_why else ""
        raise ForbiddenError(f"no OpenClaw gateway answers at {g.url}{why}", hint=g.how_to_start())


def gateway_config(paths: StatePaths) -> tuple[Path, dict[str, Any]] | None:
    """The remote gateway's OpenClaw config (`config.get`, operator.read; secrets come back
    redacted and are not used): where it lives on the gateway's host and its parsed content.
    None when it cannot be asked; the command's own calls then say why."""
    from sessiontool.errors import SessiontoolError
    from sessiontool.openclaw import gateway

    try:
        if not gateway.find(paths).reachable():
            return None
        res = _call(paths, "config.get", {})
    except SessiontoolError:
        return None
    parsed = res.get("parsed")
    where = res.get("path")
    if not isinstance(parsed, dict):
        return None
    return Path(f"{where if isinstance(where, str) else 'openclaw.json'} (gateway)"), parsed


def all_rows(paths: StatePaths) -> list[dict[str, Any]]:
    """Every session row the gateway lists (all agents, global and unknown included: the
    caller filters as it does for a local store)."""
    key = str(paths.root)
    if key in _rows:
        return _rows[key]
    require_up(paths)
    out: list[dict[str, Any]] = []
    offset = 0
    while True:
        page = _call(
            paths,
            "sessions.list",
            {"limit": PAGE, "offset": offset, "includeGlobal": True, "includeUnknown": True},
        )
        rows = page.get("sessions")
        out += [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []
        nxt = page.get("nextOffset")
        if not page.get("hasMore") or not isinstance(nxt, int) or nxt <= offset:
            break
        offset = nxt
    _rows[key] = out
    return out


def archived_rows(paths: StatePaths, agent_id: str) -> dict[str, Folded]:
    """The agent's archived sessions (`sessions.list` with `archived: true`, left out of its
    default listing), with `archivedAt` as the row has it."""
    require_up(paths)
    out: dict[str, Folded] = {}
    offset = 0
    while True:
        page = _call(
            paths,
            "sessions.list",
            {"limit": PAGE, "offset": offset, "archived": True, "agentId": agent_id},
        )
        rows = page.get("sessions")
        for row in rows if isinstance(rows, list) else []:
            key = row.get("key") if isinstance(row, dict) else None
            if isinstance(key, str) and row.get("agentId") == agent_id:
                entry = entry_of(row)
                entry["archivedAt"] = row.get("archivedAt") or row.get("updatedAt") or 0
                out[key] = Folded(key, entry, [key])
        nxt = page.get("nextOffset")
        if not page.get("hasMore") or not isinstance(nxt, int) or nxt <= offset:
            return out
        offset = nxt


def agent_ids(paths: StatePaths) -> list[str]:
    """The agents the gateway has sessions for, sorted."""
    ids = {r["agentId"] for r in all_rows(paths) if isinstance(r.get("agentId"), str)}
    from sessiontool.state.paths import is_plain_name

    return sorted(a for a in ids if is_plain_name(a))


def entry_of(row: dict[str, Any]) -> Entry:
    """The stored entry as far as a sessions.list row shows it."""
    entry: Entry = {f: row[f] for f in ROW_FIELDS if row.get(f) is not None}
    if entry.get("displayName") is not None and entry.get("displayName") == entry.get("label"):
        del entry["displayName"]  # derived from the label; the stored one is not returned
    if row.get("pinned") is True and "pinnedAt" not in entry:
        entry["pinnedAt"] = row.get("updatedAt") or 1  # a row that says only that it is pinned
    return normalize_entry(entry)


def message_of(msg: dict[str, Any]) -> tuple[Message, bool]:
    """A chat.history message as the stored event shows it, and whether the gateway cut it."""
    out = {k: v for k, v in msg.items() if k not in ADDED_KEYS}
    cut = False
    meta = out.get("__openclaw")
    if isinstance(meta, dict):
        cut = meta.get("truncated") is True
        kept = {k: v for k, v in meta.items() if k not in ADDED_META}
        if kept.get("idempotencyKey") == out.get("idempotencyKey"):
            kept.pop("idempotencyKey", None)
        if out.get("role") == "system" and kept.get("kind") == "reset":
            kept.pop("kind")  # the "Reset" line: sessiontool's has no metadata
        if kept:
            out["__openclaw"] = kept
        else:
            del out["__openclaw"]
    content = out.get("content")
    texts = [content] if isinstance(content, str) else []
    if isinstance(content, list):
        texts += [
            b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)
        ]
    if any(_was_cut(t) for t in texts):
        cut = True
    if cut:
        out["truncated"] = True
    return out, cut


def _was_cut(text: str) -> bool:
    """A text chat.history cut: with its marker, or (a tool result's, cut to an exact prefix)
    exactly as long as a cap: the one asked for, or the 8,000 a gateway that ignores `maxChars`
    applies."""
    return text.endswith(TRUNCATED_TAIL) or len(text) in (DEFAULT_MAX_CHARS, MAX_CHARS)


class GatewayReader:
    """One agent's sessions through the gateway (see the module docstring)."""

    def __init__(self, paths: StatePaths, info: StoreInfo) -> None:
        self.paths = paths
        self.info = info
        self._sessions: dict[str, Folded] | None = None
        self._pages: dict[str, dict[str, Any]] = {}  # chat.history answers, by key

    def sessions(self, fields: Sequence[str] | None = None) -> dict[str, Folded]:
        if self._sessions is None:
            out: dict[str, Folded] = {}
            for row in all_rows(self.paths):
                key = row.get("key")
                if not isinstance(key, str) or row.get("agentId") != self.info.agent_id:
                    continue
                if row.get("archived") is True:
                    continue
                out[key] = Folded(key, entry_of(row), [key])
            self._sessions = out
        return self._sessions

    def session(self, full_key: str) -> Folded | None:
        """One session: its chat.history page names it (`sessionInfo` is its sessions.list row),
        so `history KEY` costs one call, and the page is kept for `messages`."""
        if self._sessions is None and full_key not in self._pages:
            from sessiontool.errors import SessiontoolError

            require_up(self.paths)
            try:
                page = self._history(full_key)
            except SessiontoolError:  # e.g. no such session: the listing says what there is
                page = {}
            info = page.get("sessionInfo")
            if (
                isinstance(info, dict)
                and info.get("key") == full_key
                and info.get("agentId") == self.info.agent_id
                and isinstance(info.get("sessionId"), str)
                and info.get("archived") is not True
            ):
                return Folded(full_key, entry_of(info), [full_key])
        return self.sessions().get(full_key)

    def _history(self, full_key: str) -> dict[str, Any]:
        if full_key not in self._pages:
            require_up(self.paths)
            self._pages[full_key] = _call(
                self.paths,
                "chat.history",
                {
                    "sessionKey": full_key,
                    "agentId": self.info.agent_id,
                    "limit": HISTORY_MAX,
                    "maxChars": MAX_CHARS,
                },
            )
            _marks[(str(self.paths.root), full_key)] = page_mark(self._pages[full_key])
        return self._pages[full_key]

    def messages(
        self,
        full_key: str,
        entry: Entry,
        limit: int | None,
        keep: Callable[[Message], bool] | None = None,
        *,
        stop: Callable[[Message], bool] | None = None,
        skip_line: Callable[[bytes], bool] | None = None,  # no lines here: unused
    ) -> ReadResult:
        result = ReadResult()
        if not isinstance(entry.get("sessionId"), str):
            result.exists = False
            return result
        if limit is not None and limit <= 0:
            return result
        data = self._history(full_key)
        if data.get("sessionId") not in (None, entry.get("sessionId")):
            return result  # the key names another session by now: its transcript is not this
        raw = data.get("messages")
        collected: list[Message] = []
        for m in reversed(raw if isinstance(raw, list) else []):
            if not isinstance(m, dict):
                result.bad_lines += 1
                continue
            msg, _ = message_of(m)
            if stop is not None and stop(msg):
                break
            if keep is None or keep(msg):
                collected.append(msg)
                meta = m.get("__openclaw")
                mid = meta.get("id") if isinstance(meta, dict) else None
                result.ids.append(mid if isinstance(mid, str) else None)
            if limit is not None and len(collected) >= limit:
                break
        else:
            if data.get("hasMore") is True:  # more before these than one page holds
                from sessiontool import diag

                diag.warn(
                    f"{full_key}: the gateway returns a session's last {HISTORY_MAX} messages; "
                    "older ones are not shown"
                )
        collected.reverse()
        result.ids.reverse()
        result.messages = collected
        return result

    def close(self) -> None:
        _rows.pop(str(self.paths.root), None)
        self._sessions = None
        self._pages = {}
