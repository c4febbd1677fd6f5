"""`deliveries --follow` walks the outbox's replacements file by file (flow/follow.py): two
rewrites between two looks must not hide the lines the middle file received and the second
rewrite dropped. Driven step by step through the follower's own poll hook, so the "between two
looks" is exact rather than a race."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from sessiontool.flow import follow
from sessiontool.flow.delivery import append_outbox, outbox_lock, rewrite_outbox
from sessiontool.state.paths import StatePaths

OLD = "2020-01-01T00:00:00.000Z"
NEW = "2099-01-01T00:00:00.000Z"


def _drop_old(paths: StatePaths) -> None:
    """What `prune` does, in-process: keep the lines that are not old, rename over."""
    with outbox_lock(paths):
        lines = paths.deliveries.read_bytes().splitlines(keepends=True)
        rewrite_outbox(paths, b"".join(ln for ln in lines if OLD.encode() not in ln))


def _follower(paths: StatePaths, steps: list[Callable[[], None]], chain: bool) -> list[str]:
    """Every runId the follower prints while `steps` run, one per poll, then one more look."""
    out: list[str] = []
    todo = list(steps)

    class Done(Exception):
        pass

    def sleep(_: float) -> None:
        if not todo:
            raise Done
        todo.pop(0)()

    gen = follow.follow_lines(
        paths.deliveries,
        replay=False,
        poll=0,
        chain=paths.outbox_successors if chain else None,
        sleep=sleep,
    )
    try:
        for raw in gen:
            out.append(json.loads(raw)["runId"])
    except Done:
        pass
    return out


def test_two_rewrites_between_looks_lose_nothing(tmp_path: Path) -> None:
    paths = StatePaths(tmp_path)
    append_outbox(paths, {"ts": NEW, "runId": "before"})

    def burst() -> None:
        # One look sees none of this: a rewrite, an old line into the new file, a rewrite
        # that drops it, and a new line after.
        append_outbox(paths, {"ts": NEW, "runId": "a"})
        _drop_old(paths)
        append_outbox(paths, {"ts": OLD, "runId": "middle"})
        append_outbox(paths, {"ts": NEW, "runId": "b"})
        _drop_old(paths)
        append_outbox(paths, {"ts": NEW, "runId": "c"})

    assert _follower(paths, [burst], chain=True) == ["a", "middle", "b", "c"]
    # The line that only the middle file held is gone from the outbox itself: only the
    # successor record let the follower read it.
    assert b"middle" not in paths.deliveries.read_bytes()


def test_without_the_successor_record_the_middle_line_is_lost(tmp_path: Path) -> None:
    """The record is what makes the difference (this fails if the chain is read anyway)."""
    paths = StatePaths(tmp_path)
    append_outbox(paths, {"ts": NEW, "runId": "before"})

    def burst() -> None:
        _drop_old(paths)
        append_outbox(paths, {"ts": OLD, "runId": "middle"})
        _drop_old(paths)
        append_outbox(paths, {"ts": NEW, "runId": "c"})

    assert _follower(paths, [burst], chain=False) == ["c"]


def test_old_successor_records_are_removed_by_the_next_rewrite(tmp_path: Path) -> None:
    paths = StatePaths(tmp_path)
    for i in range(3):
        append_outbox(paths, {"ts": OLD, "runId": f"r{i}"})
        _drop_old(paths)
    names = sorted(os.listdir(paths.outbox_successors))
    assert names  # (fewer than 3: a freed inode reused replaces its own stale entry)
    # Age them past the keep time: the next rewrite removes them and records only itself.
    aged = []
    for name in names:
        prefix, _, stamp = name.rpartition("-")
        aged.append(f"{prefix}-{int(stamp) - follow.SUCCESSOR_KEEP_SECONDS - 5}")
        os.rename(paths.outbox_successors / name, paths.outbox_successors / aged[-1])
    append_outbox(paths, {"ts": OLD, "runId": "last"})
    _drop_old(paths)
    left = os.listdir(paths.outbox_successors)
    assert len(left) == 1 and left[0] not in aged
