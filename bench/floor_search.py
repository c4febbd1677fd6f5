"""The floor under a first `search`: the message texts of every transcript, parsed with orjson
and inserted into an FTS5 table with the index's own tokenizer and settings (contentless,
unicode61 remove_diacritics 2, the same hashsize, WAL, synchronous=OFF) in one transaction, in
one process; nothing else kept (no message rows, no usage, no trigram table, no optimize).

    python bench/floor_search.py DB TRANSCRIPT.jsonl ...   (or a directory: its *.jsonl)

Prints one JSON object: rows and characters inserted, bytes read."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from typing import Any

import orjson

FTS = (
    "CREATE VIRTUAL TABLE fts USING fts5(text, content='', "
    "tokenize='unicode61 remove_diacritics 2')"
)
HASHSIZE = 64 << 20


def texts(msg: dict[str, Any]) -> list[str]:
    """What the index holds of a message: its text blocks, a tool call's name and argument
    values (flat), a tool result's text."""
    content = msg.get("content")
    if isinstance(content, str):
        return [content]
    out: list[str] = []
    if isinstance(content, list):
        for b in content:
            if not isinstance(b, dict):
                continue
            kind = b.get("type")
            if kind == "text" and isinstance(b.get("text"), str):
                out.append(b["text"])
            elif kind == "toolCall":
                args = b.get("arguments")
                vals = [str(b.get("name") or "")]
                if isinstance(args, dict):
                    vals += [str(v) for v in args.values() if isinstance(v, str | int | float)]
                out.append(" ".join(vals))
    return out


def main(args: list[str]) -> None:
    db, paths = args[0], []
    for a in args[1:]:
        p = Path(a)
        paths += sorted(p.glob("*.jsonl")) if p.is_dir() else [p]
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=OFF")
    conn.execute(FTS)
    conn.execute("INSERT INTO fts(fts, rank) VALUES ('hashsize', ?)", (HASHSIZE,))
    conn.execute("BEGIN")
    rowid = chars = size = 0
    insert = "INSERT INTO fts(rowid, text) VALUES (?, ?)"
    for p in paths:
        with open(p, "rb") as fh:
            data = fh.read()
        size += len(data)
        batch = []
        for line in data.split(b"\n"):
            if b'"message"' not in line:
                continue
            try:
                obj = orjson.loads(line)
            except ValueError:
                continue
            msg = obj.get("message") if isinstance(obj, dict) else None
            if not isinstance(msg, dict):
                continue
            for t in texts(msg):
                rowid += 1
                chars += len(t)
                batch.append((rowid, t))
        conn.executemany(insert, batch)
    conn.execute("COMMIT")
    conn.close()
    sys.stdout.write(orjson.dumps({"rows": rowid, "chars": chars, "bytes": size}).decode() + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
