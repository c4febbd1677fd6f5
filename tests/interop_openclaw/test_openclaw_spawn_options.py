"""OpenClaw 2026.9.6's newer `sessions_spawn` / `sessions_send` parameters (issue 41 items 3, 4)
through its gateway: with `gateway.tools.allow` sessiontool hands them to OpenClaw's own tools,
so its child and OpenClaw's own agent's (the same tool called with the same arguments through
`tools.invoke`) have the same row and first message, but for ids, times and the label asked
for; a `send --mode notify` gets OpenClaw's own answer."""

from __future__ import annotations

import base64
import json
import re
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from ..helpers import generous
from .conftest import Live, running
from .test_openclaw_gateway import _gw, _roles_match, st
from .test_openclaw_own_tools import _full, messages, norm, rows, settled


@pytest.fixture(scope="module")
def allowed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    with running(tmp_path_factory.mktemp("oc-options"), allow_own_tools=True) as it:
        yield it


def test_spawn_options_are_openclaws_own(allowed: Live) -> None:
    task = "Check the options (fixture)"
    proc = st(
        allowed.env,
        allowed.state,
        "--json",
        "spawn",
        task,
        "--label",
        "opts-a",
        "--thinking",
        "low",
        "--task-name",
        "opts",
        "--quiet-completion",
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["tool"] == "sessions_spawn"
    # A quiet spawn has no follow-up to wait for (OpenClaw announces nothing): its run's end.
    st(allowed.env, allowed.state, "--json", "wait", out["runId"], "--timeout", "300")
    rec = json.loads(st(allowed.env, allowed.state, "--json", "runs", out["runId"]).stdout)
    assert rec["status"] == "ok" and "followUp" not in rec, rec
    args = {
        "task": task,
        "label": "opts-b",
        "cleanup": "keep",
        "thinking": "low",
        "taskName": "opts",
        "expectsCompletionMessage": False,
    }
    answer = _gw(
        allowed, "tools.invoke", {"name": "sessions_spawn", "sessionKey": "main", "args": args}
    )
    theirs = answer["output"]["details"]
    assert theirs["status"] == "accepted", theirs
    _gw(allowed, "agent.wait", {"runId": theirs["runId"], "timeoutMs": 120000})
    ours_key, their_key = _full(rec["sessionKey"]), theirs["childSessionKey"]
    table = rows(allowed)
    assert norm(table[ours_key]) == norm(table[their_key])
    ours_msgs, their_msgs = messages(allowed, ours_key), messages(allowed, their_key)
    assert ours_msgs == their_msgs
    assert "(depth 1/5)" in ours_msgs[0]["content"]


def test_a_refused_option_is_refused_in_openclaws_words(allowed: Live) -> None:
    """`mode: "session"` without a thread: OpenClaw's own refusal comes back (exit 1)."""
    proc = st(allowed.env, allowed.state, "--json", "spawn", "persist", "--mode", "session")
    theirs = _their_answer(allowed, {"task": "persist", "mode": "session"})
    assert theirs["status"] == "error"
    assert proc.returncode != 0
    assert theirs["error"] in json.loads(proc.stdout)["error"]


def test_send_notify_is_openclaws_own(allowed: Live) -> None:
    target = "agent:main:telegram:group:-100555"
    proc = st(
        allowed.env, allowed.state, "--json", "send", target, "context only", "--mode", "notify"
    )
    assert proc.returncode == 0, proc.stderr
    ours = json.loads(proc.stdout)
    args = {"sessionKey": target, "message": "context only", "mode": "notify"}
    answer = _gw(
        allowed, "tools.invoke", {"name": "sessions_send", "sessionKey": "main", "args": args}
    )
    theirs = answer["output"]["details"]
    assert ours["status"] == theirs["status"]
    assert set(ours) == set(theirs)


# -- fork, attachments, steer: field by field beside OpenClaw's own agent ------------------------

ATTACHMENTS_ON = "tools: { sessions_spawn: { attachments: { enabled: true } } },"


@pytest.fixture(scope="module")
def attaching(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """OpenClaw's own tools allowed, and its spawn's attachments enabled."""
    with running(
        tmp_path_factory.mktemp("oc-attach"), allow_own_tools=True, more_config=ATTACHMENTS_ON
    ) as it:
        yield it


def _their_answer(live: Live, args: dict[str, object]) -> dict[str, Any]:
    """What OpenClaw's own agent's sessions_spawn answers (the tool through `tools.invoke` as
    `main`): accepted or its refusal."""
    answer = _gw(
        live, "tools.invoke", {"name": "sessions_spawn", "sessionKey": "main", "args": args}
    )
    details: dict[str, Any] = answer["output"]["details"]
    return details


def _their_spawn(live: Live, args: dict[str, object]) -> dict[str, object]:
    """OpenClaw's own agent's sessions_spawn, to its run's end."""
    theirs: dict[str, object] = _their_answer(live, args)
    assert theirs["status"] == "accepted", theirs
    _gw(live, "agent.wait", {"runId": theirs["runId"], "timeoutMs": 120000})
    return theirs


def _our_spawn(live: Live, *args: str, quiet: bool = True, ok: bool = True) -> dict[str, object]:
    """sessiontool's spawn through the gateway (quiet unless `quiet` is False), to its run's
    end: its run record (`ok`: the run ended ok)."""
    more = ("--quiet-completion",) if quiet else ()
    proc = st(live.env, live.state, "--json", "spawn", *args, *more)
    assert proc.returncode == 0, proc.stderr
    out: dict[str, object] = json.loads(proc.stdout)
    assert out["tool"] == "sessions_spawn"
    st(live.env, live.state, "--json", "wait", str(out["runId"]), "--timeout", "300")
    rec: dict[str, object] = json.loads(
        st(live.env, live.state, "--json", "runs", str(out["runId"])).stdout
    )
    assert rec["status"] == "ok" or not ok, rec
    return rec


def test_spawn_context_fork_is_openclaws_own(attaching: Live) -> None:
    """`--context fork`: the child starts with the requester's transcript, row and messages as
    OpenClaw's own agent's fork child (both quiet, so that neither announce changes `main`
    between the two)."""
    task = "Use the forked context (fixture)"
    rec = _our_spawn(attaching, task, "--label", "fork-a", "--context", "fork")
    assert rec.get("context") == "fork"
    theirs = _their_spawn(
        attaching,
        {"task": task, "label": "fork-b", "context": "fork", "expectsCompletionMessage": False},
    )
    table = rows(attaching)
    ours_key, their_key = _full(str(rec["sessionKey"])), str(theirs["childSessionKey"])
    assert norm(table[ours_key]) == norm(table[their_key])
    ours_msgs, their_msgs = messages(attaching, ours_key), messages(attaching, their_key)
    assert ours_msgs == their_msgs
    assert len(ours_msgs) > 2  # main's messages came first, then the task and the reply
    main_msgs = messages(attaching, "agent:main:main")
    assert ours_msgs[0] == main_msgs[0]


def test_spawn_attachments_are_openclaws_own(attaching: Live, tmp_path: Path) -> None:
    """`--attach FILE`: the same file as OpenClaw's own agent's inline attachment: the rows, the
    child's messages (OpenClaw's receipt and prompt) and the files it staged are the same."""
    note = tmp_path / "notes.txt"
    note.write_text("attached words\n")
    task = "Read the attachment (fixture)"
    rec = _our_spawn(attaching, task, "--label", "att-a", "--attach", str(note))
    theirs = _their_spawn(
        attaching,
        {
            "task": task,
            "label": "att-b",
            "expectsCompletionMessage": False,
            "attachments": [
                {
                    "name": "notes.txt",
                    "content": base64.b64encode(note.read_bytes()).decode(),
                    "encoding": "base64",
                }
            ],
        },
    )
    table = rows(attaching)
    ours_key, their_key = _full(str(rec["sessionKey"])), str(theirs["childSessionKey"])
    assert norm(table[ours_key]) == norm(table[their_key])
    ours_msgs, their_msgs = messages(attaching, ours_key), messages(attaching, their_key)
    strip = _ids_of_attachments
    assert strip(ours_msgs) == strip(their_msgs)
    assert ours_msgs[0]["role"] == "user" and "[Subagent Task]" in ours_msgs[0]["content"]


def _ids_of_attachments(value: object) -> object:
    """Messages with the staging directory's per-spawn ids replaced (each spawn stages into
    its own folder: the only difference OpenClaw's own two spawns have too)."""
    return json.loads(
        re.sub(
            r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "ID", json.dumps(value)
        )
    )


def test_send_steer_is_openclaws_own(attaching: Live) -> None:
    """`send --mode steer` to a session with no active run: OpenClaw's own sessions_send answer
    (2026.9.6 refuses it: the target has no run that accepts steering), field by field."""
    target = "agent:main:slack:channel:c0123"
    proc = st(
        attaching.env, attaching.state, "--json", "send", target, "steer words", "--mode", "steer"
    )
    ours = json.loads(proc.stdout)
    args = {"sessionKey": target, "message": "steer words", "mode": "steer"}
    answer = _gw(
        attaching, "tools.invoke", {"name": "sessions_send", "sessionKey": "main", "args": args}
    )
    theirs = answer["output"]["details"]
    assert set(ours) >= set(theirs), (ours, theirs)
    for key, value in theirs.items():
        if key != "runId":  # each call's own
            assert ours.get(key) == value, (key, ours, theirs)
    assert (proc.returncode == 0) == (theirs.get("status") in ("ok", "accepted")), proc.returncode


# A held model answer keeps the target's turn running long enough for a steer to reach it: the
# fake model holds an answer asked with `[hold Ns]` (tests/fixtures/tools/oc/fake_llm_server.py).
# The steer has to reach the gateway within the hold: a few seconds, scaled for a busy machine.
HOLD_S = max(20, round(generous(3)))
HELD = f"work slowly [hold {HOLD_S}s]"


def _held_turn(live: Live, key: str) -> str:
    """A turn started on `key` by OpenClaw's own `agent` method, returned (its run id) once the
    fake model is holding its answer: the turn is running, in its model call."""
    said = live.state.parent / "llm.log"
    before = said.read_bytes().count(b"fake-llm: holding")
    run = _gw(live, "agent", {"sessionKey": key, "message": HELD, "idempotencyKey": key + "-held"})
    deadline = time.monotonic() + 600
    while said.read_bytes().count(b"fake-llm: holding") == before:
        assert time.monotonic() < deadline, "the fake model was never asked"
        time.sleep(0.2)
    return str(run["runId"])


def _masked(value: object, *ids: str) -> object:
    """`value` with the per-call ids named replaced (the target's key, the runs' ids)."""
    text = json.dumps(value)
    for i, one in enumerate(ids):
        text = text.replace(one, f"<id{i}>")
    return json.loads(text)


def test_a_steer_into_a_running_turn_is_openclaws_own(attaching: Live) -> None:
    """`send --mode steer` while the target's turn is running (its model answer held): OpenClaw's
    own sessions_send (`tools.invoke`) steers it, and the answer (`targetDisposition:
    "steered"`), the target's transcript (the steer a message of the same run, answered in it)
    and its row are those of OpenClaw's own agent steering a second such turn the same way."""
    ours_key, their_key = "agent:main:steer-a", "agent:main:steer-b"
    ours_run = _held_turn(attaching, ours_key)
    proc = st(
        attaching.env, attaching.state, "--json", "send", ours_key, "steer words", "--mode", "steer"
    )
    assert proc.returncode == 0, proc.stderr
    ours = json.loads(proc.stdout)
    # Answered once the guidance is in the transcript: after the held model call's reply.
    now = _gw(attaching, "chat.history", {"sessionKey": ours_key, "limit": 10})["messages"]
    assert [m["role"] for m in now if HELD in json.dumps(m.get("content"))] == ["user", "assistant"]
    _gw(attaching, "agent.wait", {"runId": ours_run, "timeoutMs": 120000})
    their_run = _held_turn(attaching, their_key)
    args = {"sessionKey": their_key, "message": "steer words", "mode": "steer"}
    answer = _gw(
        attaching, "tools.invoke", {"name": "sessions_send", "sessionKey": "main", "args": args}
    )
    theirs = answer["output"]["details"]
    _gw(attaching, "agent.wait", {"runId": their_run, "timeoutMs": 120000})
    assert theirs["targetDisposition"] == "steered", theirs
    assert _masked(ours, ours_key, str(ours["runId"])) == _masked(
        theirs, their_key, str(theirs["runId"])
    )
    ours_msgs = settled(attaching, ours_key)
    their_msgs = settled(attaching, their_key)
    assert _masked(ours_msgs, ours_key, ours_run) == _masked(their_msgs, their_key, their_run)
    # The steer is a message of the held run, and that run answered it (no turn of its own).
    raw = _gw(attaching, "chat.history", {"sessionKey": ours_key, "limit": 10})["messages"]
    steer_at = next(i for i, m in enumerate(raw) if "steer words" in json.dumps(m.get("content")))
    assert raw[steer_at]["provenance"]["sourceTool"] == "sessions_send"
    answered = raw[steer_at + 1]
    assert answered["role"] == "assistant" and answered["__openclaw"]["runId"] == ours_run
    # sessiontool's own `history` reads the steered turn as chat.history gives it.
    assert [r for r, _ in _roles_match(attaching, ours_key, 4)] == ["user"] + ["assistant"] * 3
    table = rows(attaching)
    assert _masked(norm(table[ours_key]), ours_key, ours_run) == _masked(
        norm(table[their_key]), their_key, their_run
    )


# -- completionTarget, sandbox, attachAs, cwd: beside OpenClaw's own agent ----------------------

# What differs between two spawns' model requests but for the spawn: ids, the label asked for,
# the time stamp OpenClaw puts before the task, the attachments' per-spawn folder.
_PROMPT_MASKS = (
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "ID"),
    (re.compile(r"/[0-9a-f]{32}/"), "/DIR/"),
    (re.compile(r"\[\w{3} \d{4}-\d\d-\d\d \d\d:\d\d UTC\] "), ""),
    (re.compile(r"Current date: \S+"), "Current date: D"),
    (re.compile(r"^- Label: .*$", re.M), "- Label: L"),
)


def _masked_text(value: object) -> object:
    if isinstance(value, str):
        for pattern, to in _PROMPT_MASKS:
            value = pattern.sub(to, value)
        return value
    if isinstance(value, dict):
        return {k: _masked_text(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked_text(v) for v in value]
    return value


def _child_prompt(live: Live, key: str) -> list[dict[str, object]]:
    """The messages of the first model request of the child `key`'s run, its system prompt
    first, as the fake model got them (what the child's transcript does not show: the mount
    hint, the working directory, how its result returns), masked as _PROMPT_MASKS says."""
    for request in live.model_requests():
        if f"Your session: {key}." in json.dumps(request["messages"][:1]):
            masked: list[dict[str, object]] = _masked_text(request["messages"])  # type: ignore[assignment]
            return masked
    raise AssertionError(f"the fake model was never asked for {key}")


def _same_child(live: Live, rec: dict[str, object], theirs: dict[str, object]) -> str:
    """sessiontool's child and OpenClaw's own agent's have the same row, transcript and first
    model request (but for ids, times and the label); the system prompt is returned."""
    ours_key, their_key = _full(str(rec["sessionKey"])), str(theirs["childSessionKey"])
    table = rows(live)
    assert norm(table[ours_key]) == norm(table[their_key])
    ours_msgs, their_msgs = messages(live, ours_key), messages(live, their_key)
    assert _ids_of_attachments(ours_msgs) == _ids_of_attachments(their_msgs)
    ours_prompt, their_prompt = _child_prompt(live, ours_key), _child_prompt(live, their_key)
    assert ours_prompt == their_prompt
    return json.dumps(ours_prompt[0])


def test_spawn_cwd_is_openclaws_own(allowed: Live, tmp_path: Path) -> None:
    """`--cwd DIR`: the child's row says the directory (`spawnedCwd`, `workspaceDir`) as OpenClaw's
    own agent's child with `cwd` does, and the rest of the row, its messages and its system
    prompt are the same."""
    task = "Work in the directory (fixture)"
    rec = _our_spawn(allowed, task, "--label", "cwd-a", "--cwd", str(tmp_path))
    assert rec["cwd"] == str(tmp_path)
    theirs = _their_spawn(
        allowed,
        {"task": task, "label": "cwd-b", "cwd": str(tmp_path), "expectsCompletionMessage": False},
    )
    _same_child(allowed, rec, theirs)
    row = rows(allowed)[_full(str(rec["sessionKey"]))]
    assert row["spawnedCwd"] == row["workspaceDir"] == str(tmp_path)


def test_spawn_sandbox_inherit_is_openclaws_own(allowed: Live) -> None:
    """`--sandbox inherit` (the default; an unsandboxed requester): the child OpenClaw's own
    agent gets with `sandbox: "inherit"`."""
    task = "Inherit the sandbox (fixture)"
    rec = _our_spawn(allowed, task, "--label", "inh-a", "--sandbox", "inherit")
    theirs = _their_spawn(
        allowed,
        {"task": task, "label": "inh-b", "sandbox": "inherit", "expectsCompletionMessage": False},
    )
    _same_child(allowed, rec, theirs)


def test_sandbox_require_without_a_sandbox_is_refused_in_openclaws_words(allowed: Live) -> None:
    """`--sandbox require` where the child would not be sandboxed: OpenClaw's own refusal,
    word for word and as a refusal (`forbidden`, exit 4), no child."""
    before = set(rows(allowed))
    proc = st(allowed.env, allowed.state, "--json", "spawn", "guarded", "--sandbox", "require")
    theirs = _their_answer(allowed, {"task": "guarded", "sandbox": "require"})
    assert theirs["status"] == "forbidden", theirs
    ours = json.loads(proc.stdout)
    assert (proc.returncode, ours["status"], ours["error"]) == (4, "forbidden", theirs["error"])
    assert set(rows(allowed)) == before


def _registry_row(live: Live, run_id: str) -> dict[str, Any]:
    """OpenClaw's own record of a sub-agent run (its registry's `subagent_runs` row, the
    payload), read from its database without writing (no gateway method lists it)."""
    db = live.state / "state" / "openclaw.sqlite"
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        got = conn.execute(
            "SELECT payload_json FROM subagent_runs WHERE run_id = ?", (run_id,)
        ).fetchone()
    assert got is not None, f"no subagent_runs row for {run_id}"
    payload: dict[str, Any] = json.loads(got[0])["parentCompletion"]
    return payload


# What differs between two registry rows of runs made the same way: ids, times, the label.
_RUN_VOLATILE = {"runId", "taskRunId", "childSessionKey", "label", "elapsedMs"}


def _run_norm(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: _run_norm(v)
            for k, v in value.items()
            if k not in _RUN_VOLATILE and not k.endswith("At") and k != "lifecycleGeneration"
        }
    return value


def _delivered(live: Live, *run_ids: str) -> list[dict[str, Any]]:
    """The registry rows of `run_ids` once each says its completion was delivered."""
    deadline = time.monotonic() + 300
    while True:
        got = [_registry_row(live, r) for r in run_ids]
        done = all((g.get("delivery") or {}).get("status") == "delivered" for g in got)
        if done or time.monotonic() > deadline:
            return got
        time.sleep(2)


def test_completion_target_parent_is_openclaws_own(allowed: Live) -> None:
    """`--completion-target parent`: the child, its messages and its system prompt (its result
    "returns privately to the requester") are OpenClaw's own agent's with `completionTarget:
    "parent"`; sessiontool announces nothing of its own. The completion is OpenClaw's, the same
    for both: 2026.9.6's direct hand-over fails after `tools.invoke` (no spawning turn), so
    the results wait, the requester's transcript unchanged, until its next turn, which is given
    both as steering items; its registry then records both delivered, the same way."""
    task = "Report to the parent only (fixture)"
    main_before = messages(allowed, "agent:main:main", 200)
    proc = st(
        allowed.env,
        allowed.state,
        "--json",
        "spawn",
        task,
        "--label",
        "par-a",
        "--completion-target",
        "parent",
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    st(allowed.env, allowed.state, "--json", "wait", out["runId"], "--timeout", "300")
    rec = json.loads(st(allowed.env, allowed.state, "--json", "runs", out["runId"]).stdout)
    assert rec["status"] == "ok" and rec["completion"] == "parent", rec
    assert "followUp" not in rec  # OpenClaw's own completion: no announce step of sessiontool's
    theirs = _their_spawn(allowed, {"task": task, "label": "par-b", "completionTarget": "parent"})
    assert theirs["completionTarget"] == "parent"
    system = _same_child(allowed, rec, theirs)
    assert "The result returns privately to the requester." in system
    runs = (str(rec["gatewayRunId"]), str(theirs["runId"]))
    ours_run, their_run = (_registry_row(allowed, r) for r in runs)
    assert ours_run["completionTarget"] == their_run["completionTarget"] == "parent"
    # Held: nothing reached the requester (no announce turn, no message) while it was idle.
    assert messages(allowed, "agent:main:main", 200) == main_before
    turn = _gw(
        allowed,
        "agent",
        {"sessionKey": "agent:main:main", "message": "carry on", "idempotencyKey": "drive-par"},
    )
    _gw(allowed, "agent.wait", {"runId": turn["runId"], "timeoutMs": 120000})
    (driven,) = [
        r for r in allowed.model_requests() if "carry on" in json.dumps(r["messages"][-2:])
    ]
    queued = json.dumps(driven["messages"][-2:])
    assert all(f"childRunId: {run}" in queued for run in runs), queued
    ours_run, their_run = _delivered(allowed, *runs)
    assert ours_run["delivery"]["status"] == "delivered", ours_run
    assert _run_norm(ours_run) == _run_norm(their_run)


def test_spawn_attach_as_is_openclaws_own(attaching: Live, tmp_path: Path) -> None:
    """`--attach FILE --attach-as PATH`: OpenClaw's own agent's `attachAs: {mountPath}` beside
    the same attachment: the rows, the messages and the system prompt, which names the hint
    ("Requested mountPath hint: PATH") after the staged files, are the same."""
    note = tmp_path / "inbox.txt"
    note.write_text("mounted words\n")
    task = "Read the mounted attachment (fixture)"
    rec = _our_spawn(
        attaching, task, "--label", "as-a", "--attach", str(note), "--attach-as", "/mnt/inbox"
    )
    theirs = _their_spawn(
        attaching,
        {
            "task": task,
            "label": "as-b",
            "expectsCompletionMessage": False,
            "attachAs": {"mountPath": "/mnt/inbox"},
            "attachments": [
                {
                    "name": "inbox.txt",
                    "content": base64.b64encode(note.read_bytes()).decode(),
                    "encoding": "base64",
                }
            ],
        },
    )
    system = _same_child(attaching, rec, theirs)
    assert "Requested mountPath hint: /mnt/inbox." in system


# -- on a sandboxed child ------------------------------------------------------------------------

# Sub-agents sandboxed, `main` not: OpenClaw's spawn takes the child for sandboxed (no Docker is
# needed to spawn one; without a daemon its run ends at the sandbox's provisioning).
SANDBOXED = 'sandbox: { mode: "non-main" },'


@pytest.fixture(scope="module")
def sandboxed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    with running(
        tmp_path_factory.mktemp("oc-sandbox"), allow_own_tools=True, agent_defaults=SANDBOXED
    ) as it:
        yield it


def test_cwd_on_a_sandboxed_child_is_refused_as_openclaw_refuses(
    sandboxed: Live, tmp_path: Path
) -> None:
    """`--cwd` on a sandboxed child: OpenClaw's refusal in its words and as a refusal
    (`forbidden`, exit 4), no child; a cwd that is the agent's own workspace it accepts, from
    sessiontool too."""
    before = set(rows(sandboxed))
    proc = st(sandboxed.env, sandboxed.state, "--json", "spawn", "here", "--cwd", str(tmp_path))
    theirs = _their_answer(sandboxed, {"task": "here", "cwd": str(tmp_path)})
    assert theirs["status"] == "forbidden", theirs
    ours = json.loads(proc.stdout)
    assert (proc.returncode, ours["status"]) == (4, "forbidden"), ours
    assert theirs["error"] in ours["error"]
    assert set(rows(sandboxed)) == before
    workspace = "/srv/ceo-oc/workspace"  # the fixture's agents.defaults.workspace
    rec = _our_spawn(sandboxed, "at home", "--label", "ws-a", "--cwd", workspace, ok=False)
    assert rows(sandboxed)[_full(str(rec["sessionKey"]))]["spawnedCwd"] == workspace


def test_sandbox_require_on_a_sandboxed_child_is_openclaws_own(sandboxed: Live) -> None:
    """`--sandbox require` where the child is sandboxed: accepted, and the child's row and
    messages are OpenClaw's own agent's with `sandbox: "require"` (however far its run gets
    on this machine's Docker)."""
    task = "Stay in the sandbox (fixture)"
    rec = _our_spawn(sandboxed, task, "--label", "req-a", "--sandbox", "require", ok=False)
    assert rec["sandbox"] == "require"
    theirs = _their_spawn(
        sandboxed,
        {"task": task, "label": "req-b", "sandbox": "require", "expectsCompletionMessage": False},
    )
    ours_key, their_key = _full(str(rec["sessionKey"])), str(theirs["childSessionKey"])
    table = rows(sandboxed)
    assert norm(table[ours_key]) == norm(table[their_key])
    assert messages(sandboxed, ours_key) == messages(sandboxed, their_key)
