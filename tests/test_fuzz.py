"""Fuzzing every input sessiontool reads: session keys, sessionIds, labels, config files,
sessions.json and transcript lines (random bytes, deep nesting, huge strings, invalid UTF-8,
lone surrogates, NUL, `..`, absolute paths).

The contract under test: never a traceback (only `SessiontoolError`, exit codes 0-5), never a
write outside the state dir, never a changed file on a refused input, and text of any kind
round-trips exactly through `send` + `history`.

For speed the core functions are fuzzed in-process where that is equivalent (keys, paths,
store.read_store/update_store, transcript.read_tail, config.load_config, sessions.resolve /
history / list_sessions, render.emit_json), with a smaller number of real CLI runs.

The examples are derandomized (the same every run: no test that fails at random). Set
SESSIONTOOL_FUZZ_RANDOM=1 to explore new ones, SESSIONTOOL_FUZZ_SCALE=10 for ten times more."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from sessiontool.cli import render
from sessiontool.context import build_context
from sessiontool.errors import ConfigError, CorruptStateError, SessiontoolError, UsageError
from sessiontool.sessions.history import history
from sessiontool.sessions.listing import list_sessions
from sessiontool.sessions.resolve import resolve
from sessiontool.state import config as config_mod
from sessiontool.state import config_models, keys, transcript
from sessiontool.state import sessions_json as store
from sessiontool.state.envelopes import strip_envelope_text
from sessiontool.state.paths import StatePaths, is_plain_name, transcript_path_for
from tests.helpers import run_cli
from tests.reliability.util import reap_state, snapshot

RANDOM = os.environ.get("SESSIONTOOL_FUZZ_RANDOM") == "1"
SCALE = float(os.environ.get("SESSIONTOOL_FUZZ_SCALE", "1"))
DOCUMENTED_EXIT_CODES = {0, 1, 2, 3, 4, 5}


def fuzz(n: int) -> Any:
    return settings(
        max_examples=max(1, int(n * SCALE)),
        deadline=None,
        derandomize=not RANDOM,
        database=None if not RANDOM else settings.default.database,
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
        ],
    )


# -- strategies ------------------------------------------------------------------------------

NASTY = [
    "",
    " ",
    ".",
    "..",
    "/",
    "../x",
    "../../etc/passwd",
    "/etc/passwd",
    "a/b",
    "a\\b",
    "\x00",
    "a\x00b",
    "main",
    "global",
    "unknown",
    "agent:main:main",
    "agent:main:",
    "agent::x",
    "agent:Main:Cron:1",
    "agent:../..:x",
    "agent:x/y:z",
    "agent:main:../../x",
    "cron:nightly",
    "discord:group:42",
    "subagent:x",
    "agent:main:subagent:1",
    "\u202etxt.exe",
    "\U0001f642",
    "\ufeff",
    "\u2028",
    "x" * 300,
    "0b3f1e57-8a43-4c1e-9f00-1234567890ab",
    "dev-orphan-42",
    "\ud800",
    "\udcff",
    "a\udcffb",
    "nul",
    "\r\n",
    "main\n",
    "-",
    "--json",
    "ë" * 200,
]
# Any code point, lone surrogates included (JSON "\ud800" escapes decode to them).
any_char = st.characters(exclude_categories=[])
text = st.one_of(
    st.sampled_from(NASTY),
    st.text(any_char, max_size=24),
    st.builds(lambda a, b: a + b, st.sampled_from(NASTY), st.text(any_char, max_size=8)),
)
json_scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=10**20, max_value=10**40),
    st.floats(allow_nan=True, allow_infinity=True),
    text,
)
json_value = st.recursive(
    json_scalar,
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(text, kids, max_size=4),
    max_leaves=12,
)


def deeply_nested(depth: int, obj: bool) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = {"a": value} if obj else [value]
    return value


entry = st.fixed_dictionaries(
    {"sessionId": st.one_of(text, st.uuids().map(str), json_value)},
    optional={
        "updatedAt": st.one_of(st.integers(), st.floats(allow_nan=True), text, json_value),
        "sessionFile": st.one_of(
            text, st.sampled_from(["/etc/passwd", "../../x.jsonl", "/tmp/elsewhere/s.jsonl"])
        ),
        "label": text,
        "displayName": text,
        "spawnedBy": text,
        "chatType": st.one_of(st.sampled_from(["direct", "group", "channel"]), text),
        "channel": text,
        "lastChannel": text,
        "lastTo": json_value,
        "deliveryContext": st.one_of(
            json_value, st.fixed_dictionaries({"channel": text, "to": text})
        ),
        "sendPolicy": st.one_of(st.sampled_from(["allow", "deny"]), json_value),
        "modelOverride": text,
        "totalTokens": json_scalar,
        "inputTokens": json_scalar,
        "abortedLastRun": json_scalar,
        "skillsSnapshot": json_value,
    },
)
store_obj = st.dictionaries(text, st.one_of(entry, json_value), max_size=5)


def json_bytes(obj: Any) -> bytes:
    """How a JSON writer would put `obj` on disk (lone surrogates as \\u escapes)."""
    return json.dumps(obj, ensure_ascii=True).encode("ascii")


raw_json_file = st.one_of(
    st.binary(max_size=300),
    store_obj.map(json_bytes),
    store_obj.map(lambda s: b"\xef\xbb\xbf" + json_bytes(s)),  # a BOM
    store_obj.map(lambda s: json.dumps(s).encode("utf-16")),
    st.integers(1, 3000).map(lambda n: b"[" * n + b"]" * n),
    st.integers(1, 3000).map(lambda n: b'{"a":' * n + b"1" + b"}" * n),
    st.integers(100, 1200).map(
        lambda n: json_bytes(
            {
                "agent:main:deep": {
                    "sessionId": "deep",
                    "updatedAt": 1,
                    "x": deeply_nested(n, n % 2 == 0),
                }
            }
        )
    ),
    st.sampled_from(
        [
            b"{agent: {sessionId: 'x', updatedAt: 1,}, // json5\n}",
            b'{"k": {"sessionId": "x\x00y", "updatedAt": 1}}',
            b'{"k": {"sessionId": "x", "updatedAt": 1}, "k": {"sessionId": "y"}}',
            b'{"k": {"sessionId": "a", "label": "' + b"x" * 1_000_000 + b'"}}',
            b"\xff\xfe\x00",
            b"null",
            b"[]",
            b'"str"',
            b"NaN",
            b'{"k": {"sessionId": "s", "updatedAt": 1e400}}',
            b"  \n\t ",
        ]
    ),
)


@contextmanager
def scratch() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="fuzz-"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


# -- keys and paths (pure) -------------------------------------------------------------------

AGENT_ID = re.compile(r"^[a-z0-9_-]{1,64}$")


@pytest.mark.slow  # over 5 s on 2 cores
@fuzz(400)
@given(
    key=text,
    agent=text,
    main_key=text,
    scope=st.sampled_from(["per-sender", "global"]),
    ent=st.one_of(entry, st.none()),
)
def test_key_functions_are_total(key: str, agent: str, main_key: str, scope: str, ent: Any) -> None:
    agent_id = keys.normalize_agent_id(agent)
    assert AGENT_ID.match(agent_id)
    assume(main_key.strip() and key.strip())  # empty ones are refused before they get here
    main_key = main_key.strip()
    full = keys.canonical(key, agent_id, main_key, scope)
    assert keys.canonical(full, agent_id, main_key, scope) == full
    assert full in keys.RESERVED_KEYS or full.startswith("agent:")
    assert AGENT_ID.match(keys.agent_of(full, agent_id))
    assert isinstance(keys.display(full, agent_id, main_key, scope), str)
    kind = keys.kind_of(full, ent, main_key)
    assert kind in keys.KINDS
    assert isinstance(keys.row_channel(full, ent or {}, main_key, kind), str)
    assert keys.chat_type(full, ent) in ("direct", "group", "channel")
    channel = keys.policy_channel(full, ent)
    assert channel is None or channel == channel.lower()
    assert keys.stored_to_full(key, agent_id) == key or keys.stored_to_full(
        key, agent_id
    ).startswith("agent:")
    keys.is_subagent(full)
    keys.key_group_target(full)
    keys.looks_like_uuid(key)


@fuzz(400)
@given(session_id=text, session_file=st.one_of(st.none(), text, json_value), agent=text)
def test_ids_and_file_names_never_name_a_path_outside_the_sessions_dir(
    session_id: str, session_file: Any, agent: str
) -> None:
    paths = StatePaths(Path("/state"))
    try:
        sdir = paths.sessions_dir(agent)
    except UsageError:
        assert not is_plain_name(agent)
        return
    assert sdir.parent.parent == paths.agents_dir
    try:
        p = transcript_path_for(sdir, session_id, session_file)
    except UsageError:
        assert not is_plain_name(session_id)
        return
    assert p.parent == sdir and is_plain_name(p.name)
    assert os.path.normpath(p) == str(p)


@fuzz(300)
@given(value=text)
def test_labels_are_cleaned_or_refused(value: str) -> None:
    from sessiontool.operations.manage import validate_label

    try:
        label = validate_label(value)
    except UsageError:
        return
    assert label == label.strip() and 0 < len(label) <= 64
    label.encode("utf-8")
    assert not any(ord(c) < 0x20 or c == "\x7f" for c in label)


@fuzz(300)
@example("9" * 400)
@example("9" * 400 + "d")
@example(" 1.5 W ")
@given(
    value=st.one_of(
        text, st.from_regex(r"\s*\d{1,400}(\.\d{1,5})?\s*(ms|s|m|h|d|w|S|D)?\s*", fullmatch=True)
    )
)
def test_durations_parse_to_finite_values_or_refuse(value: str) -> None:
    import math

    from sessiontool.durations import parse_duration, parse_since

    try:
        seconds = parse_duration(value, option="--timeout")
    except UsageError:
        pass
    else:
        assert math.isfinite(seconds) and seconds >= 0
    try:
        assert isinstance(parse_since(value), int)
    except UsageError:
        pass


# -- sessions.json ----------------------------------------------------------------------------


@pytest.mark.slow  # over 5 s on 2 cores
@fuzz(150)
@example(
    b'{"k": {"sessionId": "x", "label": "\\ud800 \\udcff"}}'
)  # lone surrogates (JS writes them)
@example(b'{"\\ud800": {"sessionId": "\\udcff", "updatedAt": 1}}')
@given(data=raw_json_file)
def test_any_sessions_json_is_read_or_refused_and_what_is_read_can_be_rewritten(
    data: bytes,
) -> None:
    with scratch() as d:
        path = d / "sessions.json"
        path.write_bytes(data)
        try:
            parsed = store.read_store(path)
        except CorruptStateError:
            # Refused: never overwritten either.
            with pytest.raises(CorruptStateError):
                store.update_store(path, lambda s: None)
            assert path.read_bytes() == data
            assert sorted(os.listdir(d)) == ["sessions.json"]
            return
        assert isinstance(parsed, dict)
        for full, folded in store.fold(parsed, "main").items():
            assert full in keys.RESERVED_KEYS or full.startswith("agent:")
            assert isinstance(folded.entry["sessionId"], str)
        # A store sessiontool can read, it can rewrite: unchanged content, nothing lost.
        try:
            store.update_store(path, lambda s: None)
        except SessiontoolError:
            assert path.read_bytes() == data
            return
        finally:
            assert sorted(os.listdir(d)) == ["sessions.json"]  # no lock or temp file left
        again = store.read_store(path)
        assert json.dumps(again, sort_keys=True) == json.dumps(parsed, sort_keys=True)


# -- transcripts ------------------------------------------------------------------------------

message_obj = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "assistant", "toolResult", "system"]),
        "content": st.one_of(
            st.text(any_char, max_size=30),
            st.lists(
                st.fixed_dictionaries(
                    {"type": st.just("text"), "text": st.text(any_char, max_size=20)}
                ),
                max_size=3,
            ),
        ),
    },
    optional={
        "timestamp": st.integers(),
        "provenance": st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2),
    },
)
transcript_line = st.one_of(
    message_obj.map(
        lambda m: json_bytes({"type": "message", "id": "1", "parentId": None, "message": m})
    ),
    message_obj.map(
        lambda m: json.dumps({"type": "message", "message": m}, ensure_ascii=False).encode(
            "utf-8", "surrogatepass"
        )
    ),
    st.just(b'{"type":"session","version":3,"id":"x","timestamp":"t","cwd":"/"}'),
    st.just(b'{"type":"compaction","summary":"s"}'),
    st.just(b""),
    st.just(b"   "),
    st.binary(max_size=60).map(lambda b: b.replace(b"\n", b"")),
    st.integers(1, 3000).map(
        lambda n: (
            b'{"type":"message","message":{"role":"user","content":' + b"[" * n + b"]" * n + b"}}"
        )
    ),
    st.just(b'{"type":"message","message":"not an object"}'),
    st.just(
        b'{"type":"message","message":{"role":"user","content":"'
        + "\u05d0\U0001f642\x00".encode() * 5_000
        + b'"}}'
    ),
)


def forward_reference(data: bytes) -> tuple[list[Any], int]:
    """The messages and bad-line count a naive front-to-back reader finds."""
    parts = data.split(b"\n")
    last = parts.pop()
    msgs, bad = [], 0
    for raw, terminated in [*((p, True) for p in parts), (last, False)]:
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except (ValueError, RecursionError):
            bad += terminated
            continue
        if isinstance(obj, dict) and isinstance(obj.get("message"), dict):
            msgs.append(obj["message"])
    return msgs, bad


@fuzz(150)
@given(
    lines=st.lists(transcript_line, max_size=12),
    terminated=st.booleans(),
    limit=st.one_of(st.none(), st.integers(0, 15)),
    block=st.sampled_from([1, 2, 7, 64, 4096, 64 * 1024]),
)
def test_read_tail_agrees_with_a_front_to_back_reader(
    lines: list[bytes], terminated: bool, limit: int | None, block: int
) -> None:
    data = b"\n".join(lines) + (b"\n" if terminated and lines else b"")
    want, bad = forward_reference(data)
    with scratch() as d:
        path = d / "t.jsonl"
        path.write_bytes(data)
        saved, transcript.BLOCK = transcript.BLOCK, block  # exercise lines across blocks
        try:
            res = transcript.read_tail(path, limit)
        finally:
            transcript.BLOCK = saved
    if limit is None:
        assert res.messages == want and res.bad_lines == bad
    else:
        assert res.messages == (want[-limit:] if limit else [])


# -- config -----------------------------------------------------------------------------------

CONFIG_PATHS = [
    "session.mainKey",
    "session.scope",
    "session.agentToAgent.maxPingPongTurns",
    "session.sendPolicy",
    "session.sendPolicy.rules",
    "session.sendPolicy.default",
    "agents.list",
    "agents.defaults.runner",
    "agents.defaults.runner.type",
    "agents.defaults.model",
    "agents.defaults.subagents.model",
    "agents.defaults.subagents.archiveAfterMinutes",
    "agents.defaults.sandbox.mode",
    "agents.defaults.sandbox.sessionToolsVisibility",
    "agents.defaults.models",
    "tools.agentToAgent.enabled",
    "tools.agentToAgent.allow",
    "tools.subagents.tools.allow",
    "sessiontool.delivery.command",
    "sessiontool.maxToolRounds",
    "models.providers",
    "unknownTop",
    "sessiontool.unknown",
]
agent_item = st.fixed_dictionaries(
    {},
    optional={
        "id": st.one_of(text, json_scalar),
        "default": json_scalar,
        "model": st.one_of(
            text,
            json_value,
            st.fixed_dictionaries({"primary": json_scalar, "fallbacks": json_value}),
        ),
        "runner": st.one_of(
            json_value,
            st.fixed_dictionaries(
                {"type": st.sampled_from(["echo", "command", "openai", "x"]), "command": json_value}
            ),
        ),
        "subagents": st.one_of(
            json_value, st.fixed_dictionaries({"allowAgents": json_value, "model": json_value})
        ),
        "sandbox": st.one_of(
            json_value,
            st.fixed_dictionaries(
                {"mode": st.one_of(st.sampled_from(["all", "non-main", "off"]), json_scalar)}
            ),
        ),
    },
)


def nest(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for dotted, value in pairs:
        node = out
        *parents, leaf = dotted.split(".")
        for p in parents:
            if not isinstance(node.get(p), dict):
                node[p] = {}
            node = node[p]
        node[leaf] = value
    return out


# Values that break numeric settings: non-finite floats (JSON5 `Infinity`, `NaN`, `1e400`), huge
# and negative numbers, booleans (an int subclass), numbers as strings.
edge_scalar = st.sampled_from(
    [float("inf"), float("-inf"), float("nan"), 10**30, -1, 0, 0.5, True, False, "5", ""]
)
config_obj = st.lists(
    st.tuples(
        st.sampled_from(CONFIG_PATHS),
        st.one_of(edge_scalar, json_scalar, json_value, st.lists(agent_item, max_size=3)),
    ),
    max_size=6,
).map(nest)
config_file = st.one_of(
    config_obj.map(json_bytes),
    config_obj.map(lambda c: json.dumps(c, indent=1).encode("utf-8", "surrogatepass")),
    raw_json_file,
)


def exercise_config(cfg: config_mod.Config) -> None:
    """Everything commands read from a config; a bad value may only be a ConfigError."""
    for agent in cfg.agents():
        cfg.runner_for(agent.id)
        cfg.sandbox_mode(agent.id)
        cfg.a2a_allows(agent.id)
    for attr in (
        "main_key",
        "scope",
        "max_ping_pong_turns",
        "send_policy",
        "default_agent_id",
        "defaults_model",
        "defaults_subagent_model",
        "sandbox_visibility",
        "archive_after_minutes",
        "a2a_enabled",
        "a2a_allow",
        "subagent_tools_allow",
        "delivery_command",
        "max_tool_rounds",
        "providers",
    ):
        getattr(cfg, attr)
    cfg.runner_for("main")
    config_models.known_models(cfg)
    config_models.is_known_model(cfg, "x/y")
    config_models.model_cost(cfg, "p", "m")
    cfg.known_agent_ids()


@fuzz(200)
@example(own=b'{"session": {"agentToAgent": {"maxPingPongTurns": Infinity}}}', openclaw=None)
@example(
    own=b'{"agents": {"defaults": {"subagents": {"archiveAfterMinutes": NaN}}}}', openclaw=None
)
@example(own=b'{"sessiontool": {"delivery": {"command": "\'"}}}', openclaw=None)
@given(own=config_file, openclaw=st.one_of(st.none(), config_file))
def test_any_config_loads_or_is_a_config_error(own: bytes, openclaw: bytes | None) -> None:
    with scratch() as d:
        (d / "sessiontool.json5").write_bytes(own)
        if openclaw is not None:
            (d / "openclaw.json").write_bytes(openclaw)
        try:
            cfg = config_mod.load_config(StatePaths(d))
            exercise_config(cfg)
        except ConfigError as exc:
            assert str(d) in exc.message  # the error names the file
            return
        # Policy decisions over that config never crash either.
        from sessiontool.flow.policy import send_decision

        for key in ("agent:main:main", "agent:main:discord:group:1"):
            try:
                send_decision(cfg.send_policy, key, {"channel": "discord"})
            except ConfigError:
                pass


# -- resolving, reading, listing over a random store ------------------------------------------


def write_state(root: Path, store_data: dict[str, Any], transcripts: dict[str, bytes]) -> None:
    sdir = root / "agents" / "main" / "sessions"
    sdir.mkdir(parents=True)
    (sdir / "sessions.json").write_bytes(json_bytes(store_data))
    for name, data in transcripts.items():
        (sdir / name).write_bytes(data)


def session_ids(store_data: dict[str, Any]) -> list[str]:
    return [
        e["sessionId"]
        for e in store_data.values()
        if isinstance(e, dict)
        and isinstance(e.get("sessionId"), str)
        and is_plain_name(e["sessionId"])
    ]


def emitted(obj: Any) -> bytes:
    """What `render.emit_json` writes to stdout for `obj` (fd 1 pointed at a file meanwhile)."""
    with tempfile.TemporaryFile() as out:
        sys.stdout.flush()
        saved = os.dup(1)
        try:
            os.dup2(out.fileno(), 1)
            render.emit_json(obj)
        finally:
            os.dup2(saved, 1)
            os.close(saved)
        out.seek(0)
        return out.read()


@fuzz(120)
@example(
    store_data={"": {"sessionId": "\ud800"}}, lines=[], value="", create=False, use_label=False
)
@example(
    store_data={"k": {"sessionId": "\udcff", "label": "\ud800"}},
    lines=[b'{"message":{"role":"user","content":"\\ud800"}}'],
    value="k",
    create=False,
    use_label=False,
)
@given(
    store_data=store_obj,
    lines=st.lists(transcript_line, max_size=6),
    value=st.one_of(text, st.sampled_from(["main", "agent:main:main"])),
    create=st.booleans(),
    use_label=st.booleans(),
)
def test_resolve_history_and_list_over_any_store(
    store_data: dict[str, Any], lines: list[bytes], value: str, create: bool, use_label: bool
) -> None:
    with scratch() as root:
        ids = session_ids(store_data)
        write_state(root, store_data, {f"{sid}.jsonl": b"\n".join(lines) for sid in ids[:2]})
        before = snapshot(root)
        ctx = build_context(state_dir=root)
        sdir = ctx.paths.sessions_dir("main")
        try:
            r = resolve(
                ctx, None if use_label else value, label=value if use_label else None, create=create
            )
        except SessiontoolError:
            pass
        else:
            tp = r.transcript_path()
            assert tp is None or tp.parent == sdir
        for call in (
            lambda: history(ctx, value, limit=5).to_json(),
            lambda: list_sessions(ctx, message_limit=3),
            lambda: list_sessions(ctx, kinds=[value]),
        ):
            try:
                out = call()
            except SessiontoolError:
                continue
            line = emitted(out)
            assert line.endswith(b"\n") and line.count(b"\n") == 1
            json.loads(line.decode("utf-8"))  # strict UTF-8, valid JSON
        assert snapshot(root) == before  # reads never write


# -- the real CLI -----------------------------------------------------------------------------

argv_text = st.one_of(
    text.filter(lambda s: "\x00" not in s),
    st.binary(max_size=12).filter(lambda b: b"\x00" not in b),  # invalid UTF-8 argv
)


commands = st.one_of(
    st.tuples(
        st.just("list"),
        st.sampled_from([[], ["--json"], ["--message-limit", "3", "--json"], ["--all-agents"]]),
    ).map(lambda t: [t[0], *t[1]]),
    st.tuples(st.just("list"), st.just("--kinds"), argv_text).map(list),
    st.tuples(
        st.just("history"),
        argv_text,
        st.sampled_from(
            [
                [],
                ["--json"],
                ["--raw", "--json"],
                ["--format", "markdown"],
                ["--limit", "2", "--json"],
            ]
        ),
    ).map(lambda t: [t[0], t[1], *t[2]]),
    st.tuples(st.just("history"), st.just("--label"), argv_text, st.just("--json")).map(list),
    st.tuples(
        st.just("send"),
        argv_text,
        argv_text,
        st.just("--timeout"),
        st.sampled_from(["5", "0", "x", "-1", "1e9"]),
        st.just("--json"),
    ).map(list),
    st.tuples(st.just("label"), argv_text, argv_text).map(list),
    st.tuples(
        st.just("policy"), argv_text, st.sampled_from(["allow", "deny", "inherit", "maybe"])
    ).map(list),
    st.tuples(st.sampled_from(["reset", "delete"]), argv_text, st.just("--json")).map(list),
    st.tuples(st.sampled_from(["runs", "wait", "abort"]), argv_text, st.just("--json")).map(list),
    st.tuples(st.just("spawn"), argv_text, st.just("--label"), argv_text, st.just("--json")).map(
        list
    ),
    st.tuples(
        st.just("--as"), argv_text, st.sampled_from(["list", "agents"]), st.just("--json")
    ).map(list),
    st.tuples(
        st.sampled_from(["list", "deliveries"]),
        st.just("--since"),
        st.one_of(argv_text, st.just("9" * 400)),
    ).map(list),
    st.tuples(st.just("prune"), st.just("--older-than"), argv_text, st.just("--dry-run")).map(list),
    st.just(["doctor", "--json"]),
)


def _as_arg(a: Any) -> bytes:
    return a if isinstance(a, bytes) else os.fsencode(a)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A state dir written by sessiontool itself: a few sessions with transcripts."""
    root = tmp_path_factory.mktemp("template") / "state"
    env = {"SESSIONTOOL_STATE_DIR": str(root)}
    for args in (
        ("send", "main", "hello"),
        ("send", "cron:nightly", "report"),
        ("label", "cron:nightly", "nightly"),
    ):
        proc = run_cli(*args, env=env)
        assert proc.returncode == 0, proc.stderr
    reap_state(root)
    return root


def _cli_example(
    argv: list[Any], state_kind: str = "template", store_data: Any = None, lines: Any = ()
) -> Any:
    return example(
        argv=argv,
        state_kind=state_kind,
        store_data=store_data or {},
        config_data=b"{}",
        lines=list(lines),
    )


@pytest.mark.slow  # ~8 s on 2 cores: hundreds of CLI runs
@fuzz(30)
@_cli_example(["runs", b"\x0b", "--json"])  # a control character quoted in an error
@_cli_example(["send", "main", b"caf\xe9", "--timeout", "5", "--json"])  # Latin-1 bytes
@_cli_example(["label", b"\xff", "x"])
@_cli_example(["list", "--since", "9" * 400])
@_cli_example(  # lone surrogates in the store and the transcript, as JSON escapes
    ["history", "k", "--json"],
    "random",
    {"agent:main:k": {"sessionId": "s1", "updatedAt": 1, "label": "\ud800 \udcff"}},
    [b'{"type":"message","message":{"role":"user","content":"\\ud800 \\udcff"}}'],
)
@_cli_example(
    ["list", "--json"],
    "random",
    {"agent:main:k": {"sessionId": "s1", "updatedAt": 1, "label": "\ud800"}},
)
@given(
    argv=commands,
    state_kind=st.sampled_from(["template", "random", "random-config"]),
    store_data=store_obj,
    config_data=config_file,
    lines=st.lists(transcript_line, max_size=4),
)
def test_the_cli_never_crashes_never_writes_outside_and_refusals_change_nothing(
    template: Path,
    argv: list[Any],
    state_kind: str,
    store_data: dict[str, Any],
    config_data: bytes,
    lines: list[bytes],
) -> None:
    try:
        args = [_as_arg(a) for a in argv]
    except UnicodeEncodeError:
        assume(False)  # a lone surrogate cannot be put in argv at all
    with scratch() as base:
        state, sibling, cwd = base / "state", base / "sibling", base / "cwd"
        sibling.mkdir()
        (sibling / "keep.txt").write_text("untouched")
        cwd.mkdir()
        if state_kind == "template":
            shutil.copytree(template, state)
        else:
            write_state(
                state,
                store_data,
                {f"{sid}.jsonl": b"\n".join(lines) for sid in session_ids(store_data)[:2]},
            )
            if state_kind == "random-config":
                (state / "sessiontool.json5").write_bytes(config_data)
        outside = {"sibling": snapshot(sibling), "cwd": snapshot(cwd)}
        before = snapshot(state)
        env = {**os.environ, "SESSIONTOOL_STATE_DIR": str(state), "SESSIONTOOL_LOCK_TIMEOUT": "5"}
        try:
            proc = subprocess.run(
                [sys.executable.encode(), b"-m", b"sessiontool", *args],
                capture_output=True,
                env=env,
                cwd=cwd,
                timeout=60,
            )
        finally:
            reap_state(state, grace=10)
        stderr = proc.stderr.decode("utf-8", "replace")
        assert proc.returncode in DOCUMENTED_EXIT_CODES, (args, proc.returncode, stderr)
        assert "Traceback" not in stderr and "internal error" not in stderr, (args, stderr)
        for line in stderr.splitlines():
            assert line.startswith(
                (
                    "sessiontool: error: ",
                    "sessiontool: warning: ",
                    "hint: ",
                    "still running",
                    "created session ",  # the notice for a session a send created
                )
            ), (args, stderr)
        # --help wins over --json (as in every Click program): help is text, not a result
        if b"--json" in args and b"--help" not in args and proc.stdout:
            for line in proc.stdout.splitlines():
                json.loads(line.decode("utf-8"))
        assert {"sibling": snapshot(sibling), "cwd": snapshot(cwd)} == outside
        if proc.returncode in (2, 3, 4, 5):
            assert snapshot(state) == before, (args, proc.returncode, stderr)


# -- any text round-trips through send and history --------------------------------------------

message_text = st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=300).filter(
    lambda s: s.strip()
)


def round_trip(message: str) -> None:
    data = message.encode("utf-8")
    proc = run_cli("send", "main", "-", "--timeout", "30", "--json", input=data)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["reply"] == "echo: " + message
    for raw in (True, False):
        hist = run_cli("history", "main", "--json", "--limit", "2", *(["--raw"] if raw else []))
        assert hist.returncode == 0, hist.stderr
        user, reply = json.loads(hist.stdout)["messages"]
        want = message if raw else strip_envelope_text(message)
        assert [b["text"] for b in user["content"]] == [want]
        assert [b["text"] for b in reply["content"]] == ["echo: " + message]


@fuzz(8)
@given(message=message_text)
def test_any_text_round_trips_exactly(state: Path, message: str) -> None:
    round_trip(message)


def test_a_10_mb_message_of_any_characters_round_trips(state: Path) -> None:
    import random

    rng = random.Random(7)
    alphabet = [chr(c) for c in rng.sample(range(0x20, 0xD800), 3000)]
    alphabet += [
        "\x00",
        "\n",
        "\r",
        "\t",
        "\u202e",
        "\u05d0",
        "\U0001f642",
        "\U0010fffd",
        "\ufeff",
        "\u2028",
    ]
    chunk = "".join(rng.choice(alphabet) for _ in range(100_000))
    message = "start " + (chunk * 40)[:3_700_000] + " end"
    assert len(message.encode("utf-8")) > 10 * 1024 * 1024
    round_trip(message)


# -- the whole CLI surface: random commands, options, values, keys, stdin bytes, environment ----
#
# Every exit code sessiontool documents (README "Exit codes"); anything else, a traceback or an
# "internal error" fails. The default suite runs a handful of derandomized examples (a few
# seconds); the `slow` profile runs hundreds.

ALL_EXIT_CODES = {0, 1, 2, 3, 4, 5, 75, 124, 130, 143}

option_value = st.one_of(
    argv_text,
    st.sampled_from(["0", "-1", "1", "3", "all", "1e9", "9" * 40, "5m", "nan", "inf", ""]),
)
key_arg = st.one_of(st.sampled_from(["main", "cron:nightly", "global", "unknown", "-"]), argv_text)
global_opts = st.lists(
    st.one_of(
        st.just(["--json"]),
        st.tuples(st.just("--color"), st.sampled_from(["auto", "always", "never", "x"])).map(list),
        st.tuples(st.just("--agent"), st.sampled_from(["main", "other", "Bad Id", "..", ""])).map(
            list
        ),
        st.tuples(st.just("--as"), key_arg).map(list),
    ),
    max_size=2,
).map(lambda parts: [a for p in parts for a in p])

surface = st.one_of(
    commands,
    st.tuples(
        st.sampled_from(
            [
                "list",
                "history",
                "send",
                "spawn",
                "wait",
                "runs",
                "abort",
                "agents",
                "policy",
                "label",
                "reset",
                "delete",
                "deliveries",
                "sweep",
                "prune",
                "paths",
                "doctor",
                "completion",
                "no-such-command",
            ]
        ),
        st.lists(
            st.one_of(
                key_arg,
                st.sampled_from(
                    [
                        "--json",
                        "-q",
                        "--quiet",
                        "--raw",
                        "--include-tools",
                        "--all-agents",
                        "--dry-run",
                        "--deliver",
                        "--fix",
                        "--yes",
                        "--log",
                        "--follow-not",
                        "-h",
                    ]
                ),
                st.tuples(
                    st.sampled_from(
                        [
                            "--limit",
                            "--message-limit",
                            "--kinds",
                            "--since",
                            "--timeout",
                            "--label",
                            "--format",
                            "--older-than",
                            "--status",
                            "--session",
                            "--kind",
                            "--model",
                            "--agent-id",
                            "--run-timeout",
                            "--cleanup",
                            "--active-minutes",
                        ]
                    ),
                    option_value,
                ).map(list),
            ),
            max_size=4,
        ),
    ).map(lambda t: [t[0], *[a for x in t[1] for a in (x if isinstance(x, list) else [x])]]),
    st.tuples(st.sampled_from(["send", "spawn"]), st.just("-")).map(
        lambda t: [t[0], "main", "-", "--timeout", "5"] if t[0] == "send" else [t[0], "-"]
    ),
    st.just(["history", "main", "-o", "out.md"]),
    st.just(["doctor", "--fix", "--yes", "--json"]),
)

environment = st.fixed_dictionaries(
    {},
    optional={
        "PYTHONIOENCODING": st.sampled_from(["utf-8", "ascii", "latin-1", "utf-8:strict"]),
        "LC_ALL": st.sampled_from(["C", "C.UTF-8", "POSIX", "en_US.UTF-8", "xx_XX"]),
        "SESSIONTOOL_NOW_MS": st.one_of(
            st.sampled_from(["0", "-1", "1790000000000", "abc", "", "1e3"]),
            st.integers(min_value=-(10**20), max_value=10**20).map(str),
        ),
        "SESSIONTOOL_LOCK_TIMEOUT": st.sampled_from(["0", "0.1", "x", "-5", "nan"]),
        "COLUMNS": st.sampled_from(["0", "1", "5", "abc", "100000"]),
        "TERM": st.sampled_from(["dumb", "xterm-256color", ""]),
        "NO_COLOR": st.just("1"),
        "SESSIONTOOL_SESSION_KEY": key_arg.filter(lambda v: isinstance(v, str) and "\x00" not in v),
    },
)


def run_surface(template: Path, argv: list[Any], stdin: bytes, env_extra: dict[str, str]) -> None:
    try:
        args = [_as_arg(a) for a in argv]
        env_bytes = {k: v.encode("utf-8") for k, v in env_extra.items()}
    except UnicodeEncodeError:
        assume(False)
        return
    with scratch() as base:
        state, sibling, cwd = base / "state", base / "sibling", base / "cwd"
        sibling.mkdir()
        (sibling / "keep.txt").write_text("untouched")
        cwd.mkdir()
        shutil.copytree(template, state)
        outside = snapshot(sibling)
        env = {
            **{k.encode(): v.encode() for k, v in os.environ.items()},
            b"SESSIONTOOL_STATE_DIR": str(state).encode(),
            b"SESSIONTOOL_LOCK_TIMEOUT": b"2",
            **{k.encode(): v for k, v in env_bytes.items()},
        }
        try:
            proc = subprocess.run(
                [sys.executable.encode(), b"-m", b"sessiontool", *args],
                input=stdin,
                capture_output=True,
                env=env,
                cwd=cwd,
                timeout=60,
            )
        finally:
            reap_state(state, grace=10)
        stderr = proc.stderr.decode("utf-8", "replace")
        assert proc.returncode in ALL_EXIT_CODES, (args, env_extra, proc.returncode, stderr)
        assert "Traceback" not in stderr, (args, env_extra, stderr)
        assert "internal error" not in stderr, (args, env_extra, stderr)
        if b"--json" in args and proc.stdout and b"-h" not in args:
            for line in proc.stdout.splitlines():
                json.loads(line.decode("utf-8"))
        assert snapshot(sibling) == outside
        for p in cwd.iterdir():  # only `-o out.md` may write there, privately
            assert p.name == "out.md" and (p.stat().st_mode & 0o077) == 0, p


surface_example = example(
    argv=["send", "main", "-", "--timeout", "5", "--json"],
    stdin=b"caf\xe9\xff",
    env_extra={"PYTHONIOENCODING": "utf-8"},
)


@settings(
    max_examples=max(1, int(6 * SCALE)),
    deadline=None,
    derandomize=not RANDOM,
    database=None,
    suppress_health_check=list(HealthCheck),
)
@surface_example
@example(argv=["list", "-q"], stdin=b"", env_extra={"SESSIONTOOL_NOW_MS": "99999999999999999"})
@given(argv=surface, stdin=st.binary(max_size=48), env_extra=environment)
def test_cli_surface_fuzz(
    template: Path, argv: list[Any], stdin: bytes, env_extra: dict[str, str]
) -> None:
    run_surface(template, argv, stdin, env_extra)


@pytest.mark.slow
@settings(
    max_examples=max(1, int(300 * SCALE)),
    deadline=None,
    derandomize=not RANDOM,
    database=None,
    suppress_health_check=list(HealthCheck),
)
@surface_example
@given(argv=surface, stdin=st.binary(max_size=200), env_extra=environment)
def test_cli_surface_fuzz_long(
    template: Path, argv: list[Any], stdin: bytes, env_extra: dict[str, str]
) -> None:
    run_surface(template, argv, stdin, env_extra)
