"""`sessiontool mcp`: the real server as a subprocess, driven over stdio by the MCP SDK's own
client. Each test starts as few servers as it can (start-up is the SDK's import time)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import run_cli, run_json, write_config

from .runhelpers import alive, records
from .test_startup import imported_modules

pytest.importorskip("mcp")

import anyio  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

pytestmark = pytest.mark.usefixtures("reap_workers")

AGENTS = Path(__file__).resolve().parent / "agents"
SLEEPY = {"type": "command", "command": [sys.executable, str(AGENTS / "sleepy.py"), "2"]}
ME = "agent:main:mcp"


def server(*args: str, wrapper: Path | None = None) -> StdioServerParameters:
    """The real `sessiontool mcp` (optionally under a wrapper that records its exit status)."""
    cmd = [sys.executable, "-m", "sessiontool", "mcp", *args]
    if wrapper is not None:
        code = (
            "import subprocess, sys\n"
            f"p = subprocess.Popen({cmd!r})\n"
            "rc = p.wait()\n"
            f"open({str(wrapper)!r}, 'w').write(f'{{p.pid}} {{rc}}')\n"
        )
        cmd = [sys.executable, "-c", code]
    return StdioServerParameters(command=cmd[0], args=cmd[1:], env=dict(os.environ))


def run(session: Callable[[Client], Awaitable[None]], params: StdioServerParameters) -> None:
    async def main() -> None:
        async with Client(params, read_timeout_seconds=60) as client:
            await session(client)

    anyio.run(main)


def err(result: Any) -> dict[str, Any]:
    assert result.is_error, result
    data: dict[str, Any] = result.structured_content
    assert json.loads(result.content[0].text) == data  # text and structure say the same
    return data


def ok(result: Any) -> dict[str, Any]:
    assert not result.is_error, result
    data: dict[str, Any] = result.structured_content
    assert json.loads(result.content[0].text) == data
    return data


def test_tools_send_history_list_spawn_errors_and_resources(state: Path) -> None:
    write_config(
        state,
        {
            "session": {
                "sendPolicy": {"rules": [{"action": "deny", "match": {"keyPrefix": "dm:"}}]},
                "agentToAgent": {"maxPingPongTurns": 0},
            }
        },
    )
    seen: dict[str, Any] = {}

    async def session(c: Client) -> None:
        listed = (await c.list_tools()).tools
        seen["tools"] = {t.name: t for t in listed}
        before = int(time.time() * 1000)
        sent = ok(await c.call_tool("sessions_send", {"sessionKey": "main", "message": "hello"}))
        seen["sent"] = sent
        hist = ok(await c.call_tool("sessions_history", {"sessionKey": "main"}))
        seen["history"] = hist
        rows = ok(await c.call_tool("sessions_list", {}))["sessions"]
        seen["main_row"] = next(r for r in rows if r["key"] == "main")
        seen["before"] = before
        seen["spawn"] = ok(
            await c.call_tool("sessions_spawn", {"task": "sub task", "label": "kid"})
        )
        seen["agents"] = ok(await c.call_tool("agents_list", {}))
        # failures are tool errors carrying the CLI's JSON; the server stays up through them
        seen["denied"] = err(
            await c.call_tool("sessions_send", {"sessionKey": "dm:bob", "message": "hi"})
        )
        seen["unknown"] = err(
            await c.call_tool("sessions_history", {"sessionKey": "agent:main:nobody"})
        )
        seen["bad"] = [
            err(await c.call_tool("sessions_list", {"limit": "ten"})),
            err(await c.call_tool("sessions_send", {"message": 5, "sessionKey": "main"})),
            err(await c.call_tool("sessions_history", {})),
            err(await c.call_tool("agents_list", {"extra": 1})),
            err(await c.call_tool("no_such_tool", {})),
        ]
        # resources: the transcripts this session can see
        res = await c.list_resources()
        seen["resources"] = {r.name: r for r in res.resources}
        main_uri = seen["resources"]["main"].uri
        seen["read"] = json.loads((await c.read_resource(main_uri)).contents[0].text)
        try:
            await c.read_resource("sessiontool://session/agent:main:nobody")
        except Exception as exc:  # noqa: BLE001 - the SDK's McpError
            seen["read_missing"] = str(exc)
        # the announce of the spawned child arrives in our own transcript
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            mine = ok(await c.call_tool("sessions_history", {"sessionKey": ME}))["messages"]
            announce = [m for m in mine if m.get("stopReason") == "injected"]
            child = seen["spawn"]["childSessionKey"]
            if any(child in json.dumps(m) for m in announce):
                seen["announce"] = announce
                break
            await anyio.sleep(0.2)
        seen["still_up"] = ok(await c.call_tool("sessions_list", {"limit": 1}))

    run(session, server("--as", ME))

    tools = seen["tools"]
    assert list(tools) == [
        "sessions_list",
        "sessions_history",
        "sessions_send",
        "sessions_spawn",
        "agents_list",
        "sessions",
        "session_status",
        "sessions_search",
        "subagents",
        "sessions_yield",
        "usage",
        "diff",
    ]
    for t in tools.values():
        assert t.input_schema["type"] == "object" and t.description
        assert all(p.get("description") for p in t.input_schema["properties"].values())
        assert t.output_schema is not None and t.output_schema["type"] == "object"
    assert tools["sessions_send"].input_schema["required"] == ["message"]
    assert tools["sessions_history"].annotations.read_only_hint is True
    assert tools["sessions_send"].annotations.read_only_hint is False
    assert tools["sessions_send"].annotations.destructive_hint is False

    sent = seen["sent"]
    assert sent["status"] == "ok" and sent["reply"] == "echo: hello" and sent["runId"]
    texts = [(m["role"], json.dumps(m["content"])) for m in seen["history"]["messages"]]
    assert texts[0][0] == "user" and "hello" in texts[0][1]
    assert texts[1][0] == "assistant" and "echo: hello" in texts[1][1]
    assert seen["main_row"]["updatedAt"] >= seen["before"]

    spawn = seen["spawn"]
    assert spawn["status"] == "accepted" and spawn["childSessionKey"].startswith(
        "agent:main:subagent:"
    )
    assert "announce" in seen, "the spawn's announce never reached the requester's transcript"
    assert seen["agents"]["requester"] == "main"

    denied = seen["denied"]
    assert denied["status"] == "forbidden" and denied["code"] == 4
    assert denied["error"] == "send blocked by session policy"
    unknown = seen["unknown"]
    assert unknown["status"] == "error" and "agent:main:nobody" in unknown["error"]
    assert [b["code"] for b in seen["bad"]] == [2, 2, 2, 2, 2]
    assert "limit must be a whole number" in seen["bad"][0]["error"]
    assert "unknown tool 'no_such_tool'" in seen["bad"][4]["error"]
    assert seen["still_up"]["count"] == 1

    assert seen["resources"]["main"].uri == "sessiontool://session/main"
    assert seen["resources"]["main"].mime_type == "application/json"
    assert seen["read"]["sessionKey"] == "main"
    assert seen["read"]["messages"][:2] == seen["history"]["messages"][:2]
    assert "agent:main:nobody" in seen["read_missing"]


def test_read_only_in_the_legacy_handshake(state: Path) -> None:
    got: dict[str, Any] = {}

    async def main() -> None:
        async with Client(server("--read-only"), mode="legacy") as c:
            got["names"] = [t.name for t in (await c.list_tools()).tools]
            got["refused"] = err(
                await c.call_tool("sessions_send", {"sessionKey": "x", "message": "m"})
            )
            got["list"] = ok(await c.call_tool("sessions_list", {}))

    anyio.run(main)
    assert got["names"] == [
        "sessions_list",
        "sessions_history",
        "agents_list",
        "sessions_search",
        "sessions_yield",
        "usage",
        "diff",
    ]
    assert got["refused"]["status"] == "forbidden" and "read-only" in got["refused"]["error"]
    assert got["list"] == {"count": 0, "sessions": [], "hasMore": False, "limitApplied": 200}
    assert not (state / "agents").exists()  # nothing was sent


def test_slow_sends_side_by_side_then_stdin_closes(state: Path, tmp_path: Path) -> None:
    """Two waits on a 2 s agent at once are not serialised; a third call is cancelled; then
    stdin closes while a fourth still waits. The server exits on its own, and every run it
    started goes on to the end (detached, as with the CLI)."""
    write_config(state, {"agents": {"defaults": {"runner": SLEEPY}}})
    exit_file = tmp_path / "server-exit"
    out: dict[str, Any] = {}
    progress: list[tuple[str, float, float | None]] = []

    async def send(c: Client, key: str) -> None:
        async def on_progress(p: float, total: float | None, msg: str | None) -> None:
            progress.append((key, p, total))

        out[key] = ok(
            await c.call_tool(
                "sessions_send",
                {"sessionKey": key, "message": "hi", "timeoutSeconds": 5},
                progress_callback=on_progress,
            )
        )

    async def cancelled(c: Client) -> None:
        with anyio.move_on_after(0.5):
            await c.call_tool(
                "sessions_send", {"sessionKey": "dm:c", "message": "hi", "timeoutSeconds": 30}
            )
        out["after_cancel"] = ok(await c.call_tool("sessions_list", {}))

    async def pending(c: Client) -> None:
        try:
            await c.call_tool(
                "sessions_send", {"sessionKey": "dm:y", "message": "hi", "timeoutSeconds": 30}
            )
        except Exception as exc:  # noqa: BLE001 - the connection closes under it
            out["pending_error"] = type(exc).__name__

    async def main() -> None:
        params = server("--tools", "sessions_send,sessions_list", wrapper=exit_file)
        async with anyio.create_task_group() as outer:
            async with Client(params, read_timeout_seconds=60) as c:
                out["names"] = [t.name for t in (await c.list_tools()).tools]
                async with anyio.create_task_group() as tg:
                    tg.start_soon(send, c, "dm:a")
                    tg.start_soon(send, c, "dm:b")
                    tg.start_soon(cancelled, c)
                out["accepted"] = ok(
                    await c.call_tool(
                        "sessions_send",
                        {"sessionKey": "dm:x", "message": "hi", "timeoutSeconds": 0},
                    )
                )
                outer.start_soon(pending, c)
                while not any(r.get("sessionKey") == "agent:main:dm:y" for r in records(state)):
                    await anyio.sleep(0.05)
            # stdin is closed (the client is gone) while that call was still waiting
            outer.cancel_scope.cancel()

    anyio.run(main)
    assert out["names"] == ["sessions_list", "sessions_send"]
    assert out["dm:a"]["status"] == "ok" and out["dm:a"]["reply"] == "woke up"
    assert out["dm:b"]["status"] == "ok" and out["dm:b"]["reply"] == "woke up"
    # Not serialised: each send was accepted before the other's run had ended. (Wall time
    # against the 4 s target is measured in bench/mcp_concurrency.py.)
    recs = {r["sessionKey"]: r for r in records(state)}
    a, b = recs["agent:main:dm:a"], recs["agent:main:dm:b"]
    assert a["createdAt"] < b["endedAt"] and b["createdAt"] < a["endedAt"]
    assert progress and {k for k, _, _ in progress} <= {"dm:a", "dm:b"}
    assert all(total == 5 and 0 <= p <= 5 for _, p, total in progress)
    # The cancelled call: the server kept answering.
    assert isinstance(out["after_cancel"]["sessions"], list)

    # The wrapper records the server's own exit; had the SDK client had to kill the process
    # group (after its grace period), the wrapper would have died before writing it.
    assert exit_file.exists(), "the server did not exit on its own when stdin closed"
    pid, rc = map(int, exit_file.read_text().split())
    assert rc == 0 and not alive(pid)
    assert out["accepted"]["status"] == "accepted"
    # Every run goes on to the end after the server is gone (cancelled, fire-and-forget, and
    # the one still waited on when stdin closed).
    for key in ("agent:main:dm:c", "agent:main:dm:x", "agent:main:dm:y"):
        rc, waited = run_json("wait", recs[key]["runId"] if key in recs else _run_of(state, key))
        assert rc == 0 and waited["reply"] == "woke up", waited


def _run_of(state: Path, key: str) -> str:
    return str(next(r["runId"] for r in records(state) if r["sessionKey"] == key))


PROBE_NO_SDK = """
import runpy, sys
sys.modules["mcp"] = None  # as if the extra were not installed
sys.argv = ["sessiontool", *sys.argv[1:]]
runpy.run_module("sessiontool", run_name="__main__", alter_sys=True)
"""


def test_missing_sdk_is_one_line_with_the_install_command(state: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE_NO_SDK, "mcp"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 1 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "pip install 'mcp>=2.3,<3'" in lines[0] and "pip install '.[mcp]'" in lines[0]


def test_bad_tools_option_is_a_usage_error(state: Path) -> None:
    proc = run_cli("mcp", "--tools", "sessions_list,sessions_delete")
    assert proc.returncode == 2 and proc.stdout == ""
    assert "unknown tool 'sessions_delete'" in proc.stderr
    assert "sessions_history" in proc.stderr  # the valid names


def test_other_commands_never_import_the_sdk(state: Path, tmp_path: Path) -> None:
    for args in (("list", "--json"), ("agents", "--json"), ("--help",)):
        names = imported_modules(*args, state=state, tmp=tmp_path)
        for heavy in ("mcp", "mcp_types", "anyio", "pydantic", "starlette"):
            assert heavy not in names, f"{heavy} imported by {' '.join(args)}"


def test_null_for_an_optional_argument_is_a_usage_error(state: Path) -> None:
    """`{"limit": null}` is not "no limit": through MCP a null is a value of the wrong type."""
    assert run_cli("send", "main", "hello").returncode == 0
    seen: dict[str, Any] = {}

    async def session(c: Client) -> None:
        seen["null"] = err(await c.call_tool("sessions_list", {"limit": None}))
        seen["absent"] = ok(await c.call_tool("sessions_list", {}))

    run(session, server("--as", ME))
    assert seen["null"]["code"] == 2 and "limit" in seen["null"]["error"]
    assert "null" in seen["null"]["error"]
    assert seen["absent"]["count"] >= 1


def test_every_request_gets_an_answer_even_one_the_sdk_cannot_parse(state: Path) -> None:
    """A lone surrogate in the arguments, a batch, params as a list, a line that is not JSON:
    each gets a JSON-RPC error with its id, never silence (issue 27, item 17)."""
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    }
    lines = [
        json.dumps(init),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sessions_list",'
        '"arguments":{"kinds":["\\ud800"]}}}',
        json.dumps([{"jsonrpc": "2.0", "id": 3, "method": "tools/list"}]),
        json.dumps({"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": [1]}),
        "{not json",
        json.dumps({"jsonrpc": "2.0", "id": "five", "method": "tools/list", "params": "x"}),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": [1]}),
        json.dumps({"jsonrpc": "2.0", "id": 6, "method": "tools/list"}),
    ]
    answers: list[dict[str, Any]] = []
    with subprocess.Popen(
        [sys.executable, "-m", "sessiontool", "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write("\n".join(lines) + "\n")
            proc.stdin.flush()
            # Read until the last request is answered (stdin stays open: EOF ends the server).
            while not any(a.get("id") == 6 for a in answers):
                line = proc.stdout.readline()
                if not line:
                    break
                answers.append(json.loads(line))
        finally:
            proc.stdin.close()
            try:
                proc.wait(timeout=60)
            finally:
                if proc.poll() is None:
                    proc.kill()
    by_id = {a.get("id"): a for a in answers}
    assert sorted(by_id, key=str) == sorted([1, 2, 3, 4, None, "five", 6], key=str), answers
    assert by_id[2]["error"]["code"] == -32602 and "surrogate" in by_id[2]["error"]["message"]
    assert by_id[3]["error"]["code"] == -32600 and "batch" in by_id[3]["error"]["message"]
    assert by_id[4]["error"]["code"] == -32602
    assert by_id["five"]["error"]["code"] == -32602
    assert by_id[None]["error"]["code"] == -32700
    assert [t["name"] for t in by_id[6]["result"]["tools"]][:1] == ["sessions_list"]
    assert len(answers) == 7, answers  # a bad notification gets no answer


def test_mcp_as_acts_as_that_session_on_a_remote_gateway(state: Path, tmp_path: Path) -> None:
    """`--gateway URL mcp --as main`: a send goes to the gateway as that session (inter-session
    provenance naming it), its key read under the gateway's own config (main key `work`), not
    as the operator (the remote context took the global `--as`, which `mcp --as` does not set)."""
    from .fakes import gateway as fake
    from .runhelpers import reap

    config = {"session": {"mainKey": "work"}}
    with fake.running(tmp_path / "gw", token="mcp-remote-token", config=config) as gw:
        url = f"ws://127.0.0.1:{gw.port}"
        params = server("--as", "main")
        at = params.args.index("mcp")
        params.args[at:at] = ["--gateway", url]
        params.env = {**(params.env or {}), "OPENCLAW_GATEWAY_TOKEN": "mcp-remote-token"}
        sent: dict[str, Any] = {}

        async def session(c: Client) -> None:
            sent.update(
                ok(await c.call_tool("sessions_send", {"sessionKey": "room", "message": "hi"}))
            )

        try:
            run(session, params)
        finally:
            for root in state.glob("gateways/*"):
                reap(root)
        turns = [c["params"] for c in gw.calls("agent")]
    assert sent["status"] == "ok", sent
    first = turns[0]
    assert first["sessionKey"] == "agent:main:room" and first["message"] == "hi"
    assert first["inputProvenance"]["sourceSessionKey"] == "agent:main:work"
