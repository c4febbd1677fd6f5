"""What sessiontool knows of OpenClaw's releases, each fact one row (pre-commit's
`all_languages.py`): the gateway's wire protocols, the forms of the store lock, the SQLite
schemas read. The modules that act on them (`openclaw/wsconnection.py`, `openclaw/gateway.py`,
`state/openclaw_sqlite.py`) read them here, so a new OpenClaw release that moves one of them is a
row here, plus a fixture the real release wrote (tests/fixtures/) and the test that reads it.

Plain data in the base layer, importing nothing: the state formats and the gateway client below
and above each other both read it."""

from __future__ import annotations

Release = tuple[int, int, int]  # (2026, 5, 28) is OpenClaw 2026.5.28

# The gateway's wire protocol (`connect` minProtocol..maxProtocol) → the first release speaking
# it. sessiontool speaks the newest; an older one only to ask an older gateway its version
# (`wsclient.Client.probe_version`: 3 is 2026.1 to 2026.5.27).
PROTOCOLS: dict[int, Release] = {
    3: (2026, 1, 0),
    4: (2026, 5, 28),
}

# The form of a JSON-era store lock (`sessions.json.lock`) → the first release writing it; None:
# from that release the gateway serialises store writes in-process and takes no lock.
STORE_LOCKS: dict[str | None, Release] = {
    "startedAt": (2026, 1, 0),  # {pid, startedAt}: OpenClaw 2026.1, Clawdbot
    "createdAt": (2026, 2, 0),  # {pid, createdAt, starttime}: the session write lock
    None: (2026, 5, 2),
}

# OpenClaw 2026.8+'s SQLite store: schema version → the columns read, checked by name. A version
# newer than every row is refused (a later schema may change what a column holds); an older one
# is read with the newest row at or below it, or the newest row (19 and 21 read as 23).
SQLITE_SCHEMAS: dict[int, dict[str, tuple[str, ...]]] = {
    23: {  # 2026.9.6 (tests/fixtures/openclaw-2026.9.6)
        "session_nodes": ("session_key", "current_session_id", "entry_json", "updated_at"),
        "transcript_events": ("session_id", "seq", "event_json", "event_zstd"),
        "session_transcript_active_events": ("session_id", "active_position", "event_seq"),
    },
}


def named(release: Release) -> str:
    """2026.5.28, as OpenClaw names its releases."""
    return ".".join(str(n) for n in release)


def newest_protocol() -> int:
    return max(PROTOCOLS)


def known_schema() -> int:
    """The newest SQLite schema sessiontool reads."""
    return max(SQLITE_SCHEMAS)


def schema_columns(version: int | None) -> dict[str, tuple[str, ...]]:
    """The columns read from a database of schema `version` (None: it does not say)."""
    at_or_below = [v for v in SQLITE_SCHEMAS if version is not None and v <= version]
    return SQLITE_SCHEMAS[max(at_or_below) if at_or_below else known_schema()]


# Files of OpenClaw's own in a JSON-era sessions dir beside the transcripts, that are no
# session's transcript: how the name is made (a regular expression) → the earliest release
# sessiontool has seen write it. `doctor` never takes one for an orphan transcript to archive,
# and the search index never reads one as a session.
SESSION_DIR_FILES: dict[str, Release] = {
    # A run's trajectory (on unless OPENCLAW_TRAJECTORY=0) and the pointer to it.
    r".+\.trajectory\.jsonl": (2026, 7, 35),
    r".+\.trajectory-path\.json": (2026, 7, 35),
    # A compaction checkpoint: the transcript as it was before a compaction.
    r".+\.checkpoint\.[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    r"\.jsonl": (2026, 7, 35),
}


def openclaw_session_file(name: str) -> bool:
    """Whether a file name in a sessions dir is one of OpenClaw's own non-transcript files."""
    import re

    return any(re.fullmatch(pattern, name) for pattern in SESSION_DIR_FILES)
