"""The llm runner: every model the `llm` library reaches (OpenAI, Anthropic, Gemini, Ollama,
llama.cpp, MLX and more through its plugins), with the session transcript as the conversation
and the session tools as `llm` tools.

`llm` is an optional extra (`pip install '.[llm]'` in a checkout), imported only when a run uses this
runner, so it costs the rest of sessiontool nothing. Model ids, aliases, the default model and
API keys are `llm`'s own (`llm models`, `llm aliases`, `llm keys set`, its environment
variables): whoever has `llm` working has this runner working.

The conversation reaches the model twice over, because `llm` plugins read it in one of two ways
(runs/runners/llm_history.py builds both from the transcript).

The tool loop is sessiontool's own, like the `openai` runner's: each tool call is executed as the
run's own session with every policy applied, and recorded as OpenClaw's toolCall/toolResult
messages; `sessiontool.maxToolRounds` bounds it. The model calls and tool calls run in a helper
thread so that the run's deadline and `abort` interrupt a call that `llm` itself cannot."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sessiontool.runs.llm_models import resolve
from sessiontool.runs.runners import spend
from sessiontool.runs.runners.base import (
    RunnerError,
    RunnerResult,
    RunnerTimeout,
    format_seconds,
    make_usage,
    positive_seconds,
    remaining,
)
from sessiontool.runs.runners.llm_history import earlier_responses, to_history
from sessiontool.runs.runners.turns import (
    add_usage,
    call_offered,
    too_many_rounds,
    tool_result_message,
    tool_use_turn,
)

if TYPE_CHECKING:
    from sessiontool.context import Context

API = "llm"
# sessiontool is not on a package index: name the package itself, and the checkout's extra.
INSTALL = (
    "pip install 'llm>=0.36' in sessiontool's environment (from a checkout: "
    "pip install '.[llm]'; with pipx: pipx inject sessiontool llm)"
)
POLL_SECONDS = 0.1


def import_llm() -> Any:
    """The `llm` module, or a RunnerError that says how to install it."""
    try:
        import llm
    except ImportError as exc:
        raise RunnerError(
            f"the llm runner needs the llm library, which is not installed: {INSTALL}"
        ) from exc
    return llm


# -- model, provider, options ----------------------------------------------------------------


def get_model(llm: Any, name: str | None) -> Any:
    """The model as `llm` resolves the name (runs/llm_models.py: ids, aliases, `provider/`
    tried off; None = llm's default model); the error names the name as given."""
    try:
        return resolve(llm, name)
    except llm.UnknownModelError as exc:
        message = exc.args[0] if exc.args and isinstance(exc.args[0], str) else str(exc)
        raise RunnerError(f"{message} (`llm models` lists the models llm knows)") from exc


def provider_of(model: Any) -> str:
    """The provider `llm` serves the model through: the plugin's name (`llm_anthropic` ->
    `anthropic`, llm's built-in OpenAI plugin -> `openai`)."""
    module = type(model).__module__ or ""
    if module.startswith("llm.default_plugins."):
        name = module.rsplit(".", 1)[1]
        return name.removesuffix("_models") or "llm"
    top = module.split(".", 1)[0]
    return top.removeprefix("llm_").replace("_", "-") or "llm"


def model_name(model: Any, provider: str, resolved: str | None = None) -> str:
    """The model's id as `llm` reports it (the resolved id when the plugin gives one), without
    a leading `provider/` that only repeats the provider."""
    name = resolved or str(getattr(model, "model_id", "") or "")
    return name.removeprefix(provider + "/") if name.startswith(provider + "/") else name


def model_options(model: Any, options: Any) -> dict[str, Any]:
    """`runner.options`, checked against the model's own options (`llm models --options`)."""
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise RunnerError("runner.options: expected an object of model options")
    opts = {str(k): v for k, v in options.items()}
    try:
        model.Options(**opts)
    except Exception as exc:  # pydantic's ValidationError; its text names the option
        first = " ".join(str(exc).split())
        raise RunnerError(f"runner.options: not valid for {model.model_id}: {first}") from exc
    return opts


# -- usage ------------------------------------------------------------------------------------


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return 0
    return max(0, int(value))


def usage_of(usage: Any) -> dict[str, Any]:
    """OpenClaw's usage object from `llm`'s `Usage(input, output, details)`.

    Cache counts come from the details plugins report: Anthropic's `cache_read_input_tokens` /
    `cache_creation_input_tokens` (not part of `input`), OpenAI's
    `prompt_tokens_details.cached_tokens` (part of `input`, so taken out of it)."""
    inp = _count(getattr(usage, "input", None))
    out = _count(getattr(usage, "output", None))
    details = getattr(usage, "details", None)
    cache_read = cache_write = 0
    if isinstance(details, Mapping):
        cache_read = _count(details.get("cache_read_input_tokens"))
        cache_write = _count(details.get("cache_creation_input_tokens"))
        prompt_details = details.get("prompt_tokens_details")
        if isinstance(prompt_details, Mapping):
            cached = min(_count(prompt_details.get("cached_tokens")), inp)
            inp -= cached
            cache_read += cached
    return make_usage(inp, out, cache_read, cache_write)


# -- the tool loop ----------------------------------------------------------------------------


def llm_tools(llm: Any, definitions: Sequence[Any]) -> list[Any]:
    """The session tools (runs.tools' one definition of each) as `llm` tools. They carry no
    implementation: the loop below executes every call itself, as the session."""
    return [
        llm.Tool(name=d.name, description=d.description, input_schema=dict(d.input_schema))
        for d in definitions
    ]


def _error_text(result: Mapping[str, Any]) -> str:
    """`forbidden: <why>`: a refusal or failure as one line for llm's tool-error channel."""
    status = result.get("status") if isinstance(result.get("status"), str) else "error"
    err = result.get("error")
    return f"{status}: {err}" if isinstance(err, str) and err else f"{status}: the call failed"


class _Loop:
    """Model calls and tool calls of one run, run in a helper thread. What it has recorded so
    far (`extra`, `total`) stays readable when the run stops it for time or an abort."""

    def __init__(
        self,
        runner: LLMRunner,
        llm: Any,
        model: Any,
        request: Mapping[str, Any],
        env: Mapping[str, str],
    ) -> None:
        self.runner = runner
        self.llm = llm
        self.model = model
        self.request = request
        self.env = env
        self.provider = provider_of(model)
        self.model_id = model_name(model, self.provider)
        self.extra: list[dict[str, Any]] = []
        self.total = make_usage(0, 0)
        self.result: RunnerResult | None = None
        self.error: BaseException | None = None
        self.stopped = threading.Event()
        self.lock = threading.Lock()

    def partial(self) -> RunnerResult:
        with self.lock:
            return RunnerResult(
                reply="",
                usage=dict(self.total),
                model=self.model_id,
                provider=self.provider,
                api=API,
                extra_messages=list(self.extra),
            )

    def __call__(self) -> None:
        try:
            self.result = self._run()
        except BaseException as exc:  # noqa: BLE001 - handed to the run's thread
            self.error = exc

    def _run(self) -> RunnerResult:
        llm, model, request = self.llm, self.model, self.request
        system = request.get("system") if isinstance(request.get("system"), str) else None
        message = request.get("message") if isinstance(request.get("message"), str) else ""
        transcript = request.get("messages")
        history = to_history(
            llm,
            model,
            system or None,
            transcript=[m for m in transcript if isinstance(m, Mapping)]
            if isinstance(transcript, list)
            else [],
            message=message,
        )
        if not getattr(model, "supports_conversation", True):
            history = to_history(llm, model, system or None, transcript=[], message=message)
        options = with_thinking(
            model, model_options(model, self.runner.cfg.get("options")), request
        )
        tool_ctx, definitions = self.runner.tools_for(model, self.env)
        tools = llm_tools(llm, definitions)
        max_rounds = tool_ctx.config.max_tool_rounds if tool_ctx is not None else 0

        conversation = model.conversation()
        conversation.responses = earlier_responses(llm, model, history.turns)
        response = conversation.prompt(
            message,
            system=system or None,
            messages=history.messages,
            tools=tools or None,
            stream=False,
            options=options or None,
        )
        rounds = 0
        while True:
            text = response.text()
            calls = list(response.tool_calls()) if tools else []
            usage = usage_of(response.usage())
            self.model_id = model_name(
                model, self.provider, getattr(response, "resolved_model", None)
            )
            with self.lock:
                add_usage(self.total, usage)
            if not calls:
                with self.lock:
                    return RunnerResult(
                        reply=text.strip(),
                        usage=dict(self.total),
                        model=self.model_id,
                        provider=self.provider,
                        api=API,
                        stop_reason="stop",
                        last_call_usage=usage,
                        extra_messages=list(self.extra),
                    )
            stopped_here = self.partial()
            stopped_here.reply, stopped_here.last_call_usage = text.strip(), usage
            spend.check(stopped_here)  # between model calls: a budget crossed stops the run
            if rounds >= max_rounds:
                err = too_many_rounds(max_rounds)
                err.partial = self.partial()
                err.partial.last_call_usage = usage
                raise err
            rounds += 1
            results = self._tool_round(
                tool_ctx, {t.name for t in tools}, text, calls=calls, usage=usage
            )
            chain = list(response.prompt.messages) + list(response.messages())
            response = conversation.prompt(
                self._guidance(),
                system=system or None,
                messages=chain,
                tools=tools,
                tool_results=results,
                stream=False,
                options=options or None,
            )

    def _tool_round(
        self,
        tool_ctx: Context | None,
        offered: set[str],
        text: str,
        calls: list[Any],
        usage: dict[str, Any],
    ) -> list[Any]:
        """Record the model's tool calls, execute each as the session and record its result;
        the results as `llm` tool results for the next model call."""
        blocks: list[dict[str, Any]] = (
            [{"type": "text", "text": text.strip()}] if text.strip() else []
        )
        blocks += [
            {"type": "toolCall", "id": c.tool_call_id, "name": c.name, "arguments": c.arguments}
            for c in calls
        ]
        self._record(tool_use_turn(blocks, API, self.provider, model=self.model_id, usage=usage))
        results = []
        for call in calls:
            if self.stopped.is_set():
                raise RunnerError("stopped")
            outcome = call_offered(tool_ctx, offered, call.name, call.arguments)
            output = outcome.text()
            self._record(tool_result_message(call.tool_call_id, call.name, output, outcome))
            # A refusal or failure goes back through llm's tool-error channel, so plugins
            # that mark tool errors for the model (is_error) do so; the text is the same.
            results.append(
                self.llm.ToolResult(
                    name=call.name,
                    output=output,
                    tool_call_id=call.tool_call_id,
                    exception=RunnerError(_error_text(outcome.data)) if outcome.failed else None,
                )
            )
        if self.stopped.is_set():
            raise RunnerError("stopped")
        return results

    def _record(self, message: dict[str, Any]) -> None:
        with self.lock:
            self.extra.append(message)

    def _guidance(self) -> str | None:
        """Guidance steered into this run since the last model call (`send --mode steer`):
        the next call's prompt, and user messages in the transcript."""
        from sessiontool.runs.steer import take_from_env, user_message

        items = take_from_env(dict(self.env))
        for item in items:
            self._record(user_message(item))
        return "\n\n".join(item["text"] for item in items) or None


# The llm option names that take a thinking level, in the order tried (the plugins differ).
THINKING_OPTIONS = ("reasoning_effort", "thinking_level", "thinking")


def with_thinking(
    model: Any, options: dict[str, Any], request: Mapping[str, Any]
) -> dict[str, Any]:
    """The run's thinking level (a spawn's, else the session's) as the first of
    THINKING_OPTIONS the model has (a boolean `thinking` is on unless the level is `off`); a
    model with none of them runs without."""
    level = request.get("thinkingLevel")
    if not isinstance(level, str) or not level:
        return options
    fields = getattr(getattr(model, "Options", None), "model_fields", {}) or {}
    for name in THINKING_OPTIONS:
        if name in fields and name not in options:
            if name == "thinking":
                return {**options, name: level != "off"}
            value = {"xhigh": "high", "max": "high", "ultra": "high"}.get(level, level)
            return (
                {**options, name: value}
                if level != "off" or name != "reasoning_effort"
                else options
            )
    return options


class LLMRunner:
    """`{"type": "llm", "model"?: "...", "options"?: {...}, "tools"?: bool, "timeoutSeconds"?: N}`.

    The model is the run's (unless that is only the type-name placeholder), else the runner's,
    else `llm`'s default model. `tools` defaults to on when the model supports tools; `true`
    insists (a model without tool support is then an error), `false` turns them off."""

    def __init__(self, cfg: Mapping[str, Any]) -> None:
        self.cfg = cfg
        self.timeout = positive_seconds(cfg, "timeoutSeconds", "runner")
        model = cfg.get("model")
        if model is not None and not isinstance(model, str):
            raise RunnerError(f"runner.model: expected a model id or alias, got {model!r}")
        tools = cfg.get("tools")
        if tools is not None and not isinstance(tools, bool):
            raise RunnerError(f"runner.tools: expected true or false, got {tools!r}")
        options = cfg.get("options")
        if options is not None and not isinstance(options, Mapping):
            raise RunnerError("runner.options: expected an object of model options")

    def model_requested(self, request: Mapping[str, Any]) -> str | None:
        """The run's model, else the runner's, else None (llm's default). Only `llm` itself
        is the placeholder the model resolution ends with: `echo` is a real llm model id
        (llm-echo), not sessiontool's echo runner."""
        model = request.get("model")
        if isinstance(model, str) and model.strip() not in ("", "llm"):
            return model.strip()
        cfg_model = self.cfg.get("model")
        if isinstance(cfg_model, str) and cfg_model.strip():
            return cfg_model.strip()
        return None

    def tools_for(self, model: Any, env: Mapping[str, str]) -> tuple[Context | None, list[Any]]:
        """(tool context, offered definitions): none when tools are off, the run has no
        session, or the model cannot call tools and the config did not insist."""
        from sessiontool.runs.tools import offered_definitions, tool_context

        setting = self.cfg.get("tools")
        if setting is False or not env.get("SESSIONTOOL_SESSION_KEY"):
            return None, []
        if not getattr(model, "supports_tools", False):
            if setting is True:
                raise RunnerError(
                    f"model {model.model_id} does not support tools; set runner.tools to false"
                )
            return None, []
        ctx = tool_context(env)
        return ctx, offered_definitions(ctx)

    def run(
        self,
        request: dict[str, Any],
        *,
        env: dict[str, str],
        on_agent_pid: Callable[[int], object],
        deadline: float | None,
    ) -> RunnerResult:
        limit = self.timeout
        left = remaining(deadline)
        if left is not None:
            limit = left if limit is None else min(limit, left)
        if limit is not None and limit <= 0:
            raise RunnerTimeout("runner timed out after 0s (no time left before the run deadline)")
        start = time.monotonic()
        llm = import_llm()
        model = get_model(llm, self.model_requested(request))
        loop = _Loop(runner=self, llm=llm, model=model, request=request, env=env)
        thread = threading.Thread(target=loop, name="sessiontool-llm", daemon=True)
        thread.start()
        try:
            while thread.is_alive():
                wait = POLL_SECONDS
                if limit is not None:
                    left = start + limit - time.monotonic()
                    if left <= 0:
                        err = RunnerTimeout(f"runner timed out after {format_seconds(limit)}")
                        err.partial = loop.partial()
                        raise err
                    wait = min(wait, left)
                thread.join(wait)
        except BaseException:
            loop.stopped.set()  # an abort or the deadline: the thread makes no further calls
            raise
        if loop.error is not None:
            raise self._failure(llm, loop, loop.error)
        assert loop.result is not None
        return loop.result

    @staticmethod
    def _failure(llm: Any, loop: _Loop, exc: BaseException) -> RunnerError:
        """What a failure inside `llm` or a plugin means for the run: its own message."""
        if isinstance(exc, RunnerError):
            if exc.partial is None and loop.extra:
                exc.partial = loop.partial()
            return exc
        if isinstance(exc, llm.UnknownModelError):
            text = exc.args[0] if exc.args and isinstance(exc.args[0], str) else str(exc)
        elif isinstance(exc, llm.NeedsKeyException | llm.ModelError):
            text = str(exc) or type(exc).__name__
        else:
            detail = " ".join(str(exc).split())
            text = f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__
        err = RunnerError(f"llm: {text}")
        err.__cause__ = exc
        if loop.extra:
            err.partial = loop.partial()
        return err
