"""`send`, `wait`, `runs`, `abort`: starting background runs and following them."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any

import typer

from sessiontool.cli import output, render
from sessiontool.cli.app import app, check_writable, command, get_ctx, look, read_stdin, want_json
from sessiontool.cli.completers import (
    choices,
    complete_keys,
    complete_labels,
    complete_run_ids,
)
from sessiontool.errors import UsageError

if TYPE_CHECKING:
    from sessiontool.context import Context
    from sessiontool.runs.record_types import RunRecord
    from sessiontool.runs.result_types import DeliveryState, SendResult


def _spinner(look: render.Look, text: str) -> AbstractContextManager[Any]:
    """A spinner on stderr while waiting, only when stderr is a terminal."""
    if not look.terminal(sys.stderr):
        return nullcontext()
    from rich.console import Console

    return Console(file=sys.stderr).status(text)


def _print_result(
    result: Mapping[str, Any],
    code: int,
    as_json: bool,
    accepted_text: str | None = None,
    *,
    ids_only: bool = False,
) -> int:
    """`ids_only` (`-q`): the run id on stdout whatever happened (errors still on stderr)."""
    if result.get("note") and not as_json:  # a steer queued as a new turn says so
        render.err(f"note: {result['note']}")
    view = output.View(result, text=lambda r: _result_text(r, accepted_text, ids_only))
    output.show(view, look(), as_json=as_json)
    return code


def _result_text(result: Mapping[str, Any], accepted_text: str | None, ids_only: bool) -> str:
    """What stdout gets for a run's result; what went wrong is said on stderr here."""
    status = result.get("status")
    failed = f"{result.get('error')} (run {result.get('runId')}, {result.get('runStatus')})"
    if ids_only and result.get("runId"):
        if status not in ("accepted", "ok", "timeout", "no_reply"):
            render.error_line(failed)
        return f"{result['runId']}\n"
    if status in ("no_reply", "queued"):  # nothing to say (exit 0); notify: no run at all
        if status == "no_reply":
            render.err(f"no visible reply (run {result.get('runId')})")
        return ""
    if status == "accepted":
        return f"{accepted_text or result['runId']}\n"
    if status == "ok":
        if "reply" in result:
            reply = render.esc_text(result["reply"])
            return reply + ("\n" if not reply.endswith("\n") else "")
        if "sendPolicy" in result:
            render.err(
                f"send policy of {result['sessionKey']}: {result['sendPolicy'] or 'inherit'}"
            )
        return ""
    if status == "timeout":
        # The run id on stdout: `id=$(sessiontool send … --timeout 10) || sessiontool wait "$id"`.
        render.err(f"still running: sessiontool wait {result['runId']}")
        return f"{result['runId']}\n"
    render.error_line(failed)
    return ""


@app.command("send")
@command
def send_cmd(
    key: str | None = typer.Argument(
        None, help="Session key, bare key, 'main' or sessionId.", autocompletion=complete_keys
    ),
    message: str | None = typer.Argument(None, help="The message ('-' reads stdin)."),
    label: str | None = typer.Option(
        None, "--label", help="Pick the session by its label.", autocompletion=complete_labels
    ),
    timeout: str = typer.Option(
        "30", "--timeout", help="Wait up to this long (30, 30s, 5m, 1h30m); 0 = don't wait."
    ),
    deliver: bool = typer.Option(
        False, "--deliver", help="Deliver the reply to the session's channel."
    ),
    no_create: bool = typer.Option(
        False, "--no-create", help="Exit 3 instead of creating a session that does not exist."
    ),
    mode: str = typer.Option(
        "followup",
        "--mode",
        help="followup (a new turn), steer (guidance into the active run) or notify (context "
        "only, no run).",
        autocompletion=choices("followup", "steer", "notify"),
    ),
    max_cost: float | None = typer.Option(
        None, "--max-cost", help="Stop the run (exit 6) once it has spent USD.", metavar="USD"
    ),
    force: bool = typer.Option(
        False, "--force", help="Start even when a budget is spent (sessiontool.budgets)."
    ),
    quiet: bool = typer.Option(
        False,
        "-q",
        "--quiet",
        help="Print only the run id (not the reply); no notices on stderr.",
    ),
    json_: bool = typer.Option(False, "--json", help="JSON output."),
) -> int:
    """Run a session's agent on a message and wait for the reply.

    A key that does not exist yet is created (as OpenClaw does) with a notice on stderr;
    --no-create makes that exit 3. When the wait times out (exit 124) the run id is printed on
    stdout; after Ctrl-C (exit 130) it is named on stderr; either way the run goes on:
    `sessiontool wait RUN_ID`. With --deliver, a reply that could not be delivered is a warning
    on stderr (the exit status stays the run's; `deliveries retry` tries again). A spent budget
    (sessiontool.budgets) refuses the run with exit 6 unless --force; a run that crosses its
    budget or --max-cost is stopped (aborted, reason budget: exit 6)."""
    from sessiontool import testhooks
    from sessiontool.cli.app import gated
    from sessiontool.durations import parse_duration
    from sessiontool.errors import SessiontoolError
    from sessiontool.runs.sendmodes import SendRequest, openclaw_words, send
    from sessiontool.runs.submit import run_result
    from sessiontool.runs.wait import wait_for

    if label is not None and message is None:
        key, message = None, key
    if message is None:
        raise UsageError("a message is required: sessiontool send KEY MESSAGE")
    if message == "-":
        message = read_stdin("the message")
    wait_s = parse_duration(timeout, option="--timeout")
    as_json = want_json(json_)
    ctx = get_ctx()
    check_writable(ctx)
    ctx = gated(ctx, max_cost, force)
    watch = _SendWatch(key, no_create, quiet)
    # Start the run without waiting, then wait here: an interrupted wait still knows the run.
    # (Through OpenClaw's gateway too: the run's worker hands the turn to it.)
    with _ctrl_c_names_the_run() as interrupted:
        request = SendRequest(key, message, label=label, mode=mode, timeout=0, deliver=deliver)
        result, code = send(ctx, request, watch=watch.on(interrupted))
    if interrupted.run_id is not None and interrupted.seen:
        return _interrupted(interrupted.run_id, result.get("sessionKey"), as_json)
    steered = result.get("targetDisposition") == "steered"  # admission only, never waited
    if result.get("status") != "accepted" or wait_s <= 0 or steered:
        return _print_result(result, code, as_json, ids_only=quiet)
    run_id, note = result["runId"], result.get("note")
    testhooks.pause("send-wait")
    try:
        with _spinner(output.look(ctx.options), "waiting for the reply…"):
            rec = wait_for(ctx.paths, run_id, wait_s, submitted=True)
    except KeyboardInterrupt:
        return _interrupted(run_id, result.get("sessionKey"), as_json)
    except SessiontoolError:  # withdrawn (a full disk): the error says so; K only if it exists
        watch.say_created(ctx)
        raise
    result, code = run_result(ctx, rec)
    result = openclaw_words(result, note=note)
    watch.say_created(ctx, replied=result.get("status") in ("ok", "no_reply"))
    delivery = result.get("delivery")
    own_delivery = delivery is not None and delivery["mode"] == "deliver"
    if deliver and own_delivery and result.get("status") == "ok":
        # From a session, --deliver means the agent-to-agent announce, which decides by itself
        # what (if anything) is posted: there is no delivery of the reply to wait for. Through
        # OpenClaw's gateway the turn delivered it itself: no outbox line will come either.
        code = _report_delivery(ctx, result, rec, wait_s=wait_s, code=code)
    return _print_result(result, code, as_json, ids_only=quiet)


class _SendWatch:
    """What `send` tells the command: a new key (refused with --no-create, else named once it
    exists) and the run's id (for Ctrl-C)."""

    def __init__(self, typed: str | None, no_create: bool, quiet: bool) -> None:
        self.typed, self.no_create, self.quiet = typed, no_create, quiet
        self.new: str | None = None
        self.interrupt: _Interrupt | None = None

    def on(self, interrupt: _Interrupt) -> _SendWatch:
        self.interrupt = interrupt
        return self

    def new_session(self, key: str) -> None:
        if self.no_create:
            from sessiontool.errors import session_not_found

            raise session_not_found(self.typed or key)  # as the user typed it
        self.new = key

    def run_created(self, run_id: str) -> None:
        if self.interrupt is not None:
            self.interrupt.arm(run_id)

    def say_created(self, ctx: Context, replied: bool = False) -> None:
        """`created session K` once the run that was to create it is over and K exists: not
        for a run withdrawn before it made it (a full disk), nor before the run ran
        (`--timeout 0`). A run that replied wrote K's entry when its turn started, so only
        another end reads the store again (a big one costs a parse)."""
        if self.new is None or self.quiet:
            return
        from sessiontool.runs.submit import session_exists

        if replied or session_exists(ctx, self.new):
            render.err(f"created session {render.esc(self.new)}")


class _Interrupt:
    """Ctrl-C during a send's start: before the run exists it stops the command at once; once
    it exists (armed) it is held until the worker is started, so the run is named, not lost."""

    def __init__(self) -> None:
        self.run_id: str | None = None
        self.seen = False

    def arm(self, run_id: str) -> None:
        self.run_id = run_id

    def handle(self, signum: int, frame: Any) -> None:
        if self.run_id is None:
            raise KeyboardInterrupt
        self.seen = True


@contextmanager
def _ctrl_c_names_the_run() -> Iterator[_Interrupt]:
    import signal

    state = _Interrupt()
    previous = signal.getsignal(signal.SIGINT)
    if previous is not signal.default_int_handler:  # ignored (a background job): leave it so
        yield state
        return
    signal.signal(signal.SIGINT, state.handle)
    try:
        yield state
    finally:
        signal.signal(signal.SIGINT, previous)


def _interrupted(run_id: str, session_key: Any, as_json: bool) -> int:
    """Ctrl-C while waiting: the run goes on in its worker. Not an error (the user chose to
    stop waiting): a plain line on stderr naming the run."""
    from sessiontool.errors import ExitCode

    msg = f"stopped waiting; run {run_id} goes on: sessiontool wait {run_id} (or abort {run_id})"
    render.err(msg)
    result = {
        "status": "interrupted",
        "runId": run_id,
        "sessionKey": session_key,
        "error": msg,
        "code": int(ExitCode.INTERRUPTED),
    }
    output.show(output.View(result, text=lambda _: ""), look(), as_json=as_json)
    return int(ExitCode.INTERRUPTED)


def _report_delivery(
    ctx: Context, result: SendResult, rec: RunRecord, wait_s: float, code: int
) -> int:
    """Say when a `--deliver` run's reply was not delivered: a warning on stderr, the exit
    status stays the run's (`deliveries retry ID` tries again; `delivery.status` in the JSON
    says it too). Still pending after the wait: `delivery.status` says so."""
    from sessiontool.errors import SessiontoolError
    from sessiontool.flow.delivery import LANDED
    from sessiontool.runs.control import wait_delivery

    try:
        got = wait_delivery(ctx, rec, wait_s)
    except SessiontoolError as exc:
        # The run succeeded: its reply is the answer; only the delivery's fate is unknown.
        render.warning_line(f"cannot tell whether the reply was delivered: {exc.message}")
        return code
    if got is None:
        return code
    did, found = got
    info: DeliveryState = {"id": did, "status": found.get("status"), "mode": "deliver"}
    if found.get("error"):
        info["error"] = found["error"]
    result["delivery"] = info
    if found.get("status") in LANDED:  # `outbox`: recorded for a bridge, which the JSON says
        return code
    render.warning_line(
        f"the reply was not delivered ({found.get('status')}): {found.get('error') or '?'}"
    )
    if found.get("status") not in ("denied", "undelivered"):  # retrying cannot change those
        render.err(f"hint: sessiontool deliveries retry {did}")
    return code


def _report_announce(ctx: Context, rec: RunRecord, wait_s: float) -> None:
    """Say when a gateway spawn's result did not reach its requester (its announce turn
    failed), as for a delivery that failed: a warning, the exit status stays the run's."""
    from sessiontool.runs.control import wait_announce
    from sessiontool.runs.gateway_announce import MODE

    why = wait_announce(ctx, rec, wait_s)
    if why is None:
        return
    render.warning_line(f"the result was not announced to the requester: {why}")
    render.err(f"hint: sessiontool deliveries retry {rec['runId']}:{MODE}")


@app.command("wait")
@command
def wait_cmd(
    run_ids: list[str] | None = typer.Argument(
        None, help="Run ids (or unique prefixes).", autocompletion=complete_run_ids
    ),
    session: str | None = typer.Option(
        None,
        "--session",
        help="Also every queued or running run of this session.",
        autocompletion=complete_keys,
    ),
    timeout: str | None = typer.Option(
        None, "--timeout", help="Give up after this long (default: until they end)."
    ),
    json_: bool = typer.Option(False, "--json", help="JSON output (one line per run)."),
) -> int:
    """Wait for runs to end and print their results.

    One run: the same result as `send` (the reply, or the JSON object). Several runs: one line
    per run in the order given (TSV without a header: runId, status as --json gives it (ok,
    error, timeout), the whole reply or error with newlines as \\n; with --json one JSON object
    per run). A --session that names no session (and no run) is exit 3 with the nearest key.
    The exit status is the worst of them: a failed run (1) over a wait that timed out (124)
    over ok (0)."""
    from sessiontool.durations import parse_duration
    from sessiontool.runs.control import full_run_id
    from sessiontool.runs.listing import open_runs
    from sessiontool.runs.submit import get_run, run_result
    from sessiontool.runs.wait import wait_all, worst_exit

    ctx = get_ctx(reads=True)
    ids = [full_run_id(ctx, r) for r in run_ids or []]
    if session is not None:
        ids += [r for r in open_runs(ctx, session) if r not in ids]
    elif not ids:
        raise UsageError("give one or more run ids, or --session KEY")
    for rid in ids:
        get_run(ctx, rid)
    wait_s = parse_duration(timeout, option="--timeout") if timeout is not None else None
    as_json = want_json(json_)
    if not ids:
        render.empty(output.look(ctx.options), "No open runs.")
        return 0
    try:
        waiting = "waiting for the run…" if len(ids) == 1 else f"waiting for {len(ids)} runs…"
        with _spinner(output.look(ctx.options), waiting):
            recs = wait_all(ctx.paths, ids, wait_s)
    except KeyboardInterrupt:
        return _interrupted(ids[0], None, as_json) if len(ids) == 1 else _interrupted_many(ids)
    codes = []
    for rec in recs:
        result, code = run_result(ctx, rec)
        if rec.get("deliver") and result.get("status") == "ok":
            # The delivery outcome, as `send --deliver` reports it (it is long done, usually).
            code = _report_delivery(ctx, result, rec, wait_s=wait_s or 30.0, code=code)
        _report_announce(ctx, rec, wait_s or 30.0)
        codes.append(code)
        if len(ids) == 1:
            _print_result(result, code, as_json)
        else:  # TSV: whole values (a newline as `\n`), the status --json gives
            output.show(output.View(result, text=_wait_line), look(), as_json=as_json)
    return worst_exit(codes)


def _wait_line(result: Mapping[str, Any]) -> str:
    detail = result.get("reply") if result.get("status") == "ok" else result.get("error")
    return render.tsv([[result["runId"], result["status"], detail or ""]])


def _interrupted_many(ids: list[str]) -> int:
    from sessiontool.errors import ExitCode

    render.err(f"stopped waiting; the {len(ids)} runs go on: sessiontool wait {' '.join(ids)}")
    return int(ExitCode.INTERRUPTED)


def short_ids(ids: list[str], minimum: int = 8) -> dict[str, str]:
    """The shortest prefix of each id, at least `minimum` long, that no other id shares."""
    out: dict[str, str] = {}
    ordered = sorted(set(ids))
    for i, rid in enumerate(ordered):
        n = minimum
        for other in (ordered[i - 1] if i else "", ordered[i + 1] if i + 1 < len(ordered) else ""):
            common = 0
            while common < min(len(rid), len(other)) and rid[common] == other[common]:
                common += 1
            n = max(n, common + 1)
        out[rid] = rid[:n]
    return out


def _human_value(key: str, value: Any) -> str:
    """A run record's value for people: times as ISO and age, everything else whole."""
    if key.endswith("At") and isinstance(value, int | float) and not isinstance(value, bool):
        return f"{render.iso_or_dash(value)} ({render.ago(value)})"
    s: str = value if isinstance(value, str) else render.json_line(value).strip()
    return s.replace("\n", "\n\t")


def _machine_value(key: str, value: Any) -> str:
    """A run record's value for scripts: times as ISO only, objects as JSON, text whole."""
    if key.endswith("At") and isinstance(value, int | float) and not isinstance(value, bool):
        return render.iso_or_dash(value)
    return value if isinstance(value, str) else render.json_line(value).strip()


@app.command("runs")
@command
def runs_cmd(
    run_id: str | None = typer.Argument(
        None, help="Show one run (its id or a unique prefix).", autocompletion=complete_run_ids
    ),
    status: str | None = typer.Option(
        None,
        "--status",
        help="queued, running, ok, error, timeout, aborted, lost.",
        autocompletion=choices("queued", "running", "ok", "error", "timeout", "aborted", "lost"),
    ),
    session: str | None = typer.Option(
        None,
        "--session",
        help="Only runs of this session (none such: exit 3, the nearest key named).",
        autocompletion=complete_keys,
    ),
    kinds: list[str] = typer.Option(
        [],
        "--kind",
        help="send, spawn, compact, step (repeat or comma-separate).",
        autocompletion=choices("send", "spawn", "compact", "step"),
    ),
    steps: bool = typer.Option(
        False, "--steps", help="Also the internal steps (reply turns, announce), under their run."
    ),
    limit: str = typer.Option("all", "--limit", help="At most N runs (newest first), or 'all'."),
    log: bool = typer.Option(False, "--log", help="With RUN_ID: include the worker log."),
    quiet: bool = typer.Option(False, "-q", "--quiet", help="Run ids only."),
    fields: str | None = typer.Option(
        None,
        "--fields",
        help="Only these columns, in this order, as TSV (on a terminal too): runId, kind, step, "
        "status, sessionKey, createdAt, result, parentRunId, rerunOf; with --json, any key of "
        "a run (e.g. usage).",
        metavar="F,..",
    ),
    json_: bool = typer.Option(False, "--json", help="JSON output."),
) -> None:
    """List background runs, newest first, or show one.

    Your runs (send, spawn); their internal steps (an agent-to-agent reply turn, the announce)
    with --steps, each under its run. The RUN column shows the shortest unique prefix (8
    characters or more); wait, runs and abort accept it. Piped: TSV without a header, one run
    per line: runId, kind, step, status, sessionKey, createdAt, result (the table's columns;
    the whole reply or error, a newline as \\n); --fields picks and orders them."""
    from sessiontool.cli import columns
    from sessiontool.cli.commands.read import parse_limit
    from sessiontool.runs.control import show_run
    from sessiontool.runs.listing import RunQuery, list_runs, parse_kinds

    n = parse_limit(limit)
    keys = columns.run_json_keys() if fields and want_json(json_) else ()
    names = columns.pick(columns.RUNS, fields, columns.RUNS_DEFAULT, keys) if fields else None
    ctx = get_ctx(reads=True)
    look = output.look(ctx.options)
    if run_id is not None:
        one = output.View(show_run(ctx, run_id, log=log), text=_run_piped, table=_run_lines)
        output.show(one, look, as_json=want_json(json_))
        return
    if log:
        raise UsageError("--log needs a RUN_ID")
    kinds_ = parse_kinds(kinds)
    result = list_runs(
        ctx, RunQuery(status=status, session=session, kinds=kinds_, steps=steps, limit=n)
    )
    view = output.View(
        result,
        rows=lambda r: r["runs"],
        columns=lambda: (columns.RUNS, columns.RUNS_DEFAULT),
        table=_runs_table,
        ids="runId",
    )
    output.show(view, look, as_json=want_json(json_), quiet=quiet, fields=names)


def _run_piped(view: Mapping[str, Any]) -> str:
    """One run piped: `field<TAB>value` lines as every TSV, whole values, newlines escaped, no
    ages; then its log when asked for."""
    text = render.tsv([k, _machine_value(k, v)] for k, v in view.items() if k != "log")
    return text + ("--- log ---\n" + view["log"] if "log" in view else "")


def _run_lines(look: render.Look, view: Mapping[str, Any]) -> None:
    """One run on a terminal: one `field<TAB>value` line each, then its log when asked for."""
    lines = [f"{k}\t{render.esc_text(_human_value(k, v))}" for k, v in view.items() if k != "log"]
    text = "\n".join(lines) + "\n"
    if "log" in view:
        text += "--- log ---\n" + view["log"]
    render.write_out(text)


def _runs_table(look: render.Look, result: Mapping[str, Any]) -> None:
    """The table on a terminal (short run ids, ages, results cut with "…" to fit: one line a
    run); piped, the TSV is cli/columns.py's, whole values as `--fields` gives them."""
    rows = result["runs"]
    short = short_ids([r["runId"] for r in rows])
    cells = [
        [
            short.get(r["runId"], r["runId"]),
            r.get("kind", ""),
            (r.get("step") or ""),
            r.get("status", ""),
            r.get("sessionKey", ""),
            render.ago(r.get("createdAt")),
            _short(r.get("reply") or r.get("error") or ""),
        ]
        for r in rows
    ]
    if not rows:
        render.empty(look, "No runs.")
    else:
        render.table(
            look,
            ["RUN", "KIND", "STEP", "STATUS", "SESSION", "CREATED", "RESULT"],
            cells,
            {
                **dict.fromkeys(("RUN", "KIND", "STATUS", "CREATED"), "whole"),
                "SESSION": "key",
                "RESULT": "cut",
            },
        )


def _short(v: Any, n: int = 400) -> str:
    """A result on one line (render.table cuts it to the terminal's width with "…")."""
    s = v if isinstance(v, str) else render.json_line(v).strip()
    s = s.replace("\n", " ")
    return s if len(s) <= n else s[: n - 1] + "…"


@app.command("rerun")
@command
def rerun_cmd(
    run_id: str = typer.Argument(
        ..., help="A failed, lost, aborted or timed-out run.", autocompletion=complete_run_ids
    ),
    json_: bool = typer.Option(False, "--json", help="JSON output."),
) -> int:
    """Start a new run with the target, message and options of one that did not end well.

    The old record stays; the new one names it (`rerunOf`). Prints the new run id at once, as
    `send --timeout 0` does: `sessiontool wait $(sessiontool rerun ID)`. A spawn keeps its
    label only when no session holds it any more."""
    from sessiontool.cli.app import gated
    from sessiontool.runs.control import full_run_id
    from sessiontool.runs.rerun import rerun
    from sessiontool.runs.submit import get_run

    ctx = get_ctx(reads=True)
    check_writable(ctx)
    ctx = gated(ctx, None, False)  # a rerun is a new run: the budgets hold for it too
    run_id = full_run_id(ctx, run_id)
    result = rerun(ctx, get_run(ctx, run_id))
    return _print_result(result, 0, want_json(json_))


@app.command("abort")
@command
def abort_cmd(
    run_id: str = typer.Argument(..., help="The run id.", autocompletion=complete_run_ids),
    json_: bool = typer.Option(False, "--json", help="JSON output."),
) -> int:
    """Stop a run: kill its agent's process group and mark it aborted."""
    from sessiontool.runs.control import abort_run

    ctx = get_ctx(reads=True)
    result = abort_run(ctx, run_id)
    view = output.View(result, text=lambda r: f"{r['runId']}\t{r['status']}\n")
    output.show(view, output.look(ctx.options), as_json=want_json(json_))
    return 0
