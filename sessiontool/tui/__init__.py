"""`sessiontool top`: a live full-screen view of the sessions, runs and deliveries of a state dir.

Built on Textual (the optional extra `sessiontool[tui]`), imported only by the `top` command.
`watch.py` (what changed, cheaply; a run's memory) and `model.py` (one snapshot from the same
core functions `list`, `runs` and `deliveries` call) know nothing of Textual; `screens.py` (the
dialogs and the followed transcript), `panes.py` (the tables) and `keys.py` (what a key does)
draw and act on them, `live.py` keeps them current, `app.py` binds keys and events to those.
Every action calls the core function its command calls: `abort_run`, `send`, `wait_for`,
`history` with `transcript.follow`. Nothing here prints or exits: the app returns, `top` exits."""
