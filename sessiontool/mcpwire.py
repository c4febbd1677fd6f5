"""The MCP server's stdin, screened: every request gets an answer.

The SDK's stdio reader drops a line it cannot validate (a JSON-RPC batch, `params` that are a
list, malformed JSON) and the handlers never see one whose strings hold a lone surrogate
(`"\\ud800"` is valid JSON, not valid Unicode); the client that sent it then waits for ever.
Each line is looked at here first: one the SDK would drop is answered with the JSON-RPC error
it deserves (parse error, invalid request, invalid params) on the server's own write stream, so
answers never interleave; the rest go to the SDK unchanged. A notification (no id) that is bad
gets no answer, as JSON-RPC says.

This module imports the SDK (via mcpserver): import it only once `mcp` is needed.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602

Answer = tuple[Any, int, str]  # (id, code, message)


def _ident(obj: Any) -> Any:
    """A request's id when it is one JSON-RPC allows (string or integer), else None."""
    i = obj.get("id") if isinstance(obj, dict) else None
    return i if isinstance(i, str | int) and not isinstance(i, bool) else None


def _has_surrogate(value: Any, depth: int = 0) -> bool:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if depth > 200:
        return False
    if isinstance(value, dict):
        return any(
            _has_surrogate(k, depth + 1) or _has_surrogate(v, depth + 1) for k, v in value.items()
        )
    if isinstance(value, list):
        return any(_has_surrogate(v, depth + 1) for v in value)
    return False


def _one(obj: Any, validate: Callable[[str], object]) -> Answer | None | bool:
    """The answer owed for one message, None when it is fine, False when it gets no answer."""
    if not isinstance(obj, dict):
        return (None, INVALID_REQUEST, "Invalid Request: a message is a JSON object")
    ident = _ident(obj)
    is_request = "method" in obj and "id" in obj
    if "method" not in obj and "id" in obj:
        return False  # a response from the client: nothing to answer
    problem: tuple[int, str] | None = None
    if "params" in obj and not isinstance(obj["params"], dict):
        problem = (INVALID_PARAMS, "Invalid params: params must be an object")
    elif _has_surrogate(obj):
        problem = (
            INVALID_PARAMS,
            "Invalid params: a string holds a lone surrogate (\\ud800-\\udfff), not Unicode text",
        )
    else:
        try:
            validate(json.dumps(obj, ensure_ascii=False))
        except Exception:  # noqa: BLE001 - whatever the SDK's validator refuses
            problem = (INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 message MCP accepts")
    if problem is None:
        return None
    if not is_request:
        return False  # a bad notification: JSON-RPC answers none
    return (ident, *problem)


def screen(line: str, validate: Callable[[str], object]) -> list[Answer] | None:
    """None: hand the line to the SDK. Else the answers owed instead (maybe none)."""
    if not line.strip():
        return []
    try:
        obj = json.loads(line)
    except RecursionError:
        return [(None, PARSE_ERROR, "Parse error: the line is JSON nested too deep to read")]
    except ValueError:
        return [(None, PARSE_ERROR, "Parse error: the line is not JSON")]
    if isinstance(obj, list):
        # MCP has no batches (removed in 2025-06-18): every request in one is refused by id.
        out = [
            (_ident(o), INVALID_REQUEST, "Invalid Request: JSON-RPC batches are not supported")
            for o in obj
            if isinstance(o, dict) and "method" in o and _ident(o) is not None
        ]
        return out or [(None, INVALID_REQUEST, "Invalid Request: an empty or odd batch")]
    got = _one(obj, validate)
    if got is None:
        return None
    return [] if got is False else [got]  # type: ignore[list-item]


def stdin_lines() -> AsyncIterator[str]:
    """The wire's lines. Descriptor 0 is pointed at /dev/null meanwhile, so a child of a
    handler can never read protocol bytes (what the SDK's own reader does too)."""
    from io import TextIOWrapper

    import anyio

    try:
        import fcntl

        wire = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        buffer: Any = os.fdopen(wire, "rb", closefd=False)
    except OSError:
        import sys

        buffer = sys.stdin.buffer
    return anyio.wrap_file(TextIOWrapper(buffer, encoding="utf-8", errors="replace")).__aiter__()


class ScreenedStdin:
    """What the SDK's stdio server reads: the wire's lines minus those answered here."""

    def __init__(self, lines: AsyncIterator[str]) -> None:
        import anyio

        self.lines = lines
        self.ready = anyio.Event()
        self.answer: Callable[[Answer], Awaitable[None]] | None = None

    def connect(self, write_stream: Any) -> None:
        import mcp_types as types
        from mcp.shared.message import SessionMessage

        async def answer(a: Answer) -> None:
            ident, code, message = a
            err = types.JSONRPCError(
                jsonrpc="2.0", id=ident, error=types.ErrorData(code=code, message=message)
            )
            await write_stream.send(SessionMessage(err))

        self.answer = answer
        self.ready.set()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._screened()

    async def _screened(self) -> AsyncIterator[str]:
        import mcp_types as types

        def validate(text: str) -> object:
            return types.jsonrpc_message_adapter.validate_json(text, by_name=False)

        async for line in self.lines:
            answers = screen(line, validate)
            if answers is None:
                yield line
                continue
            await self.ready.wait()
            assert self.answer is not None
            for a in answers:
                await self.answer(a)
