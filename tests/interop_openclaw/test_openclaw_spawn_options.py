"""OpenClaw 2026.9.6's newer `sessions_spawn` / `sessions_send` parameters (issue 41 items 3, 4)
through its gateway: with `gateway.tools.allow` sessiontool hands them to OpenClaw's own tools,
so its child and OpenClaw's own agent's (the same tool called with the same arguments through
`tools.invoke`) have the same row and first message, but for ids, times and the label asked
for; a `send --mode notify` gets OpenClaw's own answer."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import Live, running
from .test_openclaw_gateway import _gw, st
from .test_openclaw_own_tools import _full, messages, norm, rows


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
