"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1, for tests.

In-process:

    with FakeOpenAI(["hi", {"status": 500, "body": {"error": {"message": "boom"}}}]) as srv:
        cfg = {"type": "openai", "baseUrl": srv.base_url, "model": "m"}
        ...
        srv.requests[0].body["messages"]

As a separate process (for tests whose worker runs in another process and cannot share Python
objects): `python tests/fakes/openai_server.py [--script replies.json] [--log requests.jsonl]`
prints its base URL on the first stdout line and serves until stdin closes or it is killed.

A scripted reply is a string (the assistant text) or an object with any of:
`content`, `tool_calls` (`[{"name", "arguments" (object or string), "id"?}]`), `usage` (an
OpenAI usage object; default: characters / 4), `finish_reason`, `model`, `delay` (seconds
before answering), `status` (HTTP status, default 200) and `body` (sent verbatim instead of a
completion: an object is sent as JSON, a string as text). Replies are used in order; when
they run out, `default` answers (by default `fake: <last user message>`).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = str | dict[str, Any]


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    body: Any  # parsed JSON, or the raw text when it is not JSON

    def to_json(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "path": self.path,
            "headers": self.headers,
            "body": self.body,
        }


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"
        )
    return ""


def last_user_text(body: Any) -> str:
    messages = body.get("messages") if isinstance(body, dict) else None
    for m in reversed(messages if isinstance(messages, list) else []):
        if isinstance(m, dict) and m.get("role") == "user":
            return _text(m.get("content"))
    return ""


def default_reply(body: Any) -> Reply:
    return f"fake: {last_user_text(body)}"


def completion_body(reply: dict[str, Any], request_body: Any) -> dict[str, Any]:
    """A chat.completion object for a scripted reply."""
    content = reply.get("content")
    message: dict[str, Any] = {"role": "assistant", "content": content}
    calls = reply.get("tool_calls")
    if calls:
        message["tool_calls"] = [
            {
                "id": c.get("id") or f"call_{i}",
                "type": "function",
                "function": {
                    "name": c["name"],
                    "arguments": c["arguments"]
                    if isinstance(c.get("arguments"), str)
                    else json.dumps(c.get("arguments") or {}),
                },
            }
            for i, c in enumerate(calls)
        ]
    usage = reply.get("usage")
    if usage is None:
        messages = request_body.get("messages") if isinstance(request_body, dict) else []
        prompt = (
            sum(len(_text(m.get("content"))) for m in messages or [] if isinstance(m, dict)) // 4
        )
        completion = len(content or "") // 4
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
    model = request_body.get("model") if isinstance(request_body, dict) else None
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": reply.get("model") or model or "fake-model",
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": reply.get("finish_reason") or ("tool_calls" if calls else "stop"),
            }
        ],
        "usage": usage,
    }


class FakeOpenAI:
    """The server; start it with `with` (or start()/stop()). Thread-safe."""

    def __init__(
        self,
        replies: Iterable[Reply] = (),
        *,
        default: Callable[[Any], Reply] | None = default_reply,
        on_request: Callable[[RecordedRequest], None] | None = None,
    ) -> None:
        self._replies: deque[Reply] = deque(replies)
        self._default = default
        self._on_request = on_request
        self._lock = threading.Lock()
        self.requests: list[RecordedRequest] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- script ---------------------------------------------------------------------------
    def push(self, *replies: Reply) -> None:
        with self._lock:
            self._replies.extend(replies)

    def _next(self, body: Any) -> Reply | None:
        with self._lock:
            if self._replies:
                return self._replies.popleft()
        return self._default(body) if self._default else None

    def _record(self, req: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(req)
        if self._on_request:
            self._on_request(req)

    # -- lifecycle ------------------------------------------------------------------------
    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FakeOpenAI:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._server.daemon_threads = True
        # A short poll: shutdown() waits for the loop's next look (0.5 s by default, per test).
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _make_handler(fake: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read records
            pass

        def _send(self, status: int, payload: Any) -> None:
            if isinstance(payload, str | bytes):
                data = payload.encode() if isinstance(payload, str) else payload
                ctype = "text/plain; charset=utf-8"
            else:
                data = json.dumps(payload).encode()
                ctype = "application/json"
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _read_body(self) -> Any:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            text = raw.decode("utf-8", "replace")
            try:
                return json.loads(text) if text else None
            except ValueError:
                return text

        def _recorded(self, body: Any) -> RecordedRequest:
            headers = {k.lower(): v for k, v in self.headers.items()}
            req = RecordedRequest(self.command, self.path, headers, body)
            fake._record(req)
            return req

        def do_GET(self) -> None:
            self._recorded(None)
            if self.path.rstrip("/").endswith("/models"):
                self._send(
                    200, {"object": "list", "data": [{"id": "fake-model", "object": "model"}]}
                )
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:
            body = self._read_body()
            self._recorded(body)
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            reply = fake._next(body)
            if reply is None:
                self._send(500, {"error": {"message": "fake server: no scripted reply left"}})
                return
            spec: dict[str, Any] = {"content": reply} if isinstance(reply, str) else dict(reply)
            delay = spec.get("delay")
            if isinstance(delay, int | float) and delay > 0:
                time.sleep(delay)
            status = int(spec.get("status", 200))
            if "body" in spec:
                self._send(status, spec["body"])
                return
            self._send(status, completion_body(spec, body))

    return Handler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--script", help="JSON file: an array of scripted replies")
    parser.add_argument("--log", help="append each request as one JSON line to this file")
    args = parser.parse_args(argv)
    replies: list[Reply] = []
    if args.script:
        with open(args.script, encoding="utf-8") as fh:
            replies = json.load(fh)
    log_lock = threading.Lock()

    def log(req: RecordedRequest) -> None:
        if args.log:
            with log_lock, open(args.log, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(req.to_json()) + "\n")

    with FakeOpenAI(replies, on_request=log) as srv:
        sys.stdout.write(srv.base_url + "\n")
        sys.stdout.flush()
        try:
            sys.stdin.read()  # serve until the parent closes our stdin (or kills us)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
