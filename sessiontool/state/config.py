"""Configuration: OpenClaw's own config (read-only, shared keys) overlaid by sessiontool's, both
JSON5. Defaults live here, and every error names the file, the key and what was expected."""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sessiontool.errors import ConfigError
from sessiontool.state import config_files
from sessiontool.state.config_files import agent_id as _agent_id
from sessiontool.state.config_keys import MAX_CONCURRENT_RUNS, MAX_TOOL_ROUNDS
from sessiontool.state.keys import DEFAULT_AGENT_ID, DEFAULT_MAIN_KEY, normalize_agent_id
from sessiontool.state.paths import StatePaths
from sessiontool.structs import Value

if TYPE_CHECKING:
    from sessiontool.state.budget_config import Budget

_load_file = config_files.load_file  # openclaw/target.py and gateway.py read a file with it
SHARED_TOP_KEYS = ("session", "agents", "tools", "models")
OWN_TOP_KEYS = frozenset({*SHARED_TOP_KEYS, "sessiontool", "$schema"})


def _has_path(node: Any, dotted: str) -> bool:
    """Whether `dotted` (`agents.list[0].runner.type`) exists in a parsed config layer."""
    parts = dotted.split(".")
    for n, part in enumerate(parts):
        name, _, index = part.partition("[")
        if not isinstance(node, dict) or name not in node:
            return False
        node = node[name]
        if index:
            if not isinstance(node, list):
                return False
            i = int(index.rstrip("]")) if index.rstrip("]").isdigit() else -1
            rest = ".".join(parts[n + 1 :])
            items = [node[i]] if 0 <= i < len(node) else node
            return any(not rest or _has_path(item, rest) for item in items)
    return True


class AgentConfig(Value):
    __slots__ = (
        "id",
        "name",
        "default",
        "model",
        "model_fallbacks",
        "runner",
        "allow_agents",
        "subagent_model",
        "sandbox_mode",
        "configured",
    )

    id: str
    name: str | None
    default: bool
    model: str | None
    model_fallbacks: tuple[str, ...]
    runner: Mapping[str, Any] | None
    allow_agents: tuple[str, ...] | None
    subagent_model: str | None
    sandbox_mode: str | None
    configured: bool

    def __init__(
        self,
        id: str,
        name: str | None = None,
        default: bool = False,
        model: str | None = None,
        model_fallbacks: tuple[str, ...] = (),
        runner: Mapping[str, Any] | None = None,
        allow_agents: tuple[str, ...] | None = None,
        subagent_model: str | None = None,
        sandbox_mode: str | None = None,
        configured: bool = True,
    ) -> None:
        self.id = id
        self.name = name
        self.default = default
        self.model = model
        self.model_fallbacks = model_fallbacks
        self.runner = runner
        self.allow_agents = allow_agents
        self.subagent_model = subagent_model
        self.sandbox_mode = sandbox_mode
        self.configured = configured


def model_primary(value: Any) -> tuple[str | None, tuple[str, ...]]:
    """A `model` setting: a string, or OpenClaw's {primary, fallbacks}."""
    if isinstance(value, str) and value.strip():
        return value.strip(), ()
    if isinstance(value, dict):
        primary = value.get("primary")
        fb = value.get("fallbacks")
        fallbacks = tuple(x for x in fb if isinstance(x, str)) if isinstance(fb, list) else ()
        return (primary if isinstance(primary, str) and primary else None), fallbacks
    return None, ()


def _budgets(cfg: Config) -> tuple[Budget, ...]:
    """`sessiontool.budgets`, parsed by budget_config.py (imported only when a file sets it),
    which says what the table cannot (a missing window or limit, an unknown key, a name twice).
    Lenient (doctor): none, the error kept in `errors`."""
    if cfg.get("sessiontool.budgets") is None:
        return ()  # the common case: no import, no parsing
    from sessiontool.state.budget_config import parse_budgets

    try:
        return parse_budgets(cfg.get("sessiontool.budgets"), cfg._where("sessiontool.budgets"))
    except ConfigError as exc:
        if not cfg.lenient:
            raise
        if exc.message not in cfg.errors:
            cfg.errors.append(exc.message)
        return ()


class Config(Value):
    # `__dict__` holds the cached properties (main_key, scope).
    __slots__ = (
        "raw",
        "files",
        "warnings",
        "skipped",
        "errors",
        "lenient",
        "own_file",
        "layers",
        "__dict__",
    )

    raw: dict[str, Any]
    files: list[Path]
    warnings: list[str]
    skipped: list[str]  # bad values of OpenClaw's file, ignored
    # `lenient` (doctor's load): a value that would be refused is kept in `errors` instead, and
    # the default (a safety limit's strictest reading) is used, so every check still runs.
    errors: list[str]
    lenient: bool
    own_file: Path | None
    # (file, what it contributed), in merge order: an error names the file that set the key.
    layers: list[tuple[Path, dict[str, Any]]]

    def __init__(
        self,
        raw: dict[str, Any],
        files: list[Path] | None = None,
        warnings: list[str] | None = None,
        skipped: list[str] | None = None,
        own_file: Path | None = None,
        layers: list[tuple[Path, dict[str, Any]]] | None = None,
    ) -> None:
        self.raw = raw
        self.files = [] if files is None else files
        self.warnings = [] if warnings is None else warnings
        self.skipped = [] if skipped is None else skipped
        self.errors = []
        self.lenient = False
        self.own_file = own_file
        self.layers = [] if layers is None else layers

    # -- generic access -------------------------------------------------------------------
    def get(self, dotted: str, default: Any = None) -> Any:
        node: Any = self.raw
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node

    def _where(self, dotted: str) -> str:
        """`<file>: <key>`, naming the last file that sets the key (else every file read)."""
        for path, layer in reversed(self.layers):
            if _has_path(layer, dotted):
                return f"{path}: {dotted}"
        names = ", ".join(str(f) for f in self.files) or "config"
        return f"{names}: {dotted}"

    def expect(
        self, dotted: str, kind: type | tuple[type, ...], what: str, default: Any = None
    ) -> Any:
        value = self.get(dotted, None)
        if value is None:
            return default
        if (
            not isinstance(value, kind)
            or isinstance(value, bool)
            and bool not in (kind if isinstance(kind, tuple) else (kind,))
        ):
            return self._bad_value(dotted, what, value, default)
        if isinstance(value, float) and not math.isfinite(value):  # JSON5 Infinity, NaN, 1e400
            return self._bad_value(dotted, what, value, default)
        return value

    def _bad_value(self, dotted: str, what: str, value: Any, default: Any) -> Any:
        """A value of the wrong type or out of its range: exit 2 when sessiontool's own file
        set it (the user can fix it), or when it is a safety limit (config_keys' `strict`) in
        any file; else skipped with one warning (OpenClaw's file: sessiontool only reads it,
        and one odd value there must not stop every command). `doctor` reports both."""
        from sessiontool.state.config_keys import is_strict, shown

        message = f"{self._where(dotted)}: expected {what}, got {shown(value)}"
        setter = next((p for p, layer in reversed(self.layers) if _has_path(layer, dotted)), None)
        if setter is None or setter == self.own_file or is_strict(dotted):
            if not self.lenient:
                raise ConfigError(message)
            if message not in self.errors:
                self.errors.append(message)
            return default
        warning = f"{message} (skipped; the default is used)"
        if warning not in self.skipped:  # said once, however often the value is read
            from sessiontool import diag

            diag.warn(warning)
            self.skipped.append(warning)
        return default

    # -- session ---------------------------------------------------------------------------
    # Read for every key shown (thousands per `list`): computed once. The raw config never
    # changes after loading.
    @functools.cached_property
    def main_key(self) -> str:
        v = self.expect("session.mainKey", str, "a string", DEFAULT_MAIN_KEY)
        return v.strip() or DEFAULT_MAIN_KEY

    @functools.cached_property
    def scope(self) -> str:
        what = '"per-sender" or "global"'
        v = self.expect("session.scope", str, what, "per-sender")
        if v not in ("per-sender", "global"):
            v = self._bad_value("session.scope", what, v, "per-sender")
        return str(v)

    @property
    def max_ping_pong_turns(self) -> int:
        """OpenClaw takes 0 to 20 and plays at most 5."""
        return min(5, self._count("session.agentToAgent.maxPingPongTurns", 5, 20, low=0))

    @property
    def send_policy(self) -> dict[str, Any]:
        return dict(self.expect("session.sendPolicy", dict, "an object with rules and default", {}))

    # -- agents ----------------------------------------------------------------------------
    def agents(self) -> list[AgentConfig]:
        items = self.expect("agents.list", list, "an array of agents", [])
        out: list[AgentConfig] = []
        seen: set[str] = set()
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                self._bad_value(f"agents.list[{i}]", "an object", item, None)
                continue
            aid = _agent_id(item)
            if aid in seen:  # a duplicate: warned once when loaded (duplicate_agents)
                continue
            seen.add(aid)
            out.append(self._agent_from(item, aid, f"agents.list[{i}]"))
        return out

    def _agent_from(self, item: Mapping[str, Any], aid: str, where: str) -> AgentConfig:
        primary, fallbacks = model_primary(item.get("model"))
        runner = self._runner(item.get("runner"), f"{where}.runner")
        sub = item.get("subagents") if isinstance(item.get("subagents"), dict) else {}
        allow = sub.get("allowAgents") if isinstance(sub, dict) else None
        allow_t = tuple(str(a) for a in allow) if isinstance(allow, list) else None
        sub_model, _ = model_primary(sub.get("model") if isinstance(sub, dict) else None)
        sandbox = item.get("sandbox")
        mode = sandbox.get("mode") if isinstance(sandbox, dict) else sandbox
        if mode is not None and not isinstance(mode, str):
            mode = repr(mode)  # none of the modes: read as `all` (sandbox_mode)
        name = item.get("name")
        return AgentConfig(
            id=aid,
            name=name if isinstance(name, str) else None,
            default=item.get("default") is True,
            model=primary,
            model_fallbacks=fallbacks,
            runner=runner,
            allow_agents=allow_t,
            subagent_model=sub_model,
            sandbox_mode=mode,
        )

    @property
    def default_agent_id(self) -> str:
        agents = self.agents()
        for a in agents:
            if a.default:
                return a.id
        return agents[0].id if agents else DEFAULT_AGENT_ID

    def agent(self, agent_id: str) -> AgentConfig:
        for a in self.agents():
            if a.id == agent_id:
                return a
        return AgentConfig(id=agent_id, configured=False)

    def known_agent_ids(self) -> list[str]:
        return [a.id for a in self.agents()] or [DEFAULT_AGENT_ID]

    @property
    def defaults_model(self) -> tuple[str | None, tuple[str, ...]]:
        return model_primary(self.get("agents.defaults.model"))

    @property
    def defaults_subagent_model(self) -> str | None:
        return model_primary(self.get("agents.defaults.subagents.model"))[0]

    def runner_for(self, agent_id: str) -> dict[str, Any]:
        a = self.agent(agent_id)
        if a.runner is not None:
            return dict(a.runner)
        default = self._runner(self.get("agents.defaults.runner"), "agents.defaults.runner")
        return dict(default) if default is not None else {"type": "echo"}

    def _runner(self, runner: Any, where: str) -> Mapping[str, Any] | None:
        """A runner object its table row accepts, else None (the bad value said)."""
        if runner is None:
            return None
        from sessiontool.state.config_keys import check_runner_object

        for at, what, value in check_runner_object(runner, where):
            return self._bad_value(at, what, value, None)  # type: ignore[no-any-return]
        return runner  # type: ignore[no-any-return]

    def sandbox_mode(self, agent_id: str) -> str:
        """off, non-main or all. A value that is none of them is refused when the config is
        loaded; where it is read anyway (doctor's lenient load) it is `all`, the strictest."""
        found = (
            self.agent(agent_id).sandbox_mode,
            _entry_sandbox_mode(self.raw, agent_id),
            self.get("agents.defaults.sandbox.mode"),
        )
        mode = next((m for m in found if m is not None), "off")
        return mode if mode in ("off", "all", "non-main") else "all"

    @property
    def sandbox_visibility(self) -> str:
        v = self.get("agents.defaults.sandbox.sessionToolsVisibility", "spawned")
        return v if v in ("spawned", "all") else "spawned"

    @property
    def archive_after_minutes(self) -> float:
        key, what = (
            "agents.defaults.subagents.archiveAfterMinutes",
            "a number of minutes, 0 or more",
        )
        v = self.expect(key, (int, float), what, 60)
        if v < 0:
            v = self._bad_value(key, what, v, 60)
        return float(v)

    # -- tools -----------------------------------------------------------------------------
    @property
    def a2a_enabled(self) -> bool:
        return self.get("tools.agentToAgent.enabled") is True

    @property
    def a2a_allow(self) -> list[str]:
        v = self.expect("tools.agentToAgent.allow", list, "an array of agent-id globs", [])
        return [str(x) for x in v]

    def a2a_allows(self, agent_id: str) -> bool:
        pats = self.a2a_allow
        if not pats:
            return True
        import fnmatch  # only agent-to-agent checks need it: kept off the start-up path

        return any(fnmatch.fnmatchcase(agent_id, p.strip().lower()) for p in pats)

    @property
    def subagent_tools_allow(self) -> list[str]:
        v = self.expect("tools.subagents.tools.allow", list, "an array of tool names", [])
        return [str(x) for x in v]

    # -- sessiontool's own -----------------------------------------------------------------
    @property
    def delivery_command(self) -> list[str] | None:
        key = "sessiontool.delivery.command"
        v = self.get(key)
        if v is None:
            return None
        if isinstance(v, str) and v.strip():
            import shlex

            try:
                return shlex.split(v)
            except ValueError as exc:  # an unbalanced quote
                return self._bad_value(key, f"a command that splits ({exc})", v, None)  # type: ignore[no-any-return]
        if isinstance(v, list) and v and all(isinstance(x, str) for x in v):
            return list(v)
        return self._bad_value(key, "a command as an array of strings", v, None)  # type: ignore[no-any-return]

    @property
    def max_tool_rounds(self) -> int:
        return self._count("sessiontool.maxToolRounds", 8, MAX_TOOL_ROUNDS)

    @property
    def max_concurrent_runs(self) -> int:
        """How many runs' agents may run at once across all sessions (more wait their turn)."""
        return self._count("sessiontool.maxConcurrentRuns", 8, MAX_CONCURRENT_RUNS)

    def _count(self, dotted: str, default: int, most: int, *, low: int = 1) -> int:
        """A whole number from `low` to `most`: `-3` or `0` is as wrong as `"eight"` (exit 2
        naming the file and the key), never quietly taken as 1."""
        what = f"a whole number from {low} to {most}"
        v = self.expect(dotted, int, what, default)
        if not low <= v <= most:
            return int(self._bad_value(dotted, what, v, default))
        return int(v)

    budgets = property(_budgets)  # sessiontool.budgets (budget_config.py)

    @property
    def providers(self) -> dict[str, Any]:
        v = self.get("models.providers", {})
        return v if isinstance(v, dict) else {}


def spawn_allowlist(cfg: Config, agent_id: str) -> tuple[str, ...] | None:
    """The agent ids `spawn --agent-id` may name for this agent (None: only itself):
    `agents.list[]`'s, else OpenClaw 2026.9's `agents.entries.<id>.subagents.allowAgents`, else
    `agents.defaults.subagents.allowAgents`, as OpenClaw reads them."""
    found = (
        cfg.agent(agent_id).allow_agents,
        _entry_value(cfg.raw, agent_id, "subagents", "allowAgents"),
        cfg.get("agents.defaults.subagents.allowAgents"),
    )
    allow = next((a for a in found if a is not None), None)
    return tuple(str(a) for a in allow) if isinstance(allow, list | tuple) else None


def _entry_sandbox_mode(raw: Mapping[str, Any], agent_id: str) -> Any:
    """OpenClaw 2026.9's per-agent override, `agents.entries.<id>.sandbox.mode` (its object key
    is the agent's id): a limit set there holds here too (`sandbox: "all"` is the mode)."""
    sandbox = _entry_value(raw, agent_id, "sandbox")
    return sandbox.get("mode") if isinstance(sandbox, dict) else sandbox


def _entry_value(raw: Mapping[str, Any], agent_id: str, *path: str) -> Any:
    """`agents.entries.<id>.<path>` of OpenClaw 2026.9's keyed roster (the object key is the
    agent's id, normalised), or None."""
    agents = raw.get("agents")
    entries = agents.get("entries") if isinstance(agents, dict) else None
    for key, entry in entries.items() if isinstance(entries, dict) else ():
        if normalize_agent_id(str(key)) == agent_id and isinstance(entry, dict):
            value: Any = entry
            for name in path:
                value = value.get(name) if isinstance(value, dict) else None
            return value
    return None


def load_config(
    paths: StatePaths,
    explicit: str | None = None,
    *,
    gateway: tuple[Path, dict[str, Any]] | None = None,
    lenient: bool = False,
) -> Config:
    """OpenClaw's config (if any) under sessiontool's (`--config` > SESSIONTOOL_CONFIG >
    <state>/sessiontool.json5). OpenClaw's file is only read, and only for shared keys. With a
    remote gateway, `gateway` is its config as its `config.get` returns it (where it lives there,
    and its parsed content), in place of a local OpenClaw file. `lenient` (doctor): nothing is
    refused, what would be is in `errors` (a file that does not parse contributes nothing)."""
    errors: list[str] = []

    def read(path: Path) -> dict[str, Any]:
        try:
            return config_files.load_file(path)
        except ConfigError as exc:
            if not lenient:
                raise
            errors.append(exc.message)
            return {}

    layers: list[tuple[Path, dict[str, Any]]] = []
    oc = paths.openclaw_config() if gateway is None else None
    base = gateway if gateway is not None else (oc, read(oc)) if oc is not None else None
    if base is not None:
        layers.append((base[0], {k: base[1][k] for k in SHARED_TOP_KEYS if k in base[1]}))
    own = _own_path(paths, explicit)
    warnings: list[str] = []
    if own is not None:
        layer = read(own)
        warnings += [f"{own}: {w}" for w in config_files.unknown_keys(layer)]
        warnings += [f"{own}: {w}" for w in config_files.own_key_typos(layer)]
        layers.append((own, {k: v for k, v in layer.items() if k in OWN_TOP_KEYS}))
    merged: dict[str, Any] = {}
    for path, layer in layers:
        merged = config_files.merge(merged, layer) if merged else layer
        warnings += [f"{path}: {w}" for w in config_files.duplicate_agents(layer)]
    files = [p for p, _ in layers if p in (own, oc)]
    cfg = Config(raw=merged, files=files, warnings=warnings, own_file=own, layers=layers)
    cfg.lenient = lenient
    cfg.errors.extend(errors)
    _check(cfg)
    return cfg


def _own_path(paths: StatePaths, explicit: str | None) -> Path | None:
    if explicit:
        return Path(explicit).expanduser()
    if os.environ.get("SESSIONTOOL_CONFIG"):
        return Path(os.environ["SESSIONTOOL_CONFIG"]).expanduser()
    return paths.own_config_default if paths.own_config_default.is_file() else None


def _check(cfg: Config) -> None:
    """Every value of the config table (config_keys.py), checked now: a wrong one in
    sessiontool's file (or a safety limit's in any) fails every command at once with exit 2,
    before any run starts, not later in the background worker where nobody sees it; OpenClaw's
    file gets one warning per value. Then what every command reads, the agents first."""
    from sessiontool.state.config_keys import check_all

    for at, what, value in check_all(cfg.raw):
        cfg._bad_value(at, what, value, None)
    cfg.agents()
    _ = cfg.main_key, cfg.scope, cfg.max_ping_pong_turns
    _ = cfg.max_tool_rounds, cfg.max_concurrent_runs, cfg.delivery_command, cfg.budgets


def check_runner(runner: Any, where: str, name: Callable[[str], str]) -> None:
    """Refuse (exit 2) a runner object sessiontool cannot run; `name` words a key for the
    message (`<file>: <key>`, the file that set it). The types and their checks are one table
    (`runnertable.py`), read only when a config names a runner."""
    from sessiontool.state.config_keys import check_runner_object, shown

    for at, what, value in check_runner_object(runner, where):
        got = "" if value is None else f", got {shown(value)}"
        raise ConfigError(f"{name(at)}: expected {what}{got}")
