"""Configuration: OpenClaw's own config (read-only, shared keys) overlaid by sessiontool's, both
JSON5. Defaults live here, and every error names the file, the key and what was expected."""

from __future__ import annotations

import functools
import math
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sessiontool.errors import ConfigError
from sessiontool.state.jsonio import loads_tolerant
from sessiontool.state.keys import DEFAULT_AGENT_ID, DEFAULT_MAIN_KEY, normalize_agent_id
from sessiontool.state.paths import StatePaths
from sessiontool.structs import Value

if TYPE_CHECKING:
    from sessiontool.state.budget_config import Budget

SHARED_TOP_KEYS = ("session", "agents", "tools", "models")
OWN_TOP_KEYS = frozenset({*SHARED_TOP_KEYS, "sessiontool", "$schema"})
OWN_SECTION_KEYS = frozenset({"delivery", "maxToolRounds", "maxConcurrentRuns", "budgets"})
MAX_CONCURRENT_RUNS = 1024  # a waiting worker holds one open file per slot
# Values read only by some commands or only by the worker: (key, the Config property reading it)
CHECKED_ON_LOAD = (
    ("session.sendPolicy", "send_policy"),
    ("agents.defaults.subagents.archiveAfterMinutes", "archive_after_minutes"),
    ("tools.agentToAgent.allow", "a2a_allow"),
    ("tools.subagents.tools.allow", "subagent_tools_allow"),
)
MAX_TOOL_ROUNDS = 1000


def _merge(base: Any, over: Any, path: str = "") -> Any:
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, v in over.items():
            out[k] = _merge(base.get(k), v, f"{path}.{k}" if path else k) if k in base else v
        return out
    if path == "agents.list" and isinstance(base, list) and isinstance(over, list):
        return _merge_agent_list(base, over)
    return over


def _merge_agent_list(base: list[Any], over: list[Any]) -> list[Any]:
    """Entries merge by agent id; new ids are appended."""
    out = [dict(a) if isinstance(a, dict) else a for a in base]
    index = {normalize_agent_id(a.get("id")): i for i, a in enumerate(out) if isinstance(a, dict)}
    for item in over:
        if not isinstance(item, dict):
            out.append(item)
            continue
        aid = normalize_agent_id(item.get("id"))
        if aid in index:
            out[index[aid]] = _merge(out[index[aid]], item, "agents.list[]")
        else:
            index[aid] = len(out)
            out.append(item)
    return out


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


def _load_file(path: Path) -> dict[str, Any]:
    try:
        data = path.read_bytes()
    except FileNotFoundError as exc:
        raise ConfigError(f"config file not found: {path}") from exc
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
    if not data.strip():
        return {}
    try:
        parsed = loads_tolerant(data)
    except (ValueError, RecursionError) as exc:
        raise ConfigError(
            f"config file {path} is not valid JSON5: {_json5_error(data, exc)}"
        ) from exc
    if not isinstance(parsed, dict):
        raise ConfigError(f"config file {path}: expected an object at the top level")
    return parsed


def _json5_error(data: bytes, exc: BaseException) -> str:
    """Where a config file stops being JSON5. The fast path's error is the strict JSON
    parser's (it fails at the first comment or unquoted key, usually line 1), so the file is
    parsed again with json5 alone to name the real line and column."""
    try:
        import json5

        json5.loads(data.decode("utf-8", errors="replace"))
    except RecursionError:
        return "nested too deeply"
    except ValueError as j5:
        text = str(j5)
        m = re.match(r"^<string>:(\d+) (.*) at column (\d+)$", text)
        if m:
            return f"line {m.group(1)} column {m.group(3)}: {m.group(2)}"
        return text.removeprefix("<string>:")
    except Exception:  # noqa: BLE001 - json5 failing in another way: keep the first error
        pass
    return str(exc)


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


class Config(Value):
    # `__dict__` holds the cached properties (main_key, scope).
    __slots__ = ("raw", "files", "warnings", "skipped", "own_file", "layers", "__dict__")

    raw: dict[str, Any]
    files: list[Path]
    warnings: list[str]
    skipped: list[str]  # bad values of OpenClaw's file, ignored
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
        """A value of the wrong type: exit 2 when sessiontool's own file set it (the user can
        fix it); skipped with one warning when OpenClaw's file did (sessiontool only reads it,
        and one odd value there must not stop every command). `doctor` reports both."""
        message = f"{self._where(dotted)}: expected {what}, got {value!r}"
        setter = next((p for p, layer in reversed(self.layers) if _has_path(layer, dotted)), None)
        if setter is None or setter == self.own_file:
            raise ConfigError(message)
        from sessiontool import diag

        warning = f"{message} (skipped; the default is used)"
        diag.warn(warning)
        if warning not in self.skipped:
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
        return str(self.expect("session.scope", str, '"per-sender" or "global"', "per-sender"))

    @property
    def max_ping_pong_turns(self) -> int:
        v = self.expect("session.agentToAgent.maxPingPongTurns", (int, float), "a number", 5)
        return max(0, min(5, int(v)))

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
                raise ConfigError(f"{self._where(f'agents.list[{i}]')}: expected an object")
            aid = normalize_agent_id(item.get("id") if isinstance(item.get("id"), str) else None)
            if aid in seen:
                continue
            seen.add(aid)
            out.append(self._agent_from(item, aid, f"agents.list[{i}]"))
        return out

    def _agent_from(self, item: Mapping[str, Any], aid: str, where: str) -> AgentConfig:
        primary, fallbacks = model_primary(item.get("model"))
        runner = item.get("runner")
        if runner is not None:
            check_runner(runner, f"{where}.runner", self._where)
        sub = item.get("subagents") if isinstance(item.get("subagents"), dict) else {}
        allow = sub.get("allowAgents") if isinstance(sub, dict) else None
        allow_t = tuple(str(a) for a in allow) if isinstance(allow, list) else None
        sub_model, _ = model_primary(sub.get("model") if isinstance(sub, dict) else None)
        sandbox = item.get("sandbox")
        mode = sandbox.get("mode") if isinstance(sandbox, dict) else None
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
            sandbox_mode=mode if isinstance(mode, str) else None,
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
        default = self.get("agents.defaults.runner")
        if default is not None:
            check_runner(default, "agents.defaults.runner", self._where)
            return dict(default)
        return {"type": "echo"}

    def sandbox_mode(self, agent_id: str) -> str:
        mode = self.agent(agent_id).sandbox_mode
        if mode is None:
            mode = self.get("agents.defaults.sandbox.mode")
        return mode if mode in ("off", "all", "non-main") else "off"

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
        v = self.get("sessiontool.delivery.command")
        if v is None:
            return None
        if isinstance(v, str) and v.strip():
            import shlex

            try:
                return shlex.split(v)
            except ValueError as exc:  # an unbalanced quote
                raise ConfigError(
                    f"{self._where('sessiontool.delivery.command')}: cannot split {v!r}: {exc}"
                ) from None
        if isinstance(v, list) and v and all(isinstance(x, str) for x in v):
            return list(v)
        raise ConfigError(
            f"{self._where('sessiontool.delivery.command')}: expected a command as an array of strings"
        )

    @property
    def max_tool_rounds(self) -> int:
        return self._count("sessiontool.maxToolRounds", 8, MAX_TOOL_ROUNDS)

    @property
    def max_concurrent_runs(self) -> int:
        """How many runs' agents may run at once across all sessions (more wait their turn)."""
        return self._count("sessiontool.maxConcurrentRuns", 8, MAX_CONCURRENT_RUNS)

    def _count(self, dotted: str, default: int, most: int) -> int:
        """A whole number from 1 to `most`: `-3` or `0` is as wrong as `"eight"` (exit 2 naming
        the file and the key), never quietly taken as 1."""
        what = f"a whole number from 1 to {most}"
        v = self.expect(dotted, int, what, default)
        if not 1 <= v <= most:
            return int(self._bad_value(dotted, what, v, default))
        return int(v)

    @property
    def budgets(self) -> tuple[Budget, ...]:
        if self.get("sessiontool.budgets") is None:
            return ()  # the common case: no import, no parsing
        from sessiontool.state.budget_config import parse_budgets

        return parse_budgets(self.get("sessiontool.budgets"), self._where("sessiontool.budgets"))

    @property
    def providers(self) -> dict[str, Any]:
        v = self.get("models.providers", {})
        return v if isinstance(v, dict) else {}


def load_config(
    paths: StatePaths,
    explicit: str | None = None,
    *,
    gateway: tuple[Path, dict[str, Any]] | None = None,
) -> Config:
    """OpenClaw's config (if any) under sessiontool's (`--config` > SESSIONTOOL_CONFIG >
    <state>/sessiontool.json5). OpenClaw's file is only read, and only for shared keys. With a
    remote gateway, `gateway` is its config as its `config.get` returns it (where it lives there,
    and its parsed content), in place of a local OpenClaw file."""
    merged: dict[str, Any] = {}
    files: list[Path] = []
    layers: list[tuple[Path, dict[str, Any]]] = []
    warnings: list[str] = []
    oc = paths.openclaw_config() if gateway is None else None
    if gateway is not None:
        merged = {k: gateway[1][k] for k in SHARED_TOP_KEYS if k in gateway[1]}
        layers.append((gateway[0], merged))
    if oc is not None:
        base = _load_file(oc)
        merged = {k: base[k] for k in SHARED_TOP_KEYS if k in base}
        files.append(oc)
        layers.append((oc, merged))
    own: Path | None = None
    if explicit:
        own = Path(explicit).expanduser()
    elif os.environ.get("SESSIONTOOL_CONFIG"):
        own = Path(os.environ["SESSIONTOOL_CONFIG"]).expanduser()
    elif paths.own_config_default.is_file():
        own = paths.own_config_default
    if own is not None:
        layer = _load_file(own)
        for k in layer:
            if k not in OWN_TOP_KEYS:
                warnings.append(f"{own}: unknown config key {k!r} (ignored)")
        section = layer.get("sessiontool")
        if isinstance(section, dict):
            for k in section:
                if k not in OWN_SECTION_KEYS:
                    warnings.append(f"{own}: unknown config key 'sessiontool.{k}' (ignored)")
        warnings += [f"{own}: {w}" for w in _own_key_typos(layer)]
        own_layer = {k: v for k, v in layer.items() if k in OWN_TOP_KEYS}
        merged = _merge(merged, own_layer)
        files.append(own)
        layers.append((own, own_layer))
    cfg = Config(raw=merged, files=files, warnings=warnings, own_file=own, layers=layers)
    # Validate eagerly what every command depends on, so a bad file fails at once with exit 2.
    cfg.agents()
    _ = cfg.main_key, cfg.scope, cfg.max_ping_pong_turns
    # sessiontool's own settings, read by the background worker: refused here, by the command
    # that starts it, not found wrong (and ignored) later where nobody sees it. So is what the
    # user's own file sets of the values read only now and then (a worker's tool call, the
    # archive sweep); OpenClaw's file is still read value by value (a bad one: a warning then).
    _ = cfg.max_tool_rounds, cfg.max_concurrent_runs, cfg.delivery_command, cfg.budgets
    _check_own(cfg)
    if cfg.get("agents.defaults.runner") is not None:
        check_runner(cfg.get("agents.defaults.runner"), "agents.defaults.runner", cfg._where)
    return cfg


# sessiontool's own keys inside OpenClaw's sections. The sections hold OpenClaw's keys too, which
# sessiontool does not all know, so a key there is reported only when it is a near miss of one
# of these (`runer`): a typo must not quietly leave the demo agent answering.
OWN_NESTED_KEYS = ("runner",)


def _own_key_typos(layer: Mapping[str, Any]) -> list[str]:
    import difflib

    agents = layer.get("agents")
    if not isinstance(agents, dict):
        return []
    sections: list[tuple[str, Any]] = [("agents.defaults", agents.get("defaults"))]
    items = agents.get("list")
    if isinstance(items, list):
        sections += [(f"agents.list[{i}]", item) for i, item in enumerate(items)]
    out = []
    for where, section in sections:
        if not isinstance(section, dict):
            continue
        for k in section:
            if not isinstance(k, str) or k in OWN_NESTED_KEYS:
                continue
            close = difflib.get_close_matches(k.lower(), OWN_NESTED_KEYS, n=1, cutoff=0.75)
            if close:
                out.append(
                    f"unknown config key '{where}.{k}' (ignored): did you mean '{close[0]}'?"
                )
    return out


def _check_own(cfg: Config) -> None:
    """Read each CHECKED_ON_LOAD value the user's own file sets (a wrong one: exit 2 now)."""
    own_layer = next((layer for path, layer in cfg.layers if path == cfg.own_file), {})
    for key, name in CHECKED_ON_LOAD:
        if cfg.own_file is not None and _has_path(own_layer, key):
            getattr(cfg, name)


def check_runner(runner: Any, where: str, name: Callable[[str], str]) -> None:
    """Refuse (exit 2) a runner object sessiontool cannot run; `name` words a key for the
    message (`<file>: <key>`, the file that set it). The types and their checks are one table
    (`runnertable.py`), read only when a config names a runner."""
    from sessiontool.state.runnertable import RUNNERS, expected_types

    if not isinstance(runner, dict):
        raise ConfigError(f'{name(where)}: expected an object like {{"type": "echo"}}')
    rtype = runner.get("type", "echo")
    row = RUNNERS.get(rtype) if isinstance(rtype, str) else None
    if row is None:
        raise ConfigError(
            f"{name(where + '.type')}: expected one of {expected_types()}, got {rtype!r}"
        )
    check = row[2]
    if check is not None:
        check(runner, where, name)
