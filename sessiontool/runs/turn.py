"""What every run's turn shares, whoever carries it out: sessiontool's runner over the files
(execute.py) or OpenClaw's gateway (gateway_run.py).

- `WorkerState`: what the worker process running the turn knows (the state, the config read once).
- `abortable`: while a turn runs, `abort`'s SIGUSR1 to the worker raises `RunAborted` in it.
- `Outcome` and `decide`: the end the turn reached, recorded under the records lock unless an
  abort got there first (records.py: a run ends exactly once).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType
from typing import TYPE_CHECKING, Any

from sessiontool.errors import SessiontoolError
from sessiontool.runs import lanes, records
from sessiontool.state.paths import StatePaths

if TYPE_CHECKING:
    from sessiontool.runs.record_types import RunRecord, RunStatus
    from sessiontool.state.config import Config


class WorkerState:
    """What one worker process knows: where the state is and the config, read again for each
    run it carries out, so a lane draining several queued runs gives each the config as it was
    when its turn began, not as it was when the worker started."""

    def __init__(self, paths: StatePaths) -> None:
        self.paths = paths
        self._cfg: Config | None = None

    @property
    def cfg(self) -> Config:
        if self._cfg is None:
            from sessiontool.state.config import load_config

            self._cfg = load_config(self.paths)
        return self._cfg

    def forget_config(self) -> None:
        self._cfg = None

    def max_concurrent(self) -> int:
        try:
            return int(self.cfg.max_concurrent_runs)
        except (SessiontoolError, AttributeError):
            return lanes.DEFAULT_MAX_CONCURRENT


# -- the abort signal --------------------------------------------------------------------------

_current: dict[str, Any] = {"runId": None, "paths": None}


class RunAborted(Exception):
    """Raised inside the turn (the runner call, the gateway call) when `abort` signals this
    worker."""


def on_abort_signal(signum: int, frame: FrameType | None) -> None:
    """The worker's SIGUSR1 handler: interrupt the turn under way if its record says aborted."""
    run_id, paths = _current["runId"], _current["paths"]
    if run_id is None or paths is None:
        return
    try:
        rec = records.read_record(paths, run_id)
    except Exception:  # noqa: BLE001
        return
    if rec.get("status") == "aborted":
        raise RunAborted()


@contextmanager
def abortable(paths: StatePaths, run_id: str) -> Iterator[None]:
    """The span of a turn that `abort` interrupts (on_abort_signal raises RunAborted in it)."""
    _current.update(runId=run_id, paths=paths)
    try:
        yield
    finally:
        _current.update(runId=None, paths=None)


# -- the end -----------------------------------------------------------------------------------


@dataclass
class Outcome:
    status: RunStatus = "ok"
    reply: str = ""
    error: str | None = None
    result: Any = None
    model: str | None = None
    provider: str | None = None
    extra: list[dict[str, Any]] = field(default_factory=list)
    reason: str | None = None  # why an aborted run was stopped: "budget" (else by a user)


def decide(paths: StatePaths, rec: RunRecord, out: Outcome) -> tuple[RunStatus, str | None]:
    """Record the end this run reached, unless an abort got there first: the one answer."""
    got: dict[str, Any] = {}

    def mark(r: RunRecord) -> bool:
        if r.get("status") == "aborted" or r.get("outcome") == "aborted":
            got["aborted"] = r.get("error") or "aborted by user"
            return False
        if r.get("status") != "running":
            return False
        r["outcome"] = out.status
        return True

    records.update_record(paths, rec["runId"], mark)
    if "aborted" in got:
        return "aborted", str(got["aborted"])
    return out.status, out.error
