"""The JSON schemas of the `sessions_spawn` and `sessions_send` parameters that OpenClaw 2026.9.6
added after the January contract, with OpenClaw's names (runs/tools.py builds the tools from
them; runs/spawnopts.py and runs/sendmodes.py carry them out). Plain data: importing this costs
nothing."""

from __future__ import annotations

from typing import Any


def _enum(values: list[str], description: str) -> dict[str, Any]:
    return {"type": "string", "enum": values, "description": description}


SPAWN_PROPERTIES: dict[str, Any] = {
    "thinking": {
        "type": "string",
        "description": "Thinking level for the child's runs: off, minimal, low, medium, high, "
        "xhigh, adaptive, max or ultra (OpenClaw's other words too: 'think hard' is low); the "
        "child's thinkingLevel (the openai runner's reasoning_effort, llm's option, a command "
        "runner's {thinkingLevel} and SESSIONTOOL_THINKING_LEVEL).",
    },
    "cwd": {
        "type": "string",
        "description": "The child agent process's working directory (an existing directory).",
    },
    "context": _enum(
        ["isolated", "fork"],
        "isolated (default): a clean child; fork: the child starts with this session's "
        "messages before its [Subagent Task] (same agent only).",
    ),
    "mode": _enum(
        ["run", "session"],
        '"run" (default) one-shot; "session" a persistent child that is never archived, so '
        "later sessions_send calls reach it.",
    ),
    "taskName": {
        "type": "string",
        "description": "Stable later-target alias; starts with a lowercase letter, then "
        "lowercase/digit/_/-.",
    },
    "expectsCompletionMessage": {
        "type": "boolean",
        "description": "false: fire-and-forget; nothing is announced when the child finishes.",
    },
    "completionTarget": _enum(
        ["parent"],
        "parent: the result goes into this session's transcript only, no channel delivery "
        '(mode "run" only, not with expectsCompletionMessage=false).',
    ),
    "sandbox": _enum(
        ["inherit", "require"],
        '"inherit" (default) the sandbox policy; "require" fails unless the child is sandboxed.',
    ),
    "attachments": {
        "type": "array",
        "maxItems": 50,
        "items": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "content": {"type": "string"},
                "encoding": {"type": "string", "enum": ["utf8", "base64"]},
                "mimeType": {"type": "string"},
            },
            "required": ["name", "content"],
        },
        "description": "Inline files for the child (at most 50; 1 MiB each, 5 MiB in all), "
        "staged in a directory its system prompt names.",
    },
    "attachAs": {
        "type": "object",
        "properties": {"mountPath": {"type": "string"}},
        "description": "Attachment mount hint ({mountPath}), named in the child's prompt.",
    },
}

SEND_MODE: dict[str, Any] = _enum(
    ["followup", "steer", "notify"],
    "followup (default): a new turn; steer: guidance into the target's active run (queued as a "
    "new turn when it has none that takes guidance); notify: the message is added as context "
    "and no turn runs.",
)
