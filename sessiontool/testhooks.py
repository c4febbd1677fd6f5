"""A test-only hook: pause at a named point so a reliability test can kill -9 (or signal) the
process exactly there. Inert unless `SESSIONTOOL_TEST_PAUSE=<point>:<seconds>` is set; the cost
when it is not is one environment lookup.

Points: `store-locked` (store.update_store, holding the store lock, before the write),
`before-user` (worker: session ensured, before the user line), `index-write` (worker: inside
the final index update, holding the store lock). On reaching the point the process writes
`sessiontool test pause: <point> pid=<pid>` to stderr (a worker's stderr is its run log), so
the test knows where it is, then sleeps."""

from __future__ import annotations

import os


def pause(point: str) -> None:
    spec = os.environ.get("SESSIONTOOL_TEST_PAUSE")
    if not spec:
        return
    name, _, seconds = spec.rpartition(":")
    if name != point:
        return
    import sys
    import time

    try:
        delay = float(seconds)
    except ValueError:
        return
    sys.stderr.write(f"sessiontool test pause: {point} pid={os.getpid()}\n")
    sys.stderr.flush()
    time.sleep(delay)
