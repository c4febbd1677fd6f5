"""`label`, `reset`, `delete`, `paths`, `doctor`, `prune` and `completion`: managing sessions
and the state dir. Each command parses, calls one function of `sessiontool.operations` and renders
what it returns."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import typer

from sessiontool.cli import output, render
from sessiontool.cli.app import app, command, get_ctx, look, want_json
from sessiontool.cli.completers import SHELLS, complete_keys, complete_labels

if TYPE_CHECKING:
    from sessiontool.operations.repair import FixResult

KEY_HELP = "Session key, bare key, 'main' or sessionId."
LABEL_HELP = "Pick the session by its label instead of KEY."


def _complete_shells(incomplete: str) -> list[str]:
    return [s for s in SHELLS if s.startswith(incomplete)]


def _emit_session(result: Mapping[str, Any], as_json: bool, human: str) -> None:
    output.show(output.View(result, text=lambda _: human + "\n"), look(), as_json=as_json)


@app.command("label")
@command
def label_cmd(
    key: str | None = typer.Argument(
        None, help=KEY_HELP, metavar="KEY", autocompletion=complete_keys
    ),
    text: str | None = typer.Argument(
        None, help="The new label (at most 64 characters).", metavar="TEXT"
    ),
    label: str | None = typer.Option(
        None, "--label", help=LABEL_HELP, metavar="L", autocompletion=complete_labels
    ),
    json_: bool = typer.Option(False, "--json", help="JSON output."),
) -> None:
    """Set a session's label (operator only)."""
    from sessiontool.errors import UsageError
    from sessiontool.operations.manage import set_label

    if label is not None and key is not None and text is None:
        key, text = None, key  # `label --label OLD NEW`: the one positional is the new text
    if text is None:
        raise UsageError("usage: sessiontool label KEY TEXT (or --label L TEXT)")
    result = set_label(get_ctx(), key, text, label=label)
    # A gateway that answers without the entry still set the label it was sent (trimmed).
    shown = (result["entry"] or {}).get("label", text.strip())
    _emit_session(
        result, want_json(json_), f"{render.esc(result['sessionKey'])}\tlabel: {render.esc(shown)}"
    )


@app.command("reset")
@command
def reset_cmd(
    key: str | None = typer.Argument(
        None, help=KEY_HELP, metavar="KEY", autocompletion=complete_keys
    ),
    label: str | None = typer.Option(
        None, "--label", help=LABEL_HELP, metavar="L", autocompletion=complete_labels
    ),
    expect: str | None = typer.Option(
        None,
        "--expect-session-id",
        help="Refuse (exit 4) unless the session is still this sessionId.",
        metavar="ID",
    ),
    json_: bool = typer.Option(False, "--json", help="JSON output."),
) -> None:
    """Start a new conversation in a session: zero tokens, a new sessionId (operator only).

    The label, thinking and verbose levels, model override and send policy are kept; the old
    transcript stays on disk. Through OpenClaw 2026.9.6's gateway the reset is in place: the
    sessionId is kept and its transcript starts over."""
    from sessiontool.operations.manage import reset

    result = reset(get_ctx(), key, label=label, expect=expect)
    sid = render.esc(str((result.get("entry") or {}).get("sessionId")))
    what = (
        f"reset in place: sessionId {sid} kept, its transcript starts over"
        if result.get("inPlace")
        else f"new sessionId: {sid}"
    )
    _emit_session(result, want_json(json_), f"{render.esc(result['sessionKey'])}\t{what}")


@app.command("delete")
@command
def delete_cmd(
    key: str | None = typer.Argument(
        None, help=KEY_HELP, metavar="KEY", autocompletion=complete_keys
    ),
    label: str | None = typer.Option(
        None, "--label", help=LABEL_HELP, metavar="L", autocompletion=complete_labels
    ),
    expect: str | None = typer.Option(
        None,
        "--expect-session-id",
        help="Refuse (exit 4) unless the session is still this sessionId.",
        metavar="ID",
    ),
    json_: bool = typer.Option(False, "--json", help="JSON output."),
) -> None:
    """Delete a session: remove it from its store and archive its transcript (operator only).

    The transcript is renamed to <file>.deleted.<time>, never removed. A main session cannot
    be deleted."""
    from sessiontool.operations.manage import delete

    result = delete(get_ctx(), key, label=label, expect=expect)
    archived = result.get("archived")
    where = f" (transcript archived: {render.esc(archived)})" if archived else ""
    _emit_session(result, want_json(json_), f"deleted {render.esc(result['sessionKey'])}{where}")


@app.command("paths")
@command
def paths_cmd(json_: bool = typer.Option(False, "--json", help="JSON output.")) -> None:
    """Show where sessiontool reads and writes: state dir, config files, stores, runs, outbox,
    the search index, and each remote gateway's part (`gateways/<hash>/`)."""
    from sessiontool.operations.manage import state_paths

    ctx = get_ctx()
    view = output.View(state_paths(ctx), cells=_path_rows, table=_paths_table)
    output.show(view, output.look(ctx.options), as_json=want_json(json_))


def _path_rows(result: Mapping[str, Any]) -> list[tuple[str, str]]:
    """One (name, path) a line: TSV as every piped output (names hold spaces)."""
    rows: list[tuple[str, str]] = [("state dir", result["stateDir"])]
    if result["configFiles"]:
        rows += [("config", f) for f in result["configFiles"]]
    else:
        rows.append(("config", f"(none; would read {result['configDefault']})"))
    for a in result["agents"]:
        rows.append((f"agent {a['id']} sessions", a["sessionsDir"]))
        rows.append(
            (f"agent {a['id']} store", a["store"] + ("" if a["exists"] else " (not created yet)"))
        )
        rows.append((f"agent {a['id']} format", f"{a['format']} ({a['why']})"))
    rows += [("runs", result["runsDir"]), ("outbox", result["outbox"])]
    rows.append(("search index", result["index"]))
    for g in result["gateways"]:
        rows.append((f"gateway {g['url']}" if g["url"] else "gateway part", g["dir"]))
    return rows


def _paths_table(look: render.Look, result: Mapping[str, Any]) -> None:
    rows = _path_rows(result)
    width = max(len(name) for name, _ in rows)
    render.write_out(
        "".join(f"{render.esc(name).ljust(width)}  {render.esc(value)}\n" for name, value in rows)
    )


@app.command("doctor")
@command
def doctor_cmd(
    fix: bool = typer.Option(
        False, "--fix", help="Remove temp files of dead writers and locks of dead pids."
    ),
    yes: bool = typer.Option(
        False, "--yes", help="With --fix: also remove quarantined records and planted links."
    ),
    json_: bool = typer.Option(False, "--json", help="JSON output."),
) -> int:
    """Check the state dir and report what it finds; without --fix it never changes anything.

    Exit 0 when clean, 1 when there are problems, 2 when there are only warnings. Problems:
    a state dir that is not a directory, unreadable stores and run records, transcripts with
    bad or torn lines, entries whose transcript is missing although the session has had
    messages, lost runs, failed deliveries, links planted where sessiontool writes, a config
    every other command refuses (each value it refuses, every file that does not parse; the
    rest is still checked). Warnings: a chosen state dir or --agent that does not exist, transcripts
    no entry points to (a reset keeps the old one), stale lock files, deliveries with no
    target, temp files of dead writers, malformed outbox lines, config values skipped. Each
    finding has a hint how to clear it. --fix removes what is safe and says what it did;
    --yes adds malformed outbox lines, unreadable run records and planted links."""
    from sessiontool.cli.app import G
    from sessiontool.errors import UsageError
    from sessiontool.operations.doctor import doctor

    if yes and not fix:
        raise UsageError("--yes only goes with --fix")
    ctx = get_ctx(check=False, lenient=True)
    fixed: FixResult | None = None
    if fix:
        from sessiontool.operations import repair

        fixed = repair.fix(ctx.paths, ctx.config, yes=yes)
    result = doctor(ctx, explicit_agent=G.agent)
    if fixed is not None:
        result["fix"] = fixed
    output.show(
        output.View(result, text=_doctor_text), output.look(ctx.options), as_json=want_json(json_)
    )
    if result["errors"]:
        return 1
    return 2 if result["warnings"] else 0


def _doctor_text(result: Mapping[str, Any]) -> str:
    """doctor's report for a person (a pipe gets the same: its lines are for reading)."""
    fixed = result.get("fix")
    out = []
    if fixed is not None:
        out += [f"{d['action']} {render.esc(d['path'])}\n" for d in fixed["fixed"]]
        out += [
            f"could not fix {render.esc(d['path'])}: {render.esc(d['error'])}\n"
            for d in fixed["failed"]
        ]
        if fixed["needsYes"]:
            out.append(f"{len(fixed['needsYes'])} more need confirmation: doctor --fix --yes\n")
        if not fixed["fixed"] and not fixed["failed"]:
            out.append("nothing to fix\n")
    out += [
        f"store {s['agent']}: {s['format']} ({s['reason']})\n"
        for s in result["stores"]
        if s["format"] != "jsonl"
    ]
    out += _gateway_text(result.get("gateway") or {})
    for p in result["problems"]:
        head = "warning: " if p["severity"] == "warning" else "problem: "
        out.append(f"{head}{p['kind']}: {render.esc(p['path'])}\n    {render.esc(p['detail'])}\n")
        if p.get("hint"):
            out.append(f"    hint: {render.esc(p['hint'])}\n")
    errors, warnings = result["errors"], result["warnings"]
    if not errors and not warnings:
        out.append("no problems found\n")
    else:
        parts = []
        if errors:
            parts.append(f"{errors} problem{'s' if errors != 1 else ''}")
        if warnings:
            parts.append(f"{warnings} warning{'s' if warnings != 1 else ''}")
        out.append(" and ".join(parts) + " found\n")
    return "".join(out)


def _gateway_text(gw: Mapping[str, Any]) -> list[str]:
    """doctor's lines about the gateway: a remote one's connection, identity, pairing and
    scopes; the state dir's own with its version, write mode and handshake."""
    out: list[str] = []
    rem = gw.get("remote")
    if rem:  # a remote gateway: connection, identity, pairing, scopes, one line each
        scopes = rem["scopes"]
        out += [
            f"gateway {gw['url']}: {render.esc(rem['connection'])}\n",
            f"  identity: {render.esc(rem['identity'])}\n",
            f"  pairing: {render.esc(rem['pairing'])}\n",
            "  scopes: " + ("unknown" if scopes is None else ", ".join(scopes) or "none") + "\n",
        ]
        if gw.get("spawn"):
            out.append(f"  spawn: {render.esc(gw['spawn'])}\n")
    elif gw.get("reachable"):
        out.append(
            f"gateway {gw['url']}: OpenClaw {gw.get('version') or '(version unknown)'}; "
            f"writes: {gw.get('mode')}"
            + (f"; store lock {gw['lockForm']}" if gw.get("lockForm") else "")
            + "\n"
        )
        hs = gw.get("handshake") or {}
        if hs.get("scopes") is not None:
            out.append(
                f"  via {gw.get('transport')}: protocol {hs.get('protocol')}, auth "
                f"{gw.get('auth')}, {hs.get('identity')}, scopes "
                f"{', '.join(hs['scopes']) or 'none'}\n"
            )
        elif gw.get("transport"):
            out.append(f"  via {gw['transport']}: {hs.get('refused')}\n")
        if gw.get("spawn"):
            out.append(f"  spawn: {render.esc(gw['spawn'])}\n")
    return out


@app.command("prune")
@command
def prune_cmd(
    older_than: str = typer.Option(
        ..., "--older-than", help="Age to delete beyond (30s, 5m, 2h, 7d).", metavar="D"
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only count what would be deleted."),
    quiet: bool = typer.Option(False, "-q", "--quiet", help="Print nothing (for cron)."),
    json_: bool = typer.Option(False, "--json", help="JSON output."),
) -> None:
    """Delete finished run records, their logs and outbox lines older than D (operator only).

    Spawn records whose child session is still in a store are kept."""
    from sessiontool.durations import parse_duration
    from sessiontool.operations.manage import prune
    from sessiontool.sessions.resolve import all_agent_ids
    from sessiontool.state.detect import require_writable

    seconds = parse_duration(older_than, option="--older-than")
    ctx = get_ctx()
    require_writable(ctx.paths, all_agent_ids(ctx), "prune")
    result = prune(ctx, seconds, dry_run=dry_run)

    def text(r: Mapping[str, Any]) -> str:
        if quiet:
            return ""
        d = r["deleted"]
        verb = "would delete" if dry_run else "deleted"
        tail = " (dry run: nothing changed)" if dry_run else ""
        return (
            f"{verb} {d['runs']} run record(s), {d['logs']} log(s), "
            f"{d['deliveries']} outbox line(s){tail}\n"
        )

    output.show(output.View(result, text=text), output.look(ctx.options), as_json=want_json(json_))


@app.command("completion")
@command
def completion_cmd(
    shell: str = typer.Argument(
        ..., help="bash, zsh or fish.", metavar="SHELL", autocompletion=_complete_shells
    ),
) -> None:
    """Print the shell completion script (the one shipped in completions/).

    bash: add `source <(sessiontool completion bash)` to ~/.bashrc.

    zsh: `sessiontool completion zsh > ~/.zfunc/_sessiontool` with ~/.zfunc in $fpath.

    fish: `sessiontool completion fish > ~/.config/fish/completions/sessiontool.fish`."""
    from sessiontool.cli.completers import completion_script

    render.write_out(completion_script(shell, typer.main.get_command(app)))
