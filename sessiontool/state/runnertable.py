"""Every runner sessiontool can run, one row each (pre-commit's `all_languages.py`): the type
name a config writes → the module and class that run it, and the keys its config object may
hold (each a JSON Schema fragment with the words an error says, as config_keys.py's rows).

A new runner is one row here plus its module under `runs/runners/`. The modules are named,
not imported: `runs/runners.get_runner` imports the one a run needs, so start-up does not grow,
and this table sits in the state layer where the config checks (`config.check_runner`,
`config_keys.check_all`) and the JSON Schema (`config schema`) read the same names."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# The longest a runner's `timeoutSeconds` (or the echo runner's delay) may be: about 31 years.
MAX_SECONDS = 1_000_000_000


@dataclass(frozen=True)
class Field:
    schema: dict[str, Any]
    what: str  # what an error says was expected
    doc: str
    required: bool = False


SECONDS = Field(
    {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_SECONDS},
    f"a positive number of seconds up to {MAX_SECONDS:,} (about 31 years)",
    "how long one turn of the runner may take",
)
TEXT_JSON = {"enum": ["text", "json"]}
ENV = Field(
    {
        "anyOf": [
            {"type": "array", "items": {"type": "string", "minLength": 1}},
            {"type": "object"},
        ]
    },
    'an array of variable names (globs allowed), e.g. ["OPENAI_API_KEY", "LLM_*"], '
    "or an object of variables to set",
    "variables the agent may see (names or globs), or an object of variables to set",
)
PASS_ENV = Field({"type": "boolean"}, "true or false", "pass the whole environment")
MODEL = Field({"type": "string"}, "a model id or alias", "the model, unless the run names one")
OBJECT = {"type": "object"}

FIELDS_COMMAND = {
    "command": Field(
        {
            "anyOf": [
                {"type": "string", "pattern": r"\S"},
                {"type": "array", "items": {"type": "string"}, "minItems": 1},
            ]
        },
        "a non-empty array of strings or a command string",
        "the program and its arguments",
        required=True,
    ),
    "input": Field(TEXT_JSON, '"text" or "json"', "the message on stdin, or the whole request"),
    "output": Field(TEXT_JSON, '"text" or "json"', "stdout is the reply, or `{reply, usage?}`"),
    "timeoutSeconds": SECONDS,
    "env": ENV,
    "passEnv": PASS_ENV,
    "model": MODEL,
}
FIELDS_OPENAI = {
    "baseUrl": Field(
        {"type": "string", "pattern": "^https?://"},
        "an http(s) URL",
        "the endpoint's base URL (`/chat/completions` is added)",
    ),
    "model": MODEL,
    "apiKeyEnv": Field({"type": "string"}, "a variable name", "the variable holding the API key"),
    "provider": Field({"type": "string"}, "a string", "the provider name recorded"),
    "headers": Field(
        {"type": "object", "additionalProperties": {"type": "string"}},
        "an object of strings",
        "extra HTTP headers",
    ),
    "body": Field(OBJECT, "an object", "extra keys of the request body"),
    "tools": Field({"type": "boolean"}, "true or false", "offer the session tools"),
    "timeoutSeconds": SECONDS,
}
FIELDS_LLM = {
    "model": MODEL,
    "options": Field(OBJECT, "an object of model options", "the model's options"),
    "tools": Field({"type": "boolean"}, "true or false", "offer the session tools"),
    "timeoutSeconds": SECONDS,
}
FIELDS_ECHO = {
    "delaySeconds": Field(
        SECONDS.schema, SECONDS.what, "wait this long before answering (tests and demos)"
    ),
}

# type name → (module, class, the keys of its config object beside `type`)
RUNNERS: dict[str, tuple[str, str, dict[str, Field]]] = {
    "echo": ("sessiontool.runs.runners.echo", "EchoRunner", FIELDS_ECHO),
    "command": ("sessiontool.runs.runners.command", "CommandRunner", FIELDS_COMMAND),
    "openai": ("sessiontool.runs.runners.openai", "OpenAIRunner", FIELDS_OPENAI),
    "llm": ("sessiontool.runs.runners.llm", "LLMRunner", FIELDS_LLM),
}

# The runners whose turn is an agent process of their own: a spawn's `cwd` is its working
# directory. The others answer inside sessiontool's worker (their tools are the session tools,
# which touch no working directory): a `cwd` for them is refused rather than ignored.
TAKES_CWD = frozenset({"command"})


def expected_types() -> str:
    """The runner types, for an error message."""
    return ", ".join(RUNNERS)
