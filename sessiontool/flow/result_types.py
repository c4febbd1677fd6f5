"""The types of what the delivery side returns: the outbox record `delivery.deliver` writes,
`deliveries retry`'s result, and `agents` (OpenClaw's agents_list). `--json` and a runner's tool
call write these as they are, so their keys are declared once, here, for mypy.

Imported under `TYPE_CHECKING` only, like runs/record_types.py: a TypedDict class costs start-up
to create. Outbox lines read back from the file (`read_deliveries`, `follow_deliveries`) are
DeliveryRecords too, each value as the line holds it: any version of sessiontool, or a person,
may have written them, so a reader checks the type of a value it relies on.
"""

from typing import Literal, NotRequired, TypedDict


class DeliveryRecord(TypedDict, total=False):
    """One outbox line as `deliver` writes it (`id` first when the worker gave one; `error`
    when not delivered). The returned record, not the line, carries `mirrorError` when the
    transcript mirror could not be written."""

    id: str
    ts: str
    runId: str
    sessionKey: str
    mode: Literal["announce", "deliver", "spawn-announce"]
    channel: str | None
    to: str | None
    accountId: str | None
    text: str
    status: str
    error: str
    mirrorError: str


class RetriedDelivery(DeliveryRecord, total=False):
    """A retried delivery: the new attempt's record under the delivery's id, and the status
    its previous attempt had."""

    previousStatus: object


class RetryResult(TypedDict):
    """What `deliveries retry` returns: how many were tried, how many were delivered."""

    count: int
    delivered: int
    deliveries: list[RetriedDelivery]


class AgentItem(TypedDict):
    id: str
    name: NotRequired[str]
    configured: bool


class AgentsResult(TypedDict):
    """What `agents` (OpenClaw's agents_list) returns: the requester's agent first."""

    requester: str
    allowAny: bool
    agents: list[AgentItem]
