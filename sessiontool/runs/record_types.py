"""The type of a run record (`<state>/sessiontool/runs/<runId>.json`) and of its follow-up.

A record travels between processes (the command that creates it, its lane's worker, `abort`,
`wait`, reconcilers, a newer or older sessiontool on the same state dir), so its fields are
declared once, here, for mypy; the values on disk are checked at read time by runs/schema.py,
which a test keeps in step with these declarations (tests/test_run_record_format.py).

Format versions: a record written by this version carries `version`
(runs/schema.RECORD_VERSION); a record without it is of version 1, the format before the field
existed, read the same way. A newer version's fields are kept and not checked, so an older
sessiontool can still list and wait on its runs.

Importing this module costs nothing at run time for its users: they import it under
`TYPE_CHECKING` (only the tests load it for real, to hold runs/schema.py to it). No
`from __future__ import annotations` here: `Required` must be seen at run time for that.
"""

from typing import Any, Literal, Required, TypedDict

RunStatus = Literal["queued", "running", "ok", "error", "timeout", "aborted", "lost"]
FinishedStatus = Literal["ok", "error", "timeout", "aborted", "lost"]
RunKind = Literal["send", "spawn", "step", "compact"]


class FollowUp(TypedDict, total=False):
    """What still follows a finished run (runs/steps.py): its next step and that step's data.
    A step's field that is done with is removed, never left as null."""

    next: str  # "reply:N", "announce", "inject", "deliver", "cleanup", "gateway-announce",
    # "openclaw-announce", "done"
    latest: str  # the last reply of an agent-to-agent exchange
    incoming: str  # the message the next reply turn answers
    text: str  # what `inject`/`deliver` hands on
    to: str  # the session key a delivery is for
    mode: str  # the delivery's mode (flow/delivery.py)
    error: str  # why the last attempt failed (it is retried)
    delivering: bool  # a delivery was started (resumed, never written twice)
    attemptAt: int  # ms of the last failed attempt (retried after a pause)
    injectAt: int  # ms the announce message was made (its transcript timestamp)
    announceAttempt: int  # a gateway announce's attempt (its idempotency key; gateway_announce)
    announceLimit: int  # the last attempt it may make (`deliveries retry` raises it)
    announceRunId: str  # the gateway's run of the announce turn
    announcedBy: str  # "openclaw" or "sessiontool": whose announce turn landed


class Announce(TypedDict, total=False):
    """An announce step's inputs, kept for the step that consumes its reply."""

    round1: str | None
    latest: str | None
    childReply: str | None


class RunRecord(TypedDict, total=False):
    """One run (`kind` send, spawn or compact) or one internal step of a run (`kind` step)."""

    # Always there (runs/schema.py refuses a record without them).
    runId: Required[str]
    kind: Required[RunKind]
    status: Required[RunStatus]
    createdAt: Required[int]
    sessionKey: Required[str]
    version: int  # the record format (RECORD_VERSION); absent: 1
    # Who and what.
    agentId: str
    sessionId: str
    requesterSessionKey: str
    startedBy: str
    parentRunId: str  # a step's run
    rerunOf: str  # the run this one repeats
    message: str
    system: str | None
    label: str | None
    cleanup: str | None
    via: str  # the writer its command chose: "gateway", else files
    # OpenClaw's own tool that carries the run out through the gateway's `tools.invoke`
    # ("sessions_spawn", "sessions_send"; openclaw/own_tools.py); absent: sessiontool's turn.
    tool: str
    step: str  # a step's name: "reply", "announce"
    turn: int
    maxTurns: int
    a2a: bool
    deliver: bool
    gatewayDeliver: bool
    skipIndex: bool
    keep: int  # a compaction's last turns kept as they are (`compact --keep`)
    compaction: dict[str, Any]  # what a compaction did: archived, firstKeptEntryId, compacted
    channel: str
    to: str
    accountId: str
    provenance: dict[str, Any]
    announce: Announce
    timeoutSeconds: float
    runTimeoutSeconds: float | None
    # What it may spend (runs/runners/spend.py): usd, and the budget, its limit, window, spend.
    costLimit: dict[str, Any]
    # Its lane and its worker.
    seq: int
    pid: int
    agentPid: int
    workerStartedAt: int
    startedAt: int
    # Its end.
    outcome: RunStatus  # the end the worker reached, before it is published as `status`
    endedAt: int
    reply: str | None
    error: str | None
    abortReason: str  # why an aborted run was stopped: "budget" (absent: by a user)
    model: str
    modelProvider: str
    usage: dict[str, Any]
    recoveredAt: int
    gatewayRunId: str
    gatewayDurationMs: float
    announceRunId: str | None
    gatewayAborted: bool  # whether the gateway said it stopped the turn of an aborted run
    # A spawn's options (runs/spawnopts.py), each only when asked for.
    spawnDepth: int  # the child's depth (1 under a main session)
    maxSpawnDepth: int  # the limit it was spawned under
    thinkingLevel: str  # the thinking level handed to the runner
    thinking: str  # thinkingLevel, as an older sessiontool wrote it (read, never written)
    cwd: str  # the agent process's working directory
    context: str  # "fork": the child starts with the requester's messages
    spawnMode: str  # "session": a persistent child, never swept
    taskName: str
    completion: str  # "quiet": nothing announced; "parent": the requester's transcript only
    sandbox: str  # "require"
    attachments: dict[str, Any]  # the staged attachments' receipt (and their `dir`)
    # What follows it.
    followUp: FollowUp
    announcedAt: int


class RunView(RunRecord, total=False):
    """A record as `runs` shows it (runs/submit.py `run_view`: its public fields only, keys in
    display form), with its worker's log under `runs RUN_ID --log`."""

    log: str


class Spawn(TypedDict):
    """What a spawn asks for (runs/submit.py), as the writers take it (runs/writer.py)."""

    task: str
    requester: str  # the requester session's key
    agentId: str  # the child's agent
    label: str | None
    model: str | None
    runTimeout: float | None
    cleanup: str  # "keep" | "delete"
    more: dict[str, Any]  # OpenClaw's other sessions_spawn arguments (spawnopts.tool_arguments)


class ChildSpec(TypedDict):
    """A spawned child's entry as a spawn asks the writer to make it (runs/writer.py)."""

    key: str
    agentId: str
    requester: str  # the requester session's key
    label: str | None
    model: str | None
    entry: dict[str, Any]  # more entry fields (spawnopts.child_entry_fields)
