"""The cells of `top`'s panes and its status line, from a snapshot: plain strings, no Textual,
so that what a person sees is tested without a screen."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sessiontool.termtext import label_cell
from sessiontool.tui import fmt
from sessiontool.tui.model import ACTIVE, Cost, Snapshot

KEY_WIDTH, LABEL_WIDTH, TEXT_WIDTH = 32, 16, 80
SESSION_COLUMNS = ("KEY", "KIND", "UPDATED", "LABEL", "MODEL", "TOKENS", "COST")
# Widths that keep KEY, KIND, UPDATED and LABEL on an 80-column screen (a longer key is cut in
# the middle with "…", a longer label at its end, as `list` cuts them; Enter shows the whole
# key, `list --json` has it); None: as wide as the widest cell.
SESSION_WIDTHS: tuple[int | None, ...] = (KEY_WIDTH, None, None, LABEL_WIDTH, None, None, None)
RUN_COLUMNS = ("RUN", "KIND", "STATUS", "SESSION", "STEP", "ELAPSED", "RSS", "RESULT")
# ELAPSED and RSS change while a run runs: as wide as their title or widest value ("12d05h",
# "10240M"), so a new value never changes the table's layout (tables.py redraws their row).
RUN_WIDTHS: tuple[int | None, ...] = (8, None, None, None, None, 7, 6, None)
CLOCKS = (5, 6)  # the columns of RUN_COLUMNS that tick
DELIVERY_COLUMNS = ("WHEN", "MODE", "STATUS", "SESSION", "TO", "TEXT")
FILTERED = ("key", "kind", "label", "displayName", "model", "channel")

Row = tuple[str | None, list[str]]  # the row's key (a session key, a run id) and its cells


def matching(sessions: list[dict[str, Any]], needle: str) -> list[dict[str, Any]]:
    """`/` in `top`: the sessions whose key, kind, label, model or channel holds the text."""
    if not needle:
        return sessions
    n = needle.casefold()
    return [r for r in sessions if any(n in str(r.get(f) or "").casefold() for f in FILTERED)]


def sessions_title(found: int, shown: int, total: int, needle: str) -> str:
    """`Sessions (9)`; `Sessions (1 of 9 matching /x)`; `…, newest 200 shown` when cut."""
    title = f"Sessions ({found} of {total} matching /{needle}" if needle else f"Sessions ({total}"
    title += f", newest {shown} shown; / filters)" if shown < found else ")"
    return fmt.esc(title)


def session_rows(
    sessions: list[dict[str, Any]], cost_by_key: dict[str, float], now: int
) -> list[Row]:
    return [
        (
            r["key"],
            [
                fmt.key_cell(r["key"], KEY_WIDTH),
                fmt.esc(r.get("kind", "")) + (" (pinned)" if r.get("pinnedAt") is not None else ""),
                fmt.ago(r.get("updatedAt"), now),
                fmt.text_cell(label_cell(r), LABEL_WIDTH),
                fmt.esc(r.get("model", "")),
                fmt.count(r.get("totalTokens")),
                fmt.money(cost_by_key[r["key"]]) if r["key"] in cost_by_key else "",
            ],
        )
        for r in sessions
    ]


def elapsed_ms(r: Mapping[str, Any], now: int) -> float:
    """Queued: since it was made; running: since it started; ended: how long it ran."""
    status = r.get("status")
    if status == "queued":
        return float(now - (r.get("createdAt") or now))
    start = r.get("startedAt") or r.get("createdAt") or now
    end = now if status in ACTIVE else (r.get("endedAt") or now)
    return float(end - start)


def _status(r: Mapping[str, Any]) -> str:
    """A run's status; a run its budget stopped says so."""
    status = str(r.get("status", ""))
    return f"{status} (budget)" if r.get("abortReason") == "budget" else status


def run_rows(runs: Sequence[Mapping[str, Any]], rss: dict[str, int | None], now: int) -> list[Row]:
    return [
        (
            r["runId"],
            [
                fmt.esc(r["runId"][:8]),
                fmt.esc(r.get("kind", "")),
                fmt.esc(_status(r)),
                fmt.key_cell(r.get("sessionKey", ""), KEY_WIDTH),
                fmt.esc(r.get("step") or ""),
                fmt.span(elapsed_ms(r, now) / 1000),
                fmt.size(rss.get(r["runId"])) if r.get("status") == "running" else "",
                fmt.text_cell(_head(r.get("reply") or r.get("error")), TEXT_WIDTH),
            ],
        )
        for r in runs
    ]


def _head(value: Any) -> str:
    """The start of a reply, error or delivered text: enough to fill its cell (a 10 MB reply
    is not escaped whole to show 80 characters of it)."""
    text = value if isinstance(value, str) else ("" if value is None else str(value))
    return text[: TEXT_WIDTH + 1]


def delivery_rows(
    deliveries: Sequence[Mapping[str, Any]], display: Callable[[str], str], now: int
) -> list[Row]:
    return [
        (
            None,
            [
                fmt.ago(d.get("ts"), now),
                fmt.esc(d.get("mode", "")),
                fmt.esc(d.get("status", "")),
                fmt.key_cell(
                    display(d["sessionKey"]) if isinstance(d.get("sessionKey"), str) else "",
                    KEY_WIDTH,
                ),
                fmt.text_cell(d.get("to") or d.get("channel") or "", KEY_WIDTH),
                fmt.text_cell(_head(d.get("text") or d.get("error")), TEXT_WIDTH),
            ],
        )
        for d in deliveries
    ]


def status_line(
    snap: Snapshot, gateway: str, cost: Cost | None, budget: float | None
) -> tuple[str, bool]:
    """The footer: today's cost against the budget, the runs, the store's format, the gateway's
    state; and whether the cost is over the budget."""
    parts = []
    over = False
    if cost is not None:
        today = f"today: {fmt.money(cost.total, cost.currency)}"
        if budget is not None:
            over = cost.total > budget
            today += f" of {fmt.money(budget, cost.currency)}" + (" OVER BUDGET" if over else "")
        parts.append(today)
    elif budget is not None:
        parts.append(f"today: … of {fmt.money(budget)}")
    for b in cost.budgets if cost is not None else ():
        if b.get("fill") is None:
            continue
        full = b["fill"] >= 1
        over = over or full
        parts.append(
            f"budget {b['budget']}: {fmt.money(b['spend'])} of {fmt.money(b['limit'])} "
            f"({b['fill'] * 100:.0f}%)" + (" SPENT" if full else "")
        )
    running = sum(1 for r in snap.runs if r.get("status") == "running")
    queued = sum(1 for r in snap.runs if r.get("status") == "queued")
    parts.append(f"runs: {running} running, {queued} queued")
    parts += [f"store: {', '.join(snap.formats) or '-'}", f"gateway: {gateway}"]
    if snap.error:
        parts.append(f"error: {snap.error}")
    return fmt.esc(" · ".join(parts)), over
