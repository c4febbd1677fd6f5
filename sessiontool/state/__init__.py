"""What lives under the state dir, and how it is read and written: paths, keys, config, the
session stores (sessions.json, OpenClaw's SQLite database) and their transcripts, locks, the
search index. Named for the state dir, not for one of the stores in it."""
