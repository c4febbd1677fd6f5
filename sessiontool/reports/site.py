"""`export --html DIR`: the sessions as a static site people open in a browser.

    DIR/index.html     every exported session: key, kind, label, last activity, messages,
                       tokens, cost
    DIR/usage.html     cost and tokens per day and per model, as inline SVG charts and tables
    DIR/s/<name>.html  one page per session (reports/html.py), linked to the sessions it
                       spawned, was spawned by, and exchanged messages with

It reads through `sessions/reading.py`, so both store formats export alike. A re-run renders again
only the sessions whose entry, links or prices changed (a fingerprint per page is kept in
`DIR/.sessiontool-html.json`, with the figures the index and usage pages need), and writes a
file only when its bytes differ, so an unchanged site is not touched; like `export`, it never
deletes anything in DIR."""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from sessiontool.context import Context
from sessiontool.errors import UsageError
from sessiontool.reports import html as H
from sessiontool.reports import htmlbase as B
from sessiontool.reports.htmlbase import Markup
from sessiontool.state import keys
from sessiontool.state.envelopes import strip_envelopes
from sessiontool.state.paths import is_plain_name
from sessiontool.testhooks import pause

if TYPE_CHECKING:
    from typing import TypedDict

    from sessiontool.sessions.history import History

    class SiteResult(TypedDict):
        """What `export --html DIR` returns: where, how many sessions, the pages written and
        left unchanged (the same bytes), and the pages in all (the sessions', index, usage)."""

        to: str
        sessions: int
        written: int
        unchanged: int
        pages: int


FORMAT = 3  # bump when the pages' markup changes: every page is rendered again
MANIFEST = ".sessiontool-html.json"
SITE_PAGES = ("index.html", "usage.html")  # beside the manifest and s/, in every site


def _site_writes(rel: str) -> bool:
    """Whether a site export writes the file at `rel` (a session's page, a site page)."""
    return rel in (MANIFEST, *SITE_PAGES) or (
        rel.startswith("s/") and rel.count("/") == 1 and rel.endswith(".html")
    )


DAY_MS = 86_400_000


def _facts(ctx: Context, agent_id: str, full_key: str, entry: dict[str, Any]) -> list[Markup]:
    kind = keys.kind_of(full_key, entry, ctx.config.main_key)
    out = [
        Markup("agent {}").format(B.h(agent_id)),
        Markup('<span class="kind">{}</span>').format(B.h(kind)),
    ]
    for name in ("label", "model"):
        v = entry.get(name)
        if isinstance(v, str) and v:
            out.append(B.h(v))
    sid = entry.get("sessionId")
    if isinstance(sid, str):
        out.append(Markup("<code>{}</code>").format(B.h(sid)))
    return out


def standalone_page(ctx: Context, hist: History) -> str:
    """`history KEY --format html`: the page on its own (the sessions it names are not linked:
    there is no page of theirs beside it). A plain str: the output code handles text."""
    from sessiontool.reports.usage import cost_function

    r = hist.resolved
    return str(
        H.transcript_page(
            hist.session_key,
            hist.messages,
            facts=_facts(ctx, r.agent_id, r.key, r.entry or {}),
            price_for=cost_function(ctx),
        )
    )


# -- the site ---------------------------------------------------------------------------------


def page_name(full_key: str) -> str:
    """A file name per session key: readable, and unique (two keys that differ only in
    characters a file name cannot hold still get two pages)."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", full_key).strip("._")[:80] or "session"
    return (
        f"{slug}-{hashlib.sha256(full_key.encode('utf-8', 'surrogatepass')).hexdigest()[:10]}.html"
    )


def _write_if_changed(path: Path, data: bytes) -> bool:
    from sessiontool.state.jsonio import atomic_write

    try:
        if path.read_bytes() == data:
            return False
    except OSError:
        pass
    atomic_write(path, data, mode=0o600)
    return True


def _stats(
    messages: list[H.Message], usage_msgs: list[H.Message], price_for: H.PriceFor
) -> dict[str, Any]:
    """What the index and usage pages need of a session, kept in the manifest."""
    tokens, cost = 0, 0.0
    groups: dict[tuple[int, str], list[Any]] = {}
    for m in usage_msgs:
        u = H.turn_usage(m, price_for)
        if u is None:
            continue
        i, o, cr, cw, c = u
        tokens += i + o + cr + cw
        cost += c
        ts = m.get("timestamp")
        day = int(ts) // DAY_MS if isinstance(ts, int | float) and not isinstance(ts, bool) else -1
        g = groups.setdefault((day, H.model_name(m)), [0, 0, 0, 0, 0.0, 0])
        for k, v in enumerate((i, o, cr, cw, c, 1)):
            g[k] += v
    last = None
    for m in reversed(messages):
        ts = m.get("timestamp")
        if isinstance(ts, int | float) and not isinstance(ts, bool):
            last = ts
            break
    return {
        "messages": len(messages),
        "last": last,
        "tokens": tokens,
        "cost": round(cost, 6),
        "usage": [[d, mdl, *v] for (d, mdl), v in sorted(groups.items())],
        "top": _top_turns(messages, price_for),
        **_reset_stats(messages, usage_msgs),
    }


TOP_TURNS = 10  # per session in the manifest, and on the usage page


def _top_turns(messages: list[H.Message], price_for: H.PriceFor) -> list[list[Any]]:
    """The session's costliest turns: [message index (its anchor, m<i>), ts, model, tokens,
    cost], costliest first (the usage page's "most expensive turns")."""
    out: list[list[Any]] = []
    for i, m in enumerate(messages):
        u = H.turn_usage(m, price_for)
        if u is not None and u[4] > 0:
            out.append([i, m.get("timestamp"), H.model_name(m), sum(u[:4]), round(u[4], 6)])
    out.sort(key=lambda t: -float(t[4]))
    return out[:TOP_TURNS]


def _reset_stats(messages: list[H.Message], usage_msgs: list[H.Message]) -> dict[str, Any]:
    """When the session was last reset in place, and how many of the turns its tokens and cost
    count came before that (the chat view, and so the message count, starts at the reset)."""
    at = next((m.get("timestamp") for m in reversed(messages) if H.is_reset(m)), None)
    if not isinstance(at, int | float) or isinstance(at, bool):
        return {}
    before = sum(
        1
        for m in usage_msgs
        if H.turn_usage(m, None) is not None
        and isinstance(m.get("timestamp"), int | float)
        and m["timestamp"] < at
    )
    return {"reset": at, "beforeReset": before}


def _usage_messages(
    ctx: Context, agent_id: str, entry: dict[str, Any], messages: list[H.Message]
) -> list[H.Message]:
    """Every assistant turn that cost tokens: a store that hides some messages from the chat
    view (OpenClaw's silent replies) gives its raw events."""
    from sessiontool.sessions.reading import raw_events

    events = raw_events(ctx.paths, agent_id, entry)
    if events is None:
        return messages
    return [
        e["message"]
        for e in events
        if e.get("type") == "message" and isinstance(e.get("message"), dict)
    ]


def export_html(
    ctx: Context,
    dest: str,
    *,
    agent: str | None,
    all_agents: bool,
    since_ms: int | None = None,
) -> SiteResult:
    return export_site(ctx, dest, SiteSpec(agent, all_agents, since_ms))


class SiteSpec(NamedTuple):
    """Which sessions a site shows: an agent's (None: the context's) or all, updated since."""

    agent: str | None
    all_agents: bool
    since_ms: int | None = None


def _no_progress(done: int, total: int) -> None:
    return None


def export_site(
    ctx: Context, dest: str, spec: SiteSpec, progress: Callable[[int, int], None] = _no_progress
) -> SiteResult:
    """The site of these sessions in `dest`; `progress(done, total)` before each page."""
    agent, all_agents, since_ms = spec
    from sessiontool.reports.usage import configured_prices, cost_function
    from sessiontool.sessions.reading import read_scope
    from sessiontool.sessions.resolve import all_agent_ids
    from sessiontool.state.paths import ensure_dir

    agent_ids = all_agent_ids(ctx) if all_agents else [agent or ctx.agent_id]
    bad = [a for a in agent_ids if not is_plain_name(a)]
    if bad:
        raise UsageError(f"--agent {bad[0]!r} is not an agent id")
    out_root, old_pages = _open_site(ctx, dest)
    price_for = cost_function(ctx)
    prices_fp = repr(sorted(configured_prices(ctx).items()))
    counts = {"sessions": 0, "written": 0, "unchanged": 0}
    rows: list[dict[str, Any]] = []
    new_pages: dict[str, Any] = {}
    with read_scope():
        found = _sessions(ctx, agent_ids, since_ms)
        files = {k: page_name(k) for _a, k, _e in found}
        parents, children = _family(ctx, found)
        files_fp = hashlib.sha256(json.dumps(sorted(files.items())).encode()).hexdigest()
        ensure_dir(out_root / "s")
        # The manifest names every page before the first is written: a killed export leaves
        # only files the next one recognises as its own.
        planned = {f"s/{name}" for name in files.values()}
        if not planned <= old_pages.keys() or not (out_root / MANIFEST).is_file():
            pending = {**{rel: {"fp": ""} for rel in planned}, **old_pages}
            _write_if_changed(out_root / MANIFEST, _manifest_bytes(pending))
        for agent_id, full_key, entry in found:
            progress(counts["sessions"], len(found))
            pause("export-page")
            counts["sessions"] += 1
            name = files[full_key]
            rel = f"s/{name}"
            fp = hashlib.sha256(
                json.dumps(
                    [FORMAT, full_key, entry, files_fp, children.get(full_key), prices_fp],
                    sort_keys=True,
                    default=str,
                ).encode("utf-8", "surrogatepass")
            ).hexdigest()
            old = old_pages.get(rel)
            if (
                isinstance(old, dict)
                and old.get("fp") == fp
                and isinstance(old.get("stats"), dict)
                and (out_root / rel).is_file()
            ):
                stats = old["stats"]
                counts["unchanged"] += 1
            else:
                page, stats = _session_page(
                    ctx,
                    agent_id,
                    full_key,
                    entry,
                    files=files,
                    parents=parents,
                    children=children,
                    price_for=price_for,
                )
                if _write_if_changed(out_root / rel, page.encode("utf-8")):
                    counts["written"] += 1
                else:
                    counts["unchanged"] += 1
            new_pages[rel] = {"fp": fp, "stats": stats}
            rows.append(
                {
                    "key": full_key,
                    "agent": agent_id,
                    "kind": keys.kind_of(full_key, entry, ctx.config.main_key),
                    "label": entry.get("label") if isinstance(entry.get("label"), str) else "",
                    "updatedAt": _number(entry.get("updatedAt")),
                    "parent": parents.get(full_key),
                    "href": rel,
                    **stats,
                }
            )
    from sessiontool.reports.charts import index_page, usage_page

    for rel, text in (("index.html", index_page(rows)), ("usage.html", usage_page(rows))):
        if _write_if_changed(out_root / rel, text.encode("utf-8")):
            counts["written"] += 1
        else:
            counts["unchanged"] += 1
    pages = {**old_pages, **new_pages}
    _write_if_changed(out_root / MANIFEST, _manifest_bytes(pages))
    return {
        "to": str(out_root),
        "sessions": counts["sessions"],
        "written": counts["written"],
        "unchanged": counts["unchanged"],
        "pages": len(rows) + 2,
    }


def _open_site(ctx: Context, dest: str) -> tuple[Path, dict[str, Any]]:
    """DIR, checked as a site's to write, and the pages its manifest lists. Nothing in DIR is
    replaced unless this site's manifest lists it (DIR is new, empty, or an earlier export's),
    and nothing is written through a link."""
    from sessiontool.openclaw.target import local_root
    from sessiontool.state import outdir

    out_root = outdir.open_dir(dest, "--html", local_root(ctx.paths.root))
    manifest = _read_manifest(out_root / MANIFEST)
    old_pages: dict[str, Any] = manifest.get("pages", {})
    listed = _listed(out_root / MANIFEST)
    if listed is None:
        raise outdir.foreign(out_root / MANIFEST, out_root, "a manifest the HTML")
    outdir.survey(out_root, {MANIFEST, *listed}, {"s"}, option="--html", writes=_site_writes)
    return out_root, old_pages


Found = list[tuple[str, str, dict[str, Any]]]  # (agent id, full key, entry)


def _sessions(ctx: Context, agent_ids: list[str], since_ms: int | None) -> Found:
    """The sessions to export: every agent's, or those updated since `since_ms`."""
    from sessiontool.sessions.reading import reader_for

    found: Found = []
    for agent_id in agent_ids:
        for full_key, f in reader_for(ctx.paths, agent_id).sessions().items():
            upd = f.entry.get("updatedAt")
            if since_ms is not None and not (isinstance(upd, int | float) and upd >= since_ms):
                continue
            found.append((agent_id, full_key, f.entry))
    return found


def _family(ctx: Context, found: Found) -> tuple[dict[str, str], dict[str, list[str]]]:
    """Who spawned whom among the exported sessions: child → parent, parent → children."""
    parents: dict[str, str] = {}
    for agent_id, full_key, entry in found:
        # A child made through OpenClaw's gateway by sessiontool's emulation has no spawnedBy
        # (only OpenClaw's own spawn tool writes it), only its parentSessionKey.
        p = entry.get("spawnedBy") or entry.get("parentSessionKey")
        if isinstance(p, str) and p:
            parents[full_key] = _canonical(ctx, p, agent_id)
    children: dict[str, list[str]] = {}
    for child, parent in sorted(parents.items()):
        children.setdefault(parent, []).append(child)
    return parents, children


def _session_page(
    ctx: Context,
    agent_id: str,
    full_key: str,
    entry: dict[str, Any],
    files: dict[str, str],
    parents: dict[str, str],
    children: dict[str, list[str]],
    price_for: H.PriceFor,
) -> tuple[str, dict[str, Any]]:
    """One session's page, linked to the pages of the sessions it names, and its figures for
    the index and usage pages."""
    from sessiontool.sessions.reading import reader_for

    name = files[full_key]
    raw = reader_for(ctx.paths, agent_id).messages(full_key, entry, None).messages
    messages = strip_envelopes(raw)
    stats = _stats(messages, _usage_messages(ctx, agent_id, entry, raw), price_for)

    def link_for(key: str) -> str | None:
        target = files.get(_canonical(ctx, key, agent_id))
        return target if target is not None and target != name else None

    page = H.transcript_page(
        full_key,
        messages,
        facts=_facts(ctx, agent_id, full_key, entry),
        nav=Markup('<a href="../index.html">All sessions</a><a href="../usage.html">Usage</a>'),
        related=_related(ctx, full_key, parents, children=children, files=files),
        link_for=link_for,
        price_for=price_for,
    )
    return page, stats


def _canonical(ctx: Context, key: str, agent_id: str) -> str:
    return keys.canonical(key, agent_id, ctx.config.main_key, ctx.config.scope)


def _related(
    ctx: Context,
    full_key: str,
    parents: dict[str, str],
    children: dict[str, list[str]],
    files: dict[str, str],
) -> Markup:
    def link(k: str) -> Markup:
        f = files.get(k)
        if f:
            return Markup('<a href="{}">{}</a>').format(B.ha(f), B.h(k))
        return Markup("<code>{}</code>").format(B.h(k))

    parts = []
    p = parents.get(full_key)
    if p is not None:
        parts.append(Markup("Spawned by {}").format(link(p)))
    kids = children.get(full_key)
    if kids:
        parts.append(Markup("Spawned {}").format(Markup(", ").join(link(k) for k in kids)))
    if not parts:
        return Markup()
    return Markup('<p class="from rel">{}</p>').format(Markup(" · ").join(parts))


def _number(v: Any) -> int | float | None:
    """A store's number, or None for anything else it may hold (a string, a list)."""
    return v if isinstance(v, int | float) and not isinstance(v, bool) else None


def _manifest_bytes(pages: dict[str, Any]) -> bytes:
    return json.dumps({"format": FORMAT, "pages": pages}, sort_keys=True).encode()


def _listed(path: Path) -> list[str] | None:
    """The files of the site an earlier export left in DIR (its pages, whatever the manifest's
    format: a site an older version made is still this tool's own); [] without a manifest,
    None when the file in its place is not one."""
    if os.path.islink(path):
        return []  # refused as a link by the survey, never read
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        return []
    except (OSError, ValueError, RecursionError):
        return None
    pages = data.get("pages") if isinstance(data, dict) else None
    if not isinstance(pages, dict):
        return None
    return [*SITE_PAGES, *(p for p in pages if isinstance(p, str))]


def _read_manifest(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return {}
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return {}
    return data
