"""Managing sessions and the state dir: `label`, `reset`, `delete`, `paths`, `doctor` and
`prune`. Every function returns plain data for the CLI to render and raises SessiontoolError
subclasses; nothing here prints or exits.

The writes follow OpenClaw's sessions.patch / sessions.reset / sessions.delete, so a state dir
shared with a running gateway stays consistent: index changes happen under the store lock with an
atomic replace, and a deleted session's transcript is archived (renamed), never unlinked.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sessiontool import diag
from sessiontool.clock import now_ms, parse_iso_ms
from sessiontool.context import Context, state_findings
from sessiontool.errors import (
    ForbiddenError,
    SessiontoolError,
    StorageError,
    UsageError,
    session_not_found,
)
from sessiontool.flow import policy
from sessiontool.sessions import Resolved, all_agent_ids, resolve, total_tokens
from sessiontool.stores import keys
from sessiontool.stores.jsonio import require_utf8
from sessiontool.stores.paths import StatePaths, is_plain_name, transcript_path_for
from sessiontool.stores.sessions_json import (
    Entry,
    fold,
    read_store,
)
from sessiontool.stores.writer import SessionWriter

LABEL_MAX = 64


# -- label / reset / delete ------------------------------------------------------------------


def _locate(
    ctx: Context, command: str, value: str | None, label: str | None
) -> tuple[Resolved, SessionWriter]:
    """Operator check first (a session requester learns nothing about other sessions), then
    resolution; an unknown key is exit 3 since none of these commands creates sessions. The
    session's writer is chosen here, once."""
    policy.require_operator(ctx, command)
    r = resolve(ctx, value, label=label, write=True)
    if r.entry is None:  # pragma: no cover - resolve() without create never returns one
        raise session_not_found(value or label or "")
    from sessiontool.stores.writer import writer_for

    return r, writer_for(ctx, [r.agent_id], command)


def validate_label(text: str) -> str:
    """OpenClaw's rule: trimmed, not empty, at most 64 characters. Control characters are
    refused too: labels are shown in one-line tables and matched exactly by `--label`."""
    label = require_utf8(text.strip(), "the label")
    if not label:
        raise UsageError("a label must not be empty")
    if len(label) > LABEL_MAX:
        raise UsageError(f"a label is at most {LABEL_MAX} characters (got {len(label)})")
    if any(ord(c) < 0x20 or c == "\x7f" for c in label):
        raise UsageError("a label must not contain control characters (tabs, newlines)")
    return label


def set_label(
    ctx: Context, value: str | None, text: str, *, label: str | None = None
) -> dict[str, Any]:
    """Set a session's label. As in OpenClaw's sessions.patch, a label already used by another
    session of the same agent is refused (exit 2): `--label` must keep naming one session."""
    new_label = validate_label(text)
    r, writer = _locate(ctx, "label", value, label)
    return writer.set_label(ctx, r, new_label)


def reset(ctx: Context, value: str | None, *, label: str | None = None) -> dict[str, Any]:
    """Start a new conversation in the session: on files a new UUID v4 sessionId (the old
    transcript stays on disk, unreferenced); OpenClaw 2026.9.6's gateway resets in place (same
    sessionId, `inPlace: true`)."""
    r, writer = _locate(ctx, "reset", value, label)
    return writer.reset(ctx, r)


def delete(ctx: Context, value: str | None, *, label: str | None = None) -> dict[str, Any]:
    """Remove the session from its index and archive its transcript. A main session is refused
    (exit 4), as in OpenClaw: it is where the agent's direct chat and announces land."""
    r, writer = _locate(ctx, "delete", value, label)
    if keys.kind_of(r.key, r.entry, ctx.config.main_key) == "main":
        raise ForbiddenError(f"Cannot delete the main session ({ctx.display(r.key)}).")
    return writer.delete(ctx, r)


# -- paths -----------------------------------------------------------------------------------


def state_paths(ctx: Context) -> dict[str, Any]:
    """Where everything is, for people and scripts (`paths --json`)."""
    from sessiontool.stores.reader import detect

    p = ctx.paths
    agents = []
    for a in all_agent_ids(ctx):
        if not is_plain_name(a):
            continue
        info = detect(p, a)
        agents.append(
            {
                "id": a,
                "sessionsDir": str(p.sessions_dir(a)),
                "store": str(info.location),
                "exists": info.location.is_file(),
                "format": info.kind,
                "why": info.reason,
            }
        )
    return {
        "stateDir": str(p.root),
        "configFiles": [str(f) for f in ctx.config.files],
        "configDefault": str(p.own_config_default),
        "agents": agents,
        "runsDir": str(p.runs_dir),
        "outbox": str(p.deliveries),
    }


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
    """The live transcripts of a sessions dir: `*.jsonl` (archives end in `.deleted.<time>`)."""
    try:
        names = os.listdir(sessions_dir)
    except OSError:
        return []
    return sorted(sessions_dir / n for n in names if n.endswith(".jsonl") and is_plain_name(n))


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
    from sessiontool.stores.locks import (
        STORE_LOCK_STALE_MS,
        TRANSCRIPT_NO_PID_STALE_MS,
        other_host,
        pid_alive,
        read_lock,
    )

    is_store = path.name == "sessions.json.lock"
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
            if is_store and now - stamp > STORE_LOCK_STALE_MS:
                return f"held on another host for {age_s}s (store locks go stale after 30s)"
            return None
        if not pid_alive(pid):
            return f"held by pid {pid}, which is not running (age {age_s}s)"
        return None
    limit = STORE_LOCK_STALE_MS if is_store else TRANSCRIPT_NO_PID_STALE_MS
    if now - stamp > limit:
        return f"no readable pid, {age_s}s old"
    return None


def _entry_had_messages(entry: Entry) -> bool:
    """Whether an entry's transcript should exist. A session can be in the index with no
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
    from sessiontool.stores.reader import read_scope, reader_for

    with read_scope():
        rd = reader_for(paths, agent_id)
        try:
            rd.sessions(("sessionId",))
        except SessiontoolError as exc:
            yield Problem("unreadable-store", str(rd.info.location), exc.message)


def _check_agent(paths: StatePaths, agent_id: str, now: int) -> Iterator[Problem]:
    from sessiontool.stores.reader import detect

    if detect(paths, agent_id).gateway_written:
        yield from _check_sqlite_agent(paths, agent_id)
        return
    sessions_dir = paths.sessions_dir(agent_id)
    store_path = paths.store(agent_id)
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
                "no index entry points to this transcript (a reset keeps the old one)",
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
    from sessiontool.runs import lanes, steps
    from sessiontool.runs import records as runs

    for path, why in runs.bad_records(paths):
        yield Problem("unreadable-run", str(path), f"not a usable run record: {why}")
    records = sorted(
        runs.iter_records(paths, warn=False),
        key=lambda r: (r.get("createdAt") or 0, str(r.get("runId"))),
    )
    known = {r["runId"] for r in records}
    for rec in records:
        run_id = rec["runId"]
        if runs.is_lost(paths, rec, now):
            yield Problem(
                "lost-run",
                str(paths.run_record(run_id)),
                f"run {run_id} ({rec.get('kind', '?')}, status {rec.get('status', '?')}) "
                "has no live worker; `sessiontool wait` or `runs` marks it lost",
            )
        elif steps.pending(rec) and not runs.lock_held(paths, run_id):
            fu = rec["followUp"]
            err = f" (last attempt: {fu['error']})" if fu.get("error") else ""
            yield Problem(
                "pending-follow-up",
                str(paths.run_record(run_id)),
                f"run {run_id} ({rec.get('kind')}, {rec.get('status')}) still owes its "
                f"{fu.get('next')} step{err}; `sessiontool runs` or `sweep` resumes it",
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


def doctor(ctx: Context, *, explicit_agent: str | None = None) -> dict[str, Any]:
    """Check the state dir and report; never write (reads never change the state dir, and a
    lost run is reconciled by `wait`/`runs`, not here)."""
    from sessiontool.stores.reader import detect

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
    for agent_id in all_agent_ids(ctx):
        if is_plain_name(agent_id):
            stores.append({"agent": agent_id, **detect(ctx.paths, agent_id).to_json()})
            problems.extend(_check_agent(ctx.paths, agent_id, now))
    problems.extend(_check_runs(ctx.paths, now))
    problems.extend(_check_deliveries(ctx))
    from sessiontool import repair
    from sessiontool.openclaw.gateway import describe

    problems.extend(
        Problem(f.kind, f.path, f.detail, severity=f.severity, hint=f.hint)
        for f in repair.check(ctx.paths, ctx.config)
    )
    gateway = describe(ctx.paths)
    problems.extend(
        Problem(p["kind"], p["path"], p["detail"], hint=p.get("hint"))
        for p in gateway.pop("problems")
    )
    return _doctor_result(_one_finding_per_link(problems), stores, gateway)


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
) -> dict[str, Any]:
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


# -- prune -----------------------------------------------------------------------------------


def _ms(v: Any) -> int | None:
    if isinstance(v, int | float) and not isinstance(v, bool):
        return int(v)
    if isinstance(v, str):
        return parse_iso_ms(v)
    return None


def _child_in_index(ctx: Context, rec: dict[str, Any], cache: dict[str, set[str] | None]) -> bool:
    """Whether a spawn record's child session is still in its agent's index (the archive rule
    needs the record while it is). An unreadable store counts as "still there": keep."""
    key = rec.get("sessionKey")
    if not isinstance(key, str):
        return False
    agent_id = rec.get("agentId") if isinstance(rec.get("agentId"), str) else keys.agent_of(key)
    agent_id = keys.normalize_agent_id(str(agent_id))
    if agent_id not in cache:
        try:
            cache[agent_id] = set(fold(read_store(ctx.paths.store(agent_id)), agent_id))
        except Exception:  # noqa: BLE001 - unreadable: be conservative
            cache[agent_id] = None
    present = cache[agent_id]
    return present is None or key in present


def _unlink(path: Path) -> bool:
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise StorageError(f"cannot delete {path}: {exc.strerror}") from exc
    return True


def _split_outbox(data: bytes, cutoff: int) -> tuple[list[bytes], int, bytes]:
    """(kept complete lines, how many dropped, the trailing partial line). Unparsable lines and
    lines without a readable `ts` are kept; a partial last line (an append in progress) too."""
    body, sep, partial = data.rpartition(b"\n")
    if not sep:
        return [], 0, data
    kept: list[bytes] = []
    dropped = 0
    for line in (body + sep).splitlines(keepends=True):
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):
            kept.append(line)
            continue
        ts = _ms(obj.get("ts")) if isinstance(obj, dict) else None
        if ts is not None and ts < cutoff:
            dropped += 1
        else:
            kept.append(line)
    return kept, dropped, partial


def _read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StorageError(f"cannot read {path}: {exc.strerror}") from exc


def _prune_outbox(paths: StatePaths, cutoff: int, dry_run: bool) -> int:
    """Drop outbox lines whose `ts` is older than the cutoff, rewriting the file atomically
    under the outbox lock every appender takes: no line appended meanwhile is lost."""
    from sessiontool.flow.delivery import outbox_lock, rewrite_outbox

    path = paths.deliveries
    if dry_run:
        data = _read_bytes(path)
        return 0 if data is None else _split_outbox(data, cutoff)[1]
    with outbox_lock(paths):
        data = _read_bytes(path)
        if data is None:
            return 0
        kept, dropped, partial = _split_outbox(data, cutoff)
        if dropped:
            rewrite_outbox(paths, b"".join(kept) + partial)
    return dropped


def _prune_unusable(paths: StatePaths, counts: dict[str, int], dry_run: bool) -> None:
    """Malformed run records (with their logs), lane markers naming no usable run, and wait
    FIFOs of runs that are over or gone."""
    from sessiontool.runs import lanes
    from sessiontool.runs import records as runs

    for path, _why in runs.bad_records(paths):
        log = path.with_suffix(".log")
        if dry_run:
            counts["runs"] += 1
            counts["logs"] += int(log.is_file())
            continue
        counts["logs"] += int(_unlink(log))
        counts["runs"] += int(_unlink(path))
    if dry_run:
        return
    for lane in lanes.iter_lanes(paths):
        d = lanes.lane_path(paths, lane)
        for name in lanes.markers(d):
            parsed = lanes.parse_marker(name)
            if parsed is not None:
                try:
                    rec = runs.read_record(paths, parsed[1])
                except SessiontoolError:
                    rec = None
                if rec is not None and not runs.is_finished(rec):
                    continue
                if rec is not None and lanes.worker_alive(paths, lane):
                    continue  # its worker clears it
            _unlink(d / name)
    try:
        fifos = [n for n in os.listdir(paths.runs_dir) if n.endswith(".fifo")]
    except OSError:
        fifos = []
    for name in fifos:
        try:
            rec = runs.read_record(paths, name[: -len(".fifo")])
        except SessiontoolError:
            rec = None
        if rec is None or runs.is_finished(rec):
            _unlink(paths.runs_dir / name)


def prune(ctx: Context, older_than_s: float, *, dry_run: bool = False) -> dict[str, Any]:
    """Delete finished run records and their logs, and outbox lines, older than a duration.
    The one place sessiontool deletes anything: spawn records whose child is still in an index
    are kept (the sub-agent archive rule looks for them), and so is anything unfinished or
    still owes follow-up steps. Run records that cannot be used (malformed, out of range) go
    whatever their age, with stray lane markers and wait FIFOs."""
    from sessiontool.runs.records import FINISHED_STATUSES, MAX_MS, iter_records
    from sessiontool.runs.steps import pending

    policy.require_operator(ctx, "prune")
    if older_than_s < 0:
        raise UsageError("--older-than must not be negative")
    now = now_ms()
    if not 0 <= now <= MAX_MS:
        raise UsageError(
            f"the clock reads {now}, which is not a time in milliseconds (SESSIONTOOL_NOW_MS?)"
        )
    cutoff = now - int(older_than_s * 1000)
    paths = ctx.paths
    counts = {"runs": 0, "logs": 0, "deliveries": 0}
    index_cache: dict[str, set[str] | None] = {}
    for rec in sorted(iter_records(paths), key=lambda r: str(r.get("runId"))):
        run_id = rec.get("runId")
        if not isinstance(run_id, str) or not is_plain_name(run_id):
            continue
        if rec.get("status") not in FINISHED_STATUSES:
            continue
        when = _ms(rec.get("endedAt")) or _ms(rec.get("createdAt"))
        if when is None or when >= cutoff:
            continue
        if rec.get("kind") == "spawn" and _child_in_index(ctx, rec, index_cache):
            continue
        if pending(rec):
            continue
        record, log = paths.run_record(run_id), paths.run_log(run_id)
        if dry_run:
            counts["runs"] += int(record.is_file())
            counts["logs"] += int(log.is_file())
            continue
        counts["logs"] += int(_unlink(log))
        counts["runs"] += int(_unlink(record))
    _prune_unusable(paths, counts, dry_run)
    counts["deliveries"] = _prune_outbox(paths, cutoff, dry_run)
    out: dict[str, Any] = {"deleted": counts}
    if dry_run:
        out["dryRun"] = True
    return out
