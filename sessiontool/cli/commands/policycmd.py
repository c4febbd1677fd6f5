"""`policy` (the per-session send override) and `deliveries` (the announce outbox): the two
operator commands about where agents' words may go."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import typer

from sessiontool.cli import output, render
from sessiontool.cli.app import app, command, get_ctx, want_json
from sessiontool.cli.completers import choices, complete_keys, complete_labels

if TYPE_CHECKING:
    from typing import TypedDict

    from sessiontool.context import Context
    from sessiontool.flow.result_types import DeliveryRecord, RetryResult

    class DeliveriesResult(TypedDict):
        """What `deliveries` lists: the outbox records, each with its id."""

        count: int
        deliveries: list[DeliveryRecord]


def _decision_line(result: Mapping[str, Any]) -> str:
    line = f"{render.esc(result['sessionKey'])}: send {result['effective']} ({result['decidedBy']})"
    if "sendPolicy" in result:
        value = result["sendPolicy"]
        line += " — override " + ("cleared" if value is None else f"set to {value}")
    return render.esc_text(line) + "\n"


@app.command("policy")
@command
def policy_cmd(
    key: str | None = typer.Argument(
        None,
        help="Session key, bare key, 'main' or sessionId.",
        autocompletion=complete_keys,
        metavar="KEY",
    ),
    action: str | None = typer.Argument(
        None,
        help="allow, deny or inherit (also on, off); omit to show the effective policy.",
        metavar="ACTION",
        autocompletion=choices("allow", "deny", "inherit", "on", "off"),
    ),
    label: str | None = typer.Option(
        None, "--label", help="Pick the session by its label.", autocompletion=complete_labels
    ),
    create: bool = typer.Option(
        False, "--create", help="Setting: create the session's entry if it has none yet."
    ),
    json_: bool = typer.Option(False, "--json", help="JSON output."),
) -> None:
    """Show or set a session's send policy override (operator only).

    Setting one on a session that does not exist is exit 3 (a typo must not create a
    session), unless --create is given or it is the agent's main session."""
    from sessiontool.runs.sendpolicy import is_action, policy_status, set_send_policy

    if label is not None and key is not None and action is None and is_action(key):
        key, action = None, key  # `policy --label L deny`: the one positional is the action
    ctx = get_ctx(reads=action is None)
    if action is None:
        result = policy_status(ctx, key, label)
    else:
        result = set_send_policy(ctx, key, label, action, create=create)
    view = output.View(result, text=_decision_line)
    output.show(view, output.look(ctx.options), as_json=want_json(json_))


FOLLOW_LAST = 10  # `deliveries --follow` first shows the last ones, as `tail -f` does


def _readable(rec: Mapping[str, Any]) -> str:
    target = " ".join(str(rec[k]) for k in ("channel", "to") if rec.get(k)) or "(no target)"
    text = str(rec.get("text") or "").replace("\n", " ")
    if len(text) > 160:
        text = text[:157] + "..."
    head = f"{rec.get('ts', '')}  {rec.get('status', '?')}  {rec.get('mode', '?')}"
    line = f"{head}  {rec.get('sessionKey', '?')} → {target}: {text}"
    if rec.get("error"):
        line += f"  [{rec['error']}]"
    return render.esc(line) + "\n"


def _no_quiet(quiet: bool) -> None:
    from sessiontool.errors import UsageError

    if quiet:
        raise UsageError("-q is for `deliveries retry`")


def _retry(ctx: Context, ids: list[str], as_json: bool, quiet: bool) -> int:
    """What cron mails is stderr: a delivery still not delivered is one line there (however
    stdout is redirected), one that went through a line on stdout (none with -q), and nothing
    to retry is said only to a person at a terminal."""
    from sessiontool.flow.delivery import LANDED

    result = _retry_all(ctx, ids)
    look = output.look(ctx.options)
    if not as_json and not result["deliveries"] and not quiet:
        render.empty(look, "Nothing to retry.")

    def text(r: Mapping[str, Any]) -> str:
        out = []
        for rec in r["deliveries"]:
            if rec.get("status") not in LANDED:
                why = f": {rec['error']}" if rec.get("error") else ""
                render.error_line(
                    f"delivery {rec['id']} is still not delivered ({rec.get('status')}){why}"
                )
            elif not quiet:
                # Each field escaped on its own: the tab between them is the TSV's, not text.
                change = f"{rec.get('previousStatus')} -> {rec.get('status')}"
                out.append(f"{render.esc(str(rec['id']))}\t{render.esc(change)}\n")
        return "".join(out)

    output.show(output.View(result, text=text), look, as_json=as_json)
    return 0 if result["delivered"] == result["count"] else 1


def _retry_all(ctx: Context, ids: list[str]) -> RetryResult:
    """The outbox's deliveries and the gateway announces that did not land (`<runId>:
    spawn-announce`, runs/gateway_announce.py), retried by id or all of them."""
    from sessiontool.flow.redeliver import retry
    from sessiontool.runs.control import pending_announces, retry_announces
    from sessiontool.runs.gateway_announce import MODE

    waiting = {f"{r['runId']}:{MODE}": r["runId"] for r in pending_announces(ctx.paths)}
    mine: list[str] = []
    rest: list[str] = []
    for want in ids:
        hits = [k for k in waiting if k.startswith(want)]
        (mine if len(hits) == 1 else rest).append(waiting[hits[0]] if len(hits) == 1 else want)
    result = retry(ctx, rest) if rest or not ids else {"count": 0, "delivered": 0, "deliveries": []}
    if mine or not ids:
        more = retry_announces(ctx.paths, ctx.config, mine)
        result["deliveries"] += more  # type: ignore[arg-type]
        result["count"] += len(more)
        result["delivered"] += sum(1 for r in more if r["status"] == "delivered")
    return result


@app.command("deliveries")
@command
def deliveries_cmd(
    words: list[str] | None = typer.Argument(
        None,
        help="'retry' re-sends failed or pending deliveries: the given ids (or id prefixes), "
        "or all of them.",
        metavar="[retry [ID]...]",
    ),
    follow: bool = typer.Option(
        False, "-f", "--follow", help="Keep printing records as they are appended."
    ),
    since: str | None = typer.Option(
        None, "--since", help="Only records since (30m, 2h, 1d or an ISO date)."
    ),
    json_: bool = typer.Option(
        False, "--json", help="JSON output (one line per record with --follow)."
    ),
    quiet: bool = typer.Option(
        False, "-q", "--quiet", help="retry: print only what is still not delivered (for cron)."
    ),
    lines: int | None = typer.Option(
        None,
        "-n",
        "--lines",
        min=0,
        metavar="N",
        help="Only the last N records (with --follow: first, then the new ones; 0: only new). "
        "Default: all; with --follow, the last 10 at a terminal and none piped.",
    ),
) -> int:
    """Read or follow the announce outbox, or retry deliveries (operator only).

    `deliveries retry [ID...]` re-sends deliveries whose latest attempt failed or is still
    pending (each attempt is one more outbox line); exit 1 when any is still not delivered,
    each of those one line on stderr (what cron mails); a delivered one is a line on stdout
    (none with -q); nothing to retry is silent unless stdout is a terminal.
    One with no target (`undelivered`) is final: its text is in the transcript and there is
    nowhere else to send it. A spawn's announce through OpenClaw's gateway whose turn failed
    (`RUNID:spawn-announce`, docs/runs.md) is made once more. A delivery's id is `<runId>:<mode>` (shown by --json and
    doctor). Piped: TSV without a header, one record per line: ts, mode, status, sessionKey,
    channel, to, text."""
    from sessiontool.durations import parse_since
    from sessiontool.errors import UsageError
    from sessiontool.flow.policy import require_operator

    ctx = get_ctx(reads=True)
    require_operator(ctx, "deliveries")
    if words:
        if words[0] != "retry":
            raise UsageError(f"unknown deliveries action {words[0]!r} (expected: retry)")
        if follow or since is not None or lines is not None:
            raise UsageError("retry takes ids only, not --follow, --since or --lines")
        return _retry(ctx, words[1:], want_json(json_), quiet)
    _no_quiet(quiet)
    since_ms = parse_since(since) if since is not None else None
    if follow:
        return _follow(ctx, since_ms, want_json(json_), lines)
    return _list(ctx, since_ms, want_json(json_), lines)


def _shown(ctx: Context, rec: DeliveryRecord) -> DeliveryRecord:
    """A record as `deliveries` shows it: with its id, its key in display form."""
    from sessiontool.flow.redeliver import delivery_id

    shown: DeliveryRecord = {**rec, "id": delivery_id(rec)}
    key = rec.get("sessionKey")
    if isinstance(key, str):
        shown["sessionKey"] = ctx.display(key)
    return shown


def _delivery_columns() -> output.Columns:
    from sessiontool.cli import columns

    return columns.DELIVERIES, list(columns.DELIVERIES)


def _readable_lines(look: render.Look, result: DeliveriesResult) -> None:
    render.write_out("".join(_readable(rec) for rec in result["deliveries"]))


def _list(ctx: Context, since_ms: int | None, as_json: bool, lines: int | None) -> int:
    from sessiontool.flow.delivery import read_deliveries

    found = read_deliveries(ctx.paths, since_ms)
    if lines is not None:
        found = found[len(found) - lines :] if lines else []
    records = [_shown(ctx, r) for r in found]
    result: DeliveriesResult = {"count": len(records), "deliveries": records}
    view = output.View(
        result,
        rows=lambda r: r["deliveries"],
        columns=_delivery_columns,
        table=_readable_lines,
        empty="No deliveries.",
    )
    output.show(view, output.look(ctx.options), as_json=as_json)
    return 0


def _follow(ctx: Context, since_ms: int | None, as_json: bool, lines: int | None) -> int:
    """The records since `since_ms` (the last `lines` of them), then each new one as it is
    appended. Unasked, a person at a terminal first sees the last FOLLOW_LAST, as `tail -f`
    starts (what a spawn just delivered is on the screen); a script reading --json or TSV gets
    only the new ones (a bridge started again must not forward the same records twice)."""
    from sessiontool.flow.delivery import follow_deliveries

    look = output.look(ctx.options)
    fmt = output.choose(look, as_json=as_json)
    last = lines
    if lines is None:
        last = FOLLOW_LAST if since_ms is None and fmt == "table" else None
    shown = (_shown(ctx, rec) for rec in follow_deliveries(ctx.paths, since_ms, last=last))
    output.stream(shown, _one_delivery, look, fmt)
    return 0


def _one_delivery(rec: DeliveryRecord) -> output.View[DeliveriesResult]:
    """A record that arrived under `--follow`, as a listing of one (its TSV line, its line for
    a person); the JSON is the record alone, a line each (output.stream)."""
    one: DeliveriesResult = {"count": 1, "deliveries": [rec]}
    return output.View(
        one, lambda r: r["deliveries"], columns=_delivery_columns, table=_readable_lines
    )
