"""The llm runner: the `llm` library's models, offline through the llm-echo plugin (model `echo`
answers with the prompt, the system prompt, the earlier turns and the tool results it received,
and calls tools when the prompt is a JSON object with `tool_calls`) and through models that a
test registers in-process (tests/fakes/llm_models.py)."""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sessiontool.runs.runners import RunnerError, RunnerTimeout, get_runner
from tests.helpers import generous, run_cli, run_json
from tests.runhelpers import poll, records, settle, text_of

pytest.importorskip("llm", reason="the llm extra is not installed (pip install -e '.[test]')")
pytest.importorskip("llm_echo", reason="llm-echo is not installed (pip install -e '.[test]')")


@pytest.fixture(autouse=True)
def _llm_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """llm's own directory (keys, aliases, logs) is a fresh one per test, never the real one."""
    home = tmp_path / "llm-home"
    home.mkdir()
    monkeypatch.setenv("LLM_USER_PATH", str(home))
    for var in ("OPENAI_API_KEY", "LLM_ECHO_NEEDS_KEY_KEY", "LLM_LOAD_PLUGINS"):
        monkeypatch.delenv(var, raising=False)


def _config(state: Path, runner: dict[str, Any], **more: Any) -> None:
    state.mkdir(parents=True, exist_ok=True)
    cfg: dict[str, Any] = {
        "agents": {"defaults": {"runner": runner}},
        "session": {"agentToAgent": {"maxPingPongTurns": 0}},
    }
    cfg.update(more)
    (state / "sessiontool.json5").write_text(json.dumps(cfg))


def _messages(key: str) -> list[dict[str, Any]]:
    rc, out = run_json("history", key, "--include-tools")
    assert rc == 0, out
    return list(out["messages"])


def _echoed(message: dict[str, Any]) -> dict[str, Any]:
    """What llm-echo says it received, from an assistant message."""
    return dict(json.loads(text_of(message)))


def _words(*texts: str) -> int:
    return sum(len(t.split()) for t in texts)


# -- through the CLI, with llm-echo -------------------------------------------------------------

pytestmark = pytest.mark.usefixtures("reap_workers")


def test_model_receives_system_prompt_earlier_turns_and_new_message(state: Path) -> None:
    _config(state, {"type": "llm", "model": "echo"})
    bob = "agent:main:dm:bob"
    rc, first = run_json("send", bob, "first message")
    assert rc == 0 and first["status"] == "ok", first
    assert _echoed(_messages(bob)[-1])["previous"] == []
    # An agent-to-agent send: its run has sessiontool's agent-to-agent system prompt.
    rc, out = run_json("--as", "agent:main:dm:alice", "send", bob, "second message")
    assert rc == 0 and out["status"] == "ok", out
    msgs = _messages(bob)
    reply = next(
        m for m in msgs if m["role"] == "assistant" and '"prompt": "second message"' in text_of(m)
    )
    seen = _echoed(reply)
    assert seen["prompt"] == "second message"
    assert seen["system"].startswith("Agent-to-agent message context:")
    assert "agent:main:dm:alice" in seen["system"]
    assert [p["prompt"] for p in seen["previous"]] == ["first message"]
    assert reply["api"] == "llm" and reply["provider"] == "echo" and reply["model"] == "echo"


@pytest.mark.slow
def test_spawned_child_gets_the_subagent_prompt(state: Path) -> None:
    _config(state, {"type": "llm", "model": "echo"})
    rc, out = run_json("spawn", "count the sessions", "--label", "counter")
    assert rc == 0, out
    child = out["childSessionKey"]
    settle(state)
    first = next(m for m in _messages(child) if m["role"] == "assistant")
    seen = _echoed(first)
    assert seen["prompt"] == "count the sessions"
    assert seen["system"].startswith("You are a sub-agent")
    assert "count the sessions" in seen["system"]


def test_tool_calls_are_executed_recorded_and_answered(state: Path) -> None:
    _config(state, {"type": "llm", "model": "echo"})
    run_json("send", "agent:main:dm:carol", "hello carol")
    prompt = json.dumps(
        {
            "prompt": "look around",
            "tool_calls": [
                {"name": "sessions_list", "arguments": {"limit": 5}},
                {
                    "name": "sessions_send",
                    "arguments": {
                        "sessionKey": "agent:main:dm:carol",
                        "message": "ping",
                        "timeoutSeconds": 20,
                    },
                },
            ],
        }
    )
    rc, out = run_json("send", "agent:main:dm:bob", prompt, "--timeout", "60")
    assert rc == 0 and out["status"] == "ok", out
    msgs = _messages("agent:main:dm:bob")
    assert [(m["role"], m.get("stopReason")) for m in msgs] == [
        ("user", None),
        ("assistant", "toolUse"),
        ("toolResult", None),
        ("toolResult", None),
        ("assistant", "stop"),
    ]
    calls = [b for b in msgs[1]["content"] if b["type"] == "toolCall"]
    assert [c["name"] for c in calls] == ["sessions_list", "sessions_send"]
    listed, sent = msgs[2], msgs[3]
    assert listed["toolCallId"] == calls[0]["id"] and sent["toolCallId"] == calls[1]["id"]
    assert {s["key"] for s in listed["details"]["sessions"]} == {
        "agent:main:dm:carol",
        "agent:main:dm:bob",
    }
    assert sent["isError"] is False and sent["details"]["status"] == "ok"
    assert json.loads(sent["details"]["reply"])["prompt"] == "ping"
    # The send ran as bob: carol's transcript says who asked.
    ping = next(m for m in _messages("agent:main:dm:carol") if text_of(m) == "ping")
    assert ping["provenance"]["sourceSessionKey"] == "agent:main:dm:bob"
    # The final reply is the model's answer to the tool results.
    final = _echoed(msgs[-1])
    assert [r["name"] for r in final["tool_results"]] == ["sessions_list", "sessions_send"]
    assert [r["tool_call_id"] for r in final["tool_results"]] == [c["id"] for c in calls]
    assert json.loads(final["tool_results"][1]["output"])["status"] == "ok"
    assert out["reply"] == text_of(msgs[-1])
    # The run's usage sums both model calls; each assistant message has its own call's.
    rec = next(r for r in records(state) if r["runId"] == out["runId"])
    turns = [m for m in msgs if m["role"] == "assistant"]
    assert rec["usage"]["input"] == sum(m["usage"]["input"] for m in turns) > 0
    assert rec["usage"]["output"] == sum(m["usage"]["output"] for m in turns) > 0


def test_denied_tool_call_goes_back_to_the_model(state: Path) -> None:
    # Agent-to-agent messaging is off (the default): bob may not reach agent `other`.
    _config(state, {"type": "llm", "model": "echo"})
    prompt = json.dumps(
        {
            "prompt": "reach out",
            "tool_calls": [
                {
                    "name": "sessions_send",
                    "arguments": {"sessionKey": "agent:other:main", "message": "hi"},
                }
            ],
        }
    )
    rc, out = run_json("send", "agent:main:dm:bob", prompt)
    assert rc == 0 and out["status"] == "ok", out
    msgs = _messages("agent:main:dm:bob")
    result = next(m for m in msgs if m["role"] == "toolResult")
    assert result["details"]["status"] == "forbidden"
    final = _echoed(msgs[-1])
    assert json.loads(final["tool_results"][0]["output"])["status"] == "forbidden"
    assert msgs[-1]["stopReason"] == "stop"


def test_subagent_calling_a_tool_it_was_not_given_gets_a_tool_error(state: Path) -> None:
    _config(
        state,
        {"type": "llm", "model": "echo"},
        tools={"subagents": {"tools": {"allow": ["sessions_list"]}}},
    )
    task = json.dumps(
        {"prompt": "try", "tool_calls": [{"name": "sessions_spawn", "arguments": {"task": "x"}}]}
    )
    rc, out = run_json("spawn", task)
    assert rc == 0, out
    recs = settle(state)
    child = out["childSessionKey"]
    assert next(r for r in recs if r["runId"] == out["runId"])["status"] == "ok"
    msgs = _messages(child)
    result = next(m for m in msgs if m["role"] == "toolResult")
    assert result["isError"] is True
    assert result["details"]["status"] == "forbidden"
    assert "not available to this session" in result["details"]["error"]
    # No grandchild was spawned.
    assert not [r for r in recs if r.get("kind") == "spawn" and r["runId"] != out["runId"]]


def test_usage_from_llm_lands_in_transcript_and_run_record(state: Path) -> None:
    _config(state, {"type": "llm", "model": "echo"})
    rc, out = run_json("send", "main", "count these four words")
    assert rc == 0, out
    assistant = _messages("main")[-1]
    expected_in = _words("count these four words")
    expected_out = _words(text_of(assistant))
    assert assistant["usage"]["input"] == expected_in
    assert assistant["usage"]["output"] == expected_out
    assert assistant["usage"]["totalTokens"] == expected_in + expected_out
    rc, rec = run_json("runs", out["runId"])
    assert rc == 0, rec
    run = rec.get("run", rec)
    assert run["usage"]["input"] == expected_in and run["usage"]["output"] == expected_out
    assert run["model"] == "echo" and run["modelProvider"] == "echo"


def test_unknown_model_ends_the_run_with_llms_message(state: Path) -> None:
    _config(state, {"type": "llm", "model": "no-such-model-xyz"})
    rc, out = run_json("send", "main", "hello")
    assert rc != 0
    assert out["status"] == "error"
    rec = next(r for r in records(state) if r["runId"] == out["runId"])
    assert rec["status"] == "error"
    assert "Unknown model: no-such-model-xyz" in rec["error"]
    last = _messages("main")[-1]
    assert last["stopReason"] == "error"
    assert "Unknown model: no-such-model-xyz" in last["errorMessage"]


@pytest.mark.slow
def test_model_needing_a_key_reads_llms_environment(state: Path) -> None:
    _config(state, {"type": "llm", "model": "echo-needs-key"})
    rc, out = run_json("send", "main", "hi")
    assert out["status"] == "error"
    rec = next(r for r in records(state) if r["runId"] == out["runId"])
    assert "llm keys set echo-needs-key" in rec["error"]
    rc, out = run_json("send", "main", "hi", env={"LLM_ECHO_NEEDS_KEY_KEY": "sekrit"})
    assert rc == 0 and out["status"] == "ok", out
    assert _echoed(_messages("main")[-1])["key"] == "sekrit"


@pytest.mark.slow
def test_runner_timeout_keeps_the_tool_calls_made_so_far(state: Path) -> None:
    # bob's model asks the slow agent, whose echo agent takes 600 s; bob's runner allows 6 s: time
    # enough, even on a busy machine, to start and make its tool call before it runs out.
    cfg_agents = {
        "defaults": {"runner": {"type": "llm", "model": "echo", "timeoutSeconds": 6}},
        "list": [
            {"id": "main", "default": True},
            {"id": "slow", "runner": {"type": "echo", "delaySeconds": 600}},
        ],
    }
    state.mkdir(parents=True, exist_ok=True)
    (state / "sessiontool.json5").write_text(
        json.dumps(
            {
                "agents": cfg_agents,
                "tools": {"agentToAgent": {"enabled": True}},
                "session": {"agentToAgent": {"maxPingPongTurns": 0}},
            }
        )
    )
    prompt = json.dumps(
        {
            "prompt": "ask",
            "tool_calls": [
                {
                    "name": "sessions_send",
                    "arguments": {
                        "sessionKey": "agent:slow:main",
                        "message": "x",
                        "timeoutSeconds": 900,
                    },
                }
            ],
        }
    )
    rc, out = run_json("send", "agent:main:dm:bob", prompt, "--timeout", str(generous(6)))
    # Ended by bob's 6 s runner timeout, not the slow agent's 600 s (the --timeout: 124).
    assert rc != 124 and out["runStatus"] == "timeout", out
    for r in records(state):  # the slow agent's own run need not finish
        run_cli("abort", r["runId"])
    msgs = _messages("agent:main:dm:bob")
    assert [m["role"] for m in msgs] == ["user", "assistant", "assistant"]
    assert msgs[1]["stopReason"] == "toolUse"
    assert msgs[2]["stopReason"] == "aborted" and "timed out after 6s" in msgs[2]["errorMessage"]


@pytest.mark.slow
def test_abort_stops_a_run_waiting_in_a_tool_call(state: Path) -> None:
    state.mkdir(parents=True, exist_ok=True)
    (state / "sessiontool.json5").write_text(
        json.dumps(
            {
                "agents": {
                    "defaults": {"runner": {"type": "llm", "model": "echo"}},
                    "list": [
                        {"id": "main", "default": True},
                        {"id": "slow", "runner": {"type": "echo", "delaySeconds": 600}},
                    ],
                },
                "tools": {"agentToAgent": {"enabled": True}},
                "session": {"agentToAgent": {"maxPingPongTurns": 0}},
            }
        )
    )
    prompt = json.dumps(
        {
            "prompt": "ask",
            "tool_calls": [
                {
                    "name": "sessions_send",
                    "arguments": {
                        "sessionKey": "agent:slow:main",
                        "message": "x",
                        "timeoutSeconds": 900,
                    },
                }
            ],
        }
    )
    rc, out = run_json("send", "agent:main:dm:bob", prompt, "--timeout", "0")
    run_id = out["runId"]
    poll(
        lambda: any(
            r.get("kind") == "send" and r["sessionKey"] == "agent:slow:main" for r in records(state)
        ),
        message="the tool's send to the slow agent",
    )
    assert run_cli("abort", run_id).returncode == 0
    # The abort ends bob's run inside its tool call, not after the slow agent's 600 s reply:
    # the wait would otherwise run out (124).
    rc, done = run_json("wait", run_id, "--timeout", str(generous(3)))
    assert rc != 124 and done["runStatus"] == "aborted", done
    for r in records(state):  # the slow agent's own run need not finish
        run_cli("abort", r["runId"])


def test_config_rejects_a_bad_llm_runner(state: Path) -> None:
    _config(state, {"type": "llm", "options": ["temperature", 0]})
    proc = run_cli("send", "main", "x")
    assert proc.returncode == 2
    assert "runner.options: expected an object" in proc.stderr


def test_llm_is_not_imported_by_the_read_path(state: Path, tmp_path: Path) -> None:
    from tests.test_startup import imported_modules

    _config(state, {"type": "llm", "model": "echo"})
    assert "llm" not in imported_modules("list", "--json", state=state, tmp=tmp_path)


# -- in-process, with models registered by the test ----------------------------------------------


@pytest.fixture
def fake_models() -> Iterator[Any]:
    import llm

    from tests.fakes import llm_models

    llm_models.SCRIPT = llm_models.Script()
    plugin = llm_models.Plugin()
    llm.plugins.load_plugins()
    llm.plugins.pm.register(plugin, name="sessiontool-test-models")
    try:
        yield llm_models
    finally:
        llm_models.SCRIPT.release.set()
        llm.plugins.pm.unregister(name="sessiontool-test-models")


def _request(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"kind": "send", "model": "llm", "system": "", "message": "hi"}
    base.update(kw)
    return base


def _run(cfg: dict[str, Any], request: dict[str, Any], **kw: Any) -> Any:
    return get_runner(cfg).run(
        request,
        env=kw.pop("env", {}),
        on_agent_pid=lambda pid: None,
        deadline=kw.pop("deadline", None),
    )


TRANSCRIPT = [
    {"role": "user", "content": [{"type": "text", "text": "who is online?"}]},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "toolCall", "id": "c1", "name": "sessions_list", "arguments": {"limit": 2}},
        ],
        "stopReason": "toolUse",
    },
    {
        "role": "toolResult",
        "toolCallId": "c1",
        "toolName": "sessions_list",
        "content": [{"type": "text", "text": '{"count": 0}'}],
    },
    {"role": "assistant", "content": [{"type": "text", "text": "Nobody."}]},
    {
        "role": "assistant",
        "content": [{"type": "text", "text": "mirrored"}],
        "provider": "openclaw",
        "model": "delivery-mirror",
    },
    {"role": "user", "content": [{"type": "text", "text": "thanks"}]},
    {"role": "assistant", "content": [], "stopReason": "error", "errorMessage": "boom"},
]


def test_transcript_becomes_llms_message_chain(fake_models: Any) -> None:
    result = _run(
        {"type": "llm", "model": "recorder"},
        _request(system="SYSTEM PROMPT", message="and now?", messages=TRANSCRIPT),
    )
    assert result.reply == "ok"
    (call,) = fake_models.SCRIPT.calls
    assert call.messages == [
        {"role": "system", "parts": [{"type": "text", "text": "SYSTEM PROMPT"}]},
        {"role": "user", "parts": [{"type": "text", "text": "who is online?"}]},
        {
            "role": "assistant",
            "parts": [
                {"type": "text", "text": "Let me look."},
                {
                    "type": "tool_call",
                    "name": "sessions_list",
                    "arguments": {"limit": 2},
                    "tool_call_id": "c1",
                },
            ],
        },
        {
            "role": "tool",
            "parts": [
                {
                    "type": "tool_result",
                    "name": "sessions_list",
                    "output": '{"count": 0}',
                    "tool_call_id": "c1",
                }
            ],
        },
        {"role": "assistant", "parts": [{"type": "text", "text": "Nobody."}]},
        {"role": "user", "parts": [{"type": "text", "text": "thanks"}]},
        {"role": "user", "parts": [{"type": "text", "text": "and now?"}]},
    ]
    assert call.system == "SYSTEM PROMPT" and call.prompt == "and now?"
    # Older plugins read the same history from conversation.responses (a turn that got no
    # reply is left out there: they would send an empty assistant message).
    assert call.previous == ["who is online?", ""]
    assert result.model == "recorder" and result.api == "llm"
    assert result.usage["input"] == 7 and result.usage["output"] == 3


def test_new_message_already_in_the_transcript_is_not_repeated(fake_models: Any) -> None:
    transcript = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    _run({"type": "llm", "model": "recorder"}, _request(message="hi", messages=transcript))
    (call,) = fake_models.SCRIPT.calls
    assert call.messages == [{"role": "user", "parts": [{"type": "text", "text": "hi"}]}]


def test_runner_model_and_options_reach_llm(fake_models: Any) -> None:
    with pytest.raises(RunnerError, match="runner.options: not valid for recorder"):
        _run({"type": "llm", "model": "recorder", "options": {"temperature": 2}}, _request())
    # The run's own model wins over the runner's; `provider/` is tried without the provider.
    _run({"type": "llm", "model": "nope"}, _request(model="someprovider/recorder"))
    assert len(fake_models.SCRIPT.calls) == 1


def test_aliases_and_the_default_model_are_llms(fake_models: Any, tmp_path: Path) -> None:
    home = tmp_path / "llm-home"
    (home / "aliases.json").write_text(json.dumps({"rec": "recorder"}))
    result = _run({"type": "llm", "model": "rec"}, _request())
    assert result.model == "recorder"
    # No model anywhere: llm's own default (`llm models default`).
    (home / "default_model.txt").write_text("recorder")
    result = _run({"type": "llm"}, _request())
    assert result.model == "recorder" and len(fake_models.SCRIPT.calls) == 2
    # `echo` as the run's model is llm-echo's model, not sessiontool's echo placeholder.
    result = _run({"type": "llm"}, _request(model="echo"))
    assert (result.provider, result.model) == ("echo", "echo")


def test_openai_style_cached_tokens_are_split_out(fake_models: Any) -> None:
    fake_models.SCRIPT.answer = lambda call: {
        "text": "x",
        "usage": (100, 5),
        "details": {"prompt_tokens_details": {"cached_tokens": 60}},
    }
    result = _run({"type": "llm", "model": "recorder"}, _request())
    assert (result.usage["input"], result.usage["cacheRead"], result.usage["output"]) == (40, 60, 5)
    assert result.usage["totalTokens"] == 105


def test_refused_tool_call_reaches_the_model_as_a_tool_error(fake_models: Any, state: Path) -> None:
    def answer(call: Any) -> Any:
        if call.tool_results:
            return "understood"
        return {
            "tool_calls": [
                {
                    "name": "sessions_send",
                    "arguments": {"sessionKey": "agent:x:main", "message": "m"},
                }
            ]
        }

    fake_models.SCRIPT.answer = answer
    env = {"SESSIONTOOL_STATE_DIR": str(state), "SESSIONTOOL_SESSION_KEY": "agent:main:dm:bob"}
    result = _run({"type": "llm", "model": "recorder"}, _request(), env=env)
    assert result.reply == "understood"
    second = fake_models.SCRIPT.calls[1]
    (tool_result,) = second.tool_results
    assert json.loads(tool_result["output"])["status"] == "forbidden"
    assert tool_result["exception"] is not None and "forbidden" in str(tool_result["exception"])
    assert second.messages[-1]["role"] == "tool"
    assert "exception" in second.messages[-1]["parts"][0]
    assert [m["role"] for m in result.extra_messages] == ["assistant", "toolResult"]
    assert set(fake_models.SCRIPT.calls[0].tools) >= {"sessions_list", "sessions_send"}


def test_max_tool_rounds_stops_a_looping_model(fake_models: Any, state: Path) -> None:
    fake_models.SCRIPT.answer = lambda call: {"tool_calls": [{"name": "agents_list"}]}
    state.mkdir(parents=True, exist_ok=True)
    (state / "sessiontool.json5").write_text(json.dumps({"sessiontool": {"maxToolRounds": 2}}))
    env = {"SESSIONTOOL_STATE_DIR": str(state), "SESSIONTOOL_SESSION_KEY": "agent:main:main"}
    with pytest.raises(RunnerError, match="after 2 rounds") as info:
        _run({"type": "llm", "model": "recorder"}, _request(), env=env)
    assert len(fake_models.SCRIPT.calls) == 3
    partial = info.value.partial
    assert partial is not None
    assert [m["role"] for m in partial.extra_messages] == ["assistant", "toolResult"] * 2
    assert partial.usage["input"] == 21


def test_tools_setting(fake_models: Any, state: Path) -> None:
    env = {"SESSIONTOOL_STATE_DIR": str(state), "SESSIONTOOL_SESSION_KEY": "agent:main:main"}
    _run({"type": "llm", "model": "recorder", "tools": False}, _request(), env=env)
    _run({"type": "llm", "model": "recorder-no-tools"}, _request(), env=env)
    assert [c.tools for c in fake_models.SCRIPT.calls] == [[], []]
    with pytest.raises(RunnerError, match="does not support tools"):
        _run({"type": "llm", "model": "recorder-no-tools", "tools": True}, _request(), env=env)


def test_model_errors_are_run_errors(fake_models: Any) -> None:
    with pytest.raises(RunnerError, match="llm: the service said no: quota exceeded"):
        _run({"type": "llm", "model": "failing"}, _request())


def test_deadline_interrupts_a_model_call(fake_models: Any) -> None:
    started = time.monotonic()
    with pytest.raises(RunnerTimeout, match="timed out after"):
        _run({"type": "llm", "model": "sleeper"}, _request(), deadline=time.monotonic() + 0.5)
    assert time.monotonic() - started < 300  # the deadline, not the sleeper's 600 s


def test_a_signal_handler_interrupts_a_model_call(fake_models: Any) -> None:
    """`abort` reaches a worker as a signal whose handler raises: it must not wait for llm."""

    class Stop(Exception):
        pass

    def handler(signum: int, frame: Any) -> None:
        raise Stop()

    old = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, 0.3)
    started = time.monotonic()
    try:
        with pytest.raises(Stop):
            _run({"type": "llm", "model": "sleeper"}, _request())
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert time.monotonic() - started < generous(0.3 + 1)  # not the sleeper's 600 s
    assert threading.active_count() >= 1


def test_missing_llm_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llm", None)
    with pytest.raises(RunnerError) as info:
        _run({"type": "llm", "model": "echo"}, _request())
    assert "pip install 'llm>=0.36'" in info.value.message
    assert "pip install '.[llm]'" in info.value.message


def test_spawn_model_is_any_id_or_alias_llm_knows(state: Path) -> None:
    """`spawn --model` with the llm runner asks llm (ids and aliases), not the config's list."""
    import llm

    llm.set_alias("my-echo", "echo")  # in this test's own LLM_USER_PATH
    _config(state, {"type": "llm", "model": "echo"})
    rc, out = run_json("spawn", "say hi", "--model", "my-echo")
    assert rc == 0 and out["status"] == "accepted", out
    rc, done = run_json("wait", out["runId"], "--timeout", "60")
    assert rc == 0 and done["status"] == "ok", done  # llm-echo answered through the alias
    rc, bad = run_json("spawn", "say hi", "--model", "no-such-model-xyz")
    assert rc == 2
    assert "unknown model 'no-such-model-xyz'" in bad["error"] and "llm" in bad["error"]


def test_a_cost_limit_stops_the_llm_runner_between_model_calls(
    fake_models: Any, state: Path
) -> None:
    """The run's cost limit (runners/spend.py, set by the worker from the record's costLimit)
    is checked after each model call: at its limit, no tool of that round runs and no second
    call is made; what the call said and cost is the partial result."""
    from sessiontool.runs.runners import spend

    fake_models.SCRIPT.answer = lambda call: {
        "text": "let me look",
        "tool_calls": [{"name": "agents_list"}],
        "usage": (500, 20),
    }
    env = {"SESSIONTOOL_STATE_DIR": str(state), "SESSIONTOOL_SESSION_KEY": "agent:main:main"}
    with (
        spend.limited({"usd": 0.0, "budget": "b", "limit": 0.0, "window": "run"}, {}),
        pytest.raises(spend.BudgetStop, match="budget b") as info,
    ):
        _run({"type": "llm", "model": "recorder"}, _request(), env=env)
    assert len(fake_models.SCRIPT.calls) == 1
    partial = info.value.partial
    assert partial is not None and partial.reply == "let me look"
    assert partial.usage["input"] == 500 and partial.extra_messages == []
