"""Why a command would read or write nothing useful, found before it starts: a `--state-dir`
that does not exist, an `--agent` that is neither configured nor on disk (a remote gateway's
agents included, hence here above the gateway reader rather than in `context`)."""

from __future__ import annotations

from sessiontool.context import Context
from sessiontool.sessions.reading import agent_ids_on_disk
from sessiontool.state import keys
from sessiontool.state.detect import gateway_url
from sessiontool.state.paths import is_plain_name


def state_findings(
    ctx: Context, *, explicit_state: bool, explicit_agent: str | None
) -> list[dict[str, str]]:
    """Why reading this state dir would show nothing, before anything is read: a `--state-dir`
    that does not exist (a typo on the command line), or an `--agent` that is neither
    configured nor on disk. The environment's or the platform's state dir may not exist yet
    (nothing was written): reading it shows nothing, and doctor warns."""
    out: list[dict[str, str]] = []
    root = ctx.paths.root
    if not root.exists():
        if explicit_state:
            out.append(
                {
                    "kind": "missing-state-dir",
                    "path": str(root),
                    "detail": f"state dir {root} does not exist",
                    "hint": "check --state-dir / SESSIONTOOL_STATE_DIR; a send or spawn creates it",
                }
            )
        return out
    if explicit_agent is not None:
        aid = keys.normalize_agent_id(explicit_agent)
        # Sessions dirs, OpenClaw databases, or a remote gateway's agents.
        on_disk = agent_ids_on_disk(ctx.paths)
        known = ctx.config.known_agent_ids()
        if aid not in on_disk and aid not in known:
            out.append(unknown_agent_finding(ctx, aid, on_disk, known, writes=False))
    return out


def unknown_agent_finding(
    ctx: Context, aid: str, on_disk: list[str], known: list[str], *, writes: bool = True
) -> dict[str, str]:
    """An `--agent` that is neither configured nor on disk, with the nearest known name. The
    hint fits the command: a read is not what starts an agent (`--create-agent` there only
    says it is new, and reads it empty)."""
    import difflib

    every = sorted(set(on_disk) | set(known))
    close = difflib.get_close_matches(aid, every, n=1, cutoff=0.6)
    guess = f"did you mean {close[0]!r}? " if close else ""
    root = ctx.paths.root
    return {
        "kind": "unknown-agent",
        "path": str(ctx.paths.agents_dir / aid) if is_plain_name(aid) else str(root),
        "detail": f"unknown agent {aid!r}: {guess}not configured and no sessions in {root} "
        f"(agents: {', '.join(every) or 'none'})",
        "hint": "check --agent; add it to agents.list in the config, or give --create-agent "
        + ("to start a new one" if writes else "to a send or spawn to start a new one"),
    }


def new_agent_findings(ctx: Context, explicit_agent: str | None) -> list[dict[str, str]]:
    """For a command that writes: an `--agent` it would create by a typo (`--agent mian`)."""
    if explicit_agent is None:
        return []
    aid = keys.normalize_agent_id(explicit_agent)
    on_disk = ctx.paths.agent_ids_on_disk() if ctx.paths.root.exists() else []
    if gateway_url(ctx.paths) is not None:  # a remote gateway's agents
        on_disk = agent_ids_on_disk(ctx.paths)
    known = ctx.config.known_agent_ids()
    if aid in on_disk or aid in known:
        return []
    return [unknown_agent_finding(ctx, aid, list(on_disk), known)]
