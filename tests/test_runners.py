"""Runners against real processes and a real (fake) HTTP server: what the agent sees, what comes
back, and that timeouts kill everything the agent started."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sessiontool.runs.runners import (
    RunnerError,
    RunnerResult,
    RunnerTimeout,
    get_runner,
    make_usage,
    usage_from,
)
from sessiontool.runs.runners.openai import (
    chat_completion,
    parse_completion,
    to_chat_messages,
)
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import generous

AGENTS = Path(__file__).resolve().parent / "agents"
PY = sys.executable


def request(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "runId": "run-1234",
        "kind": "send",
        "sessionKey": "agent:main:main",
        "sessionId": "sess-1",
        "agentId": "main",
        "model": "",
        "system": "You are a test.",
        "message": "hello there",
        "messages": [],
    }
    base.update(over)
    return base


class Pids:
    """Collects the pids the runner reports, as the worker would record `agentPid`."""

    def __init__(self) -> None:
        self.pids: list[int] = []

    def __call__(self, pid: int) -> None:
        self.pids.append(pid)


def run(cfg: dict[str, Any], req: dict[str, Any] | None = None, **kw: Any) -> RunnerResult:
    env = kw.pop("env", dict(os.environ))
    pids = kw.pop("pids", Pids())
    deadline = kw.pop("deadline", None)
    return get_runner(cfg).run(req or request(), env=env, on_agent_pid=pids, deadline=deadline)


def gone(pid: int, within: float = 3.0) -> bool:
    """The process no longer exists (a zombie nobody reaps counts as gone: it runs nothing)."""
    end = time.monotonic() + within
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            if stat.rsplit(")", 1)[1].split()[0] == "Z":
                return True
        except (OSError, IndexError):
            pass
        if time.monotonic() > end:
            return False
        time.sleep(0.05)


# -- usage -----------------------------------------------------------------------------------


def test_make_usage_is_complete() -> None:
    u = make_usage(10, 5, cache_read=3)
    assert u == {
        "input": 10,
        "output": 5,
        "cacheRead": 3,
        "cacheWrite": 0,
        "totalTokens": 18,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
    }
    assert make_usage(1, 1, cost={"input": 0.5, "output": 0.25})["cost"]["total"] == 0.75


def test_usage_from_accepts_openai_ours_and_anthropic() -> None:
    openai = usage_from(
        {
            "prompt_tokens": 100,
            "completion_tokens": 7,
            "prompt_tokens_details": {"cached_tokens": 40},
        }
    )
    assert openai is not None
    assert (openai["input"], openai["cacheRead"], openai["output"], openai["totalTokens"]) == (
        60,
        40,
        7,
        107,
    )
    ours = usage_from({"input": 3, "output": 4, "totalTokens": 9, "cost": {"total": 0.01}})
    assert ours is not None and ours["totalTokens"] == 9 and ours["cost"]["total"] == 0.01
    anthropic = usage_from({"input_tokens": 2, "output_tokens": 1})
    assert anthropic is not None and anthropic["totalTokens"] == 3
    assert usage_from({"tokens": 5}) is None
    assert usage_from("12") is None
    assert usage_from({"input": "many", "output": True})["input"] == 0  # type: ignore[index]


# -- echo ------------------------------------------------------------------------------------


def test_echo_reply_and_usage() -> None:
    res = run({"type": "echo"})
    assert res.reply == "echo: hello there"
    system_and_message = "You are a test." + "hello there"
    assert res.usage["input"] == len(system_and_message) // 4 == 6
    assert res.usage["output"] == len("echo: hello there") // 4 == 4
    assert res.usage["totalTokens"] == 10
    assert res.usage["cost"]["total"] == 0
    assert (res.model, res.provider, res.api, res.stop_reason) == (
        "echo",
        "sessiontool",
        "sessiontool-echo",
        "stop",
    )
    assert res.extra_messages == [] and res.last_call_usage is None
    assert run({"type": "echo"}) == res  # deterministic


def test_echo_is_the_default_type() -> None:
    assert run({}).reply == "echo: hello there"


def test_echo_steps() -> None:
    reply_step = request(kind="step", step="reply", turn=1, maxTurns=5)
    assert run({"type": "echo"}, reply_step).reply == "REPLY_SKIP"
    a2a = request(kind="step", step="announce", announce={"round1": "first", "latest": "last"})
    assert run({"type": "echo"}, a2a).reply == "echo: first"
    spawn = request(
        kind="step",
        step="announce",
        announce={"round1": None, "latest": None, "childReply": "done"},
    )
    assert run({"type": "echo"}, spawn).reply == "echo: done"
    empty_child = request(
        kind="step", step="announce", announce={"round1": "x", "childReply": None}
    )
    assert run({"type": "echo"}, empty_child).reply == "echo: (no output)"
    assert run({"type": "echo"}, request(kind="step", step="announce")).reply == "echo: (no output)"


def test_echo_delay_honours_the_deadline() -> None:
    t0 = time.monotonic()
    delay = generous(5)
    with pytest.raises(RunnerTimeout):
        run({"type": "echo", "delaySeconds": delay}, deadline=time.monotonic() + 0.2)
    # The 0.2 s deadline ended it, not the delay: before half of that had gone.
    assert time.monotonic() - t0 < delay / 2
    assert run({"type": "echo", "delaySeconds": 0.05}).reply == "echo: hello there"


def test_unknown_runner_type() -> None:
    with pytest.raises(RunnerError, match="runner.type"):
        get_runner({"type": "telepathy"})


# -- command ---------------------------------------------------------------------------------


def test_command_text_mode_env_args_and_stdin() -> None:
    pids = Pids()
    env = dict(os.environ, SESSIONTOOL_SESSION_KEY="agent:main:main", SESSIONTOOL_STEP="stale")
    cfg = {
        "type": "command",
        "command": [PY, str(AGENTS / "dump_env.py"), "-m", "{model}", "{sessionKey}", "id={runId}"],
        "env": {"AGENT_COLOR": "blue"},
    }
    res = run(cfg, request(model="ollama/llama3"), env=env, pids=pids)
    seen = json.loads(res.reply)
    assert seen["argv"] == ["-m", "ollama/llama3", "agent:main:main", "id=run-1234"]
    assert seen["stdin"] == "hello there\n"
    assert seen["env"]["SESSIONTOOL_SYSTEM_PROMPT"] == "You are a test."
    assert seen["env"]["SESSIONTOOL_RUN_KIND"] == "send"
    assert seen["env"]["SESSIONTOOL_SESSION_KEY"] == "agent:main:main"
    assert seen["env"]["AGENT_COLOR"] == "blue"
    assert "SESSIONTOOL_STEP" not in seen["env"]  # not a step: an inherited value must not leak
    assert "SESSIONTOOL_TURN" not in seen["env"]
    # its own process group, whose id is the pid the worker is told about
    assert len(pids.pids) == 1 and seen["pgid"] == pids.pids[0]
    assert (res.provider, res.model, res.api) == ("ollama", "llama3", "sessiontool-command")
    # no usage reported: estimated like echo
    assert res.usage["input"] == len("You are a test.hello there") // 4
    assert res.usage["output"] == len(res.reply) // 4


def test_command_step_variables_and_string_command() -> None:
    cfg = {"type": "command", "command": f"{PY} '{AGENTS / 'dump_env.py'}' 'two words' m={{model}}"}
    res = run(cfg, request(kind="step", step="reply", turn=2, maxTurns=5, model="command"))
    seen = json.loads(res.reply)
    assert seen["argv"] == ["two words", "m="]  # "command" is only the fallback name
    assert res.model is None  # the worker records its own fallback
    assert seen["env"]["SESSIONTOOL_RUN_KIND"] == "step"
    assert seen["env"]["SESSIONTOOL_STEP"] == "reply"
    assert seen["env"]["SESSIONTOOL_TURN"] == "2"


def test_command_json_in_and_out(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            {
                "send": {
                    "reply": "done  \n",
                    "usage": {"prompt_tokens": 120, "completion_tokens": 30},
                    "model": "gpt-test",
                    "provider": "acme",
                    "cost": 0.002,
                },
                "reply:1": "REPLY_SKIP",
            }
        )
    )
    log = tmp_path / "seen.jsonl"
    cfg = {
        "type": "command",
        "command": [PY, str(AGENTS / "scripted.py"), str(script)],
        "env": ["SCRIPTED_AGENT_LOG"],
        "input": "json",
        "output": "json",
    }
    env = dict(os.environ, SCRIPTED_AGENT_LOG=str(log))
    history = [{"role": "user", "content": "earlier", "timestamp": 1}]
    res = run(cfg, request(messages=history), env=env)
    assert res.reply == "done"
    assert (res.usage["input"], res.usage["output"], res.usage["totalTokens"]) == (120, 30, 150)
    assert res.usage["cost"]["total"] == 0.002
    assert (res.model, res.provider) == ("gpt-test", "acme")
    seen = json.loads(log.read_text().splitlines()[0])
    assert seen == request(messages=history)  # the whole request, exactly
    step = run(cfg, request(kind="step", step="reply", turn=1), env=env)
    assert step.reply == "REPLY_SKIP"


def test_command_json_output_with_our_usage_shape() -> None:
    out = {"reply": "hi", "usage": {"input": 5, "output": 2, "cacheRead": 1}}
    code = f"import json; print('loading...'); print(json.dumps({out!r}))"
    res = run({"type": "command", "command": [PY, "-c", code], "output": "json"})
    assert res.reply == "hi"
    assert res.usage["totalTokens"] == 8 and res.usage["cacheRead"] == 1


def test_command_bad_json_output() -> None:
    cfg = {"type": "command", "command": [PY, "-c", "print('not json')"], "output": "json"}
    with pytest.raises(RunnerError, match="not a JSON object"):
        run(cfg)
    cfg["command"] = [PY, "-c", "print('{\"answer\": 1}')"]
    with pytest.raises(RunnerError, match='no "reply"'):
        run(cfg)


def test_command_nonzero_exit_gives_the_stderr_tail() -> None:
    cfg = {"type": "command", "command": [PY, str(AGENTS / "failing.py"), "3", "model overloaded"]}
    with pytest.raises(RunnerError) as info:
        run(cfg)
    msg = info.value.message
    assert msg.startswith("runner exited with code 3: ")
    assert msg.endswith("model overloaded")
    assert "noise line 000" not in msg  # the head is cut, the tail kept
    assert len(msg) <= len("runner exited with code 3: ") + 2000
    assert not isinstance(info.value, RunnerTimeout)


def test_command_killed_by_signal() -> None:
    code = (
        "import os, signal, sys; sys.stderr.write('bye\\n'); os.kill(os.getpid(), signal.SIGTERM)"
    )
    with pytest.raises(RunnerError, match="killed by SIGTERM: bye"):
        run({"type": "command", "command": [PY, "-c", code]})


def test_command_not_found() -> None:
    with pytest.raises(RunnerError, match="runner command not found: no-such-agent-xyz"):
        run({"type": "command", "command": ["no-such-agent-xyz", "--flag"]})


def test_command_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    pids = Pids()
    cfg = {
        "type": "command",
        "command": [PY, str(AGENTS / "sleepy.py"), str(generous(6)), str(pidfile)],
        "timeoutSeconds": 1.5,
    }
    t0 = time.monotonic()
    with pytest.raises(RunnerTimeout, match="runner timed out after 1.5s"):
        run(cfg, pids=pids)
    assert time.monotonic() - t0 < generous(1.5 + 1)  # the timeout, not the agent's sleep
    grandchild = int(pidfile.read_text())
    assert gone(pids.pids[0])
    assert gone(grandchild), "the agent's grandchild survived the timeout"


def test_command_run_deadline_is_a_timeout_too() -> None:
    cfg = {"type": "command", "command": [PY, str(AGENTS / "sleepy.py"), str(generous(6))]}
    pids = Pids()
    t0 = time.monotonic()
    with pytest.raises(RunnerTimeout):
        run(cfg, deadline=time.monotonic() + 0.5, pids=pids)
    assert time.monotonic() - t0 < generous(0.5 + 1)  # the deadline, not the agent's sleep
    assert gone(pids.pids[0])


def test_command_deadline_already_passed_starts_nothing() -> None:
    pids = Pids()
    cfg = {"type": "command", "command": [PY, str(AGENTS / "sleepy.py"), "30"]}
    with pytest.raises(RunnerTimeout):
        run(cfg, deadline=time.monotonic() - 1, pids=pids)
    assert pids.pids == []


def test_command_large_input_and_output_do_not_deadlock() -> None:
    message = "x" * 300_000 + "\nend"
    res = run({"type": "command", "command": ["cat"]}, request(message=message))
    assert res.reply == message


def test_command_background_child_holding_stdout_does_not_block() -> None:
    pids = Pids()
    t0 = time.monotonic()
    try:
        sleep = generous(6)
        hold = f"sleep {sleep:g} & echo done"
        res = run({"type": "command", "command": ["sh", "-c", hold]}, pids=pids)
        assert res.reply == "done"
        assert time.monotonic() - t0 < sleep / 2  # not the background child's sleep
    finally:
        if pids.pids:
            try:
                os.killpg(pids.pids[0], signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_command_pid_callback_failure_kills_the_agent() -> None:
    started: list[int] = []

    def boom(pid: int) -> None:
        started.append(pid)
        raise RuntimeError("cannot record agentPid")

    cfg = {"type": "command", "command": [PY, str(AGENTS / "sleepy.py"), "30"]}
    with pytest.raises(RuntimeError):
        get_runner(cfg).run(request(), env=dict(os.environ), on_agent_pid=boom, deadline=None)
    assert gone(started[0])


def test_command_config_errors() -> None:
    with pytest.raises(RunnerError, match="runner.command"):
        get_runner({"type": "command", "command": []})
    with pytest.raises(RunnerError, match="runner.input"):
        get_runner({"type": "command", "command": ["cat"], "input": "xml"})
    with pytest.raises(RunnerError, match="timeoutSeconds"):
        get_runner({"type": "command", "command": ["cat"], "timeoutSeconds": -1})


# -- openai ----------------------------------------------------------------------------------


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as srv:
        yield srv


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


TRANSCRIPT: list[dict[str, Any]] = [
    {"role": "user", "content": "first question", "timestamp": 1},
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "hmm"},
            {"type": "text", "text": "first answer"},
            {"type": "toolCall", "id": "c1", "name": "sessions_list", "arguments": {"limit": 2}},
        ],
        "api": "openai-completions",
        "provider": "openai",
        "model": "m",
        "stopReason": "toolUse",
        "timestamp": 2,
    },
    {
        "role": "toolResult",
        "toolCallId": "c1",
        "toolName": "sessions_list",
        "content": [{"type": "text", "text": '{"count":0}'}],
        "isError": False,
        "timestamp": 3,
    },
    {
        "role": "assistant",
        "content": [{"type": "text", "text": "mirrored announce"}],
        "api": "openai-responses",
        "provider": "openclaw",
        "model": "delivery-mirror",
        "stopReason": "stop",
        "timestamp": 4,
    },
    {"role": "user", "content": [{"type": "text", "text": "second question"}], "timestamp": 5},
    {
        "role": "assistant",
        "content": [],
        "stopReason": "error",
        "errorMessage": "x",
        "timestamp": 6,
    },
]


def test_openai_request_and_reply(fake: FakeOpenAI) -> None:
    fake.push(
        {
            "content": "  the answer  ",
            "usage": {
                "prompt_tokens": 50,
                "completion_tokens": 9,
                "prompt_tokens_details": {"cached_tokens": 20},
            },
        }
    )
    cfg = {"type": "openai", "baseUrl": fake.base_url, "model": "llama3.2", "apiKeyEnv": "TEST_KEY"}
    env = dict(os.environ, TEST_KEY="sk-test-123")
    res = run(cfg, request(messages=TRANSCRIPT), env=env)
    assert res.reply == "the answer"
    assert (res.usage["input"], res.usage["cacheRead"], res.usage["output"]) == (30, 20, 9)
    assert res.usage["totalTokens"] == 59
    assert (res.model, res.provider, res.api, res.stop_reason) == (
        "llama3.2",
        "openai",
        "openai-completions",
        "stop",
    )
    [sent] = fake.requests
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-test-123"
    assert sent.headers["content-type"] == "application/json"
    assert sent.body["model"] == "llama3.2"  # no request model: the runner's
    assert sent.body["stream"] is False
    assert sent.body["messages"] == [
        {"role": "system", "content": "You are a test."},
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "first answer"},
        {"role": "user", "content": "second question"},
        {"role": "user", "content": "hello there"},
    ]


def test_openai_model_from_request_and_provider_prefix(fake: FakeOpenAI) -> None:
    base = {"type": "openai", "baseUrl": fake.base_url + "/", "model": "default-model"}
    res = run({**base, "provider": "ollama"}, request(model="ollama/qwen3:8b"))
    assert fake.requests[-1].body["model"] == "qwen3:8b"
    assert (res.provider, res.model) == ("ollama", "qwen3:8b")
    res = run(base, request(model="meta-llama/Llama-3.1-8B"))
    assert fake.requests[-1].body["model"] == "meta-llama/Llama-3.1-8B"
    assert (res.provider, res.model) == ("meta-llama", "Llama-3.1-8B")
    assert "authorization" not in fake.requests[-1].headers
    assert res.reply == "fake: hello there"


def test_openai_without_any_model() -> None:
    runner = get_runner({"type": "openai", "baseUrl": "http://127.0.0.1:9/v1"})
    with pytest.raises(RunnerError, match="no model"):
        runner.run(request(model="openai"), env={}, on_agent_pid=Pids(), deadline=None)


def test_openai_http_error(fake: FakeOpenAI) -> None:
    fake.push({"status": 500, "body": {"error": {"message": "model crashed"}}})
    cfg = {"type": "openai", "baseUrl": fake.base_url, "model": "m"}
    with pytest.raises(RunnerError, match="HTTP 500: model crashed"):
        run(cfg)
    fake.push({"status": 401, "body": "unauthorized"})
    with pytest.raises(RunnerError) as info:
        run({**cfg, "apiKeyEnv": "MY_KEY"})
    assert "HTTP 401: unauthorized" in info.value.message
    assert info.value.hint is not None and "MY_KEY" in info.value.hint


def test_openai_bad_bodies(fake: FakeOpenAI) -> None:
    cfg = {"type": "openai", "baseUrl": fake.base_url, "model": "m"}
    fake.push({"body": "<html>proxy page</html>"})
    with pytest.raises(RunnerError, match="did not answer with JSON"):
        run(cfg)
    fake.push({"body": {"choices": []}})
    with pytest.raises(RunnerError, match="no choices"):
        run(cfg)


def test_openai_unreachable() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(RunnerError, match=f"cannot reach {url}/chat/completions"):
        run({"type": "openai", "baseUrl": url, "model": "m"})


def test_openai_deadline(fake: FakeOpenAI) -> None:
    fake.push({"content": "late", "delay": generous(3)})
    cfg = {"type": "openai", "baseUrl": fake.base_url, "model": "m"}
    t0 = time.monotonic()
    with pytest.raises(RunnerTimeout):
        run(cfg, deadline=time.monotonic() + 0.3)
    assert time.monotonic() - t0 < generous(0.3 + 1)  # the deadline, not the server's delay


def test_openai_bad_base_url() -> None:
    with pytest.raises(RunnerError, match="runner.baseUrl"):
        get_runner({"type": "openai", "baseUrl": "localhost:11434"})


def test_chat_messages_with_tools_pair_calls_and_results() -> None:
    orphan_call = {
        "role": "assistant",
        "content": [{"type": "toolCall", "id": "c9", "name": "x", "arguments": {}}],
        "stopReason": "toolUse",
    }
    orphan_result = {"role": "toolResult", "toolCallId": "zz", "toolName": "y", "content": []}
    msgs = to_chat_messages(
        None,
        [*TRANSCRIPT, orphan_call, orphan_result, {"role": "user", "content": "new"}],
        "new",
        tools=True,
    )
    assert msgs == [
        {"role": "user", "content": "first question"},
        {
            "role": "assistant",
            "content": "first answer",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "sessions_list", "arguments": '{"limit": 2}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"count":0}'},
        {"role": "user", "content": "second question"},
        {"role": "user", "content": "new"},  # already in the transcript: not added twice
    ]


def test_chat_messages_images() -> None:
    content = [
        {"type": "text", "text": "look"},
        {"type": "image", "data": "QUJD", "mimeType": "image/jpeg"},
    ]
    msgs = to_chat_messages("sys", [{"role": "user", "content": content}], None)
    assert msgs[1]["content"] == [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,QUJD"}},
    ]


def test_chat_completion_with_tools(fake: FakeOpenAI) -> None:
    fake.push(
        {
            "content": None,
            "tool_calls": [{"id": "call_a", "name": "sessions_list", "arguments": {"limit": 1}}],
        }
    )
    tools = [
        {
            "type": "function",
            "function": {"name": "sessions_list", "parameters": {"type": "object"}},
        }
    ]
    cfg = {"type": "openai", "baseUrl": fake.base_url, "model": "m"}
    data = chat_completion(cfg, [{"role": "user", "content": "go"}], model="m", tools=tools)
    assert fake.requests[-1].body["tools"] == tools
    done = parse_completion(data)
    assert done.stop_reason == "toolUse"
    assert done.text == ""
    assert done.content_blocks() == [
        {"type": "toolCall", "id": "call_a", "name": "sessions_list", "arguments": {"limit": 1}}
    ]


def test_fake_server_as_a_process(tmp_path: Path) -> None:
    script = tmp_path / "replies.json"
    script.write_text(json.dumps(["from a process"]))
    log = tmp_path / "requests.jsonl"
    proc = subprocess.Popen(
        [
            PY,
            str(Path(__file__).parent / "fakes" / "openai_server.py"),
            "--script",
            str(script),
            "--log",
            str(log),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        res = run({"type": "openai", "baseUrl": url, "model": "m"})
        assert res.reply == "from a process"
        assert json.loads(log.read_text())["body"]["messages"][-1]["content"] == "hello there"
    finally:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.close()
        proc.wait(timeout=10)
        proc.stdout.close()
