"""A test-only hook: pause at a named point so a reliability test can kill -9 (or signal) the
process exactly there. Inert unless `SESSIONTOOL_TEST_PAUSE=<point>:<seconds>` is set; the cost
when it is not is one environment lookup.

Points: `store-locked` (store.update_store, holding the store lock, before the write),
`before-user` (worker: session ensured, before the user line), `after-user` (the user line is
written, the agent not started), `after-runner` (the agent is done, nothing recorded),
`index-write` (inside the final store update, holding the store lock), `deliver` (a delivery
recorded as started, before its command), `cleanup` (a spawn's cleanup step), `run-created`
(`send`: the run recorded, its worker not yet started), `index-part` (an index catch-up,
after each file it read and the commit of a part when one was due), `index-commit` (between a part's commit
and taking the index's write lock again), `fork-copied` (a fork's transcript written, its entry
not yet), `rewind-archived` (what a rewind cuts archived, the transcript not cut yet),
`compact-archived` (the transcript before a compaction copied aside, the compaction entry not
appended yet), `export-page` (`export --html`, before each session's page), `send-wait` (`send`:
its run submitted and its worker started, the foreground not yet waiting). The run points
also exist as `<point>:<kind or step>` (`after-user:reply`, `after-runner:announce`, ...). On reaching the point the process writes
`sessiontool test pause: <point> pid=<pid>` to stderr (a worker's stderr is its run log), so
the test knows where it is, then sleeps.

A second hook counts: with `SESSIONTOOL_TEST_EVENTS=<file>` set, `note(event)` appends
`<event> <pid>` to that file (`store-parse`: a sessions.json parsed; `store-write`: one
written), so a test can count them across a command and the workers it starts."""

from __future__ import annotations

import os


def pause(*points: str) -> None:
    """Pause when the configured point is one of `points` (a point may be given in a general
    and a specific form, e.g. `after-user` and `after-user:reply`)."""
    spec = os.environ.get("SESSIONTOOL_TEST_PAUSE")
    if not spec:
        return
    name, _, seconds = spec.rpartition(":")
    if name not in points:
        return
    point = name
    import sys
    import time

    try:
        delay = float(seconds)
    except ValueError:
        return
    sys.stderr.write(f"sessiontool test pause: {point} pid={os.getpid()}\n")
    sys.stderr.flush()
    time.sleep(delay)


def note(event: str) -> None:
    """Append `event` to the file SESSIONTOOL_TEST_EVENTS names; inert when it is not set."""
    path = os.environ.get("SESSIONTOOL_TEST_EVENTS")
    if not path:
        return
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(f"{event} {os.getpid()}\n")
