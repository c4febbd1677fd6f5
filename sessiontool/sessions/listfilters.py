"""`list`'s metadata filters, as OpenClaw's sessions_list applies them: an exact `label`, a
`search` through the row's metadata (not the transcripts: that is `search`), only sessions with
work queued or running (`activeOnly`), none spawned (`excludeSubagents`)."""

from __future__ import annotations

from typing import Any

from sessiontool.context import Context
from sessiontool.state import keys
from sessiontool.state.sessions_json import Entry
from sessiontool.structs import Value

LIST_DEFAULT_LIMIT = 200

# A row of OpenClaw's own store says its work in `status` (2026.8+).
ACTIVE_ROW_STATUSES = frozenset({"running", "queued"})


class ListSpec(Value):
    """Which sessions a `list` page holds (OpenClaw's sessions_list filters): of `kinds`,
    updated since `cutoff` (ms), with this exact `label`, whose label, displayName or key holds
    `search` (any case), only those with work queued or running (`active_keys`: the sessions
    with a run of ours open, or a row whose status says so), without sub-agents and spawned
    sessions (`exclude_subagents`), archived ones or not (`archived`: no, yes, all); `limit` rows (None: all) after `offset`, each with its last
    `n_messages` messages."""

    __slots__ = (
        "kinds",
        "limit",
        "offset",
        "cutoff",
        "n_messages",
        "all_agents",
        "label",
        "search",
        "active_keys",
        "exclude_subagents",
        "archived",
    )

    def __init__(self, **fields: Any) -> None:
        self.kinds: set[str] | None = fields.get("kinds")
        self.limit: int | None = fields.get("limit", LIST_DEFAULT_LIMIT)
        self.offset: int = fields.get("offset", 0)
        self.cutoff: int | None = fields.get("cutoff")
        self.n_messages: int = fields.get("n_messages", 0)
        self.all_agents: bool = fields.get("all_agents", False)
        self.label: str | None = fields.get("label")
        self.search: str | None = fields.get("search")
        self.active_keys: frozenset[str] | None = fields.get("active_keys")
        self.exclude_subagents: bool = fields.get("exclude_subagents", False)
        self.archived: str = fields.get("archived", "no")  # `--archived no|yes|all`
        unknown = set(fields) - set(self.__slots__)
        if unknown:
            raise TypeError(f"ListSpec has no field {sorted(unknown)[0]!r}")


def matches(ctx: Context, spec: ListSpec, full_key: str, entry: Entry, kind: str) -> bool:
    """Whether the session passes every filter the spec sets."""
    if spec.label is not None and entry.get("label") != spec.label:
        return False
    if spec.search is not None and not _holds(ctx, (full_key, kind), entry, spec.search):
        return False
    if spec.exclude_subagents and spawned(full_key, entry):
        return False
    return spec.active_keys is None or active(spec.active_keys, full_key, entry)


# The entry fields OpenClaw 2026.9.6's sessions_list `search` looks through (its
# session-utils-list: the key, label, subject, sessionId, category, display name, kind, model
# and provider), besides the key and kind; its run state, goal and agent name are not kept here.
SEARCH_FIELDS = (
    "label",
    "displayName",
    "subject",
    "sessionId",
    "category",
    "model",
    "modelProvider",
)


def _holds(ctx: Context, key_kind: tuple[str, str], entry: Entry, text: str) -> bool:
    needle = text.casefold()
    full_key, kind = key_kind
    values = [full_key, ctx.display(full_key), kind, *(entry.get(f) for f in SEARCH_FIELDS)]
    return any(isinstance(v, str) and needle in v.casefold() for v in values)


def spawned(full_key: str, entry: Entry) -> bool:
    """A sub-agent session, or one spawned from another (its entry names its parent)."""
    if keys.is_subagent(full_key):
        return True
    return any(
        isinstance(entry.get(k), str) and entry[k] for k in ("spawnedBy", "parentSessionKey")
    )


def active(active_keys: frozenset[str], full_key: str, entry: Entry) -> bool:
    return full_key in active_keys or entry.get("status") in ACTIVE_ROW_STATUSES
