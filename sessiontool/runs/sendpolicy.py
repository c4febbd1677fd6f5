"""The per-session send-policy override (spec §8): reading the effective decision and setting or
clearing an entry's `sendPolicy`, as OpenClaw's sessions.patch and its `/send on|off|inherit`
command do. Shared by the `policy` command and by `send`'s `/send ...` message."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sessiontool.context import Context
from sessiontool.errors import UsageError
from sessiontool.flow import policy
from sessiontool.sessions.resolve import Resolved, resolve
from sessiontool.state.sessions_json import Entry

if TYPE_CHECKING:
    from sessiontool.runs.result_types import PolicyDecision, PolicySet

# Every spelling a user may type, and the override it means (None: follow the rules).
ACTIONS: dict[str, str | None] = {
    "allow": "allow",
    "on": "allow",
    "deny": "deny",
    "off": "deny",
    "inherit": None,
}


def parse_action(action: str) -> str | None:
    """`allow|on` → "allow", `deny|off` → "deny", `inherit` → None; anything else exit 2."""
    key = action.strip().lower()
    if key not in ACTIONS:
        raise UsageError(
            f"unknown send policy action {action!r} (expected allow, deny, inherit, on or off)"
        )
    return ACTIONS[key]


def is_action(word: str) -> bool:
    return word.strip().lower() in ACTIONS


def decision_json(ctx: Context, full_key: str, entry: Entry | None) -> PolicyDecision:
    """`{"sessionKey","effective","decidedBy"}`: what a send to this session would meet, and
    which layer decided it, so an operator can tell an override from a rule."""
    d = policy.send_decision(ctx.config.send_policy, full_key, entry)
    return {
        "sessionKey": ctx.display(full_key),
        "effective": d.effective,
        "decidedBy": d.decided_by,
    }


def _resolve(ctx: Context, key: str | None, label: str | None) -> Resolved:
    # A key with no entry yet is still a session the policy speaks about (its rules apply now,
    # and setting an override creates the entry), so unknown keys resolve rather than fail.
    return resolve(ctx, key, label=label, create=True)


def policy_status(
    ctx: Context, key: str | None, label: str | None = None, *, command: str = "policy"
) -> PolicyDecision:
    """The effective send policy of one session. Operator-only: agents must not probe or learn
    the operator's routing rules."""
    policy.require_operator(ctx, command)
    r = _resolve(ctx, key, label)
    return decision_json(ctx, r.key, r.entry)


def set_send_policy(
    ctx: Context,
    key: str | None,
    label: str | None,
    action: str,
    *,
    create: bool = True,
) -> PolicySet:
    """Set (`allow|on`, `deny|off`) or clear (`inherit`) a session's override and return
    `{"status":"ok","sessionKey","sendPolicy","effective","decidedBy"}`.

    A key without an entry gets one (a new UUID v4 sessionId, no transcript yet), as OpenClaw's
    sessions.patch does; clearing an override of a session that has no entry changes nothing.
    `updatedAt` moves forward, never back, like OpenClaw's patch. Operators only (`send`'s
    `/send` message reaches here only for an operator). With `create=False` a key that has no entry is not found (exit 3), except the agent's main
    session, which always exists in OpenClaw's sense: a typo must not create a session."""
    policy.require_operator(ctx, "policy")
    wanted = parse_action(action)
    r = _resolve(ctx, key, label)
    if r.entry is None and wanted is not None and not create and r.key != ctx.main_key(r.agent_id):
        from sessiontool.errors import NotFoundError

        raise NotFoundError(
            f"Session not found: {ctx.display(r.key)} (use the full key from list)",
            hint="to set a policy for a session that does not exist yet: policy KEY ACTION "
            "--create",
        )

    from sessiontool.runs.writer import writer_for

    writer = writer_for(ctx, [r.agent_id], "policy")
    entry = writer.set_send_policy(ctx, r, wanted)
    # What the store holds now (the gateway's answer, or the entry written).
    decision = decision_json(ctx, r.key, entry)
    return {
        "status": "ok",
        "sessionKey": ctx.display(r.key),
        "sendPolicy": (entry or {}).get("sendPolicy"),
        "effective": decision["effective"],
        "decidedBy": decision["decidedBy"],
    }
