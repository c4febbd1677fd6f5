"""Pure decisions about who may see, read, send to and spawn what: send policy, sandbox
visibility, agent-to-agent access, sub-agent tool access and the spawn allowlist."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sessiontool.context import Context
from sessiontool.errors import ForbiddenError
from sessiontool.state import keys
from sessiontool.structs import Value

if TYPE_CHECKING:
    from sessiontool.flow.result_types import AgentItem, AgentsResult

OPERATOR_ONLY = "is only available to the operator, not to agent sessions"


class SendDecision(Value):
    __slots__ = ("effective", "decided_by")

    effective: str  # "allow" | "deny"
    decided_by: str  # "override" | "rule #<n>" | "default"

    def __init__(self, effective: str, decided_by: str) -> None:
        self.effective = effective
        self.decided_by = decided_by

    @property
    def allowed(self) -> bool:
        return self.effective == "allow"


def _rule_matches(match: Mapping[str, Any], full_key: str, entry: Mapping[str, Any] | None) -> bool:
    if not match:
        return True
    channel = match.get("channel")
    if channel is not None:
        have = keys.policy_channel(full_key, entry)
        if not isinstance(channel, str) or have != channel.strip().lower():
            return False
    chat_type = match.get("chatType")
    if chat_type is not None and keys.chat_type(full_key, entry) != chat_type:
        return False
    prefix = match.get("keyPrefix")
    if prefix is not None:
        if not isinstance(prefix, str):
            return False
        if not (full_key.startswith(prefix) or keys.rest_of(full_key).startswith(prefix)):
            return False
    raw = match.get("rawKeyPrefix")  # OpenClaw's: the full key's prefix, case aside
    if raw is None:
        return True
    return isinstance(raw, str) and full_key.lower().startswith(raw.strip().lower())


def send_decision(
    config_policy: Mapping[str, Any], full_key: str, entry: Mapping[str, Any] | None
) -> SendDecision:
    """A session's own `sendPolicy` wins; else the first matching deny rule; else any matching
    allow; else the default (allow when unset)."""
    override = (entry or {}).get("sendPolicy")
    if override in ("allow", "deny"):
        return SendDecision(str(override), "override")
    rules = config_policy.get("rules") if isinstance(config_policy, Mapping) else None
    allow_rule: int | None = None
    if isinstance(rules, list):
        for i, rule in enumerate(rules, start=1):
            if not isinstance(rule, Mapping):
                continue
            match = rule.get("match") or {}
            if not isinstance(match, Mapping) or not _rule_matches(match, full_key, entry):
                continue
            action = str(rule.get("action", "")).lower()
            if action == "deny":
                return SendDecision("deny", f"rule #{i}")
            if action == "allow" and allow_rule is None:
                allow_rule = i
    if allow_rule is not None:
        return SendDecision("allow", f"rule #{allow_rule}")
    default = config_policy.get("default") if isinstance(config_policy, Mapping) else None
    is_deny = isinstance(default, str) and default.strip().lower() == "deny"
    return SendDecision("deny" if is_deny else "allow", "default")


def check_tool(ctx: Context, tool: str) -> None:
    """Sub-agent requesters have no session tools unless the config grants them."""
    if ctx.requester.is_subagent and tool not in ctx.config.subagent_tools_allow:
        raise ForbiddenError(f"{tool} is not available to sub-agent sessions")


def require_operator(ctx: Context, command: str) -> None:
    if not ctx.requester.is_operator:
        raise ForbiddenError(f"{command} {OPERATOR_ONLY}")


# The entry fields `visible` reads: the search index keeps only these of each session
# (catalog.live_sessions), so a field `visible` starts reading must be named here.
VISIBILITY_FIELDS = ("spawnedBy",)


def visible(ctx: Context, full_key: str, entry: Mapping[str, Any] | None) -> bool:
    """Whether the requester may see a session at all (list filters on it silently)."""
    req = ctx.requester
    if req.is_operator:
        return True
    if req.sandboxed and ctx.config.sandbox_visibility == "spawned":
        return (entry or {}).get("spawnedBy") == req.session_key
    target_agent = keys.agent_of(full_key, req.agent_id)
    if target_agent != req.agent_id:
        return ctx.config.a2a_enabled and a2a_pair_allowed(ctx, target_agent)
    return True


def a2a_pair_allowed(ctx: Context, target_agent: str) -> bool:
    return ctx.config.a2a_allows(ctx.requester.agent_id) and ctx.config.a2a_allows(target_agent)


def check_access(ctx: Context, full_key: str, entry: Mapping[str, Any] | None, action: str) -> None:
    """Refuse reading (`history`) or messaging (`send`) a session the requester may not reach."""
    req = ctx.requester
    if req.is_operator:
        return
    if req.sandboxed and ctx.config.sandbox_visibility == "spawned":
        if (entry or {}).get("spawnedBy") != req.session_key:
            raise ForbiddenError(
                f"Session not visible from this sandboxed agent session: {ctx.display(full_key)}"
            )
        return
    target_agent = keys.agent_of(full_key, req.agent_id)
    if target_agent == req.agent_id:
        return
    noun, verb = ("history", "access") if action == "history" else ("messaging", "sends")
    if not ctx.config.a2a_enabled:
        raise ForbiddenError(
            f"Agent-to-agent {noun} is disabled. Set tools.agentToAgent.enabled=true to allow "
            f"cross-agent {verb}."
        )
    if not a2a_pair_allowed(ctx, target_agent):
        raise ForbiddenError(f"Agent-to-agent {noun} denied by tools.agentToAgent.allow.")


def spawn_allowed_agents(ctx: Context) -> tuple[bool, list[str]]:
    """(allow any, explicit ids) the requester agent may spawn under; itself always."""
    from sessiontool.state.config import spawn_allowlist

    allow = spawn_allowlist(ctx.config, ctx.agent_id)
    if allow is None:
        return False, [ctx.agent_id]
    if any(a.strip() == "*" for a in allow):
        return True, [ctx.agent_id]
    ids = [ctx.agent_id]
    for a in allow:
        if not a.strip():
            continue  # a blank entry names no agent (normalising it would give `main`)
        n = keys.normalize_agent_id(a)
        if n not in ids:
            ids.append(n)
    return False, ids


def check_spawn_agent(ctx: Context, target_agent: str) -> None:
    """The spawn allowlist (how deep a requester may spawn is runs/spawnopts.py's)."""
    # Compare normalised ids, as OpenClaw does: `--agent-id Research` means `research`.
    target_agent = keys.normalize_agent_id(target_agent)
    if target_agent == ctx.agent_id:
        return
    allow_any, ids = spawn_allowed_agents(ctx)
    import fnmatch

    if allow_any or any(fnmatch.fnmatchcase(target_agent, i) for i in ids):
        return
    others = [i for i in ids if i != ctx.agent_id]
    # The message is OpenClaw's (spec: `allowed: <list or none>`); "none" reads as "nowhere",
    # so the hint says what it means and what to configure.
    raise ForbiddenError(
        f"agentId is not allowed for sessions_spawn (allowed: {', '.join(others) or 'none'})",
        hint=f"agent {ctx.agent_id!r} may spawn only under itself"
        + (f" and {', '.join(others)}" if others else "")
        + f"; to allow {target_agent!r}, add it to agents.entries.{ctx.agent_id}.subagents"
        '.allowAgents in the config (["*"] allows any; agents.defaults.subagents.allowAgents '
        "for every agent)",
    )


def agents_list(ctx: Context) -> AgentsResult:
    """OpenClaw's agents_list result: the requester agent first, then the others it may spawn
    under, sorted; with `allowAgents: ["*"]`, every configured agent. A sub-agent requester
    needs `agents_list` in `tools.subagents.tools.allow`."""
    check_tool(ctx, "agents_list")
    allow_any, ids = spawn_allowed_agents(ctx)
    configured = {a.id: a for a in ctx.config.agents()}
    requester = ctx.agent_id
    others = set(configured) if allow_any else set(ids)
    others.discard(requester)
    agents: list[AgentItem] = []
    for agent_id in [requester, *sorted(others)]:
        conf = configured.get(agent_id)
        if conf is not None and conf.name:
            agents.append({"id": agent_id, "name": conf.name, "configured": True})
        else:
            agents.append({"id": agent_id, "configured": conf is not None})
    return {"requester": requester, "allowAny": allow_any, "agents": agents}
