"""Who is asking and against which state: the state paths, the merged config and the requester,
built once per command from options and environment."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from sessiontool.state import keys
from sessiontool.state.config import Config, load_config
from sessiontool.state.paths import StatePaths, resolve_state_dir
from sessiontool.structs import Value


class Requester(Value):
    """The operator (session_key None), or a session acting through the tools."""

    __slots__ = ("session_key", "agent_id", "sandboxed")

    session_key: str | None
    agent_id: str
    sandboxed: bool

    def __init__(self, session_key: str | None, agent_id: str, sandboxed: bool = False) -> None:
        self.session_key = session_key
        self.agent_id = agent_id
        self.sandboxed = sandboxed

    @property
    def is_operator(self) -> bool:
        return self.session_key is None

    @property
    def is_subagent(self) -> bool:
        return self.session_key is not None and keys.is_subagent(self.session_key)


class Options(Value):
    """The global options that change where and how a command works, parsed once from the
    command line and never changed: `store` the forced store format (None: auto; it also rides
    on `Context.paths.store`, which is what the readers are handed), `gateway` the `--gateway`
    URL, normalized (None: the environment's or the config's), `color` auto, always or never,
    `output` the `--output-format` asked for (a row of cli/output.py's FORMATS; None: each
    command's rule). Frozen: every context carries its own, so two contexts in one process (the `mcp` server)
    never share an option through module state."""

    __slots__ = ("store", "gateway", "color", "output")

    store: str | None
    gateway: str | None
    color: str
    output: str | None

    def __init__(
        self,
        store: str | None = None,
        gateway: str | None = None,
        color: str = "auto",
        output: str | None = None,
    ) -> None:
        from sessiontool.openclaw.target import explicit_url
        from sessiontool.state.detect import check_store

        _set = object.__setattr__
        _set(self, "store", check_store(store))
        _set(self, "gateway", explicit_url(gateway))
        _set(self, "color", color)
        _set(self, "output", output)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Options are frozen (set {name!r} when building them)")


class SpendGate(Protocol):
    """What a new run may spend (`send`, `spawn`: runs/submit.py asks before any record is
    made). The budgets' spend is read from the search index by the reports layer above the run
    engine (reports/budgets.py `BudgetGate`); a command that enforces them builds its context
    `with_gate`."""

    def allow(
        self, agent_id: str, key: str, entry: Mapping[str, Any] | None, model: str | None
    ) -> dict[str, Any] | None:
        """The cost limit of a new run of `agent_id` in session `key` (its store entry, None
        for a new one) on `model` (None: the session's own), or raise OverBudgetError."""


class Context(Value):
    """Who asks, against which state, under which options (and, for a command that enforces
    budgets, the gate its runs pass): built once per command (per call in the `mcp` server)
    and passed down; frozen."""

    __slots__ = ("paths", "config", "requester", "options", "gate")

    paths: StatePaths
    config: Config
    requester: Requester
    options: Options
    gate: SpendGate | None

    def __init__(
        self,
        paths: StatePaths,
        config: Config,
        requester: Requester,
        options: Options | None = None,
        gate: SpendGate | None = None,
    ) -> None:
        _set = object.__setattr__
        _set(self, "paths", paths)
        _set(self, "config", config)
        _set(self, "requester", requester)
        _set(self, "options", options if options is not None else Options())
        _set(self, "gate", gate)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"a Context is frozen (build another to change {name!r})")

    def with_options(self, options: Options) -> Context:
        """This context under `options`: the paths carry its forced store format."""
        paths = StatePaths(self.paths.root, options.store)
        return Context(
            paths=paths,
            config=self.config,
            requester=self.requester,
            options=options,
            gate=self.gate,
        )

    def with_gate(self, gate: SpendGate | None) -> Context:
        """This context with the gate its new runs pass (budgets, `--max-cost`)."""
        return Context(
            paths=self.paths,
            config=self.config,
            requester=self.requester,
            options=self.options,
            gate=gate,
        )

    @property
    def agent_id(self) -> str:
        return self.requester.agent_id

    def canonical(self, key: str) -> str:
        return keys.canonical(key, self.agent_id, self.config.main_key, self.config.scope)

    def display(self, full_key: str) -> str:
        return keys.display(full_key, self.agent_id, self.config.main_key, self.config.scope)

    def main_key(self, agent_id: str | None = None) -> str:
        return keys.main_key_for(agent_id or self.agent_id, self.config.main_key, self.config.scope)

    def requester_or_main(self) -> str:
        """The requester's key; the operator acts as its agent's main session."""
        return self.requester.session_key or self.main_key()


def _sandboxed(cfg: Config, session_key: str, agent_id: str) -> bool:
    if os.environ.get("SESSIONTOOL_SANDBOXED", "").strip().lower() in ("1", "true", "yes"):
        return True
    mode = cfg.sandbox_mode(agent_id)
    if mode == "all":
        return True
    if mode == "non-main":
        return session_key != keys.main_key_for(agent_id, cfg.main_key, cfg.scope)
    return False


def build_context(
    state_dir: str | os.PathLike[str] | None = None,
    config_path: str | None = None,
    agent: str | None = None,
    as_key: str | None = None,
    *,
    cfg: Config | None = None,
) -> Context:
    paths = StatePaths(resolve_state_dir(state_dir))
    cfg = cfg if cfg is not None else load_config(paths, config_path)
    as_key = as_key or os.environ.get("SESSIONTOOL_SESSION_KEY") or None
    if as_key:
        base_agent = keys.normalize_agent_id(agent) if agent else cfg.default_agent_id
        full = keys.canonical(as_key, base_agent, cfg.main_key, cfg.scope)
        if full in keys.RESERVED_KEYS and full != keys.main_key_for(
            base_agent, cfg.main_key, cfg.scope
        ):
            from sessiontool.errors import UsageError

            # A requester is where replies and announces go back to: never a reserved key.
            raise UsageError(f"--as: {full!r} is a reserved key and cannot be a session")
        agent_id = keys.agent_of(full, base_agent)
        return Context(paths, cfg, Requester(full, agent_id, _sandboxed(cfg, full, agent_id)))
    agent_id = keys.normalize_agent_id(agent) if agent else cfg.default_agent_id
    return Context(paths, cfg, Requester(None, agent_id, False))


def context_for_session(paths_root: Path, cfg: Config, session_key: str) -> Context:
    """A context acting as `session_key` (a run's own session, for in-process tool calls)."""
    agent_id = keys.agent_of(session_key)
    return Context(
        StatePaths(paths_root),
        cfg,
        Requester(session_key, agent_id, _sandboxed(cfg, session_key, agent_id)),
    )
