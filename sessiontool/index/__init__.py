"""sessiontool's own index of transcripts, `<state>/sessiontool/index.sqlite`: message text for
`search`, token usage for `usage`, kept in step with the transcripts. One package, top to
bottom (each module imports only those below it):

- `catalog.py`: which transcripts a command reads and under which session each counts (the
  one seam to the store readers), and `indexed`, which catches them up and says which file id
  is whose.
- `warm.py`: a warm command's shortcut, the store's change markers against a kept snapshot of
  the last full check, then a stat of its hot transcripts only.
- `sync.py`: `Index`, the open index: what changed since the last sync (one stat per
  transcript), the lock and the parts it is composed of; `using_index` rebuilds an unreadable
  one.
- `snapshots.py`: the kept full checks (`Snapshots`, the `snap_*` tables).
- `catchup.py`: writing what changed (`CatchUp`): what to read of each transcript, reading it
  (in worker processes on a big build) and committing in parts.
- `db.py`: the file itself: schema, opening it safely, its rows by name (`FileRow`), writing
  parsed rows, deleting it.
- `tool_shares.py`: the `tools` table, each model turn's tokens and cost shared among the tools.
- `scan.py`: a transcript's new complete lines parsed (also in worker processes: no SQLite),
  and the digest that proves the bytes before an offset did not change.
- `extract.py`: what one transcript line contributes: its text rows by role and its turn.

It sits beside `runs/` (neither imports the other), over `sessions/`: the catalog lists the
sessions a requester may see through the readers. OpenClaw never reads it; it is disposable
(rebuilt when lost, unreadable or of another schema version)."""
