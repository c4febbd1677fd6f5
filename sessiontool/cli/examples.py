"""The examples that end each command's `--help`, as gh's help ends: two or three command
lines a user can copy, each with what it does. One table, command → its examples; a test runs
each example's options against the command's own (tests/test_help_examples.py), so an example
cannot name an option that is gone."""

from __future__ import annotations

from typing import Any

EXAMPLES: dict[str, tuple[tuple[str, str], ...]] = {
    "list": (
        ("sessiontool list --kinds group --since 2h", "groups active in the last two hours"),
        ("sessiontool list --all-agents --json | jq -r '.sessions[].key'", "every key"),
        ("sessiontool list --search deploy --limit 50 --offset 50", "page 2 of label/key matches"),
    ),
    "history": (
        ("sessiontool history main --limit 20 --include-tools", "the last 20, tool results too"),
        ("sessiontool history main -f", "keep printing new messages"),
        ("sessiontool history KEY --message-id ID --limit 9", "around a search hit's messageId"),
    ),
    "search": (
        ('sessiontool search "invoice"', "every session's messages that mention it"),
        ('sessiontool search "deploy failed" --since 1d --json', "as JSON, from today"),
    ),
    "usage": (
        ("sessiontool usage --by day", "tokens and cost per day, with bars"),
        ("sessiontool usage --by tool --since 7d", "what each tool's turns cost this week"),
        ("sessiontool usage --by turn main", "each turn of a session, its cost and tools"),
    ),
    "diff": (
        ("sessiontool diff main cron:nightly", "two sessions side by side"),
        ("sessiontool diff --runs 3f2a 9c1b --json", "a rerun against its original"),
        ("sessiontool diff main cron:nightly --format html > diff.html", "one page"),
    ),
    "send": (
        ('x=$(sessiontool send main "what changed since yesterday?")', "the reply only"),
        ('sessiontool send main "focus on the tests" --mode steer', "guidance into its run"),
        ('sessiontool send main "summarise" --max-cost 0.50', "stopped once it spent $0.50"),
    ),
    "wait": (
        ('sessiontool wait "$id" --timeout 10m', "until the run ends, then its reply"),
        ("sessiontool wait --session main", "every run of the session"),
    ),
    "runs": (
        ("sessiontool runs --status running", "what runs now"),
        ("sessiontool runs 3f2a --log", "one run (a unique id prefix) and its log"),
    ),
    "rerun": (
        ("sessiontool rerun 3f2a", "the same message again, as a new run"),
        ("sessiontool rerun 3f2a --json", "its new run id as JSON"),
    ),
    "abort": (
        ("sessiontool abort 3f2a", "stop a queued or running run"),
        ("sessiontool abort 3f2a --json", "what it stopped, as JSON"),
    ),
    "spawn": (
        ('sessiontool spawn "research X and report back" --label research', "a sub-agent"),
        ('sessiontool spawn "summarise the logs" --run-timeout 600', "at most ten minutes"),
        ('sessiontool spawn "review it" --attach diff.patch --thinking high', "with a file"),
    ),
    "agents": (
        ("sessiontool agents", "the agents a spawn may target"),
        ("sessiontool agents --json", "as JSON"),
    ),
    "sweep": (
        ("sessiontool sweep", "archive finished sub-agent sessions that are due"),
        ("sessiontool sweep -q", "the same, silent (for cron)"),
    ),
    "policy": (
        ("sessiontool policy discord:group:123", "may this session be sent to?"),
        ("sessiontool policy discord:group:123 deny", "refuse sends to it"),
    ),
    "deliveries": (
        ("sessiontool deliveries --since 1d", "the announces of the last day"),
        ("sessiontool deliveries --follow", "the last ones, then each new one"),
        ("sessiontool deliveries retry -q", "retry what failed (for cron)"),
    ),
    "label": (
        ("sessiontool label main daily-standup", "name a session (history --label finds it)"),
        ("sessiontool label discord:group:123 ops-room --json", "another, as JSON"),
    ),
    "reset": (
        ("sessiontool reset discord:group:123", "a fresh transcript, the old one kept"),
        ("sessiontool reset --label daily-standup --json", "by label, as JSON"),
    ),
    "delete": (
        ("sessiontool delete discord:group:123", "remove the session, keep its transcript"),
        ("sessiontool delete --label old-test --json", "by label, as JSON"),
    ),
    "archive": (
        ("sessiontool archive discord:group:123", "out of list and of sends; transcript kept"),
        (
            "sessiontool archive work --expect-session-id 5f0c3a1e-1b2c-4d5e-8f90-a1b2c3d4e5f6",
            "only if it is still that generation",
        ),
    ),
    "restore": (
        ("sessiontool restore discord:group:123", "back in list, a send target again"),
        ("sessiontool restore --label old-test --json", "by label, as JSON"),
    ),
    "pin": (
        ("sessiontool pin work", "first in list and top"),
        ("sessiontool pin --label project-x --json", "by label, as JSON"),
    ),
    "unpin": (
        ("sessiontool unpin work", "back in the order of its last update"),
        ("sessiontool unpin --label project-x -q", "print the key alone"),
    ),
    "session": (
        ("sessiontool session work", "its own model and thinking level, if any"),
        ("sessiontool session work --model gpt-4o --thinking high", "for its next runs"),
        ("sessiontool session work --model default --thinking default", "back to the defaults"),
    ),
    "fork": (
        ("sessiontool fork work --label work-b", "a new session with work's whole transcript"),
        ("sessiontool fork work --at 4f1c9a2e -q", "from before that message; the new key"),
    ),
    "rewind": (
        ("sessiontool rewind work 4f1c9a2e", "continue from before that message (history --json)"),
        ("sessiontool rewind work 4f1c9a2e --json | jq -r .editorText", "its text, to send again"),
    ),
    "compact": (
        ("sessiontool compact work", "summarize all but its last 2 turns"),
        ("sessiontool compact work --keep 5 --timeout 0 -q", "queue it; `wait` its run id"),
    ),
    "help": (
        ("sessiontool help send", "the same as sessiontool send --help"),
        ("sessiontool help", "every command"),
    ),
    "paths": (
        ("sessiontool paths", "where sessiontool reads and writes"),
        ("sessiontool paths --json | jq -r .stateDir", "the state dir only"),
    ),
    "doctor": (
        ("sessiontool doctor", "check the state dir; changes nothing"),
        ("sessiontool doctor --fix", "remove what is safe to remove"),
    ),
    "prune": (
        ("sessiontool prune --older-than 30d", "drop old run records and outbox lines"),
        ("sessiontool prune --older-than 30d -q", "the same, silent (for cron)"),
    ),
    "completion": (
        ('eval "$(sessiontool completion bash)"', "bash: in ~/.bashrc"),
        ("sessiontool completion fish > ~/.config/fish/completions/sessiontool.fish", "fish"),
    ),
    "mcp": (
        ("sessiontool mcp", "serve the session tools over stdio"),
        ("sessiontool --agent ops mcp", "as the ops agent"),
    ),
    "export": (
        ("sessiontool export --to ~/backup --all-agents", "copy stores and transcripts"),
        ("sessiontool export --html ~/sessions-site --since 30d", "a site: open index.html"),
    ),
    "gateway": (
        ("sessiontool gateway show", "which gateway this command line talks to"),
        ("sessiontool gateway forget wss://gw.example:18789", "drop its stored device token"),
    ),
    "config": (
        ("sessiontool config schema > sessiontool.schema.json", "the schema, for an editor"),
        ("sessiontool config schema | jq '.properties.sessiontool'", "sessiontool's own keys"),
    ),
    "top": (
        ("sessiontool top", "sessions, runs and deliveries, live"),
        ("sessiontool top --all-agents --budget 5", "every agent, with a daily budget"),
    ),
}


def epilog(name: str) -> str | None:
    """The help's closing paragraph for a command: `Examples:`, each a comment saying what it
    does over the command line (gh's layout: nothing to align, nothing wrapped mid-line)."""
    from rich.markup import escape

    rows = EXAMPLES.get(name)
    if not rows:
        return None
    lines = [line for cmd, what in rows for line in (f"  # {what}", f"  {cmd}")]
    return escape("Examples:\n" + "\n".join(lines))


def add_examples(root: Any) -> None:
    """Set each command's epilog (the root's subcommands; a command already given one keeps
    it)."""
    for name, cmd in getattr(root, "commands", {}).items():
        if getattr(cmd, "epilog", None) is None:
            cmd.epilog = epilog(name)
