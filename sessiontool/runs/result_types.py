"""The types of what the write and run commands return: `label`, `reset`, `delete` (both
session writers), `send`, `wait`, `spawn`, `rerun` and `abort`. `--json` writes these as they
are, and a runner's tool call gets the same (runs/tools.py), so their keys are declared once,
here, for mypy.

Importing this module costs nothing at run time for its users: like record_types.py, it is
imported under `TYPE_CHECKING` only (a TypedDict class costs start-up to create), and it imports
nothing of sessiontool's, so the writers that return these types stay out of an import cycle.
"""

from typing import Any, Literal, NotRequired, Required, TypedDict

Entry = dict[str, Any]  # a store entry: OpenClaw's keys pass through as they are


class LabelResult(TypedDict):
    """What `label` returns: the entry as the store now has it (None when a gateway answered
    without it)."""

    sessionKey: str
    entry: Entry | None
    via: NotRequired[Literal["gateway"]]


class ResetResult(TypedDict):
    """What `reset` returns; `inPlace` when the sessionId stayed (OpenClaw 2026.9.6)."""

    sessionKey: str
    entry: Entry | None
    previousSessionId: str | None
    inPlace: bool
    via: NotRequired[Literal["gateway"]]


class DeleteResult(TypedDict):
    """What `delete` returns: where the transcript was archived, if there was one."""

    sessionKey: str
    entry: None
    archived: str | None
    via: NotRequired[Literal["gateway"]]


class DeliveryState(TypedDict):
    """A `send` result's `delivery`: `pending` until the worker has delivered (or announced);
    `send --deliver` that waited fills in the outbox line's `id`, `status` and `error`."""

    status: str | None
    mode: Literal["announce", "deliver"]
    id: NotRequired[str]
    error: NotRequired[str]


class SendResult(TypedDict, total=False):
    """What `send` and `wait` return (spec §5.2): `accepted` (no wait), `ok` with the reply,
    `error` (`runStatus` says how the run ended), `timeout`; a `/send on|off|inherit` message
    answers `ok` with the `sendPolicy` and starts no run."""

    runId: str
    status: Required[Literal["accepted", "ok", "error", "timeout", "no_reply", "queued"]]
    sessionKey: Required[str]
    targetDisposition: Literal["queued", "steered"]  # `send --mode`: how the target took it
    note: str  # a steer queued as a new turn says so
    message: str  # no_reply: OpenClaw's words
    notificationId: str  # `--mode notify` (status queued): context added, no run
    durability: str
    runStarted: bool
    reply: str
    error: str
    runStatus: str | None
    via: str
    delivery: DeliveryState
    sendPolicy: str | None
    rerunOf: str  # `rerun`: the run this one repeats
    reason: str  # why an aborted run was stopped: "budget" (exit 6)


class SpawnResult(TypedDict):
    """What `spawn` returns: it never waits. `tool` when OpenClaw's own sessions_spawn made
    the child."""

    status: Literal["accepted"]
    runId: str
    childSessionKey: str
    via: NotRequired[str | None]
    tool: NotRequired[Literal["sessions_spawn"]]
    rerunOf: NotRequired[str]  # `rerun`: the run this one repeats
    attachments: NotRequired[dict[str, Any]]  # the staged attachments' receipt


class AbortResult(TypedDict):
    """What `abort` returns: the run's status after it; `gatewayAborted` when the turn ran in
    OpenClaw's gateway and chat.abort was asked to stop it."""

    runId: str
    status: str | None
    gatewayAborted: NotRequired[bool]


class PolicyDecision(TypedDict):
    """What `policy KEY` returns: the send policy a send to the session meets, and which layer
    decided it (`override`, `rule #N`, `default`)."""

    sessionKey: str
    effective: str
    decidedBy: str


class PolicySet(TypedDict):
    """What `policy KEY ACTION` (and an operator's `/send on|off|inherit`) returns: the
    override the store now holds (None: inherit) and the decision it leads to."""

    status: Literal["ok"]
    sessionKey: str
    sendPolicy: str | None
    effective: str
    decidedBy: str


class SweepResult(TypedDict):
    """What `sweep` returns: the display keys of the sub-agent sessions it archived (or, with
    `--dry-run`, would archive)."""

    archived: list[str]
