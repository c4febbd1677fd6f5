"""Living beside today's OpenClaw: its running gateway (finding it, its version, which write
mode applies, writes in their gateway form) and exporting its SQLite store as a state dir.
Reading that store is `stores.openclaw_sqlite`, one reader among the store readers."""
