"""On-disk formats: paths, keys, config, sessions.json + JSONL transcripts, locks."""
