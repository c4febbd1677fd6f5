"""`send`, `wait`, `runs`, `abort`: starting background runs and following them."""

from __future__ import annotations

import sys
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import typer

from sessiontool.cli import render
from sessiontool.cli.app import app, command, get_ctx, want_json
from sessiontool.cli.commands.completers import complete_keys, complete_run_ids
from sessiontool.errors import UsageError


def _spinner(text: str) -> AbstractContextManager[Any]:
    """A spinner on stderr while waiting, only when stderr is a terminal."""
    if not render.is_terminal(sys.stderr):
        return nullcontext()
    from rich.console import Console

    return Console(file=sys.stderr).status(text)


def _print_result(
    result: dict[str, Any], code: int, as_json: bool, accepted_text: str | None = None
) -> int:
    if as_json:
        render.emit_json(result)
        return code
    status = result.get("status")
    if status == "accepted":
        render.write_out(f"{accepted_text or result['runId']}\n")
    elif status == "ok":
        if "reply" in result:
            render.write_out(result["reply"] + ("\n" if not result["reply"].endswith("\n") else ""))
        elif "sendPolicy" in result:
            render.err(
                f"send policy of {result['sessionKey']}: {result['sendPolicy'] or 'inherit'}"
            )
    elif status == "timeout":
        render.err(f"still running: sessiontool wait {result['runId']}")
    else:
        render.error_line(
            f"{result.get('error')} (run {result.get('runId')}, {result.get('runStatus')})"
        )
    return code


@app.command("send")
@command
def send_cmd(
    key: str | None = typer.Argument(
        None, help="Session key, bare key, 'main' or sessionId.", autocompletion=complete_keys
    ),
    message: str | None = typer.Argument(None, help="The message ('-' reads stdin)."),
    label: str | None = typer.Option(None, "--label", help="Pick the session by its label."),
    timeout: str = typer.Option(
        "30", "--timeout", help="Wait up to this long (30, 30s, 5m); 0 = don't wait."
    ),
    deliver: bool = typer.Option(
        False, "--deliver", help="Deliver the reply to the session's channel."
    ),
    json_: bool = typer.Option(False, "--json", help="JSON output."),
) -> int:
    """Run a session's agent on a message and wait for the reply."""
    from sessiontool.durations import parse_duration
    from sessiontool.runs.submit import send

    if label is not None and message is None:
        key, message = None, key
    if message is None:
        raise UsageError("a message is required: sessiontool send KEY MESSAGE")
    if message == "-":
        message = sys.stdin.read()
    wait_s = parse_duration(timeout, option="--timeout")
    ctx = get_ctx()
    with _spinner("waiting for the reply…") if wait_s > 0 else nullcontext():
        result, code = send(ctx, key, message, label=label, timeout=wait_s, deliver=deliver)
    return _print_result(result, code, want_json(json_))


@app.command("wait")
@command
def wait_cmd(
    run_id: str = typer.Argument(..., help="The run id.", autocompletion=complete_run_ids),
    timeout: str | None = typer.Option(
        None, "--timeout", help="Give up after this long (default: until it ends)."
    ),
    json_: bool = typer.Option(False, "--json", help="JSON output."),
) -> int:
    """Wait for a run to end and print its result."""
    from sessiontool.durations import parse_duration
    from sessiontool.runs import records as runs
    from sessiontool.runs.submit import get_run, run_result

    ctx = get_ctx()
    get_run(ctx, run_id)
    wait_s = parse_duration(timeout, option="--timeout") if timeout is not None else None
    with _spinner("waiting for the run…"):
        rec = runs.wait_for(ctx.paths, run_id, wait_s)
    result, code = run_result(ctx, rec)
    return _print_result(result, code, want_json(json_))


@app.command("runs")
@command
def runs_cmd(
    run_id: str | None = typer.Argument(
        None, help="Show one run.", autocompletion=complete_run_ids
    ),
    status: str | None = typer.Option(
        None, "--status", help="queued, running, ok, error, timeout, aborted, lost."
    ),
    session: str | None = typer.Option(
        None, "--session", help="Only runs of this session.", autocompletion=complete_keys
    ),
    kind: str | None = typer.Option(None, "--kind", help="send, spawn or step."),
    log: bool = typer.Option(False, "--log", help="With RUN_ID: include the worker log."),
    quiet: bool = typer.Option(False, "-q", "--quiet", help="Run ids only."),
    json_: bool = typer.Option(False, "--json", help="JSON output."),
) -> None:
    """List background runs, newest first, or show one."""
    from sessiontool.runs.submit import get_run, list_runs, run_view

    ctx = get_ctx()
    if run_id is not None:
        rec = run_view(ctx, get_run(ctx, run_id))
        if log:
            try:
                rec["log"] = ctx.paths.run_log(run_id).read_text(encoding="utf-8", errors="replace")
            except OSError:
                rec["log"] = ""
        if want_json(json_):
            render.emit_json(rec)
        else:
            lines = [f"{k}\t{_short(v)}" for k, v in rec.items() if k != "log"]
            text = "\n".join(lines) + "\n"
            if log:
                text += "--- log ---\n" + rec["log"]
            render.write_out(text)
        return
    if log:
        raise UsageError("--log needs a RUN_ID")
    result = list_runs(ctx, status=status, session=session, kind=kind)
    if want_json(json_):
        render.emit_json(result)
        return
    rows = result["runs"]
    if quiet:
        render.write_out("".join(r["runId"] + "\n" for r in rows))
        return
    cells = [
        [
            r["runId"],
            r.get("kind", ""),
            (r.get("step") or ""),
            r.get("status", ""),
            r.get("sessionKey", ""),
            render.iso_or_dash(r.get("createdAt"))
            if not render.is_terminal()
            else render.ago(r.get("createdAt")),
            _short(r.get("reply") or r.get("error") or ""),
        ]
        for r in rows
    ]
    if render.is_terminal():
        if not rows:
            render.err("No runs.")
            return
        render.table(["RUN", "KIND", "STEP", "STATUS", "SESSION", "CREATED", "RESULT"], cells)
    else:
        render.write_out(render.tsv(cells))


def _short(v: Any, n: int = 60) -> str:
    s = v if isinstance(v, str) else render.json_line(v).strip()
    s = s.replace("\n", " ")
    return s if len(s) <= n else s[: n - 1] + "…"


@app.command("abort")
@command
def abort_cmd(
    run_id: str = typer.Argument(..., help="The run id.", autocompletion=complete_run_ids),
    json_: bool = typer.Option(False, "--json", help="JSON output."),
) -> int:
    """Stop a run: kill its agent's process group and mark it aborted."""
    from sessiontool.runs import records as runs
    from sessiontool.runs.submit import get_run

    ctx = get_ctx()
    get_run(ctx, run_id)
    rec = runs.abort(ctx.paths, run_id)
    result = {"runId": run_id, "status": rec.get("status")}
    if want_json(json_):
        render.emit_json(result)
    else:
        render.write_out(f"{run_id}\t{rec.get('status')}\n")
    return 0
