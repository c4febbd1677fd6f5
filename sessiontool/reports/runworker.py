"""The worker program (runs/spawnproc.py `WORKER`): the run engine's lane worker
(runs/worker.py), started from above the engine so that the session tools its runs' models
call (`sessions_send`, `sessions_spawn` in the `openai` and `llm` runners) pass the budgets as
the CLI's and the MCP server's do: `runs/tools.set_spend_gate` is handed the budgets' gate
(reports/budgets.py), which the engine below cannot import. A model's send or spawn over a
spent budget is refused as a tool error with the budget's message (`over_budget`, code 6), and
an allowed one gets the room the budget leaves as its cost limit.

    python -m sessiontool.reports.runworker STATE_DIR (lane LANE_ID | follow RUN_ID) [--lock-fd N]
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sessiontool.context import Context, SpendGate
    from sessiontool.state.paths import StatePaths


def _gate(ctx: Context) -> SpendGate:
    from sessiontool.reports.budgets import BudgetGate

    return BudgetGate(ctx)


def _hand_down() -> None:
    from sessiontool.runs.tools import set_spend_gate

    set_spend_gate(_gate)


def run_args(paths: StatePaths, args: list[str], lock_fd: int | None) -> int:
    """A forked worker's entry (spawnproc `_run_here`)."""
    from sessiontool.runs import worker

    _hand_down()
    return worker.run_args(paths, args, lock_fd)


def main(argv: list[str] | None = None) -> int:
    from sessiontool.runs import worker

    _hand_down()
    return worker.main(argv)


if __name__ == "__main__":
    sys.exit(main())
