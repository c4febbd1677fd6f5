"""OpenClaw's cold transcript archives: a transcript moved out of `transcript_events` into
`sessions/cold/<sha256>.jsonl.zst` (or the archive row's blob), a zstd frame of JSONL records of
kind header/event/active/....

Apart from the SQLite reader (state/openclaw_sqlite.py) because it is another format, read from
another file: the reader finds the archive's row, this reads the archive. `zstandard` is
imported only when an event or archive is compressed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sessiontool.errors import CorruptStateError


def decompress(blob: bytes) -> bytes:
    """A zstd frame (an event's `event_zstd`, an archive) as its bytes."""
    import zstandard

    # A plain frame without its content size in the header needs the streaming reader.
    try:
        return zstandard.ZstdDecompressor().decompress(blob)
    except zstandard.ZstdError:
        import io

        with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(blob)) as r:
            return r.read()


def cold_events(db: Path, session_id: str, name: Any, storage: Any, blob: Any) -> list[str]:
    """The event JSON texts of an archived transcript's active branch, oldest first (every
    event in seq order when the archive records no branch); [] for an archive name that is not
    a plain file name. `db` is the database whose row named the archive."""
    if storage == "sqlite" and blob is not None:
        data = bytes(blob)
    else:
        if not isinstance(name, str) or "/" in name or name in ("", ".", ".."):
            return []
        base = db.parent
        cold = (base.parent / "sessions" / "cold") if base.name == "agent" else base / "cold"
        try:
            data = (cold / name).read_bytes()
        except OSError as exc:
            raise CorruptStateError(
                f"cold transcript {cold / name} of session {session_id} is unreadable: "
                f"{exc.strerror}"
            ) from exc
    try:
        raw = decompress(data)
    except Exception as exc:  # noqa: BLE001
        raise CorruptStateError(f"cold transcript {name}: not a zstd archive") from exc
    events: dict[int, str | None] = {}
    active: list[tuple[int, int]] = []
    for line in raw.splitlines():
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if not isinstance(rec, dict) or not isinstance(rec.get("row"), dict):
            continue
        r = rec["row"]
        if rec.get("kind") == "event" and isinstance(r.get("seq"), int):
            events[r["seq"]] = r.get("event_json", "")
        elif rec.get("kind") == "active":
            ap, es = r.get("active_position"), r.get("event_seq")
            if isinstance(ap, int) and isinstance(es, int):
                active.append((ap, es))
    order = [es for _, es in sorted(active)] if active else sorted(events)
    texts = (events.get(seq) for seq in order)
    return [t for t in texts if t is not None]
