"""Which transcripts a warm `search` or `usage` reads, found without listing every session: the
store's change markers against those a kept snapshot of the last full check saw, then a stat
of its hot transcripts only (index/snapshots.py says why that is enough, and what it misses).

The markers are taken before the full check starts: a change during it moves them after, and
the next command checks in full again."""

from __future__ import annotations

import hashlib
import os
from array import array
from typing import Any, NamedTuple

from sessiontool import clock
from sessiontool.context import Context
from sessiontool.index import stamps
from sessiontool.index.snapshots import Hot, Image, Kept, SnapRow, Snapshot, hot_until
from sessiontool.index.sync import Index
from sessiontool.state import detect

# A transcript written, or whose session was updated, this recently is hot (the time is the
# one clock's, sessiontool/clock.py: SESSIONTOOL_NOW_MS moves it, as the bench does).
HOT_MS = 24 * 3600 * 1000
FULL_CHECK_ENV = "SESSIONTOOL_INDEX_FULL_CHECK"


def _st(path: Any) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def markers(ctx: Context, agents: list[str]) -> bytes | None:
    """Each agent's sessions dir and sessions.json stat (a session added, deleted, renamed or
    its entry updated moves one), or None when a snapshot cannot be trusted: a store that is
    not JSONL files or a file system with whole-second times."""
    import orjson

    out: list[Any] = []
    for agent_id in agents:
        info = detect.detect(ctx.paths, agent_id)
        if info.format != "jsonl":
            return None
        d = _st(ctx.paths.sessions_dir(agent_id))
        s = _st(info.location)
        for st in (d, s):
            if st is not None and st[3] % 1_000_000_000 == 0:
                return None
        out.append([agent_id, str(info.location), d, s])
    return orjson.dumps(out)


def scope_key(ctx: Context, agents: list[str], archived: bool, text: bool) -> str:
    """What decides the session list and what is indexed of it: the requester, what of the
    config `policy.visible` reads, the agents, the archived transcripts and the text."""
    import orjson

    req, cfg = ctx.requester, ctx.config
    parts = [
        str(ctx.paths.root),
        req.session_key,
        req.agent_id,
        req.sandboxed,
        req.is_operator,
        cfg.sandbox_visibility,
        cfg.a2a_enabled,
        [cfg.a2a_allows(a) for a in [req.agent_id, *agents]],
        agents,
        archived,
        text,
    ]
    return hashlib.sha256(orjson.dumps(parts)).hexdigest()


def by_image(
    idx: Index, scope: str, paths: list[str], text: bool
) -> tuple[dict[str, int], array[int]] | None:
    """A full check of `paths` against the stat image kept with `scope`'s snapshot
    (index/stamps.py): every path stat'ed and compared in one pass, those that differ caught
    up alone. Returns (path → file id, the image as the index now holds it), or None to check
    in full: no image of this very list, a file in the index beyond it, one gone or unreadable."""
    if os.environ.get(FULL_CHECK_ENV, "") not in ("", "0"):
        return None
    img = idx.snaps.image(scope)
    if img is None or len(img.ids) != len(paths) or img.digest != stamps.digest(paths):
        return None
    if idx.file_count() != len(paths):
        return None
    now = stamps.taken(paths)
    diff = stamps.differing(now, img.stamps) if now is not None else None
    if now is None or diff is None:
        return None
    ids = dict(zip(paths, img.ids, strict=True))
    if diff:
        changed = [paths[i] for i in diff]
        fresh = idx.sync(changed, text=text, others=False)
        if idx.unreadable or len(fresh) != len(changed):
            return None
        ids.update(fresh)
        rows = idx.stamp_rows(changed)
        for i in diff:
            stamps.put(now, i, _stamp(rows.get(paths[i]), text))
    return ids, now


def _stamp(row: tuple[Any, ...] | None, text: bool) -> tuple[int, int, int, int, int] | None:
    """A `stamp_rows` row's stamp, None when the scope needs its text and the index lacks it."""
    if row is None or (text and not row[7]):
        return None
    return (row[2], row[3], row[4], row[5], row[6])


def image(
    idx: Index, paths: list[str], ids: dict[str, int], *, text: bool, now: Any
) -> Image | None:
    """The stat image of a full check of `paths` just made: `now` when `by_image` made it, else
    the rows the index's quick check compared (or, after a catch-up, read them again)."""
    try:
        id_list = array("q", [ids[p] for p in paths])
    except (KeyError, OverflowError):
        return None
    if now is None:
        rows = idx.checked if idx.checked is not None else idx.stamp_rows()
        got = [_stamp(rows.get(p), text) for p in paths]
        now = stamps.of_rows(g + (True,) if g is not None else (0, 0, 0, 0, 0, False) for g in got)
    if now is None:
        return None
    return Image(stamps.digest(paths), id_list, now)


class Checked(NamedTuple):
    """A full check made: its sessions (SessionRefs), path → file id, and its stat image."""

    refs: list[Any]
    ids: dict[str, int]
    image: Image | None = None


def keep(idx: Index, scope: str, marks: bytes, check: Checked) -> None:
    """Keep the full check `check` as the snapshot of `scope`, with its stat image. Hot: those
    written (mtime) or whose session was updated (updatedAt) within HOT_MS, each until HOT_MS
    after that, and every one with no file yet (for good)."""
    refs, ids = check.refs, check.ids
    version = idx.conn.execute("PRAGMA data_version").fetchone()[0]
    since_ms = clock.now_ms() - HOT_MS
    rows: dict[int, SnapRow] = {}
    hot: list[Hot] = []
    for r in refs:
        path = r.where
        file_id = ids.get(path)
        if file_id is not None:
            rows[file_id] = (file_id, r.agent_id, r.key, r.session_id, r.label, int(r.archived))
        if file_id is None:
            hot.append([None, path, None])
        elif r.updated is not None and r.updated >= since_ms:
            hot.append([file_id, path, r.updated + HOT_MS])
    kept = Kept(
        scope=scope,
        markers=marks,
        rows=list(rows.values()),
        hot=hot,
        since_ns=since_ms * 1_000_000,
        hot_ms=HOT_MS,
        image=check.image,
    )
    idx.snaps.keep(kept, version)


def snapshot(idx: Index, scope: str, marks: bytes, text: bool) -> Snapshot | None:
    """The snapshot kept for `scope` when it still holds: the
    markers the same, the hot transcripts caught up (only they are read). None: check in full
    (always with SESSIONTOOL_INDEX_FULL_CHECK set)."""
    import orjson

    if os.environ.get(FULL_CHECK_ENV, "") not in ("", "0"):
        return None
    snap = idx.snaps.get(scope)
    if snap is None or snap.markers != marks:
        return None
    kept = orjson.loads(snap.hot)
    if not isinstance(kept, list) or any(
        not isinstance(h, list) or len(h) != 3 for h in kept
    ):  # kept before the hot set aged: check in full once
        return None
    now = clock.now_ms()
    hot = [h for h in kept if (until := hot_until(h)) is None or until > now]
    changed = idx.snaps.hot_changed(hot, text)
    if changed is None:
        return None
    if changed:
        ids = idx.sync(changed, text=text, others=False)
        want = {h[1]: h[0] for h in hot}
        if idx.unreadable or any(want.get(p) != i for p, i in ids.items()):
            return None
        # Written since: hot for HOT_MS from now (no marker moved: what the hot set is for).
        again = {str(p) for p in changed}
        for h in hot:
            if h[1] in again and hot_until(h) is not None:
                h[2] = now + HOT_MS
    if changed or len(hot) < len(kept):
        idx.snaps.rehot(scope, marks, hot)
    return snap
