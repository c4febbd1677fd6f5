"""The command runner: any program is an agent. It gets the message (or the whole request as
JSON) on stdin and answers on stdout; a text-mode program (an LLM CLI) gets the rest of the
context through its arguments: the system prompt (`{system}`, `{system_file}`) and the earlier
turns (`{history_file}`, `{history_text_file}`). It runs in its own process group, so a timeout
or an `abort` kills it together with everything it started."""

from __future__ import annotations

import json
import os
import re
import selectors
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from typing import Any

from sessiontool.runs.runners.base import (
    RunnerError,
    RunnerResult,
    RunnerTimeout,
    estimated_usage,
    format_seconds,
    positive_seconds,
    requested_model,
    split_model,
    text_of,
    usage_from,
)
from sessiontool.state.jsonio import dumps_compact

STDERR_TAIL = 2000
MAX_STDOUT = 32 * 1024 * 1024
MAX_STDERR_KEPT = 64 * 1024
# After the agent itself has exited, how long to keep reading pipes that a background child
# still holds open before giving up on them (the reply is what the agent wrote, not its orphans).
LINGER_SECONDS = 1.0
POLL_SECONDS = 0.1
READ_CHUNK = 64 * 1024
WRITE_CHUNK = 64 * 1024


def _command_argv(cfg: Mapping[str, Any]) -> list[str]:
    cmd = cfg.get("command")
    if isinstance(cmd, str) and cmd.strip():
        try:
            argv = shlex.split(cmd)
        except ValueError as exc:
            raise RunnerError(f"runner.command: cannot split {cmd!r}: {exc}") from exc
        if argv:
            return argv
    if isinstance(cmd, list) and cmd and all(isinstance(c, str) for c in cmd):
        return list(cmd)
    raise RunnerError("runner.command: expected a non-empty array of strings or a command string")


def _mode(cfg: Mapping[str, Any], key: str) -> str:
    value = cfg.get(key, "text")
    if value not in ("text", "json"):
        raise RunnerError(f'runner.{key}: expected "text" or "json", got {value!r}')
    return str(value)


def _tail(data: bytes, limit: int = STDERR_TAIL) -> str:
    text = data.decode("utf-8", "replace").strip()
    return text[-limit:].lstrip() if len(text) > limit else text


def _keep_in_log(data: bytes, *, truncated: bool) -> None:
    """The runner's stderr (its last MAX_STDERR_KEPT bytes) into the worker's stderr, which is
    the run's log: `runs ID --log` then shows why a runner failed, not only the error's tail."""
    if not data.strip():
        return
    head = "--- runner stderr" + (f" (last {MAX_STDERR_KEPT // 1024} KiB)" if truncated else "")
    try:
        sys.stderr.write(head + " ---\n")
        sys.stderr.write(data.decode("utf-8", "replace").rstrip("\n") + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class _Pumped:
    """What came out of the agent, and whether it had to be killed for time."""

    def __init__(self) -> None:
        self.stdout = bytearray()
        self.stderr = bytearray()
        self.stderr_dropped = False
        self.timed_out = False


def _pump(proc: subprocess.Popen[bytes], data: bytes, stop_at: float | None) -> _Pumped:
    """Feed stdin and drain stdout and stderr together (no pipe can fill up and deadlock),
    until the agent closes its pipes or `stop_at` (monotonic) passes. On time-out the whole
    process group is killed. Pipes that outlive the agent itself (held by a background child)
    are abandoned after a short grace instead of blocking the run."""
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    out = _Pumped()
    sel = selectors.DefaultSelector()
    stdin_fd = proc.stdin.fileno()
    view = memoryview(data)
    if view:
        os.set_blocking(stdin_fd, False)
        sel.register(stdin_fd, selectors.EVENT_WRITE)
    else:
        proc.stdin.close()
    sinks = {proc.stdout.fileno(): out.stdout, proc.stderr.fileno(): out.stderr}
    for fd in sinks:
        sel.register(fd, selectors.EVENT_READ)
    exited_at: float | None = None
    try:
        while sinks:
            now = time.monotonic()
            if stop_at is not None and now >= stop_at:
                out.timed_out = True
                _kill_group(proc.pid)
                break
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at > LINGER_SECONDS:
                break
            wait = POLL_SECONDS if stop_at is None else max(0.0, min(POLL_SECONDS, stop_at - now))
            for key, _ in sel.select(wait):
                fd = int(key.fd)
                if fd == stdin_fd:
                    try:
                        n = os.write(fd, view[:WRITE_CHUNK])
                    except BlockingIOError:
                        continue
                    except (BrokenPipeError, OSError):
                        n = len(view)  # the agent does not want (the rest of) its input
                    view = view[n:]
                    if not view:
                        sel.unregister(fd)
                        proc.stdin.close()
                    continue
                chunk = os.read(fd, READ_CHUNK)
                if not chunk:
                    sel.unregister(fd)
                    del sinks[fd]
                    continue
                sink = sinks[fd]
                sink += chunk
                if sink is out.stderr and len(sink) > MAX_STDERR_KEPT:
                    del sink[: len(sink) - MAX_STDERR_KEPT]
                    out.stderr_dropped = True
                if sink is out.stdout and len(sink) > MAX_STDOUT:
                    _kill_group(proc.pid)
                    raise RunnerError(
                        f"runner wrote more than {MAX_STDOUT // (1024 * 1024)} MiB to stdout"
                    )
    finally:
        sel.close()
        _close_pipes(proc)
    return out


def _close_pipes(proc: subprocess.Popen[bytes]) -> None:
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            try:
                pipe.close()
            except OSError:
                pass


def _child_env(
    base: Mapping[str, str], cfg: Mapping[str, Any], request: Mapping[str, Any]
) -> dict[str, str]:
    """The worker's environment cleaned (childenv: `env` as a list of names to pass, or
    `passEnv: true`), the runner's own `env` object, then the run's variables (these win:
    an agent must be able to trust them). Step and turn are removed when the run has none, so
    values inherited from an outer agent never leak into this one."""
    from sessiontool import childenv

    env = childenv.for_config(base, cfg, "runner")  # secrets only when the config names them
    extra = cfg.get("env")
    if extra is not None and not isinstance(extra, list):
        if not isinstance(extra, Mapping):
            raise RunnerError("runner.env: expected names to pass or an object of strings")
        for k, v in extra.items():
            env[str(k)] = v if isinstance(v, str) else json.dumps(v)

    def put(name: str, value: Any) -> None:
        if value is None or value == "":
            env.pop(name, None)
        else:
            env[name] = str(value).replace("\0", "")

    system = request.get("system")
    env["SESSIONTOOL_SYSTEM_PROMPT"] = (system if isinstance(system, str) else "").replace("\0", "")
    put("SESSIONTOOL_RUN_KIND", request.get("kind"))
    put("SESSIONTOOL_THINKING_LEVEL", request.get("thinkingLevel"))  # the run's, else the session's
    put("SESSIONTOOL_STEP", request.get("step"))
    put("SESSIONTOOL_TURN", request.get("turn"))
    put("SESSIONTOOL_THINKING", request.get("thinkingLevel"))  # its older name
    attached = request.get("attachments")
    put("SESSIONTOOL_ATTACHMENTS_DIR", attached.get("dir") if isinstance(attached, dict) else None)
    return env


PLACEHOLDER = re.compile(
    r"\{(model|sessionKey|runId|sessionId|agentId|thinkingLevel|thinking|system|system_file"
    r"|history_file|history_text_file)\}"
)
FILE_PLACEHOLDERS = ("system_file", "history_file", "history_text_file")
HISTORY_HEADER = "Earlier messages of this conversation, oldest first:"
HISTORY_FOOTER = "(End of the earlier messages. The new message follows.)"


def history_of(request: Mapping[str, Any]) -> list[dict[str, str]]:
    """The earlier turns as chat messages `{"role": "user"|"assistant", "content": text}`:
    what the model said and was told, without tool calls, delivery mirrors or failed turns,
    and without the new message (the command gets that on stdin)."""
    from sessiontool.runs.runners.openai import to_chat_messages

    transcript = request.get("messages")
    messages = (
        [m for m in transcript if isinstance(m, Mapping)] if isinstance(transcript, list) else []
    )
    out = []
    for m in to_chat_messages(None, messages, None):
        content = m.get("content")
        text = content if isinstance(content, str) else text_of(content)
        if text:
            out.append({"role": str(m["role"]), "content": text})
    message = request.get("message")
    if out and out[-1]["role"] == "user" and out[-1]["content"] == message:
        out.pop()  # the worker may have appended the new message already
    return out


def history_text(history: list[dict[str, str]]) -> str:
    """The earlier turns as plain text for a program that takes one prompt (an LLM CLI's
    fragment file); empty when there are none."""
    if not history:
        return ""
    lines = [HISTORY_HEADER, ""]
    for m in history:
        who = "User" if m["role"] == "user" else "Assistant"
        lines += [f"{who}: {m['content']}", ""]
    lines.append(HISTORY_FOOTER)
    return "\n".join(lines) + "\n"


class _Files:
    """The files behind `{system_file}`, `{history_file}` and `{history_text_file}`: written
    only when the command names them, in a private temporary directory removed after the run."""

    def __init__(self) -> None:
        self.dir: str | None = None

    def write(self, name: str, text: str) -> str:
        if self.dir is None:
            self.dir = tempfile.mkdtemp(prefix="sessiontool-run-")
        path = os.path.join(self.dir, name)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        return path

    def remove(self) -> None:
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None


def _substitute(
    argv: list[str], request: Mapping[str, Any], cfg: Mapping[str, Any], files: _Files | None = None
) -> list[str]:
    """Fill the placeholders in each argument: `{model}`, `{sessionKey}`, `{runId}`,
    `{sessionId}`, `{agentId}`, `{thinkingLevel}` (the run's thinking level: a spawn's, else the session's own, else empty;
    `{thinking}`, its older name, the same), `{system}` (the system prompt itself), and the paths of files
    holding the system prompt (`{system_file}`), the earlier turns as JSON (`{history_file}`)
    or as text (`{history_text_file}`).

    One pass of plain replacement, not str.format: other braces (JSON, shell) pass through, a
    value is never substituted into again (a system prompt that mentions `{runId}` stays as
    it is), and an argument stays one argument whatever the value holds (no shell ever sees
    it). `{model}` is the run's model, else the runner's `model`, else empty (never the bare
    type name the model resolution ends with)."""
    cfg_model = cfg.get("model")
    model = requested_model(request, "command") or (cfg_model if isinstance(cfg_model, str) else "")
    system = request.get("system")
    values = {
        "model": str(model),
        "sessionKey": str(request.get("sessionKey") or ""),
        "runId": str(request.get("runId") or ""),
        "sessionId": str(request.get("sessionId") or ""),
        "agentId": str(request.get("agentId") or ""),
        "thinking": str(request.get("thinkingLevel") or ""),
        "thinkingLevel": str(request.get("thinkingLevel") or ""),
        "system": system if isinstance(system, str) else "",
    }
    wanted = {m.group(1) for arg in argv for m in PLACEHOLDER.finditer(arg)}
    if wanted & set(FILE_PLACEHOLDERS):
        if files is None:
            raise RunnerError("runner.command: file placeholders need a place for their files")
        if "system_file" in wanted:
            values["system_file"] = files.write("system.txt", values["system"])
        if "history_file" in wanted or "history_text_file" in wanted:
            history = history_of(request)
            if "history_file" in wanted:
                values["history_file"] = files.write(
                    "history.json", json.dumps(history, ensure_ascii=False, indent=1) + "\n"
                )
            if "history_text_file" in wanted:
                values["history_text_file"] = files.write("history.txt", history_text(history))
    return [PLACEHOLDER.sub(lambda m: values[m.group(1)].replace("\0", ""), arg) for arg in argv]


def _agent_cwd(request: Mapping[str, Any]) -> str | None:
    """The agent process's working directory (a spawn's --cwd), checked: gone since, the run
    fails saying so rather than as a missing program."""
    cwd = request.get("cwd") or None
    if cwd is not None and not os.path.isdir(cwd):
        raise RunnerError(f"the agent's working directory {cwd} is gone (spawn --cwd)")
    return cwd if isinstance(cwd, str) else None


class CommandRunner:
    """`{"type": "command", "command": [...] | "string", "input": "text"|"json",
    "output": "text"|"json", "timeoutSeconds"?: N, "env"?: {...}, "model"?: "..."}`."""

    def __init__(self, cfg: Mapping[str, Any]) -> None:
        self.cfg = cfg
        self.argv = _command_argv(cfg)
        self.input = _mode(cfg, "input")
        self.output = _mode(cfg, "output")
        self.timeout = positive_seconds(cfg, "timeoutSeconds", "runner")

    def run(
        self,
        request: dict[str, Any],
        *,
        env: dict[str, str],
        on_agent_pid: Callable[[int], object],
        deadline: float | None,
    ) -> RunnerResult:
        start = time.monotonic()
        limit = self.timeout
        if deadline is not None:
            limit = deadline - start if limit is None else min(limit, deadline - start)
        if limit is not None and limit <= 0:
            raise RunnerTimeout("runner timed out after 0s (no time left before the run deadline)")
        files = _Files()
        try:
            return self._run(request, env, on_agent_pid, start=start, limit=limit, files=files)
        finally:
            files.remove()

    def _run(
        self,
        request: dict[str, Any],
        env: dict[str, str],
        on_agent_pid: Callable[[int], object],
        start: float,
        limit: float | None,
        files: _Files,
    ) -> RunnerResult:
        try:
            argv = _substitute(self.argv, request, self.cfg, files)
        except OSError as exc:
            raise RunnerError(f"cannot write the command's input files: {exc}") from exc
        message = request.get("message")
        if self.input == "json":
            payload = dumps_compact(request) + "\n"
        else:
            payload = message if isinstance(message, str) else ""
            if payload and not payload.endswith("\n"):
                payload += "\n"  # a text line, as Unix filters expect
        cwd = _agent_cwd(request)
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=_child_env(env, self.cfg, request),
                cwd=cwd,
                close_fds=True,
                start_new_session=True,
            )
        except FileNotFoundError as exc:
            raise RunnerError(f"runner command not found: {argv[0]}") from exc
        except PermissionError as exc:
            raise RunnerError(f"runner command is not executable: {argv[0]}") from exc
        except OSError as exc:
            raise RunnerError(
                f"cannot start runner command {argv[0]}: {exc.strerror or exc}"
            ) from exc
        try:
            on_agent_pid(proc.pid)
            pumped = _pump(proc, payload.encode("utf-8"), None if limit is None else start + limit)
        except BaseException:
            _kill_group(proc.pid)
            _close_pipes(proc)
            proc.wait()
            raise
        _keep_in_log(bytes(pumped.stderr), truncated=pumped.stderr_dropped)
        if pumped.timed_out:
            proc.wait()
            raise RunnerTimeout(f"runner timed out after {format_seconds(limit or 0)}")
        code = proc.wait()
        if code < 0:
            detail = _tail(bytes(pumped.stderr))
            msg = f"runner was killed by {_signal_name(-code)}"
            raise RunnerError(f"{msg}: {detail}" if detail else msg)
        if code != 0:
            detail = _tail(bytes(pumped.stderr))
            msg = f"runner exited with code {code}"
            raise RunnerError(f"{msg}: {detail}" if detail else msg)
        stdout = bytes(pumped.stdout).decode("utf-8", "replace")
        if self.output == "json":
            return self._from_json(stdout, request)
        reply = stdout.rstrip()
        return self._result(reply, None, model=None, provider=None, request=request)

    def _from_json(self, stdout: str, request: Mapping[str, Any]) -> RunnerResult:
        """`{reply, usage?, model?, provider?, cost?, stopReason?}`. If stdout is not one JSON
        document, its last non-empty line is tried: tools often log a line before answering."""
        data: Any = None
        try:
            data = json.loads(stdout)
        except ValueError:
            lines = [ln for ln in stdout.splitlines() if ln.strip()]
            if lines:
                try:
                    data = json.loads(lines[-1])
                except ValueError:
                    data = None
        if not isinstance(data, dict):
            excerpt = stdout.strip()[:300] or "(empty)"
            raise RunnerError(f"runner output is not a JSON object with a reply: {excerpt}")
        reply = data.get("reply")
        if not isinstance(reply, str):
            raise RunnerError('runner JSON output has no "reply" string')
        usage = usage_from(data.get("usage"), data.get("cost"))
        if usage is None and data.get("cost") is not None:
            base = estimated_usage(_str(request.get("system")), _str(request.get("message")), reply)
            usage = usage_from(base, data.get("cost"))
        stop = data.get("stopReason")
        result = self._result(
            reply.rstrip(),
            usage,
            model=_str(data.get("model")),
            provider=_str(data.get("provider")),
            request=request,
        )
        if isinstance(stop, str) and stop:
            result.stop_reason = stop
        return result

    def _result(
        self,
        reply: str,
        usage: dict[str, Any] | None,
        model: str | None,
        provider: str | None,
        request: Mapping[str, Any],
    ) -> RunnerResult:
        if usage is None:
            usage = estimated_usage(
                _str(request.get("system")), _str(request.get("message")), reply
            )
        if model is None:
            cfg_model = self.cfg.get("model")
            model = requested_model(request, "command") or (
                cfg_model if isinstance(cfg_model, str) else None
            )
        if model and provider is None:
            provider, model = split_model(model)
        elif model and provider and model.startswith(provider + "/"):
            model = model[len(provider) + 1 :]
        return RunnerResult(
            reply=reply,
            usage=usage,
            model=model,
            provider=provider,
            api="sessiontool-command",
        )


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
