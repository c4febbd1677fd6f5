"""Reliability suite: kill -9 at chosen points, many concurrent writers and readers, a full or
read-only disk, and the lock protocol shared with a live OpenClaw. Every test starts real
processes and reaps them; the whole package runs in well under two minutes."""
