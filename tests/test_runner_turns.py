"""runs/runners/turns.py: what the llm and openai runners share about transcript turns. Each
runner sums the usage of every model call of a run into the run's usage; they used to carry
their own `add_usage`, and the llm runner's left the cost out of the sum."""

from __future__ import annotations

from types import ModuleType

import pytest

from sessiontool.runs.runners import llm as llm_runner
from sessiontool.runs.runners import openai as openai_runner
from sessiontool.runs.runners.base import make_usage


@pytest.mark.parametrize("runner", [llm_runner, openai_runner], ids=["llm", "openai"])
def test_each_runner_sums_tokens_and_cost_of_every_call(runner: ModuleType) -> None:
    total = make_usage(0, 0)
    runner.add_usage(total, make_usage(10, 2, 3, 1, cost={"input": 0.5, "output": 0.25}))
    runner.add_usage(total, make_usage(4, 6, cost=1.5))
    assert (total["input"], total["output"], total["cacheRead"], total["cacheWrite"]) == (
        14,
        8,
        3,
        1,
    )
    assert total["totalTokens"] == 16 + 10
    assert total["cost"] == {
        "input": 0.5,
        "output": 0.25,
        "cacheRead": 0,
        "cacheWrite": 0,
        "total": 0.75 + 1.5,
    }


def test_a_call_without_cost_adds_none_and_keeps_what_was_summed() -> None:
    total = make_usage(1, 1, cost=0.5)
    llm_runner.add_usage(total, {"input": 2, "output": 3, "totalTokens": 5})
    assert total["cost"]["total"] == 0.5
    assert (total["input"], total["output"], total["totalTokens"]) == (3, 4, 7)
