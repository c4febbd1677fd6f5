"""No option lives in process state (issue 36 item 2): the global options are parsed once into a
frozen `Options` that every `Context` carries (the `--store` choice also rides on its paths), and
the long-running `mcp` server builds a context per call, so two servers (or two targets) in one
process never see each other's options. And no module under sessiontool/ keeps option state in a
module global: every `global` statement left is allowlisted below with its reason."""

from __future__ import annotations

import ast
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import ROOT

from .runhelpers import write_store

# (module, name) -> why it may stay a module global. None of them holds an option: each is the
# same in every call of a process, whoever asks and against whichever target.
ALLOWED_GLOBALS = {
    ("sessiontool/state/sessions_json.py", "_write_guard"): (
        "not an option: the one hook (openclaw's guard_store_write) installed, idempotently and "
        "with the same value, by every process that writes, so that state/ needs no gateway code"
    ),
    ("sessiontool/state/reader.py", "_kept"): (
        "not an option: a one-shot command's readers left for os._exit (long-lived processes "
        "never set it)"
    ),
    ("sessiontool/index/extract.py", "_unsegmented_re"): "a compiled pattern, cached",
    ("sessiontool/runs/records.py", "_last_created_ms"): (
        "the process's monotonic clock for record creation times, the same for every caller"
    ),
}


def _globals_declared() -> set[tuple[str, str]]:
    found = set()
    for path in sorted((ROOT / "sessiontool").rglob("*.py")):
        module = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Global):
                found.update((module, name) for name in node.names)
    return found


def test_no_module_keeps_option_state_in_a_global() -> None:
    """A new `global` is a new piece of process state: put an option in `Options` (passed down
    with the context) instead, or add it here with why it is no option. The list only shrinks:
    an entry no longer used fails too."""
    found = _globals_declared()
    assert found - ALLOWED_GLOBALS.keys() == set(), "new module globals"
    assert ALLOWED_GLOBALS.keys() - found == set(), "gone: drop them from ALLOWED_GLOBALS"


def test_options_and_context_are_frozen(tmp_path: Path) -> None:
    from sessiontool.context import Options, build_context

    opts = Options("openclaw-sqlite", "WS://GW.example:1/", "never")
    assert (opts.store, opts.gateway, opts.color) == (
        "openclaw-sqlite",
        "ws://gw.example:1",
        "never",
    )
    assert Options("auto").store is None
    with pytest.raises(AttributeError):
        opts.store = "jsonl"  # type: ignore[misc]
    ctx = build_context(tmp_path / "s").with_options(opts)
    assert ctx.paths.store == "openclaw-sqlite"
    with pytest.raises(AttributeError):
        ctx.options = Options()  # type: ignore[misc]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def test_two_contexts_in_one_process_keep_their_own_store_and_gateway(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the CLI's globals did: a context built with `--store`/`--gateway` changed every
    context built after it in the same process. Now each keeps its own, in any order."""
    from sessiontool.cli.app import remote_context
    from sessiontool.context import Options, build_context
    from sessiontool.state.detect import detect

    for name in ("SESSIONTOOL_STORE", "SESSIONTOOL_GATEWAY_URL", "OPENCLAW_GATEWAY_URL"):
        monkeypatch.delenv(name, raising=False)
    state = tmp_path / "state"
    state.mkdir()
    url = f"ws://127.0.0.1:{_closed_port()}"
    forced = remote_context(build_context(state), Options(store="openclaw-sqlite"))
    remote = remote_context(build_context(state), Options(gateway=url))
    plain = remote_context(build_context(state), Options())
    assert detect(forced.paths, "main").format == "openclaw-sqlite"
    assert detect(remote.paths, "main").format == "gateway"
    assert remote.paths.root == state / "gateways" / remote.paths.root.name
    assert plain.paths.root == state
    assert detect(plain.paths, "main").format == "jsonl"
    assert detect(forced.paths, "main").format == "openclaw-sqlite"  # built first, still its own


def test_one_mcp_process_serves_two_targets_without_leaking_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three MCP servers in one process, calls interleaved: one forced onto OpenClaw's SQLite
    store (there is none: its error says so), one on a remote gateway that does not answer (its
    error names it), one on the plain local store (its session, every time)."""
    pytest.importorskip("mcp")
    from sessiontool.cli.app import remote_context
    from sessiontool.context import Context, Options, build_context
    from sessiontool.mcpserver import SessionToolsServer, _Wait

    for name in ("SESSIONTOOL_STORE", "SESSIONTOOL_GATEWAY_URL", "OPENCLAW_GATEWAY_URL"):
        monkeypatch.delenv(name, raising=False)
    state = tmp_path / "state"
    write_store(state, {"agent:main:alpha": {"sessionId": "s-alpha", "updatedAt": 1}})

    def server(options: Options) -> SessionToolsServer:
        def make_ctx() -> Context:
            return remote_context(build_context(state), options)

        return SessionToolsServer(make_ctx, read_only=True)

    def listed(srv: SessionToolsServer) -> dict[str, Any]:
        result = srv._call("sessions_list", {}, _Wait(threading.Event(), threading.Event()))
        if result.failed:
            return {"failed": True, "error": result.data["error"]}
        return {"failed": False, "keys": _keys(result.data)}

    url = f"ws://127.0.0.1:{_closed_port()}"
    forced = server(Options(store="openclaw-sqlite"))
    remote = server(Options(gateway=url))
    plain = server(Options())
    local = {"failed": False, "keys": ["agent:main:alpha"]}
    no_db = {"failed": True, "error": f"no OpenClaw session database at {_db(state)}"}
    assert listed(plain) == local
    assert listed(forced) == no_db
    assert listed(plain) == local
    assert listed(remote) == {"failed": True, "error": f"no OpenClaw gateway answers at {url}"}
    assert listed(plain) == local
    assert listed(forced) == no_db


def _db(state: Path) -> Path:
    return state / "agents" / "main" / "agent" / "openclaw-agent.sqlite"


def _keys(data: Any) -> list[str]:
    sessions = data.get("sessions") if isinstance(data, dict) else None
    return sorted(s["key"] for s in sessions or [])
