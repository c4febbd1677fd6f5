"""Every config key sessiontool reads, one row each (pre-commit's `all_languages.py`): where it
is, what it must hold (a JSON Schema fragment, and the words an error says), its default and
what it means. One table for all the uses: the check of every value when a config is loaded
(`check_all`, before any run starts, and `doctor`), the JSON Schema of `sessiontool config
schema` (config_schema.py) and the key table of docs/reference.md (a test holds them equal).

A path is dotted; `[]` stands for every item of an array, `*` for every key of an object. The
objects on the way to a key (`agents`, `agents.list[]`, ...) are checked to be objects (or
arrays) too. The runner objects' own keys are the rows of `runnertable.py` (`runner` kind).

A `strict` key is refused from every file, OpenClaw's included: a safety limit, where a wrong
value would widen what a session may see or do (`sandbox.mode: "everything"` read as `off`;
wherever one is read anyway, doctor's lenient load, the strictest reading is taken), and a
runner (skipped, the demo agent would answer in its place)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

Schema = dict[str, Any]

MAX_TOOL_ROUNDS = 1000
MAX_CONCURRENT_RUNS = 1024  # a waiting worker holds one open file per slot


@dataclass(frozen=True)
class Key:
    path: str
    schema: Schema
    what: str  # what an error says was expected: "a whole number from 1 to 1000"
    doc: str
    default: str = "—"  # as the docs show it
    strict: bool = False
    ours: bool = False  # sessiontool's own key (else one of OpenClaw's, read only)
    extra: Schema = field(default_factory=dict)  # schema words for the JSON Schema alone


STRING: Schema = {"type": "string"}
NAMES: Schema = {"type": "array", "items": {"type": "string"}}
MODEL: Schema = {
    "anyOf": [
        {"type": "string"},
        {
            "type": "object",
            "properties": {"primary": {"type": "string"}, "fallbacks": NAMES},
        },
    ]
}
MODEL_WHAT = 'a model name, or {"primary": NAME, "fallbacks": [NAME, ...]}'
COMMAND: Schema = {
    "anyOf": [
        {"type": "string", "minLength": 1, "pattern": r"\S"},
        {"type": "array", "items": {"type": "string"}, "minItems": 1},
    ]
}
ENV: Schema = {
    "anyOf": [
        {"type": "array", "items": {"type": "string", "minLength": 1}},
        {"type": "object"},
    ]
}
ENV_WHAT = (
    'an array of variable names (globs allowed), e.g. ["OPENAI_API_KEY", "LLM_*"], '
    "or an object of variables to set"
)
BOOL: Schema = {"type": "boolean"}
NONEMPTY: Schema = {"type": "string", "pattern": r"\S"}
ALLOW_DENY: Schema = {"enum": ["allow", "deny"]}


def _count(low: int, high: int) -> Schema:
    return {"type": "integer", "minimum": low, "maximum": high}


KEYS: tuple[Key, ...] = (
    Key("$schema", STRING, "a string", "the JSON Schema this file follows (editors read it)", ours=True),
    # -- agents ------------------------------------------------------------------------------
    Key("agents.list", {"type": "array"}, "an array of agents", "the agents, merged by `id` across the two files", default="`[]` (agent `main`)"),
    Key("agents.list[]", {"type": "object"}, "an object", "one agent: `{id, name?, default?, model?, runner?, sandbox?: {mode}, subagents?: {allowAgents?, model?}}`; a second entry with the same id is ignored (a warning names both)"),
    Key("agents.list[].id", STRING, "a string", "the agent's id (lower-cased; `main` when unset)"),
    Key("agents.list[].name", STRING, "a string", "the agent's display name"),
    Key("agents.list[].default", BOOL, "true or false", "the default agent (else the first)"),
    Key("agents.list[].model", MODEL, MODEL_WHAT, "the agent's model"),
    Key("agents.list[].runner", {"type": "object"}, "runner", "who answers for this agent (see [Runners](#runners))", strict=True),
    Key("agents.list[].sandbox.mode", {"enum": ["off", "non-main", "all"]}, '"off", "non-main" or "all"', "this agent's sandbox mode", strict=True),
    Key("agents.list[].subagents.allowAgents", NAMES, "an array of agent ids", "agent ids `spawn --agent-id` may use; `[\"*\"]` = any", default="only itself", strict=True),
    Key("agents.list[].subagents.model", MODEL, MODEL_WHAT, "model for this agent's sub-agent runs"),
    Key("agents.entries.*.subagents.allowAgents", NAMES, "an array of agent ids", "OpenClaw 2026.9's per-agent allowlist of `spawn --agent-id` (the object key is the agent's id), read when `agents.list` sets none; `[\"*\"]` = any", default="only itself", strict=True),
    Key("agents.entries.*.sandbox.mode", {"enum": ["off", "non-main", "all"]}, '"off", "non-main" or "all"', "OpenClaw 2026.9's per-agent override (the object key is the agent's id), read when `agents.list` sets none", strict=True),
    Key("agents.defaults.model", MODEL, MODEL_WHAT, "model name, or `{primary, fallbacks}`"),
    Key("agents.defaults.models", {"type": "object", "additionalProperties": {"type": "object"}}, "an object of models", "OpenClaw's model catalog, `{\"<provider/model>\": {alias?}}`: its keys are models `spawn --model` and `session --model` may name"),
    Key("agents.defaults.runner", {"type": "object"}, "runner", "who answers (see [Runners](#runners)); per agent: `agents.list[].runner`", default='`{"type":"echo"}`', strict=True),
    Key("agents.defaults.sandbox.mode", {"enum": ["off", "non-main", "all"]}, '"off", "non-main" or "all"', "`off`, `all`, or `non-main` (sandbox every session but the agent's main)", default="`off`", strict=True),
    Key("agents.defaults.sandbox.sessionToolsVisibility", {"enum": ["spawned", "all"]}, '"spawned" or "all"', "a sandboxed session sees only sessions it spawned; `all` lifts it", default="`spawned`", strict=True),
    Key("agents.defaults.subagents.allowAgents", NAMES, "an array of agent ids", "every agent's allowlist of `spawn --agent-id` when its own (`agents.list[]`, `agents.entries.<id>`) sets none", default="only itself", strict=True),
    Key("agents.defaults.subagents.model", MODEL, MODEL_WHAT, "model for sub-agent runs"),
    Key("agents.defaults.subagents.archiveAfterMinutes", {"type": "number", "minimum": 0}, "a number of minutes, 0 or more", "archive sessiontool's finished sub-agents after this (0 = never); a `spawn --mode session` child is never archived", default="`60`"),
    Key("agents.defaults.subagents.maxSpawnDepth", _count(1, 5), "a whole number from 1 to 5", "how deep sub-agents nest: a requester at depth D (its entry's `spawnDepth`) spawns only while D < this; past it exit 4, `sessions_spawn is not allowed at this depth (current depth: D, max: M; agents.defaults.subagents.maxSpawnDepth).`", default="`1` (OpenClaw's store: `5`)", strict=True),
    # -- session -----------------------------------------------------------------------------
    Key("session.mainKey", STRING, "a string", "the main direct-chat key of each agent", default="`main`"),
    Key("session.scope", {"enum": ["per-sender", "global"]}, '"per-sender" or "global"', "`global` makes the main session the literal key `global`", default="`per-sender`"),
    Key("session.agentToAgent.maxPingPongTurns", _count(0, 20), "a whole number from 0 to 20", "reply-back turns after an agent-to-agent send (more than 5 is taken as 5)", default="`5`"),
    Key("session.sendPolicy", {"type": "object"}, "an object with rules and default", "`{\"rules\":[{\"match\":{\"channel\"?,\"chatType\"?,\"keyPrefix\"?},\"action\":\"allow\\|deny\"}],\"default\":\"allow\\|deny\"}`", default="allow", strict=True),
    Key("session.sendPolicy.default", ALLOW_DENY, '"allow" or "deny"', "what no rule decides", default="`allow`", strict=True),
    Key("session.sendPolicy.rules", {"type": "array"}, "an array of rules", "the first matching deny rule wins, else any matching allow", strict=True),
    Key("session.sendPolicy.rules[]", {"type": "object"}, "an object with match and action", "one rule", strict=True),
    Key("session.sendPolicy.rules[].action", ALLOW_DENY, '"allow" or "deny"', "what the rule decides", strict=True),
    Key("session.sendPolicy.rules[].match", {"type": "object"}, "an object", "what the rule matches (every key given must match)", strict=True),
    Key("session.sendPolicy.rules[].match.channel", STRING, "a string", "the session's channel", strict=True),
    Key("session.sendPolicy.rules[].match.chatType", {"enum": ["direct", "group", "channel"]}, '"direct", "group" or "channel"', "the session's chat type", strict=True),
    Key("session.sendPolicy.rules[].match.keyPrefix", STRING, "a string", "a prefix of the key, with or without its `agent:<id>:`", strict=True),
    Key("session.sendPolicy.rules[].match.rawKeyPrefix", STRING, "a string", "a prefix of the full key (`agent:<id>:...`), as OpenClaw matches it", strict=True),
    # -- tools -------------------------------------------------------------------------------
    Key("tools.agentToAgent.enabled", BOOL, "true or false", "sessions may reach other agents' sessions", default="`false`", strict=True),
    Key("tools.agentToAgent.allow", NAMES, "an array of agent-id globs", "agent-id globs allowed on both ends", default="all", strict=True),
    Key("tools.subagents.tools.allow", NAMES, "an array of tool names", "session tools a sub-agent may use (`sessions_list`, `sessions_history`, `sessions_search`, `sessions_send`, `agents_list`, `subagents`, `sessions_yield`)", default="none", strict=True),
    Key("tools.sessions_spawn.attachments.enabled", BOOL, "true or false", "a session requester (an agent's tool call) may send `attachments`; the operator always may", default="`false`"),
    Key("tools.sessions_spawn.attachments.maxFiles", _count(0, 1_000_000), "a whole number, 0 or more", "OpenClaw's limit on the files of a spawn's attachments (`attachments_file_count_exceeded`)", default="`50`"),
    Key("tools.sessions_spawn.attachments.maxFileBytes", _count(0, 2**53), "a whole number of bytes, 0 or more", "OpenClaw's limit on one attachment's decoded bytes", default="1 MiB"),
    Key("tools.sessions_spawn.attachments.maxTotalBytes", _count(0, 2**53), "a whole number of bytes, 0 or more", "OpenClaw's limit on all of a spawn's attachments' decoded bytes", default="5 MiB"),
    # -- models ------------------------------------------------------------------------------
    Key("models.providers", {"type": "object"}, "an object of providers", "the model providers, by name"),
    Key("models.providers.*", {"type": "object"}, "an object", "one provider"),
    Key("models.providers.*.models", {"type": "array"}, "an array of models", "its models"),
    Key("models.providers.*.models[]", {"type": "object"}, "an object", "`{id, cost: {input, output}}` (per million tokens) for `est $` in announce stats"),
    Key("models.providers.*.models[].id", STRING, "a string", "the model's id"),
    Key("models.providers.*.models[].cost.input", {"type": "number", "minimum": 0}, "a price, 0 or more", "dollars per million input tokens"),
    Key("models.providers.*.models[].cost.output", {"type": "number", "minimum": 0}, "a price, 0 or more", "dollars per million output tokens"),
    # -- sessiontool's own -------------------------------------------------------------------
    Key("sessiontool.delivery.command", COMMAND, "a command as an array of strings", "a program that receives each delivery record as JSON on stdin (exit 0 = delivered); without one a delivery is only recorded in the outbox, status `outbox` (for a bridge that follows `deliveries`), never `delivered`", ours=True),
    Key("sessiontool.delivery.env", ENV, ENV_WHAT, "environment variables the delivery command may see (names or globs), or an object of variables to set", default="the basics", ours=True),
    Key("sessiontool.delivery.passEnv", BOOL, "true or false", "pass the whole environment to the delivery command", default="`false`", ours=True),
    Key("sessiontool.maxToolRounds", _count(1, MAX_TOOL_ROUNDS), f"a whole number from 1 to {MAX_TOOL_ROUNDS}", "tool-calling rounds of the `llm` and `openai` runners before a run stops", default="`8`", ours=True),
    Key("sessiontool.maxConcurrentRuns", _count(1, MAX_CONCURRENT_RUNS), f"a whole number from 1 to {MAX_CONCURRENT_RUNS}", "runs whose agents run at once across all sessions; more wait their turn", default="`8`", ours=True),
    # sessiontool.budgets: budget_config.py parses it (and says a missing window or limit, an
    # unknown key, a name twice); these rows word each value as its errors do.
    Key("sessiontool.budgets", {"type": "array"}, "a list of budgets", "`[{window: day\\|session\\|run, limit: USD, agent?, model?, name?}]`: refuse a run whose budget is spent (exit 6), stop one that crosses it ([budgets.md](budgets.md))", default="none", ours=True),
    Key("sessiontool.budgets[]", {"type": "object"}, "an object", "one budget (no other keys; `window` and `limit` required; a name said twice is refused)", ours=True, extra={"required": ["window", "limit"], "additionalProperties": False}),
    Key("sessiontool.budgets[].window", {"enum": ["day", "session", "run"]}, "one of day, session, run", "a UTC day, a session's life, or one run", ours=True),
    Key("sessiontool.budgets[].limit", {"type": "number", "minimum": 0}, "a non-negative amount in USD", "the most spent in the window, in the price table's USD", ours=True),
    Key("sessiontool.budgets[].agent", NONEMPTY, "a non-empty string", "only this agent's runs (and spend)", default="every agent", ours=True),
    Key("sessiontool.budgets[].model", NONEMPTY, "a non-empty string", "only this model's runs (`gpt-4o` matches `openai/gpt-4o`)", default="every model", ours=True),
    Key("sessiontool.budgets[].name", NONEMPTY, "a non-empty string", "the budget's name in errors and reports", default="window, agent and model", ours=True),
)  # fmt: skip

# The sections whose every key sessiontool knows (an unknown one there is a warning); the
# others are OpenClaw's, which holds keys sessiontool never reads.
CLOSED = ("", "sessiontool", "sessiontool.delivery")

BY_PATH = {k.path: k for k in KEYS}


def children(section: str) -> set[str]:
    """The keys the table knows directly under `section` ("" for the top level)."""
    head = section + "." if section else ""
    return {k.path[len(head) :].split(".")[0] for k in KEYS if k.path.startswith(head)}


def containers() -> dict[str, str]:
    """Every path on the way to a key → "object" or "array" (not a row of its own)."""
    out: dict[str, str] = {}
    for k in KEYS:
        parts = k.path.split(".")
        for n in range(1, len(parts)):
            head = ".".join(parts[:n])
            name = parts[n - 1]
            if name.endswith("[]"):
                out.setdefault(head[:-2], "array")
            out.setdefault(head, "object")
        if k.path.endswith("[]"):
            out.setdefault(k.path[:-2], "array")
    return {p: kind for p, kind in out.items() if p not in BY_PATH}


# -- values ----------------------------------------------------------------------------------


def values_at(node: Any, path: str, where: str = "") -> Iterator[tuple[str, Any]]:
    """(concrete dotted path, value) for every value `path` names in `node` (`[]` → `[0]`,
    `[1]`, ...; `*` → each key). Where something on the way is not an object or an array
    nothing is yielded: the container's own row reports it."""
    head, _, rest = path.partition(".")
    name, items = (head[:-2], True) if head.endswith("[]") else (head, False)
    if name == "*":
        children = list(node.items()) if isinstance(node, dict) else []
    else:
        children = [(name, node[name])] if isinstance(node, dict) and name in node else []
    for key, value in children:
        here = f"{where}.{key}" if where else str(key)
        if not items:
            pairs: list[tuple[str, Any]] = [(here, value)]
        elif isinstance(value, list):
            pairs = [(f"{here}[{i}]", v) for i, v in enumerate(value)]
        else:
            continue
        for at, v in pairs:
            if rest:
                yield from values_at(v, rest, at)
            else:
                yield at, v


def _is_number(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and (not isinstance(value, float) or math.isfinite(value))
    )


_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": _is_number,
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
}


def conforms(schema: Schema, value: Any) -> bool:
    """Whether `value` holds to `schema`, read as the JSON Schema words the table uses: type,
    enum, const, minimum, maximum, exclusiveMinimum, minLength, pattern, minItems, items,
    additionalProperties (a schema) and anyOf."""
    if "anyOf" in schema:
        return any(conforms(s, value) for s in schema["anyOf"])
    if "enum" in schema and value not in schema["enum"]:
        return False
    if "const" in schema and value != schema["const"]:
        return False
    kind = schema.get("type")
    if kind is not None and not _TYPES[kind](value):
        return False
    return _bounds(schema, value) and _parts(schema, value)


def _bounds(schema: Schema, value: Any) -> bool:
    if _is_number(value):
        if "minimum" in schema and value < schema["minimum"]:
            return False
        if "maximum" in schema and value > schema["maximum"]:
            return False
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            return False
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            return False
        if "pattern" in schema and not re.search(schema["pattern"], value):
            return False
    return True


def _parts(schema: Schema, value: Any) -> bool:
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            return False
        items = schema.get("items")
        if items is not None and not all(conforms(items, v) for v in value):
            return False
    extra = schema.get("additionalProperties")
    if isinstance(value, dict) and isinstance(extra, dict):
        return all(conforms(extra, v) for v in value.values())
    if isinstance(value, dict):
        props = schema.get("properties", {})
        return all(conforms(s, value[k]) for k, s in props.items() if k in value)
    return True


# (concrete path, what was expected, the value) of one wrong value
Wrong = tuple[str, str, Any]


def pattern_of(dotted: str) -> str:
    """The table's path for a concrete one: `agents.list[2].sandbox.mode` →
    `agents.list[].sandbox.mode` (a provider's name stays: see `is_strict`)."""
    return re.sub(r"\[\d+\]", "[]", dotted)


def is_strict(dotted: str) -> bool:
    """Whether a concrete path is a strict key, a key inside one (a runner's), or an object on
    the way to one (`*` in the table's path stands for any one key: `agents.entries.main`)."""
    p = pattern_of(dotted)
    for k in KEYS:
        if not k.strict:
            continue
        heads = _prefixes(k.path)
        if re.match(heads[-1] + r"(?:[.\[]|$)", p) or any(re.fullmatch(h, p) for h in heads):
            return True
    return False


def _prefixes(path: str) -> list[str]:
    """The table path and every object or array on the way to it, as regular expressions."""
    out = []
    for m in re.finditer(r"(?=\.)|(?=\[\])|$", path):
        head = path[: m.start()]
        if head:
            out.append(re.escape(head).replace(r"\*", r"[^.\[\]]+"))
    return out


def shown(value: Any) -> str:
    """A value as an error quotes it: its repr, cut at 80 characters."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def check_all(raw: dict[str, Any]) -> Iterator[Wrong]:
    """Every wrong value of a merged config, in the table's order: the containers on the way
    first (an `agents` that is no object), then each key, then the runners' own keys."""
    for path, kind in containers().items():
        for at, value in values_at(raw, path):
            if value is not None and not _TYPES[kind](value):
                yield at, "an object" if kind == "object" else "an array", value
    for k in KEYS:
        for at, value in values_at(raw, k.path):
            if value is None:  # JSON null: unset, as every reader takes it
                continue
            if k.what == "runner":
                yield from check_runner_object(value, at)
            elif not conforms(k.schema, value):
                yield at, k.what, value


def check_runner_object(runner: Any, where: str) -> Iterator[Wrong]:
    """The wrong values of one runner object, by its type's row in runnertable.py."""
    from sessiontool.state.runnertable import RUNNERS, expected_types

    if not isinstance(runner, dict):
        yield where, 'an object like {"type": "echo"}', runner
        return
    rtype = runner.get("type", "echo")
    row = RUNNERS.get(rtype) if isinstance(rtype, str) else None
    if row is None:
        yield f"{where}.type", f"one of {expected_types()}", rtype
        return
    for name, f in row[2].items():
        if runner.get(name) is None:
            if f.required:
                yield f"{where}.{name}", f.what, None
        elif not conforms(f.schema, runner[name]):
            yield f"{where}.{name}", f.what, runner[name]
