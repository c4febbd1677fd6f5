"""`fork` and `rewind` on sessiontool's own store (the files writer's; the gateway writer calls
OpenClaw's `sessions.fork` / `sessions.rewind`), with OpenClaw's rule: `--at` / MESSAGE_ID
names one of the user's messages and the result is the state before it, its text handed back
as `editorText` to send again (edited or not).

- fork: a new session `agent:<agent>:dashboard:<uuid>` (OpenClaw's form of a session made from
  another) whose transcript is a copy of KEY's up to that message (all of it without `--at`),
  its lineage in `forkSource: {sessionKey, sessionId}` + `forkedFromParent: true` as OpenClaw
  records it; the session's own model and thinking level come along.
- rewind: the transcript as it was kept as `<transcript>.rewound.<time>` (a hard link: no byte
  copied), then replaced by a copy of its part before that message: nothing is deleted.

Both copy under the transcript lock, so no turn's append lands half in and half out.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sessiontool import testhooks
from sessiontool.clock import archive_stamp, now_ms
from sessiontool.errors import NotFoundError, UsageError, session_not_found
from sessiontool.runs.session_patch import fork_source_of
from sessiontool.state import sessions_json as store
from sessiontool.state import transcript_cut as cut
from sessiontool.state.jsonio import compact_utf8
from sessiontool.state.locks import transcript_lock

if TYPE_CHECKING:
    from sessiontool.context import Context
    from sessiontool.sessions.resolve import Resolved

Entry = dict[str, Any]
CARRIED = ("modelOverride", "providerOverride", "thinkingLevel", "verboseLevel", "sendPolicy")


def _user_text(c: cut.Cut, at: str) -> str:
    text = cut.user_text(c.entry)
    if text is None:
        raise UsageError(
            f"message {at} is not one of the user's messages: fork and rewind go back to "
            "just before a user message (OpenClaw's rule), whose text comes back to send again",
            hint="`sessiontool history KEY --json`: messageIds[i] is messages[i]'s id",
        )
    return text


def _transcript(r: Resolved) -> Path:
    path = r.transcript_path()
    if path is None:
        raise NotFoundError(f"{r.key} has no transcript file")
    return path


def _last_line_end(path: Path, size: int) -> int:
    """The end of the last whole line (a torn append in progress is left out)."""
    if size == 0:
        return 0
    with open(path, "rb") as fh:
        pos = size
        while pos > 0:
            start = max(0, pos - 65536)
            fh.seek(start)
            chunk = fh.read(pos - start)
            nl = chunk.rfind(b"\n")
            if nl >= 0:
                return start + nl + 1
            pos = start
    return 0


def fork(
    ctx: Context,
    r: Resolved,
    at: str | None,
    label: str | None,
    refuse_label_in_use: Callable[..., None],
) -> dict[str, Any]:
    """`refuse_label_in_use(ctx, store, agent_id, label)`: the files writer's label check,
    made inside the store lock."""
    from sessiontool.state.transcript import header_line

    src = _transcript(r)
    new_key = f"agent:{r.agent_id}:dashboard:{uuid.uuid4()}"
    sid = str(uuid.uuid4())
    dest = r.sessions_dir / f"{sid}.jsonl"
    header = compact_utf8(header_line(sid)) + b"\n"
    text: str | None = None
    with transcript_lock(src):
        if at is not None:
            c = cut.find_entry(src, at)
            text = _user_text(c, at)
            start, end = c.body, c.offset
        elif src.exists():
            size = src.stat().st_size
            start, end = cut.header_end_of(src), _last_line_end(src, size)
        else:
            start = end = 0
        if end > start or at is not None:
            cut.write_copy(src, dest, header, start=start, end=end)
    testhooks.pause("fork-copied")
    entry: Entry = {
        "sessionId": sid,
        "updatedAt": now_ms(),
        "forkSource": fork_source_of(r.key, r.session_id, at),
        "forkedFromParent": True,
    }
    entry.update({k: (r.entry or {})[k] for k in CARRIED if k in (r.entry or {})})
    if label:
        entry["label"] = label

    def mutate(s: store.Store) -> None:
        if store.get_entry(s, r.agent_id, r.key) is None:
            raise session_not_found(r.key)
        if label:
            refuse_label_in_use(ctx, s, r.agent_id, label)
        store.set_entry(s, r.agent_id, new_key, entry)

    try:
        store.update_store(r.store_path, mutate)
    except BaseException:
        _unlink(dest)  # nothing points to it yet
        raise
    out: dict[str, Any] = {
        "sessionKey": ctx.display(new_key),
        "sessionId": sid,
        "forkedFrom": ctx.display(r.key),
        "forkSource": entry["forkSource"],
        "at": at,
        "entry": entry,
    }
    if text is not None:
        out["editorText"] = text
    return out


def rewind(ctx: Context, r: Resolved, at: str) -> dict[str, Any]:
    src = _transcript(r)
    with transcript_lock(src):
        c = cut.find_entry(src, at)
        text = _user_text(c, at)
        archive = _free_name(src.with_name(f"{src.name}.rewound.{archive_stamp()}"))
        tmp = cut.copy_to_temp(src, src, b"", start=0, end=c.offset)
        try:
            cut.keep_as(src, archive)
        except BaseException:
            _unlink(tmp)
            raise
        testhooks.pause("rewind-archived")
        cut.swap_into_place(tmp, src)

    def mutate(s: store.Store) -> Entry | None:
        e = store.get_entry(s, r.agent_id, r.key)
        if e is None or e.get("sessionId") != r.session_id:
            return e  # deleted or reset meanwhile: its entry is not this transcript's any more
        e = dict(e)
        e["updatedAt"] = max(int(e.get("updatedAt") or 0), now_ms())
        store.set_entry(s, r.agent_id, r.key, e)
        return e

    entry = store.update_store(r.store_path, mutate)
    return {
        "sessionKey": ctx.display(r.key),
        "sessionId": r.session_id,
        "at": at,
        "archived": str(archive),
        "editorText": text,
        "entry": entry,
    }


def _free_name(path: Path) -> Path:
    target, n = path, 0
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.{n}")
    return target


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
