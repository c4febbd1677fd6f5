"""OpenClaw 2026.9.6's newer `sessions_spawn` / `sessions_send` parameters (issue 41 items 3, 4)
through its gateway: with `gateway.tools.allow` sessiontool hands them to OpenClaw's own tools,
so its child and OpenClaw's own agent's (the same tool called with the same arguments through
`tools.invoke`) have the same row and first message, but for ids, times and the label asked
for; a `send --mode notify` gets OpenClaw's own answer."""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

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
    answer = _gw(
        allowed,
        "tools.invoke",
        {
            "name": "sessions_spawn",
            "sessionKey": "main",
            "args": {"task": "persist", "mode": "session"},
        },
    )
    theirs = answer["output"]["details"]
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


def _their_spawn(live: Live, args: dict[str, object]) -> dict[str, object]:
    """OpenClaw's own agent's sessions_spawn (the tool through `tools.invoke` as `main`), to
    its run's end."""
    answer = _gw(
        live, "tools.invoke", {"name": "sessions_spawn", "sessionKey": "main", "args": args}
    )
    theirs: dict[str, object] = answer["output"]["details"]
    assert theirs["status"] == "accepted", theirs
    _gw(live, "agent.wait", {"runId": theirs["runId"], "timeoutMs": 120000})
    return theirs


def _our_spawn(live: Live, *args: str) -> dict[str, object]:
    proc = st(live.env, live.state, "--json", "spawn", *args, "--quiet-completion")
    assert proc.returncode == 0, proc.stderr
    out: dict[str, object] = json.loads(proc.stdout)
    assert out["tool"] == "sessions_spawn"
    st(live.env, live.state, "--json", "wait", str(out["runId"]), "--timeout", "300")
    rec: dict[str, object] = json.loads(
        st(live.env, live.state, "--json", "runs", str(out["runId"])).stdout
    )
    assert rec["status"] == "ok", rec
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
