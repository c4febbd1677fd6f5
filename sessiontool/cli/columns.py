"""The TSV columns of `list`, `runs`, `search` and `deliveries`: one place that names them, orders them (the
terminal table's order, then what only scripts want), documents them in `--help` and lets
`--fields` pick them, as `gh --json FIELDS` and `kubectl -o custom-columns` do.

The rule for every TSV sessiontool prints: no header row (`cut -f1` is a key, never a title),
columns in the order `--help` lists; `--fields a,b` prints exactly those, in that order.

It sits above `render.py`: its cells are render's formats (times, `[match]` snippets), and the
TSV of `list` and `search` is built here from them; render never asks for a column."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from sessiontool.cli import render
from sessiontool.errors import UsageError

Getter = Callable[[Mapping[str, Any]], Any]


def _iso(key: str) -> Getter:
    def get(r: Mapping[str, Any]) -> Any:
        return render.iso_or_dash(r.get(key))

    return get


def _plain(key: str) -> Getter:
    return lambda r: r.get(key, "")


def _run_result(r: Mapping[str, Any]) -> str:
    """The whole reply or error (TSV escapes a newline as `\\n`; only the terminal table cuts)."""
    v = r.get("reply") or r.get("error") or ""
    return v if isinstance(v, str) else str(v)


SESSIONS: dict[str, Getter] = {
    "key": _plain("key"),
    "kind": _plain("kind"),
    "channel": _plain("channel"),
    "label": _plain("label"),
    "updatedAt": _iso("updatedAt"),
    "model": _plain("model"),
    "totalTokens": _plain("totalTokens"),
    "sessionId": _plain("sessionId"),
}
RUNS: dict[str, Getter] = {
    "runId": _plain("runId"),
    "kind": _plain("kind"),
    "step": lambda r: r.get("step") or "",
    "status": _plain("status"),
    "sessionKey": _plain("sessionKey"),
    "createdAt": _iso("createdAt"),
    "result": _run_result,
    "parentRunId": _plain("parentRunId"),
    "rerunOf": _plain("rerunOf"),
}
RUNS_DEFAULT = ("runId", "kind", "step", "status", "sessionKey", "createdAt", "result")
SEARCH: dict[str, Getter] = {
    "key": lambda h: h.get("key") or "",
    "sessionId": _plain("sessionId"),
    "timestamp": _iso("timestamp"),
    "role": _plain("role"),
    "snippet": render.marked_snippet,
    "label": _plain("label"),
    "messageId": _plain("messageId"),  # `history KEY --message-id ID` reopens the hit
}
# The outbox (`deliveries`), the JSON's keys: no `--fields` yet, so all of them, in this order.
DELIVERIES: dict[str, Getter] = {
    k: _plain(k) for k in ("ts", "mode", "status", "sessionKey", "channel", "to", "text")
}
SEARCH_DEFAULT = ("key", "sessionId", "timestamp", "role", "snippet")


# The keys of a search hit's JSON besides the columns (`search --json --fields`).
SEARCH_JSON = ("agentId", "highlights", "score", "transcriptPath", "archived")
# What a `history` message may carry (`history --fields`): the keys of a message, as the store
# and the gateway give them. Any other key one of the page's messages has is accepted too.
MESSAGE_KEYS = (
    "role",
    "content",
    "timestamp",
    "id",
    "model",
    "provider",
    "usage",
    "stopReason",
    "toolCallId",
    "toolName",
    "isError",
    "senderLabel",
    "senderSession",
    "truncated",
)


def pick(
    spec: Mapping[str, Getter],
    fields: str | None,
    default: Iterable[str],
    json_keys: Iterable[str] = (),
) -> list[str]:
    """The column names `--fields` asks for (comma-separated), each checked; else the default.
    With `--json` (`json_keys`: every key its rows have), any key the JSON has, as gh's
    `--json FIELDS`: a column that only the TSV computes is not among them."""
    if fields is None:
        return list(default)
    names = [f.strip() for f in fields.split(",") if f.strip()]
    if not names:
        raise UsageError("--fields needs at least one field name")
    valid = list(dict.fromkeys(json_keys)) or list(spec)
    for n in names:
        if n not in valid:
            raise UsageError(f"unknown field {n!r} (valid: {', '.join(valid)})")
    return names


def session_json_keys() -> list[str]:
    """The keys a `list --json` row may have."""
    from sessiontool.sessions.listing import LIST_FIELDS

    first = ("key", "kind", "channel", "label", "displayName", "updatedAt", "sessionId")
    more = ("transcriptPath", "archived", "messages", "lastAccountId")
    return [*first, *(k for k in LIST_FIELDS if k != "subject"), *more]


def run_json_keys() -> list[str]:
    """The keys a `runs --json` row may have (the public fields of a run record)."""
    from sessiontool.runs.submit import PUBLIC_RUN_FIELDS

    return [*(k for k in RUNS if k != "result"), *sorted(PUBLIC_RUN_FIELDS - set(RUNS))]


def search_json_keys() -> list[str]:
    return [*SEARCH, *SEARCH_JSON]


def rows(spec: Mapping[str, Getter], names: list[str], records: Iterable[Mapping[str, Any]]) -> Any:
    return ([spec[n](r) for n in names] for r in records)


def help_text(names: Iterable[str]) -> str:
    return ", ".join(names)
