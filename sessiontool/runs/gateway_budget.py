"""A gateway turn's spend, watched while it runs (docs/budgets.md). OpenClaw 2026.9.6 sends the
connection that owns a turn its `agent` events: `lifecycle` (phase `model`: the provider and
model), `assistant` (the reply so far) and, after each model call, `usage` with the run's
output tokens so far (`{outputTokens}`: the input's tokens are told only at the turn's end).
Priced as `usage` prices them, the output alone is a lower bound of the spend; a turn whose
bound reaches its cost limit is stopped there: OverBudget is raised out of the wait, and the
client, the turn's owner, stops it in the gateway (`chat.abort`, wsclient). The end's own check
(gateway_run `_over_budget`) still holds for what the events did not tell."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sessiontool.runs.runners import spend
from sessiontool.runs.turn import Outcome, RunAborted

if TYPE_CHECKING:
    from sessiontool.runs.record_types import RunRecord
    from sessiontool.state.prices import Prices


class OverBudget(RunAborted):
    """The watch stopped the turn: its spend reached its cost limit (`message` says so;
    `partial`, the reply so far)."""

    def __init__(self, message: str, partial: str) -> None:
        super().__init__(message)
        self.message, self.partial = message, partial


def aborted(out: Outcome, exc: RunAborted) -> None:
    """An aborted turn's outcome: by a user, or by its budget (reason `budget`, the reply so
    far kept)."""
    out.status, out.error = "aborted", "aborted by user"
    if isinstance(exc, OverBudget):
        out.error, out.reason, out.reply = exc.message, "budget", exc.partial


class BudgetWatch:
    """The `on_event` of one gateway turn with a cost limit."""

    def __init__(self, rec: RunRecord, limit: dict[str, Any], prices: Prices) -> None:
        self.rec, self.limit, self.prices = rec, limit, prices
        model = rec.get("model")
        self.provider: str | None = None
        self.model: str | None = model if isinstance(model, str) and model else None
        if self.model is not None and "/" in self.model:
            self.provider, self.model = self.model.split("/", 1)
        self.text = ""  # the partial reply, kept when the turn is stopped

    def _ours(self, payload: dict[str, Any]) -> bool:
        """The turn's events: the gateway names it by its own id or by our idempotency key."""
        run = payload.get("runId")
        return isinstance(run, str) and run in (self.rec["runId"], self.rec.get("gatewayRunId"))

    def __call__(self, frame: dict[str, Any]) -> None:
        payload = frame.get("payload")
        if (
            frame.get("event") != "agent"
            or not isinstance(payload, dict)
            or not self._ours(payload)
        ):
            return
        data = payload.get("data")
        data = data if isinstance(data, dict) else {}
        stream = payload.get("stream")
        if stream == "lifecycle" and data.get("phase") == "model":
            for name in ("provider", "model"):
                if isinstance(data.get(name), str) and data[name]:
                    setattr(self, name, data[name])
        elif stream == "assistant" and isinstance(data.get("text"), str):
            self.text = data["text"]
        elif stream == "usage":
            n = data.get("outputTokens")
            if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
                return
            cost = spend.crossed(
                self.limit, self.prices, self.provider, model=self.model, usage={"output": n}
            )
            if cost is not None:
                raise OverBudget(spend.stop_message(self.limit, cost), self.text)


def watch_for(rec: RunRecord, providers: Any) -> BudgetWatch | None:
    """The watch of a turn with a cost limit (none without one)."""
    limit = rec.get("costLimit")
    if not limit:
        return None
    from sessiontool.state.prices import prices_of

    return BudgetWatch(rec, dict(limit), prices_of(providers))
