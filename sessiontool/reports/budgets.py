"""The budgets' spend, read from the search index, and the gate a new run passes
(context.py `SpendGate`): refused (exit 6) when a budget over it is spent, else given the room the
tightest budget leaves as its cost limit, which its worker holds it to (runs/runners/spend.py).

The spend is what `usage` counts (the transcripts' assistant turns, priced by the config), over
a budget's window: today (UTC) for `day`, the session's transcript for `session`, nothing yet
for `run`. It is read from the index's per-day sums, caught up for the transcripts that can
hold it: those written today (a directory listing and a stat each on JSONL stores; the
catalog's sessions on others), or the session's own (docs/budgets.md; bench `send_budget`).
On a warm check, what the last such read found answers while those transcripts' stat
signatures are as it saw them, or with the turns of what they only grew by since added
(spend_cache.py): no SQLite imported."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sessiontool.clock import now_ms
from sessiontool.context import Context
from sessiontool.errors import OverBudgetError, UsageError
from sessiontool.protocol import MIRROR_MODEL, MIRROR_PROVIDER
from sessiontool.reports import spend_cache
from sessiontool.reports.spend_cache import DAY_MS, Sig
from sessiontool.state.budget_config import Budget, same_model
from sessiontool.state.prices import Prices, lookup, prices_of

_NO_MIRRORS = f" AND NOT (provider IS '{MIRROR_PROVIDER}' AND model IS '{MIRROR_MODEL}')"
_SUMS = "sum(input), sum(output), sum(cache_read), sum(cache_write), sum(cost)"
# Summed turns of one window: (agent id, "provider/model", in, out, cache read, cache write,
# recorded cost). Plain tuples: a dataclass costs a `send` its creation at import.
Turns = list[tuple[Any, ...]]


def cost_of(turns: Turns, prices: Prices, agent: str | None, model: str | None) -> float:
    total = 0.0
    for a, name, i, o, cr, cw, recorded in turns:
        if agent is not None and a != agent:
            continue
        if model is not None and not same_model(model, name):
            continue
        provider, _, m = name.partition("/") if "/" in name else ("", "", name)
        price = lookup(prices, provider, m)
        total += price.of(i, o, cr, cw) if price is not None else float(recorded or 0.0)
    return total


def _name(provider: str, model: str) -> str:
    return f"{provider}/{model}" if provider else model


def _sums(idx: Any, where: str, args: list[Any], agent_of: dict[int, str]) -> Turns:
    got = idx.conn.execute(
        f"SELECT file_id, provider, model, {_SUMS} FROM days WHERE {where}{_NO_MIRRORS} "
        "GROUP BY file_id, provider, model",
        args,
    ).fetchall()
    return [(agent_of[f], _name(p, m), *sums) for f, p, m, *sums in got if f in agent_of]


def _hot_transcripts(ctx: Context, since_ms: int) -> list[Sig] | None:
    """Every agent's JSONL transcripts (archived ones too: what they spent today counts)
    written since `since_ms`: only they can hold today's turns. Each as its stat signature
    ([agent id, file name, dev, ino, size, mtime, ctime]: spend_cache's key), in the listing's
    order (unsorted: an order changed is a record not used, nothing worse). None
    when a store is not JSONL (OpenClaw's SQLite store, a gateway): then the catalog lists its
    sessions. Paths as strings: a `pathlib.Path` each was most of this listing's time."""
    from sessiontool.sessions.reading import agent_ids_on_disk
    from sessiontool.state import detect

    out = []
    for agent_id in agent_ids_on_disk(ctx.paths):
        if detect.detect(ctx.paths, agent_id).format != "jsonl":
            return None
        sdir = str(ctx.paths.sessions_dir(agent_id))
        try:  # listed through a descriptor: each stat is then relative to it (a quarter less)
            fd = os.open(sdir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            entries = list(os.scandir(fd))
            for e in entries:
                name = e.name
                if ".jsonl" not in name or name.endswith(".zst") or name.endswith(".lock"):
                    continue
                try:
                    if e.is_file(follow_symlinks=False):
                        st = e.stat(follow_symlinks=False)
                        if st.st_mtime * 1000 >= since_ms:
                            out.append(spend_cache.sig(agent_id, name, st))
                except OSError:
                    continue
        except OSError:
            continue
        finally:
            os.close(fd)
    return out


def _paths(ctx: Context, hot: list[Sig]) -> list[tuple[str, str]]:
    """(agent id, path) of each of `_hot_transcripts`'s signatures (they name the file alone:
    the listing's path strings were a tenth of a warm check)."""
    dirs: dict[str, str] = {}
    out = []
    for agent_id, name, *_st in hot:
        d = dirs.get(agent_id)
        if d is None:
            d = dirs[agent_id] = str(ctx.paths.sessions_dir(agent_id))
        out.append((agent_id, f"{d}/{name}"))
    return out


def _today(ctx: Context, idx: Any) -> Turns:
    """Today's turns (UTC), every agent's."""
    today = now_ms() // DAY_MS
    hot = _hot_transcripts(ctx, today * DAY_MS)
    if hot is None:
        from sessiontool.index import catalog

        agents = catalog.agent_ids(ctx, True)
        found = catalog.indexed(ctx, idx, catalog.Wanted(agents, True, False))
        ids = {r[0] for r in idx.conn.execute("SELECT file_id FROM days WHERE day = ?", (today,))}
        agent_of = {i: ref.agent_id for i, ref in found.refs(ids).items()}
    else:
        pairs = _paths(ctx, hot)
        got = idx.sync([p for _a, p in pairs], text=False, others=False)
        agent_of = {got[p]: a for a, p in pairs if p in got}
    return _sums(idx, "day = ?", [today], agent_of)


def _session(ctx: Context, idx: Any, agent_id: str, entry: Mapping[str, Any]) -> Turns:
    """Every turn of a session's transcript (its JSONL file, or its virtual transcript in a
    SQLite store, found through the catalog)."""
    from sessiontool.state.paths import is_plain_name

    sid = entry.get("sessionId")
    if not isinstance(sid, str) or not is_plain_name(sid):
        return []
    from sessiontool.state import detect

    if detect.detect(ctx.paths, agent_id).format == "jsonl":
        path = _session_file(ctx, agent_id, entry)
        assert path is not None  # a plain session id
        got = idx.sync([path], text=False, others=False)
        ids = {got[str(path)]: agent_id} if str(path) in got else {}
    else:
        from sessiontool.index import catalog

        refs = [r for r in catalog.live_sessions(ctx, [agent_id], idx) if r.session_id == sid]
        found = catalog.indexed(ctx, idx, catalog.Wanted([agent_id], False, False, refs))
        ids = {
            int(r[0]): agent_id
            for ref in refs
            for r in idx.conn.execute("SELECT id FROM files WHERE path = ?", (str(ref.path),))
            if found.ref(int(r[0])) is not None
        }
    return _sums(idx, "file_id IN (SELECT value FROM json_each(?))", [json.dumps(list(ids))], ids)


class _Peek:
    """An index read without its catch-up (index_db.open_if_current): `_sums` asks `.conn`."""

    __slots__ = ("conn",)

    def __init__(self, conn: Any) -> None:
        self.conn = conn


def _session_file(ctx: Context, agent_id: str, entry: Mapping[str, Any]) -> Path | None:
    """The session's JSONL transcript, None when its id is not a plain name."""
    from sessiontool.state.paths import is_plain_name, transcript_path_for

    sid = entry.get("sessionId")
    if not isinstance(sid, str) or not is_plain_name(sid):
        return None
    sf = entry.get("sessionFile")
    sdir = ctx.paths.sessions_dir(agent_id)
    return transcript_path_for(sdir, sid, sf if isinstance(sf, str) else None)


def _quick_spend(
    ctx: Context, agent_id: str, entry: Mapping[str, Any] | None, windows: set[str]
) -> tuple[Turns, Turns] | None:
    """The spend read as `read_spend` reads it, when every store is JSONL and the index holds
    each transcript it needs (today's, the session's) as it is now: one stat each, then the
    last read's record (spend_cache) when those transcripts are as it read them, else a
    read-only look at the index, none of the catch-up's modules imported (issue 44: the check's
    budget is 10 ms on a warm `send`). A transcript that only grew since the record was written
    is read on from where it stopped (spend_cache.grown_today, grown_session). None: catch up
    first."""
    from sessiontool.state import detect

    if detect.detect(ctx.paths, agent_id).format != "jsonl":
        return None
    day = now_ms() // DAY_MS
    hot: list[Sig] = []
    if "day" in windows:
        got = _hot_transcripts(ctx, day * DAY_MS)
        if got is None:
            return None
        hot = got
    own = _own_sig(ctx, agent_id, entry) if "session" in windows and entry else None
    if not hot and own is None:
        return [], []  # nothing written today and no transcript: nothing spent
    tool_dir = ctx.paths.tool_dir
    index = spend_cache.index_key(tool_dir)
    if index is None:
        return None
    rec = spend_cache.load(ctx.paths.budget_spend, index)
    today = spend_cache.today(rec, day, hot) if hot else []
    session = spend_cache.session(rec, own) if own is not None else []
    if today is not None and session is not None:
        return today, session
    read = _read_on(
        ctx,
        rec,
        day,
        hot=hot if today is None else None,
        own=own if session is None else None,
    )
    if read is None:
        return None
    rec["index"] = index
    spend_cache.save(ctx.paths.budget_spend, rec)
    return (read[0] if today is None else today), (read[1] if session is None else session)


def _read_on(
    ctx: Context, rec: spend_cache.Record, day: int, hot: list[Sig] | None, own: Sig | None
) -> tuple[Turns, Turns] | None:
    """Today's turns (when `hot` is given) and the session's (when `own` is): the record's,
    read on over what those transcripts grew by since, else the index's; the record is updated
    to them. None: the index must catch up first."""
    today = session = None
    if hot is not None:  # only the grown transcripts' paths: all of them were 0.4 ms
        today = spend_cache.grown_today(rec, day, hot, lambda s: _paths(ctx, [s])[0][1])
    if own is not None:
        session = spend_cache.grown_session(rec, own)
    pairs = _paths(ctx, hot) if hot is not None and today is None else []
    if (hot is None or today is not None) and (own is None or session is not None):
        return today or [], session or []
    got = _read_index(ctx.paths.tool_dir, day, pairs, own if session is None else None)
    if got is None:
        return None
    if hot is not None and today is None:
        today = got[0]
        spend_cache.put_today(rec, day, hot, turns=today, reads=[got[2][p] for _a, p in pairs])
    if own is not None and session is None:
        session = got[1]
        spend_cache.put_session(rec, own, session, got[2][own[1]])
    return today or [], session or []


def _own_sig(ctx: Context, agent_id: str, entry: Mapping[str, Any]) -> Sig | None:
    """The session's transcript's signature; None when it has none yet (nothing spent in it,
    as `_session` finds)."""
    import stat

    own = _session_file(ctx, agent_id, entry)
    if own is None:
        return None
    try:
        st = os.stat(own)
    except OSError:
        return None
    return spend_cache.sig(agent_id, str(own), st) if stat.S_ISREG(st.st_mode) else None


def _read_index(
    tool_dir: Path, day: int, hot: list[tuple[str, str]], own: Sig | None
) -> tuple[Turns, Turns, dict[str, Any]] | None:
    """Today's turns of `hot` and the turns of `own`, from the index in one read transaction
    when it holds each as it is now, with where the index read each path up to (`ReadTo`);
    None: it does not (catch up)."""
    from sessiontool.index import db as index_db

    paths = sorted({p for _a, p in hot} | ({own[1]} if own else set()))
    got_ids = index_db.open_if_current(tool_dir, paths)
    if got_ids is None:
        return None
    conn, reads = got_ids
    try:
        peek = _Peek(conn)
        today: Turns = []
        if hot:
            agent_of = {reads[p][0]: a for a, p in hot}
            today = _sums(peek, "day = ?", [day], agent_of)
        session: Turns = []
        if own is not None:
            mine = {reads[own[1]][0]: own[0]}
            where = "file_id IN (SELECT value FROM json_each(?))"
            session = _sums(peek, where, [json.dumps(list(mine))], mine)
        return today, session, reads
    finally:
        conn.close()


def _without_cyclic_gc(
    ctx: Context, agent_id: str, entry: Mapping[str, Any] | None, windows: set[str]
) -> tuple[Turns, Turns] | None:
    """`_quick_spend` with the cyclic collector off: it makes a few thousand short-lived lists
    (a signature per transcript of today, the record's copy of each), which hold no cycles and
    are freed by their reference counts when it returns; a collection among them walked what
    the command had imported too (2.5 ms of a 12 ms check, 1000 transcripts of today)."""
    from sessiontool import gcpause

    with gcpause.paused():
        return _quick_spend(ctx, agent_id, entry, windows)


def read_spend(
    ctx: Context, agent_id: str, entry: Mapping[str, Any] | None, windows: set[str]
) -> tuple[Turns, Turns]:
    """Today's and the session's turns from the index (each only when a budget needs it)."""
    if not windows & {"day", "session"}:
        return [], []
    quick = _without_cyclic_gc(ctx, agent_id, entry, windows)
    if quick is not None:
        return quick
    from sessiontool.index import sync as si
    from sessiontool.sessions.reading import read_scope

    def run(idx: Any) -> tuple[Turns, Turns]:
        today = _today(ctx, idx) if "day" in windows else []
        session = _session(ctx, idx, agent_id, entry) if "session" in windows and entry else []
        si.left_out(idx, False)
        return today, session

    with read_scope():
        caught_up = si.using_index(ctx.paths.tool_dir, run)
    # Read once more the quick way, now that the index is current: that writes the record (with
    # where each transcript was read up to), so the next check after an append reads only what
    # was appended (a transcript new today, or grown past the record, would otherwise send
    # every later check here). The same spend, unless a transcript changed in between.
    again = _without_cyclic_gc(ctx, agent_id, entry, windows)
    return again if again is not None else caught_up


def window_words(b: Budget, key: str | None) -> str:
    if b.window == "day":
        from datetime import UTC, datetime

        return "today (" + datetime.now(UTC).strftime("%Y-%m-%d") + " UTC)"
    if b.window == "session":
        return f"in session {key}" if key else "in this session"
    return "in one run"


def fill(b: Budget, spend: tuple[Turns, Turns], prices: Prices) -> float:
    """What a budget's window has spent: today's turns, or the session's."""
    if b.window == "day":
        return cost_of(spend[0], prices, b.agent, b.model)
    if b.window == "session":
        return cost_of(spend[1], prices, None, b.model)
    return 0.0


class BudgetGate:
    """The context.SpendGate of a command: the config's budgets (unless `force`) and
    `--max-cost`."""

    def __init__(self, ctx: Context, max_cost: float | None = None, force: bool = False) -> None:
        import math

        if max_cost is not None and (not math.isfinite(max_cost) or max_cost < 0):
            raise UsageError("--max-cost must be a non-negative amount in USD")
        self.ctx = ctx
        self.max_cost = max_cost
        self.budgets = () if force else ctx.config.budgets

    def allow(
        self, agent_id: str, key: str, entry: Mapping[str, Any] | None, model: str | None
    ) -> dict[str, Any] | None:
        """The new run's cost limit (None: no limit), or OverBudgetError (exit 6)."""
        ctx = self.ctx
        if model is None and any(b.model for b in self.budgets):
            model = _run_model(ctx, agent_id, key, entry)
        over = [b for b in self.budgets if b.applies(agent_id, model)]
        limit: dict[str, Any] | None = None
        if self.max_cost is not None:
            limit = {"usd": self.max_cost, "limit": self.max_cost, "window": "run"}
        if not over:
            return limit
        prices = prices_of(ctx.config.providers)
        spend = read_spend(ctx, agent_id, entry, {b.window for b in over})
        for b in over:
            spent = round(fill(b, spend, prices), 6)
            shown = ctx.display(key)
            if spent >= b.limit:
                raise OverBudgetError(
                    f"budget {b.name}: {spent:.4f} USD spent {window_words(b, shown)}, at or "
                    f"over its limit of {b.limit:g} USD; the run was not started",
                    hint="--force starts it anyway; or raise the limit in sessiontool.budgets",
                    extra={"budget": b.name, "window": b.window, "limit": b.limit, "spend": spent},
                )
            room = round(b.limit - spent, 6)
            if limit is None or room < limit["usd"]:
                limit = {"usd": room, "budget": b.name, "limit": b.limit, "window": b.window}
                limit["spend"] = spent
        return limit


def _run_model(
    ctx: Context, agent_id: str, key: str, entry: Mapping[str, Any] | None
) -> str | None:
    """The model a run of this session will use, as its worker resolves it."""
    from pathlib import Path

    from sessiontool.runs.execute import TurnSession, resolve_model

    provider, model = resolve_model(
        ctx.config,
        TurnSession(
            agent_id=agent_id, key=key, entry=dict(entry or {}), session_id="", path=Path()
        ),
    )
    return f"{provider}/{model}" if provider else model


def fills(ctx: Context) -> list[dict[str, Any]]:
    """Each `day` and `run` budget with what it has spent today (top, doctor): name, window,
    limit, spend (None: a session or run budget, spent per session or run), fill (0-1+)."""
    budgets = ctx.config.budgets
    prices = prices_of(ctx.config.providers)
    spend = read_spend(ctx, ctx.agent_id, None, {b.window for b in budgets})
    out = []
    for b in budgets:
        spent = round(fill(b, spend, prices), 6) if b.window == "day" else None
        row: dict[str, Any] = {"budget": b.name, "window": b.window, "limit": b.limit}
        row["spend"] = spent
        row["fill"] = (spent / b.limit if b.limit else 1.0) if spent is not None else None
        out.append(row)
    return out
