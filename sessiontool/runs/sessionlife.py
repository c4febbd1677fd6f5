"""A session's life: `archive` / `restore`, `pin` / `unpin`, and the per-session model and
thinking level (`session KEY --model M --thinking LEVEL`), for the commands and for the
`sessions` / `session_status` tools (runs/life_tools.py), hence here, beside the tools. Each is one
OpenClaw `sessions.patch` (runs/session_patch.py has its rules): written through the session's
writer, the gateway on an OpenClaw store, sessions.json under the store lock on sessiontool's.

`--expect-session-id ID` (OpenClaw's `expectedSessionId`) refuses with exit 4 when the key now
names another generation than the caller saw (a reset or a new session under the same key);
`reset` and `delete` take it too (`check_generation`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sessiontool.context import Context
from sessiontool.errors import ForbiddenError, NotFoundError
from sessiontool.flow import policy
from sessiontool.runs.session_patch import (
    check_expected,
    is_default_word,
    model_of,
    normalize_thinking,
)
from sessiontool.runs.writer import SessionWriter
from sessiontool.sessions.archived import find_archived
from sessiontool.sessions.lifeview import is_archived
from sessiontool.sessions.resolve import Resolved, resolve
from sessiontool.state import detect, keys

if TYPE_CHECKING:
    from typing import NotRequired, TypedDict

    class PatchResult(TypedDict):
        """What archive, restore, pin, unpin and `session` return; `--json` writes it."""

        sessionKey: str
        sessionId: str | None
        archived: bool
        pinned: bool
        model: str | None
        thinkingLevel: str | None
        entry: dict[str, Any] | None
        via: NotRequired[str]


def locate(
    ctx: Context,
    command: str,
    value: str | None,
    label: str | None,
    *,
    archived_too: bool = False,
) -> tuple[Resolved, SessionWriter]:
    """Operator check (a tool call checks access instead: `as_tool`), then the session (an
    archived one too when `archived_too`: OpenClaw's stores leave those out of their default
    reads), then its writer, chosen once."""
    from sessiontool.runs.writer import writer_for

    as_tool = command.startswith("sessions") or command == "session_status"
    if not as_tool:
        policy.require_operator(ctx, command)
    try:
        r = resolve(ctx, value, label=label, write=True)
    except NotFoundError:
        if not archived_too or value is None:
            raise
        full = ctx.canonical(value.strip())
        agent_id = keys.agent_of(full, ctx.agent_id)
        found = find_archived(ctx, agent_id, full)
        if found is None:
            raise
        r = Resolved(
            agent_id,
            full,
            found.entry,
            store_path=ctx.paths.sessions_json(agent_id),
            sessions_dir=ctx.paths.sessions_dir(agent_id),
            stored_keys=found.stored_keys,
            store=detect.detect(ctx.paths, agent_id),
        )
    if as_tool:
        policy.check_access(ctx, r.key, r.entry, "send")
    return r, writer_for(ctx, [r.agent_id], command)


def check_generation(ctx: Context, r: Resolved, expected: str | None) -> None:
    """`--expect-session-id`: exit 4 when the session is now another generation."""
    check_expected(ctx.display(r.key), r.entry, expected)


def busy_run(ctx: Context, full_key: str) -> str | None:
    """The id of a run queued or running in the session's lane, or None."""
    from sessiontool.errors import SessiontoolError
    from sessiontool.runs import lanes, records

    for name in lanes.markers(lanes.lane_dir(ctx.paths, full_key)):
        parsed = lanes.parse_marker(name)
        if parsed is None:
            continue
        try:
            rec = records.read_record(ctx.paths, parsed[1])
        except SessiontoolError:
            continue
        if not records.is_finished(rec) and rec.get("sessionKey") == full_key:
            return parsed[1]
    return None


def refuse_busy(ctx: Context, r: Resolved, command: str) -> None:
    """Exit 4 naming the run that is queued or running in the session's lane."""
    run_id = busy_run(ctx, r.key)
    if run_id is not None:
        raise ForbiddenError(
            f"{command}: run {run_id} is queued or running in {ctx.display(r.key)}",
            hint=f"wait for it (`sessiontool wait {run_id}`) or abort it first",
            extra={"runId": run_id, "sessionKey": ctx.display(r.key)},
        )


def result_of(ctx: Context, r: Resolved, writer: SessionWriter, entry: Any) -> PatchResult:
    e = entry if isinstance(entry, dict) else None
    shown = e if e is not None else (r.entry or {})
    out: PatchResult = {
        "sessionKey": ctx.display(r.key),
        "sessionId": shown.get("sessionId") if isinstance(shown.get("sessionId"), str) else None,
        "archived": is_archived(shown),
        "pinned": shown.get("pinnedAt") is not None,
        "model": model_of(shown),
        "thinkingLevel": shown.get("thinkingLevel"),
        "entry": e,
    }
    if writer.kind == "gateway":
        out["via"] = "gateway"
    return out


def set_archived(
    ctx: Context,
    value: str | None,
    archived: bool,
    *,
    label: str | None = None,
    expect: str | None = None,
) -> PatchResult:
    """Archive (out of `list`, refused as a send target, its transcript kept) or restore. A
    main session is refused (exit 4), as OpenClaw protects it; so is a session with a run
    queued or running (OpenClaw cancels that work first: sessiontool leaves it to the user)."""
    command = "archive" if archived else "restore"
    r, writer = locate(ctx, command, value, label, archived_too=not archived)
    check_generation(ctx, r, expect)
    if archived and keys.kind_of(r.key, r.entry, ctx.config.main_key) == "main":
        raise ForbiddenError(f"Cannot archive the main session ({ctx.display(r.key)}).")
    if archived:
        refuse_busy(ctx, r, command)
    entry = writer.patch_session(ctx, r, {"archived": archived}, expect or r.session_id)
    return result_of(ctx, r, writer, entry)


def set_pinned(
    ctx: Context, value: str | None, pinned: bool, *, label: str | None = None
) -> PatchResult:
    """Pin (first in `list` and `top`) or unpin; root sessions only, as OpenClaw rules."""
    r, writer = locate(ctx, "pin" if pinned else "unpin", value, label)
    entry = writer.patch_session(ctx, r, {"pinned": pinned}, None)
    return result_of(ctx, r, writer, entry)


def set_overrides(
    ctx: Context,
    value: str | None,
    *,
    model: str | None = None,
    thinking: str | None = None,
    label: str | None = None,
) -> PatchResult:
    """The session's model and thinking level for its next runs (`default` clears either);
    with neither given, the session's settings as they are."""
    r, writer = locate(ctx, "session", value, label)
    patch: dict[str, Any] = {}
    if model is not None:
        if is_default_word(model):
            patch["model"] = None
        else:
            from sessiontool.runs.submit import validate_model

            gateway = writer.kind == "gateway"
            patch["model"] = validate_model(ctx.config, model, r.agent_id, via_gateway=gateway)
    if thinking is not None:
        patch["thinkingLevel"] = None if is_default_word(thinking) else normalize_thinking(thinking)
    if not patch:
        return result_of(ctx, r, writer, r.entry)
    entry = writer.patch_session(ctx, r, patch, None)
    return result_of(ctx, r, writer, entry)
