"""Managing sessions and the state dir: `label`, `reset`, `delete`, `paths` and `prune` (`doctor`
is in doctor.py, `repair` in repair.py). Every function returns plain data for the CLI to render
and raises SessiontoolError subclasses; nothing here prints or exits.

The writes follow OpenClaw's sessions.patch / sessions.reset / sessions.delete, so a state dir
shared with a running gateway stays consistent: store changes happen under the store lock with an
atomic replace, and a deleted session's transcript is archived (renamed), never unlinked.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sessiontool.clock import now_ms, parse_iso_ms
from sessiontool.context import Context
from sessiontool.errors import (
    ForbiddenError,
    SessiontoolError,
    StorageError,
    UsageError,
    session_not_found,
)
from sessiontool.flow import policy
from sessiontool.runs.session_patch import check_expected
from sessiontool.runs.writer import SessionWriter
from sessiontool.sessions.resolve import Resolved, all_agent_ids, resolve
from sessiontool.state import keys
from sessiontool.state.jsonio import require_utf8
from sessiontool.state.paths import StatePaths, is_plain_name
from sessiontool.state.sessions_json import (
    fold,
    read_store,
)

if TYPE_CHECKING:
    from typing import NotRequired, TypedDict

    from sessiontool.runs.record_types import RunRecord
    from sessiontool.runs.result_types import DeleteResult, LabelResult, ResetResult

    class AgentPaths(TypedDict):
        id: str
        sessionsDir: str
        store: str
        exists: bool
        format: str
        why: str

    class PathsResult(TypedDict):
        """What `paths` returns; `--json` writes it as is."""

        stateDir: str
        configFiles: list[str]
        configDefault: str
        agents: list[AgentPaths]
        runsDir: str
        outbox: str
        index: str
        gateways: list[GatewayPart]

    class GatewayPart(TypedDict):
        """A remote gateway's part of the local state dir (`gateways/<hash>/`)."""

        dir: str
        url: str | None  # the gateway's URL, when this command line's target is it

    class PruneResult(TypedDict):
        """What `prune` returns: what it deleted (or would, `dryRun`)."""

        deleted: dict[str, int]
        dryRun: NotRequired[bool]


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
    from sessiontool.runs.writer import writer_for

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
) -> LabelResult:
    """Set a session's label. As in OpenClaw's sessions.patch, a label already used by another
    session of the same agent is refused (exit 2): `--label` must keep naming one session."""
    new_label = validate_label(text)
    r, writer = _locate(ctx, "label", value, label)
    return writer.set_label(ctx, r, new_label)


def reset(
    ctx: Context, value: str | None, *, label: str | None = None, expect: str | None = None
) -> ResetResult:
    """Start a new conversation in the session: on files a new UUID v4 sessionId (the old
    transcript stays on disk, unreferenced); OpenClaw 2026.9.6's gateway resets in place (same
    sessionId, `inPlace: true`). `expect`: exit 4 unless it is still that sessionId."""
    r, writer = _locate(ctx, "reset", value, label)
    check_expected(ctx.display(r.key), r.entry, expect)
    return writer.reset(ctx, r)


def delete(
    ctx: Context, value: str | None, *, label: str | None = None, expect: str | None = None
) -> DeleteResult:
    """Remove the session from its store and archive its transcript. A main session is refused
    (exit 4), as in OpenClaw: it is where the agent's direct chat and announces land.
    `expect`: exit 4 unless it is still that sessionId."""
    r, writer = _locate(ctx, "delete", value, label)
    check_expected(ctx.display(r.key), r.entry, expect)
    if keys.kind_of(r.key, r.entry, ctx.config.main_key) == "main":
        raise ForbiddenError(f"Cannot delete the main session ({ctx.display(r.key)}).")
    return writer.delete(ctx, r)


# -- paths -----------------------------------------------------------------------------------


def state_paths(ctx: Context) -> PathsResult:
    """Where everything is, for people and scripts (`paths --json`)."""
    from sessiontool.state.detect import detect

    p = ctx.paths
    agents: list[AgentPaths] = []
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
                "format": info.format,
                "why": info.reason,
            }
        )
    from sessiontool.index.db import INDEX_NAME

    return {
        "stateDir": str(p.root),
        "configFiles": [str(f) for f in ctx.config.files],
        "configDefault": str(p.own_config_default),
        "agents": agents,
        "runsDir": str(p.runs_dir),
        "outbox": str(p.deliveries),
        "index": str(p.tool_dir / INDEX_NAME),
        "gateways": _gateway_parts(p),
    }


def _gateway_parts(p: StatePaths) -> list[GatewayPart]:
    """Each remote gateway's part of the local state dir (its sessions, runs, outbox, index
    and device key), the one this command line talks to with its URL."""
    from sessiontool.openclaw.target import bound_to, local_root

    here = bound_to(p.root)
    gateways = local_root(p.root) / "gateways"
    try:
        names = sorted(os.listdir(gateways)) if not os.path.islink(gateways) else []
    except OSError:
        names = []
    return [
        {
            "dir": str(gateways / n),
            "url": here.url if here is not None and gateways / n == p.root else None,
        }
        for n in names
        if is_plain_name(n) and (gateways / n).is_dir()
    ]


# -- prune -----------------------------------------------------------------------------------


def _ms(v: Any) -> int | None:
    if isinstance(v, int | float) and not isinstance(v, bool):
        return int(v)
    if isinstance(v, str):
        return parse_iso_ms(v)
    return None


def _child_in_store(ctx: Context, rec: RunRecord, cache: dict[str, set[str] | None]) -> bool:
    """Whether a spawn record's child session is still in its agent's store (the archive rule
    needs the record while it is). An unreadable store counts as "still there": keep."""
    key = rec.get("sessionKey")
    if not isinstance(key, str):
        return False
    agent_id = rec.get("agentId") if isinstance(rec.get("agentId"), str) else keys.agent_of(key)
    agent_id = keys.normalize_agent_id(str(agent_id))
    if agent_id not in cache:
        try:
            cache[agent_id] = set(fold(read_store(ctx.paths.sessions_json(agent_id)), agent_id))
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
    from sessiontool.runs import lanes, records

    for path, _why in records.bad_records(paths):
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
                    rec = records.read_record(paths, parsed[1])
                except SessiontoolError:
                    rec = None
                if rec is not None and not records.is_finished(rec):
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
            rec = records.read_record(paths, name[: -len(".fifo")])
        except SessiontoolError:
            rec = None
        if rec is None or records.is_finished(rec):
            _unlink(paths.runs_dir / name)


def prune(ctx: Context, older_than_s: float, *, dry_run: bool = False) -> PruneResult:
    """Delete finished run records and their logs, and outbox lines, older than a duration.
    The one place sessiontool deletes anything: spawn records whose child is still in a store
    are kept (the sub-agent archive rule looks for them), and so is anything unfinished or
    still owes follow-up steps. Run records that cannot be used (malformed, out of range) go
    whatever their age, with stray lane markers and wait FIFOs."""
    from sessiontool.runs.records import iter_records
    from sessiontool.runs.schema import FINISHED_STATUSES, MAX_MS
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
    store_keys: dict[str, set[str] | None] = {}
    for rec in sorted(iter_records(paths), key=lambda r: str(r.get("runId"))):
        run_id = rec.get("runId")
        if not isinstance(run_id, str) or not is_plain_name(run_id):
            continue
        if rec.get("status") not in FINISHED_STATUSES:
            continue
        when = _ms(rec.get("endedAt")) or _ms(rec.get("createdAt"))
        if when is None or when >= cutoff:
            continue
        if rec.get("kind") == "spawn" and _child_in_store(ctx, rec, store_keys):
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
    out: PruneResult = {"deleted": counts}
    if dry_run:
        out["dryRun"] = True
    return out
