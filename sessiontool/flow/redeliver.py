"""The outbox as a to-do list: which deliveries did not reach their channel (their latest line
says `failed`, or a `pending` one that nothing finished), and re-sending them by id through
`delivery.deliver`, which appends the new attempt as one more outbox line.

An `undelivered` delivery (no target: the key names no channel and the session has no routing)
is final: the text is already in the session's transcript and there is nowhere else to send
it, so retrying it from cron would only append a line every time, for ever.

A delivery's id is the record's own `id` when it has one, else `<runId>:<mode>` (one delivery of
each mode per run)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sessiontool.context import Context
from sessiontool.errors import NotFoundError, UsageError
from sessiontool.flow import delivery

if TYPE_CHECKING:
    from sessiontool.flow.result_types import DeliveryRecord, RetriedDelivery, RetryResult

RETRYABLE = ("failed", "pending")


def delivery_id(rec: Mapping[str, Any]) -> str:
    rid = rec.get("id")
    if isinstance(rid, str) and rid:
        return rid
    return f"{rec.get('runId', '?')}:{rec.get('mode', '?')}"


def latest(ctx: Context) -> dict[str, DeliveryRecord]:
    """The last outbox record of every delivery id, in the order ids first appeared."""
    out: dict[str, DeliveryRecord] = {}
    for rec in delivery.read_deliveries(ctx.paths):
        out[delivery_id(rec)] = rec
    return out


def undelivered(ctx: Context) -> list[DeliveryRecord]:
    """Deliveries whose latest attempt did not deliver and may be retried."""
    return [
        {**rec, "id": did} for did, rec in latest(ctx).items() if rec.get("status") in RETRYABLE
    ]


def _match(ids: list[str], known: Mapping[str, DeliveryRecord]) -> list[str]:
    """Ids as given, or unique prefixes of them (a run id's first characters)."""
    out: list[str] = []
    for want in ids:
        if want in known:
            out.append(want)
            continue
        hits = [k for k in known if k.startswith(want)]
        if not hits:
            raise NotFoundError(f"Delivery not found: {want}", hint="see: sessiontool deliveries")
        if len(hits) > 1:
            raise UsageError(
                f"delivery id {want!r} is ambiguous: {', '.join(hits[:5])}"
                + (" …" if len(hits) > 5 else "")
            )
        out.append(hits[0])
    return out


def retry(ctx: Context, ids: list[str]) -> RetryResult:
    """Re-send deliveries by id (all retryable ones when `ids` is empty). A delivery that was
    delivered or denied is refused by id (exit 2): retrying cannot change a policy decision,
    and a delivered text must not be posted twice."""
    known = latest(ctx)
    chosen = _match(ids, known) if ids else [d["id"] for d in undelivered(ctx)]
    for did in chosen:
        status = known[did].get("status")
        if status == delivery.UNDELIVERED:
            raise UsageError(
                f"delivery {did} has no delivery target; it is final (nowhere to deliver it)",
                hint="give the session a channel (deliveryContext) and send again",
            )
        if status not in RETRYABLE:
            raise UsageError(
                f"delivery {did} is {status}; only failed or pending deliveries are retried"
            )
    results: list[RetriedDelivery] = []
    for did in chosen:
        old = known[did]
        mode = old.get("mode")
        key = old.get("sessionKey")
        if mode not in delivery.MODES or not isinstance(key, str):
            raise UsageError(f"delivery {did} has no mode or session key to retry with")
        rec = delivery.deliver(
            ctx.paths,
            ctx.config,
            run_id=str(old.get("runId", "")),
            session_key=key,
            mode=mode,
            text=str(old.get("text") or ""),
            retry_of=did,
        )
        results.append({**rec, "id": did, "previousStatus": old.get("status")})
    ok = sum(1 for r in results if r.get("status") in delivery.LANDED)
    return {"count": len(results), "delivered": ok, "deliveries": results}
