"""Headless Chromium driven over the DevTools protocol, for the browser test's layout checks: a
page opened at a given viewport width (as a phone lays it out), the DOM measured, a screenshot
taken. The profile blocks the page's own JavaScript (the pages have none and must need none);
the measurements are DevTools' evaluations, which a page's settings and CSP do not stop."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import time
import urllib.request
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from websockets.sync.client import ClientConnection, connect

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)


class Browser:
    """One Chromium process with one page; `close` (or the `with` block) kills its group."""

    def __init__(self, chromium: str, profile: Path) -> None:
        (profile / "Default").mkdir(parents=True)
        prefs = {"profile": {"default_content_setting_values": {"javascript": 2}}}
        (profile / "Default" / "Preferences").write_text(json.dumps(prefs))
        self.proc = subprocess.Popen(
            [chromium, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0"]
            + ["about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self.ws: ClientConnection | None = None
        self.stack = ExitStack()
        self.next_id = 0
        try:
            port = self._port(profile / "DevToolsActivePort")
            url = f"http://127.0.0.1:{port}/json/list"
            for _ in range(100):
                with urllib.request.urlopen(url, timeout=10) as r:
                    pages = [t for t in json.load(r) if t.get("type") == "page"]
                if pages:
                    break
                time.sleep(0.1)
            url = pages[0]["webSocketDebuggerUrl"]
            self.ws = self.stack.enter_context(connect(url, max_size=None, open_timeout=30))
            self.call("Page.enable")
        except BaseException:
            self.close()
            raise

    def _port(self, path: Path) -> int:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"chromium exited: {self.proc.stderr.read()[-2000:]!r}")  # type: ignore[union-attr]
            try:
                return int(path.read_text().split()[0])
            except (OSError, ValueError, IndexError):
                time.sleep(0.1)
        raise AssertionError("chromium opened no DevTools port in 60 s")

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        assert self.ws is not None
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            msg = json.loads(self.ws.recv(timeout=120))
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise AssertionError(f"{method}: {msg['error']}")
                return dict(msg.get("result", {}))
        raise AssertionError(f"{method}: no answer in 120 s")

    def open(self, url: str, width: int, height: int = 900) -> None:
        """The page at `width` CSS pixels, laid out as a phone lays it out under its viewport
        meta tag, once it has loaded."""
        self.call(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=width < 800,
        )
        self.call("Page.navigate", url=url)
        deadline = time.monotonic() + 60
        while self.eval("document.readyState") != "complete":
            assert time.monotonic() < deadline, f"{url} did not load in 60 s"
            time.sleep(0.05)

    def eval(self, expression: str) -> Any:
        res = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in res:
            raise AssertionError(f"{expression}: {res['exceptionDetails']}")
        return res["result"].get("value")

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        self.stack.close()
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=30)
        if self.proc.stderr is not None:
            self.proc.stderr.close()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
