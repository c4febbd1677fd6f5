"""One write interface over the two ways a session store is written, the mirror of
`state/reader.py`.

- `files` (`runs/files_writer.py`): sessiontool's own format and OpenClaw's up to 2026.7
  while no lock-ignoring gateway runs: `sessions.json` under OpenClaw's store lock, transcripts
  appended under its transcript lock, a run's turn carried out by sessiontool's runner.
- `gateway` (`runs/gateway_writer.py`): OpenClaw 2026.8+ (its SQLite store) and a JSON-era
  gateway that no longer takes the store lock: every change is a method of OpenClaw's running
  gateway (`sessions.patch`, `sessions.reset`, `sessions.delete`, `sessions.create`, `agent`,
  `chat.abort`) and nothing of OpenClaw's is written by sessiontool.

The choice is made once per command by `writer_for` (the agents a write touches, the running
gateway's version facts in `openclaw/gateway.py`), recorded in a run's record (`via`), and
found again from it by `writer_of` in the worker and the follow-up steps. Every operation is
written once per writer; nothing below the commands asks which store it is on. A new OpenClaw
release means a reader/writer pair and a line in the version table, not a new branch here.

A run's turn is carried out beside this interface, not by it: the lane worker picks the turn by
the same writer kind (`worker.carry_out`: execute.py over the files, gateway_run.py through the
gateway), because a turn runs a runner whose session tools call `send` and `spawn`, which
choose a writer here (the interface stays below the turns that use it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from sessiontool.context import Context
    from sessiontool.runs.record_types import ChildSpec, FollowUp, RunRecord, Spawn
    from sessiontool.runs.result_types import DeleteResult, LabelResult, ResetResult
    from sessiontool.sessions.resolve import Resolved
    from sessiontool.state.config import Config
    from sessiontool.state.paths import StatePaths

Entry = dict[str, Any]


class SessionWriter(Protocol):
    """What a write command, the run worker and the follow-up steps ask of a store."""

    kind: str  # "files" | "gateway"; a run's record keeps it as `via`
    # The writer delivers on the session's channel itself: OpenClaw's gateway carries out a
    # `--deliver` send's delivery (`deliver: true`), and what sessiontool's outbox delivers is
    # not mirrored into OpenClaw's transcript (not sessiontool's to write). Files: False.
    owns_delivery: bool

    # -- session management (label, reset, delete, policy) ---------------------------------
    def set_label(self, ctx: Context, r: Resolved, label: str) -> LabelResult:
        """The session's label; another session of its agent with that label: exit 2."""
        ...

    def reset(self, ctx: Context, r: Resolved) -> ResetResult:
        """A new conversation in the session (`previousSessionId`, `inPlace`)."""
        ...

    def delete(self, ctx: Context, r: Resolved) -> DeleteResult:
        """The session gone from its store, its transcript archived."""
        ...

    def set_send_policy(self, ctx: Context, r: Resolved, wanted: str | None) -> Entry | None:
        """`allow`/`deny`, or None to clear; the entry afterwards (None: no entry)."""
        ...

    def patch_session(
        self, ctx: Context, r: Resolved, patch: dict[str, Any], expected: str | None
    ) -> Entry | None:
        """OpenClaw's sessions.patch of a session's life fields (`archived`, `pinned`, `model`,
        `thinkingLevel`; runs/session_patch.py); another generation than `expected`: exit 4.
        The entry afterwards (None: a gateway that answered without it)."""
        ...

    def fork(self, ctx: Context, r: Resolved, at: str | None, label: str | None) -> dict[str, Any]:
        """A new session from this one's transcript, up to just before the user message `at`
        (all of it: None), its lineage recorded (OpenClaw's `sessions.fork`)."""
        ...

    def rewind(self, ctx: Context, r: Resolved, at: str) -> dict[str, Any]:
        """The session continues from just before the user message `at`; the later part is
        kept (OpenClaw's `sessions.rewind`)."""
        ...

    # -- runs -------------------------------------------------------------------------------
    def before_run(self, ctx: Context) -> None:
        """Housekeeping a send or spawn does first (the files writer's archive sweep)."""
        ...

    def requester_entry(self, ctx: Context, key: str) -> Entry | None:
        """The entry of a requester session, for its channel (None when not known here)."""
        ...

    def add_child(self, ctx: Context, spec: ChildSpec) -> None:
        """What a spawn writes before its run is queued: the child's entry linked to its
        requester (files), or only the label check (gateway: the worker creates the child)."""
        ...

    def openclaw_spawn(self, ctx: Context, run_id: str, spawn: Spawn) -> dict[str, Any] | None:
        """OpenClaw's own sessions_spawn, when the store's gateway runs it for sessiontool:
        its answer (`childSessionKey`, `runId`); None: sessiontool carries the spawn out."""
        ...

    def openclaw_sends(self, ctx: Context, requester: str) -> bool:
        """Whether an agent-to-agent send goes through OpenClaw's own sessions_send."""
        ...

    def first_follow_up(self, rec: RunRecord) -> FollowUp | None:
        """The first follow-up step of a run that has just ended (None: nothing follows)."""
        ...

    def announce_to_requester(
        self, paths: StatePaths, cfg: Config, rec: RunRecord, text: str
    ) -> str | None:
        """Hand a spawn's announce message to its requester session (raises: retried); the
        gateway's run id of the announce turn, when it is one."""
        ...

    def cleanup(self, paths: StatePaths, rec: RunRecord) -> None:
        """A spawn's `--cleanup delete`, after its announce."""
        ...

    def abort_turn(self, paths: StatePaths, rec: RunRecord) -> bool | None:
        """After `abort` ended a started run: stop the turn where it runs. True/False: the
        gateway says it stopped something or not; None: nothing to ask (the process is gone)."""
        ...

    def mark_aborted(self, paths: StatePaths, rec: RunRecord) -> None:
        """An aborted or lost run's session flagged as such, if this writer keeps that flag."""
        ...

    def clear_stale_locks(self, paths: StatePaths, rec: RunRecord) -> None:
        """Locks a lost worker may have left on disk (only those nobody holds)."""
        ...


def _make(kind: str) -> SessionWriter:
    if kind == "gateway":
        from sessiontool.runs.gateway_writer import GatewayWriter

        return GatewayWriter()
    from sessiontool.runs.files_writer import FilesWriter

    return FilesWriter()


def writer_for(
    ctx: Context, agent_ids: list[str], command: str, *, routable: bool = True
) -> SessionWriter:
    """The writer for a command that writes these agents' sessions, or ForbiddenError (exit 4)
    when neither way is safe (`routable`: the command has a gateway form).

    A send or spawn (`command` in TURNS) on a state dir that belongs to OpenClaw or Clawdbot
    (its config file is there) with no sessiontool runner configured for these agents never
    gets the built-in echo demo agent: it goes to the running gateway, or is refused (exit 4)
    saying so. The demo agent answers only in sessiontool's own state dirs."""
    from sessiontool.openclaw import gateway

    ids = sorted(set(agent_ids))
    kind = gateway.write_mode(ctx.paths, ids, command, routable=routable)
    foreign = kind == "files" and ctx.paths.openclaw_config() is not None
    if foreign and command in TURNS and not all(runner_configured(ctx, a) for a in ids):
        kind = _gateway_or_refuse(ctx, command)
    return _make(kind)


TURNS = ("send", "spawn")


def runner_configured(ctx: Context, agent_id: str) -> bool:
    """A runner chosen in sessiontool's config for this agent (its own, or the agents'
    default); an explicit `{"type": "echo"}` counts: the demo agent was asked for."""
    cfg = ctx.config
    return cfg.agent(agent_id).runner is not None or cfg.get("agents.defaults.runner") is not None


def _gateway_or_refuse(ctx: Context, command: str) -> str:
    from sessiontool.errors import ForbiddenError
    from sessiontool.openclaw import gateway

    cfg_file = ctx.paths.openclaw_config()
    owner = cfg_file.name if cfg_file is not None else "openclaw.json"
    g = gateway.find(ctx.paths)
    if g.reachable():
        gateway.ready(ctx.paths, command)  # how it is reached, what it refuses: the gateway's
        return "gateway"
    why = f"no gateway answers at {g.host}:{g.port}"
    raise ForbiddenError(
        f"{command}: this state dir belongs to OpenClaw ({owner}) and {why}; sessiontool's "
        "built-in echo demo agent answers only in its own state dirs",
        hint=g.how_to_start() + ", or configure a sessiontool runner for the agent "
        '(`agents.defaults.runner` in sessiontool.json5, e.g. {"type": "command", ...}; '
        'docs/reference.md, "Runners")',
    )


def writer_of(rec: RunRecord) -> SessionWriter:
    """The writer a run's command chose, from its record (`via`; older records: files)."""
    return _make("gateway" if rec.get("via") == "gateway" else "files")
