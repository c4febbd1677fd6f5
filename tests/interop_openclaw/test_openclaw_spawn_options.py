"""OpenClaw 2026.9.6's newer `sessions_spawn` / `sessions_send` parameters (issue 41 items 3, 4)
through its gateway: with `gateway.tools.allow` sessiontool hands them to OpenClaw's own tools,
so its child and OpenClaw's own agent's (the same tool called with the same arguments through
`tools.invoke`) have the same row and first message, but for ids, times and the label asked
for; a `send --mode notify` gets OpenClaw's own answer."""

from __future__ import annotations

import json
from collections.abc import Iterator

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
