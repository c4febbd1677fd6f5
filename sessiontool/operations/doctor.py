"""`doctor`: what stops this state dir from working, found without changing anything (the
stores, locks, transcripts, runs, outbox and gateway); `doctor --fix` (repair.py) removes what
is safe to remove of it. Returns plain data for the CLI to render; nothing here prints."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sessiontool import diag
from sessiontool.clock import now_ms, parse_iso_ms
from sessiontool.context import Context
from sessiontool.errors import (
    SessiontoolError,
)
from sessiontool.sessions.findings import state_findings
from sessiontool.sessions.listing import total_tokens
from sessiontool.sessions.resolve import all_agent_ids
from sessiontool.state.paths import StatePaths, is_plain_name, transcript_path_for
from sessiontool.state.sessions_json import (
    Entry,
    fold,
    read_store,
)

if TYPE_CHECKING:
    from typing import NotRequired, TypedDict

    from sessiontool.operations.repair import FixResult

    class DoctorResult(TypedDict):
        """What `doctor` returns (`fix`: what `--fix` did, added by the command); `--json`
        writes it as is."""

        ok: bool
        errors: int
        warnings: int
        problems: list[dict[str, Any]]
        stores: list[dict[str, str]]
        gateway: dict[str, Any] | None
        fix: NotRequired[FixResult]

# -- doctor ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    """One doctor finding. A `warning` is a state that is expected to arise in normal use (a
    reset's old transcript, a lock the next writer breaks) or that sessiontool repairs itself;
    a `problem` needs attention. `hint` says how to clear it."""

    kind: str
    path: str
    detail: str
    severity: str = "problem"
    hint: str | None = None

    def to_json(self) -> dict[str, str]:
        out = {"kind": self.kind, "path": self.path, "detail": self.detail}
        out["severity"] = self.severity
        if self.hint:
            out["hint"] = self.hint
        return out


@dataclass
class LineScan:
    bad: int = 0
    first_bad: int | None = None
    torn: bool = False


def scan_transcript(path: Path) -> LineScan:
    """Count unparsable lines, reading line by line (never the whole file at once). A last line
    without its newline that does not parse is a torn write; one that parses is harmless (the
    next append adds the newline first)."""
    scan = LineScan()
    with open(path, "rb") as fh:
        for n, raw in enumerate(fh, start=1):
            terminated = raw.endswith(b"\n")
            if not raw.strip():
                continue
            try:
                json.loads(raw)
                continue
            except (ValueError, RecursionError):
                pass
            if not terminated:
                scan.torn = True
            else:
                scan.bad += 1
                if scan.first_bad is None:
                    scan.first_bad = n
    return scan


def _transcript_files(sessions_dir: Path) -> list[Path]:
    """The live transcripts of a sessions dir: `*.jsonl` (archives end in `.deleted.<time>`),
    but for OpenClaw's own other files (a run's `.trajectory.jsonl`, a compaction checkpoint:
    `openclaw_releases.SESSION_DIR_FILES`)."""
    from sessiontool.openclaw_releases import openclaw_session_file

    try:
        names = os.listdir(sessions_dir)
    except OSError:
        return []
    return sorted(
        sessions_dir / n
        for n in names
        if n.endswith(".jsonl") and is_plain_name(n) and not openclaw_session_file(n)
    )


def _lock_files(sessions_dir: Path) -> list[Path]:
    try:
        names = os.listdir(sessions_dir)
    except OSError:
        return []
    return sorted(sessions_dir / n for n in names if n.endswith(".lock"))


def _stale_lock_detail(path: Path, now: int) -> str | None:
    """Why a lock file is stale under OpenClaw's rules, or None while it may still be held.
    A live holder on this host is never stale; a dead one is. The age rules (store lock 30 s,
    transcript lock without a readable pid 30 min) cover locks whose pid cannot be checked."""
    from sessiontool.state.locks import (
        STORE_LOCK_STALE_MS,
        TRANSCRIPT_NO_PID_STALE_MS,
        other_host,
        pid_alive,
        read_lock,
    )

    is_store_lock = path.name == "sessions.json.lock"
    info = read_lock(path)
    pid = info.get("pid") if info else None
    stamp: int | None = None
    for k in ("startedAt", "createdAt"):
        v = (info or {}).get(k)
        if isinstance(v, int | float) and not isinstance(v, bool):
            stamp = int(v)
            break
        if isinstance(v, str):
            stamp = parse_iso_ms(v)
            if stamp is not None:
                break
    if stamp is None:
        try:
            stamp = int(path.stat().st_mtime * 1000)
        except FileNotFoundError:
            return None
    age_s = max(0, now - stamp) // 1000
    if isinstance(pid, int) and not isinstance(pid, bool):
        if other_host(info):
            if is_store_lock and now - stamp > STORE_LOCK_STALE_MS:
                return f"held on another host for {age_s}s (store locks go stale after 30s)"
            return None
        if not pid_alive(pid):
            return f"held by pid {pid}, which is not running (age {age_s}s)"
        return None
    limit = STORE_LOCK_STALE_MS if is_store_lock else TRANSCRIPT_NO_PID_STALE_MS
    if now - stamp > limit:
        return f"no readable pid, {age_s}s old"
    return None


def _entry_had_messages(entry: Entry) -> bool:
    """Whether an entry's transcript should exist. A session can be in its store with no
    transcript by design (after `reset`, or created by `policy`/`spawn` before its first run),
    so only an entry with a `sessionFile` or with tokens counted (a model call happened) is
    expected to have one."""
    if isinstance(entry.get("sessionFile"), str) and entry["sessionFile"]:
        return True
    tt = total_tokens(entry)
    return tt is not None and tt > 0


def _check_sqlite_agent(paths: StatePaths, agent_id: str) -> Iterator[Problem]:
    """An OpenClaw SQLite store: readable read-only, with the columns sessiontool reads."""
    from sessiontool.errors import SessiontoolError
    from sessiontool.sessions.reading import read_scope, reader_for

    with read_scope():
        rd = reader_for(paths, agent_id)
        try:
            rd.sessions(("sessionId",))
        except SessiontoolError as exc:
            yield Problem("unreadable-store", str(rd.info.location), exc.message)


def _check_agent(paths: StatePaths, agent_id: str, now: int) -> Iterator[Problem]:
    from sessiontool.state.detect import detect

    if detect(paths, agent_id).gateway_written:
        yield from _check_sqlite_agent(paths, agent_id)
        return
    sessions_dir = paths.sessions_dir(agent_id)
    store_path = paths.sessions_json(agent_id)
    if not sessions_dir.is_dir():
        return
    referenced: set[Path] | None = None
    try:
        folded = fold(read_store(store_path), agent_id)
    except Exception as exc:  # noqa: BLE001 - CorruptStateError, or anything else unreadable
        message = getattr(exc, "message", None) or str(exc)
        yield Problem("unreadable-store", str(store_path), str(message))
    else:
        referenced = set()
        for full, f in sorted(folded.items()):
            sid = f.entry.get("sessionId")
            if not isinstance(sid, str) or not is_plain_name(sid):
                yield Problem(
                    "unsafe-session-id",
                    str(store_path),
                    f"{full}: sessionId {sid!r} is not a plain file name; "
                    "its transcript is never read",
                )
                continue
            tp = transcript_path_for(sessions_dir, sid, f.entry.get("sessionFile"))
            referenced.add(tp)
            if not tp.exists() and _entry_had_messages(f.entry):
                yield Problem(
                    "missing-transcript",
                    str(tp),
                    f"{full} has had messages but its transcript is missing",
                )
    for tp in _transcript_files(sessions_dir):
        try:
            scan = scan_transcript(tp)
        except OSError as exc:
            yield Problem("unreadable-transcript", str(tp), exc.strerror or str(exc))
            continue
        if scan.bad:
            yield Problem(
                "bad-lines",
                str(tp),
                f"{scan.bad} unparsable line(s), first at line {scan.first_bad}; readers skip them",
            )
        if scan.torn:
            yield Problem(
                "torn-line",
                str(tp),
                "the last line is incomplete (an interrupted write); readers skip it and "
                "the next append starts a new line",
            )
        if referenced is not None and tp not in referenced:
            yield Problem(
                "orphan-transcript",
                str(tp),
                "no store entry points to this transcript (a reset keeps the old one)",
                severity="warning",
                hint=f"archive it to clear this: mv '{tp}' '{tp}.reset.{now}'",
            )
    for lock in _lock_files(sessions_dir):
        detail = _stale_lock_detail(lock, now)
        if detail is not None:
            yield Problem(
                "stale-lock",
                str(lock),
                detail + "; the next writer breaks it",
                severity="warning",
                hint=f"if no sessiontool or OpenClaw process runs: rm '{lock}'",
            )


def _check_runs(paths: StatePaths, now: int) -> Iterator[Problem]:
    """Unusable run records and lane markers, started runs with no live worker, and finished
    runs whose follow-up (reply turns, announce, delivery) is stalled, e.g. an outbox that
    cannot be written."""
    from sessiontool.runs import lanes, records, steps

    for path, why in records.bad_records(paths):
        yield Problem("unreadable-run", str(path), f"not a usable run record: {why}")
    recs = sorted(
        records.iter_records(paths, warn=False),
        key=lambda r: (r.get("createdAt") or 0, str(r.get("runId"))),
    )
    known = {r["runId"] for r in recs}
    for rec in recs:
        run_id = rec["runId"]
        if records.is_lost(paths, rec, now):
            yield Problem(
                "lost-run",
                str(paths.run_record(run_id)),
                f"run {run_id} ({rec.get('kind', '?')}, status {rec.get('status', '?')}) "
                "has no live worker; `sessiontool wait` or `runs` marks it lost",
            )
        elif steps.pending(rec) and not records.lock_held(paths, run_id):
            fu = rec["followUp"]
            err = f" (last attempt: {fu['error']})" if fu.get("error") else ""
            how = "`sessiontool runs` or `sweep` resumes it"
            if str(fu.get("next")).endswith("-announce") and fu.get("error"):
                how = f"`sessiontool deliveries retry {run_id}:spawn-announce` makes it again"
            yield Problem(
                "pending-follow-up",
                str(paths.run_record(run_id)),
                f"run {run_id} ({rec.get('kind')}, {rec.get('status')}) still owes its "
                f"{fu.get('next')} step{err}; {how}",
            )
    for lane in lanes.iter_lanes(paths):
        d = lanes.lane_path(paths, lane)
        for name in lanes.markers(d):
            parsed = lanes.parse_marker(name)
            if parsed is None:
                yield Problem("bad-lane-marker", str(d / name), "not a lane marker; skipped")
            elif parsed[1] not in known and not paths.run_record(parsed[1]).exists():
                yield Problem(
                    "bad-lane-marker", str(d / name), f"names run {parsed[1]}, which has no record"
                )


def doctor(ctx: Context, *, explicit_agent: str | None = None) -> DoctorResult:
    """Check the state dir and report; never write (reads never change the state dir, and a
    lost run is reconciled by `wait`/`runs`, not here)."""
    from sessiontool.openclaw.gateway import describe, doctor_agent_ids
    from sessiontool.state.detect import detect

    now = now_ms()
    problems: list[Problem] = []
    stores: list[dict[str, str]] = []
    root = ctx.paths.root
    if root.exists() and not root.is_dir():
        problems.append(
            Problem(
                "state-dir-not-a-directory",
                str(root),
                "the state dir is not a directory; every command refuses it",
                hint="point --state-dir (or SESSIONTOOL_STATE_DIR) at a directory",
            )
        )
        return _doctor_result(problems)
    for f in state_findings(ctx, explicit_state=True, explicit_agent=explicit_agent):
        problems.append(
            Problem(f["kind"], f["path"], f["detail"], severity="warning", hint=f.get("hint"))
        )
    for agent_id in doctor_agent_ids(ctx.paths, lambda: all_agent_ids(ctx)):
        if is_plain_name(agent_id):
            stores.append({"agent": agent_id, **detect(ctx.paths, agent_id).to_json()})
            problems.extend(_check_agent(ctx.paths, agent_id, now))
    problems.extend(_check_runs(ctx.paths, now))
    problems.extend(_check_deliveries(ctx))
    from sessiontool.operations.doctor_budgets import budget_findings

    problems.extend(
        Problem(f["kind"], f["path"], f["detail"], severity="warning", hint=f["hint"])
        for f in budget_findings(ctx)
    )
    from sessiontool.operations import repair
    from sessiontool.sessions.reading import agent_ids_on_disk

    problems.extend(
        Problem(f.kind, f.path, f.detail, severity=f.severity, hint=f.hint)
        for f in repair.check(ctx.paths, ctx.config)
    )
    gateway = describe(ctx.paths, doctor_agent_ids(ctx.paths, lambda: agent_ids_on_disk(ctx.paths)))
    if gateway.get("mode") == "gateway (remote)":
        from sessiontool.openclaw.gateway_doctor import remote_checks, spawn_line

        gateway["remote"], gateway["problems"] = remote_checks(ctx.paths, gateway)
        gateway["spawn"] = spawn_line(ctx.paths, gateway["remote"])
    else:
        from sessiontool.openclaw.own_tools import doctor_line

        gateway["spawn"] = doctor_line(ctx.paths, gateway)
    problems.extend(
        Problem(p["kind"], p["path"], p["detail"], hint=p.get("hint"))
        for p in gateway.pop("problems")
    )
    problems.extend(_check_gateway_down(ctx.paths, stores, gateway))
    problems = _one_finding_per_link(problems)
    _said_once(problems)
    return _doctor_result(problems, stores, gateway)


def _said_once(problems: list[Problem]) -> None:
    """A warning the checks' reads left for stderr about a file a finding names already (the
    outbox's malformed lines), or that a finding says (a config value skipped), is that finding
    said twice: it is dropped."""
    paths = {p.path for p in problems}
    details = {p.detail for p in problems}
    for message in diag.drain():
        if message not in details and not any(message.startswith(f"{p}:") for p in paths):
            diag.warn(message)


def _check_gateway_down(
    paths: StatePaths, stores: list[dict[str, str]], gateway: dict[str, Any]
) -> Iterator[Problem]:
    """Agents whose sessions are in OpenClaw's SQLite store, which only its gateway writes, with
    no gateway running: reading works, every write fails until it is started."""
    from sessiontool.openclaw.gateway import find

    if gateway.get("mode") != "read-only (no gateway)":
        return
    agents = [s["agent"] for s in stores if s.get("format") == "openclaw-sqlite"]
    yield Problem(
        "gateway-not-running",
        str(gateway.get("url") or paths.root),
        f"writes are impossible now: agent{'s' if len(agents) != 1 else ''} "
        f"{', '.join(agents) or '(none)'} keep sessions in OpenClaw's SQLite store, which only "
        "its gateway writes, and no gateway is running (send, spawn, label, reset and delete "
        "fail; reading works)",
        severity="warning",
        hint=find(paths).how_to_start(),
    )


def _one_finding_per_link(problems: list[Problem]) -> list[Problem]:
    """A planted link is one finding: what the other checks saw by reading through it (a
    "stale lock", "malformed outbox lines" of a file outside the state dir) is the link's
    target, not the state dir's, and the warnings those reads left for stderr say it again."""
    links = {p.path for p in problems if p.kind == "planted-link"}
    if not links:
        return problems
    kept = [p for p in problems if p.kind == "planted-link" or p.path not in links]
    for message in diag.drain():  # the report names these paths already
        if not any(message.startswith(f"{link}:") for link in links):
            diag.warn(message)
    return kept


def _doctor_result(
    problems: list[Problem],
    stores: list[dict[str, str]] | None = None,
    gateway: dict[str, Any] | None = None,
) -> DoctorResult:
    errors = sum(1 for p in problems if p.severity == "problem")
    return {
        "ok": not problems,
        "errors": errors,
        "warnings": len(problems) - errors,
        "problems": [p.to_json() for p in problems],
        "stores": stores or [],
        "gateway": gateway,
    }


def _check_deliveries(ctx: Context) -> Iterator[Problem]:
    """Deliveries whose latest attempt did not reach the channel and can be retried: a failed
    delivery command is a problem, a pending one a warning. One with no target is final, not a
    finding (see flow/redeliver)."""
    from sessiontool.flow.redeliver import undelivered

    try:
        pending = undelivered(ctx)
    except SessiontoolError as exc:
        yield Problem("unreadable-outbox", str(ctx.paths.deliveries), exc.message)
        return
    for rec in pending:
        status = rec.get("status")
        yield Problem(
            f"{status}-delivery",
            str(ctx.paths.deliveries),
            f"delivery {rec['id']} to {rec.get('sessionKey')} is {status}"
            + (f": {rec['error']}" if rec.get("error") else ""),
            severity="problem" if status == "failed" else "warning",
            hint=f"sessiontool deliveries retry {rec['id']}",
        )
