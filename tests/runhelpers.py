"""Shared test helpers: runner configs, records and reaping for tests that start real background
runs, the stores read from disk, the CLI as a live process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def py_command(code: str, **extra: Any) -> dict[str, Any]:
    """A `command` runner that runs a Python snippet (the message arrives on stdin)."""
    return {"type": "command", "command": [sys.executable, "-c", code], **extra}


def runner_config(state: Path, runner: dict[str, Any], **more: Any) -> None:
    state.mkdir(parents=True, exist_ok=True)
    cfg: dict[str, Any] = {"agents": {"defaults": {"runner": runner}}}
    for k, v in more.items():
        cfg[k] = v
    (state / "sessiontool.json5").write_text(json.dumps(cfg))


def records(state: Path) -> list[dict[str, Any]]:
    out = []
    runs = state / "sessiontool" / "runs"
    if runs.is_dir():
        for p in runs.glob("*.json"):
            try:
                out.append(json.loads(p.read_text()))
            except ValueError:
                pass
    return out


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
    return True


def _environ_state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            env = fh.read()
    except OSError:
        return None
    for item in env.split(b"\0"):
        if item.startswith(b"SESSIONTOOL_STATE_DIR="):
            return item.split(b"=", 1)[1].decode("utf-8", "replace")
    return None


def _holds_a_file_in(pid: int, root: str) -> bool:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target == root or target.startswith(root + "/"):
            return True
    return False


def state_processes(state: Path) -> list[int]:
    """Every live process (but this one) working on this state dir: its SESSIONTOOL_STATE_DIR
    names it, or its argv does. A detached worker, whatever lock it holds or has just let go,
    and the agent processes it started, all inherit the environment of the command that
    started them, so none is missed between two lock files (as a lock-file scan can). A worker
    forked from a command that was itself forked (tests/forkserver.py) carries the server's
    environment and argv in /proc, not the command's: it is known by the files of the state
    dir it holds open (its log, at the least)."""
    me = os.getpid()
    wanted = str(state)
    real = os.path.realpath(state)
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        pid = int(name)
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\0")
        except OSError:
            continue
        # The fork server, and every command forked from it, show in /proc the environment
        # the server started with (the first test's state dir, maybe this one): only the
        # files they hold open say whether they work on this state dir.
        forked = any(a.endswith(b"forkserver_serve.py") for a in argv)
        named = not forked and (_environ_state(pid) == wanted or wanted.encode() in argv)
        if not named and not _holds_a_file_in(pid, real):
            continue
        if alive(pid):
            out.append(pid)
    return out


def _detached_from_us(pid: int) -> bool:
    """A process in a session other than the test's: a background worker or its agent, not a
    foreground command or a helper the test itself started and will stop."""
    try:
        return os.getsid(pid) != os.getsid(0)
    except OSError:
        return False


def quiet(state: Path, timeout: float = 30.0) -> None:
    """Wait until nothing runs on this state dir any more: a test that removes or changes the
    state dir after a run must not race the run's detached worker, which goes on writing
    (the outbox, its record's end, the lane) after the foreground command returned."""
    deadline = time.monotonic() + timeout
    while True:
        left = state_processes(state)
        if not left:
            return
        if time.monotonic() >= deadline:
            raise AssertionError(f"processes still working on {state} after {timeout}s: {left}")
        time.sleep(0.05)


def reap(state: Path, timeout: float = 20.0) -> None:
    """Wait for every worker of this state dir to exit; kill what is left after `timeout`.

    Done means no record names a live worker, no run lock is left, and no process works on the
    state dir any more (a worker between two lock files, or one finishing its outbox line)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = [
            r["pid"] for r in records(state) if isinstance(r.get("pid"), int) and alive(r["pid"])
        ]
        if (
            not pids
            and not [
                p
                for p in (state / "sessiontool" / "runs").glob("*.lock")
                if not p.name.startswith(".")
            ]
            and not [p for p in state_processes(state) if _detached_from_us(p)]
        ):
            return
        time.sleep(0.1)
    for r in records(state):
        for k in ("agentPid",):
            pid = r.get(k)
            if isinstance(pid, int) and pid > 0:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except OSError:
                    pass
        pid = r.get("pid")
        if isinstance(pid, int) and alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def transcript_messages(state: Path, agent: str = "main") -> dict[str, list[dict[str, Any]]]:
    """sessionKey → messages, read straight from disk."""
    sdir = state / "agents" / agent / "sessions"
    store = json.loads((sdir / "sessions.json").read_text())
    out: dict[str, list[dict[str, Any]]] = {}
    for key, entry in store.items():
        p = sdir / f"{entry['sessionId']}.jsonl"
        msgs = []
        if p.exists():
            for line in p.read_text().splitlines():
                obj = json.loads(line)
                if obj.get("type") == "message":
                    msgs.append(obj["message"])
        out[key] = msgs
    return out


def text_of(msg: dict[str, Any]) -> str:
    c = msg.get("content")
    if isinstance(c, str):
        return c
    return "".join(b.get("text", "") for b in c if isinstance(b, dict) and b.get("type") == "text")


FINISHED = frozenset({"ok", "error", "timeout", "aborted", "lost"})


def requests(log: Path) -> list[dict[str, Any]]:
    """Every request a scripted agent logged (SCRIPTED_AGENT_LOG), in order."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def outbox(state: Path) -> list[dict[str, Any]]:
    p = state / "sessiontool" / "deliveries.jsonl"
    if not p.exists():
        return []
    return [json.loads(line) for line in p.read_text().splitlines() if line.strip()]


def poll(what: Any, timeout: float = 20.0, message: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = what()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {message}")


def settle(state: Path, timeout: float = 20.0) -> list[dict[str, Any]]:
    """Wait until every run is finished, its follow-up too (the reply turns and the announce are
    records its worker creates after the run itself is finished: on a busy machine there is a
    moment with no live worker between them), and every worker has exited; the final records."""

    def follow_up_owed(r: dict[str, Any]) -> bool:
        fu = r.get("followUp")
        return isinstance(fu, dict) and fu.get("next") not in (None, "done")

    def idle() -> list[dict[str, Any]] | None:
        recs = records(state)
        if any(r.get("status") not in FINISHED or follow_up_owed(r) for r in recs):
            return None
        if any(isinstance(r.get("pid"), int) and alive(r["pid"]) for r in recs):
            return None
        if [
            p for p in (state / "sessiontool" / "runs").glob("*.lock") if not p.name.startswith(".")
        ]:
            return None
        return recs or None

    return poll(idle, timeout, "the workers to finish")


def sessiontool(*args: str, **kw: Any) -> subprocess.Popen[str]:
    """The real CLI as a live process, for tests that signal it or read it while it runs."""
    return subprocess.Popen(
        [sys.executable, "-m", "sessiontool", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


def wait_until(cond: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


# -- session stores on disk ------------------------------------------------------------------

NOW = 1_800_000_000_000  # 2027-01-15T08:00:00.000Z, pinned with SESSIONTOOL_NOW_MS
PINNED = {"SESSIONTOOL_NOW_MS": str(NOW)}


def sessions_dir(state: Path, agent: str = "main") -> Path:
    return state / "agents" / agent / "sessions"


def store_path(state: Path, agent: str = "main") -> Path:
    return sessions_dir(state, agent) / "sessions.json"


def write_store(state: Path, store: dict[str, Any], agent: str = "main") -> Path:
    p = store_path(state, agent)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(store, indent=2))
    return p


def read_store(state: Path, agent: str = "main") -> dict[str, Any]:
    """An agent's sessions.json, read straight from disk (an object, or the test fails)."""
    data = json.loads(store_path(state, agent).read_text())
    assert isinstance(data, dict), data
    return data


def write_transcript(
    state: Path, session_id: str, texts: list[tuple[str, str, int]], agent: str = "main"
) -> Path:
    """A small OpenClaw-format transcript: header, then (role, text, ts) messages."""
    p = sessions_dir(state, agent) / f"{session_id}.jsonl"
    p.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        {
            "type": "session",
            "version": 3,
            "id": session_id,
            "timestamp": "2027-01-01T00:00:00.000Z",
            "cwd": "/",
        }
    ]
    parent = None
    for i, (role, text, ts) in enumerate(texts):
        eid = f"{i:08x}"
        content: Any = text if role == "user" else [{"type": "text", "text": text}]
        lines.append(
            {
                "type": "message",
                "id": eid,
                "parentId": parent,
                "timestamp": "2027-01-01T00:00:00.000Z",
                "message": {"role": role, "content": content, "timestamp": ts},
            }
        )
        parent = eid
    p.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return p


MODULES_PROBE = """
import atexit, runpy, sys
out = sys.argv[1]
def dump():
    with open(out, "w") as fh:
        fh.write("\\n".join(sorted(sys.modules)))
atexit.register(dump)
sys.argv = ["sessiontool", *sys.argv[2:]]
runpy.run_module("sessiontool", run_name="__main__", alter_sys=True)
"""
"""`python -c MODULES_PROBE OUT ARGS...` runs `sessiontool ARGS...` and writes the names of
every module it loaded to OUT (one per line)."""


def append_openclaw_events(
    db: Path, sid: str, build: Callable[[int, int], list[dict[str, Any]]]
) -> None:
    """Append events to a session's active branch of an OpenClaw SQLite database as OpenClaw
    does mid-turn (the session entry and its updatedAt left alone). `build(seq, created)` gives
    the events; they get the next free seqs and active positions, created at `created`."""
    import sqlite3

    conn = sqlite3.connect(db)
    # OpenClaw's CHECK constraints use SQLite 3.43's octet_length; older SQLites lack it.
    conn.create_function(
        "octet_length", 1, lambda v: None if v is None else len(str(v).encode()), deterministic=True
    )
    try:
        seq, created = conn.execute(
            "SELECT max(seq) + 1, max(created_at) + 1 FROM transcript_events WHERE session_id=?",
            (sid,),
        ).fetchone()
        pos = conn.execute(
            "SELECT max(active_position) + 1 FROM session_transcript_active_events "
            "WHERE session_id=?",
            (sid,),
        ).fetchone()[0]
        events = build(seq, created)
        conn.executemany(
            "INSERT INTO transcript_events(session_id, seq, event_json, created_at) "
            "VALUES (?, ?, ?, ?)",
            [(sid, seq + i, json.dumps(e), created) for i, e in enumerate(events)],
        )
        conn.executemany(
            "INSERT INTO session_transcript_active_events(session_id, active_position, "
            "event_seq) VALUES (?, ?, ?)",
            [(sid, pos + i, seq + i) for i in range(len(events))],
        )
        conn.commit()
    finally:
        conn.close()


# -- the config table walked (tests/test_config_checks.py, test_config_schema.py) ---------------


def samples(schema: dict[str, Any]) -> tuple[Any, Any, Any]:
    """(a value of the wrong type, one of the right type but out of its range or set, or None
    when the type has no range, and a value the schema takes)."""
    if "anyOf" in schema:
        _, out, good = samples(schema["anyOf"][0])
        return 12345, out, good
    if "enum" in schema:
        return 5, "everything", schema["enum"][0]
    kind = schema["type"]
    if kind == "string":
        if "pattern" in schema and schema["pattern"].startswith("^"):
            return 5, "ftp://x", "http://127.0.0.1:1"
        return 5, ("" if "minLength" in schema or "pattern" in schema else None), "x"
    if kind in ("integer", "number"):
        low = schema.get("minimum", schema.get("exclusiveMinimum"))
        out = -5 if low is not None and low >= 0 else None
        good = schema.get("minimum", 1)
        return "900", out, good
    if kind == "boolean":
        return "yes", None, True
    if kind == "object":
        extra = schema.get("additionalProperties")
        return "x", ({"k": 5} if isinstance(extra, dict) else None), {}
    assert kind == "array", schema
    if schema.get("minItems"):
        return "x", [], ["x"]
    return "x", ([5] if "items" in schema else None), []


def nested(path: str, value: Any, *, fill: bool = False) -> tuple[dict[str, Any], str]:
    """The config that sets `path` (a table path) to `value`, and the key an error names;
    `fill`: an array item's required keys (the table row's `required`) set to what they take."""
    from sessiontool.state.config_keys import BY_PATH

    node: Any = value
    parts = path.split(".")
    for i in range(len(parts) - 1, -1, -1):
        row = BY_PATH.get(".".join(parts[: i + 1]))
        if fill and row is not None and isinstance(node, dict):
            for req in row.extra.get("required", ()):
                sibling = BY_PATH[f"{row.path}.{req}"]
                node = {req: samples(sibling.schema)[2], **node}
        name, items = (parts[i][:-2], True) if parts[i].endswith("[]") else (parts[i], False)
        node = {("p" if name == "*" else name): [node] if items else node}
    key = path.replace("[]", "[0]").replace("*", "p")
    return node, key


def minimal_runner(rtype: str) -> dict[str, Any]:
    """A runner object of `rtype` with its required keys set to what they take."""
    from sessiontool.state.runnertable import RUNNERS

    out: dict[str, Any] = {"type": rtype}
    for name, f in RUNNERS[rtype][2].items():
        if f.required:
            out[name] = samples(f.schema)[2]
    return out


def config_cases() -> list[tuple[str, dict[str, Any], str, str]]:
    """(id, config, the key an error names, what it says was expected) for every key of the
    table and every runner key, each with its wrong type and its out-of-range value."""
    from sessiontool.state.config_keys import KEYS

    out: list[tuple[str, dict[str, Any], str, str]] = []
    for k in KEYS:
        if k.what == "runner":
            out += _runner_cases(k)
            continue
        wrong, out_of_range, _ = samples(k.schema)
        for label, value in (("type", wrong), ("range", out_of_range)):
            if value is not None:
                cfg, key = nested(k.path, value)
                out.append((f"{k.path}-{label}", cfg, key, k.what))
    return out


def _runner_cases(k: Any) -> list[tuple[str, dict[str, Any], str, str]]:
    from sessiontool.state.runnertable import RUNNERS

    out: list[tuple[str, dict[str, Any], str, str]] = []
    for rtype, (_module, _cls, fields) in RUNNERS.items():
        for name, f in fields.items():
            wrong, out_of_range, _ = samples(f.schema)
            for label, value in (("type", wrong), ("range", out_of_range)):
                if value is not None:
                    cfg, key = nested(k.path, {**minimal_runner(rtype), name: value})
                    out.append((f"{k.path}.{rtype}.{name}-{label}", cfg, f"{key}.{name}", f.what))
    cfg, key = nested(k.path, {"type": "magic"})
    out.append((f"{k.path}.type", cfg, f"{key}.type", "one of echo, command, openai, llm"))
    return out


def valid_config_cases() -> list[tuple[str, dict[str, Any]]]:
    """(id, config) setting each key of the config table (each runner type with every key of
    its row) to a value the table takes."""
    from sessiontool.state.config_keys import KEYS
    from sessiontool.state.runnertable import RUNNERS

    out = []
    for k in KEYS:
        if k.what == "runner":
            for rtype, (_m, _c, fields) in RUNNERS.items():
                full = {**minimal_runner(rtype)}
                full.update({n: samples(f.schema)[2] for n, f in fields.items()})
                out.append((f"{k.path}.{rtype}", nested(k.path, full)[0]))
        else:
            out.append((k.path, nested(k.path, samples(k.schema)[2], fill=True)[0]))
    return out


def priced_turn(n: int, tokens: int = 1_000_000) -> str:
    """A JSONL assistant turn as another program appends it: model `m1` of provider `p`,
    `tokens` input tokens, timestamped now."""
    now = int(time.time() * 1000)
    return json.dumps(
        {
            "type": "message",
            "id": f"byhand{n:02d}",
            "parentId": None,
            "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(now / 1000)),
            "message": {
                "role": "assistant",
                "content": [{"type": "text", "text": "written by another program"}],
                "provider": "p",
                "model": "m1",
                "usage": {"input": tokens, "output": 0},
                "timestamp": now,
            },
        }
    )
