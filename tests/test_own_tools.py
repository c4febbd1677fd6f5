"""openclaw/own_tools.py against scripted `tools.invoke` answers (as the real 2026.9.6 and
2026.7.35 gave them): which answer means "not offered" (the emulation runs), which means the
tool ran and failed, which is a failure of the call itself; and how long an answer is kept."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sessiontool.errors import SessiontoolError
from sessiontool.openclaw import gateway, own_tools
from sessiontool.openclaw.wsconnection import GatewayError
from sessiontool.state.paths import StatePaths

NOT_FOUND = {
    "ok": False,
    "toolName": "sessions_send",
    "error": {"code": "not_found", "message": "Tool not available: sessions_send"},
}
NEEDS_ARGS = {
    "ok": False,
    "toolName": "sessions_send",
    "error": {"code": "internal_error", "message": "message required"},
}


@pytest.fixture
def answers(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    """Scripted answers, one per call; the calls made are recorded."""
    script: list[Any] = []
    calls: list[dict[str, Any]] = []

    def call(paths: Any, method: str, params: dict[str, Any], **_: Any) -> dict[str, Any]:
        assert method == "tools.invoke"
        calls.append(params)
        got = script.pop(0)
        if isinstance(got, Exception):
            raise got
        return dict(got)

    monkeypatch.setattr(gateway, "call", call)
    monkeypatch.setattr(own_tools, "_gateway_url", lambda paths: f"ws://{tmp_path.name}")
    monkeypatch.setattr(own_tools, "_known", {})
    return script, calls, StatePaths(tmp_path)


def test_not_found_means_not_offered(answers: Any) -> None:
    script, calls, paths = answers
    script.append(NOT_FOUND)
    assert own_tools.invoke(paths, "sessions_send", "main", {"message": "x"}) is None
    assert not own_tools.allowed(paths, "sessions_send", "main")  # remembered: no second call
    assert len(calls) == 1


def test_a_tool_that_wants_its_arguments_is_offered(answers: Any) -> None:
    script, calls, paths = answers
    script.append(NEEDS_ARGS)
    assert own_tools.allowed(paths, "sessions_send", "main")
    assert calls == [{"name": "sessions_send", "sessionKey": "main", "args": {}}]
    script.append(NEEDS_ARGS)
    with pytest.raises(own_tools.ToolRefused, match="message required"):
        own_tools.invoke(paths, "sessions_send", "main", {})


def test_a_gateway_without_the_method_is_not_offered(answers: Any) -> None:
    script, _calls, paths = answers
    script.append(GatewayError("gateway tools.invoke: unknown method: tools.invoke"))
    assert own_tools.invoke(paths, "sessions_spawn", "main", {"task": "t"}) is None
    script.append(GatewayError("missing scope", extra={"gatewayCode": "FORBIDDEN"}))
    assert own_tools.invoke(paths, "sessions_spawn", "main", {"task": "t"}) is None


def test_a_call_that_may_have_run_is_not_a_fallback(answers: Any) -> None:
    """A dropped connection or a timeout: the tool may have run, so no emulation after it."""
    script, _calls, paths = answers
    script.append(GatewayError("gateway tools.invoke: no answer in 60s"))
    with pytest.raises(SessiontoolError, match="no answer"):
        own_tools.invoke(paths, "sessions_spawn", "main", {"task": "t"})


def test_an_answer_is_asked_again_after_a_while(
    answers: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    script, calls, paths = answers
    now = [1000.0]
    monkeypatch.setattr("sessiontool.openclaw.own_tools.time.monotonic", lambda: now[0])
    script.append(NOT_FOUND)
    assert not own_tools.allowed(paths, "sessions_send", "main")
    now[0] += own_tools.KNOWN_FOR_S + 1  # the operator added gateway.tools.allow meanwhile
    script.append(NEEDS_ARGS)
    assert own_tools.allowed(paths, "sessions_send", "main")
    assert len(calls) == 2
