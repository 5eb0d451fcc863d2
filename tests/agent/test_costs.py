"""What a task costs: each call priced at llm.prices (or the published price of the
model), the total in the checkpoint, the status comment and the usage events, and
planning.budget.max_cost stopping a task before a call it cannot afford."""

from __future__ import annotations

import contextlib
from pathlib import Path

from bot.comments.status import StatusView
from bot.config.sections import ModelPrice
from bot.llm.prices import dollars, price_for
from bot.llm.scripted import ScriptedLLM
from bot.run_events import ProgressKind
from bot.storage.base import TaskState
from tests.agent.conftest import make_harness, planning_settings, script


async def test_a_task_on_a_priced_model_adds_up_what_each_call_cost(
    tmp_path: Path, stack: contextlib.AsyncExitStack
) -> None:
    harness = await make_harness(tmp_path, stack, llm_settings={"model": "gpt-4o"})
    llm = ScriptedLLM(script("readme_simple"))

    outcome = await harness.run(llm)

    assert outcome.state is TaskState.DONE, outcome
    usage = harness.of(ProgressKind.USAGE)
    assert len(usage) == len(llm.requests) == 3
    # Each event carries the task's running totals; with no cache, the cost is linear.
    price = price_for("gpt-4o")
    for event in usage:
        expected = price.cost(event["prompt_tokens"], event["completion_tokens"])
        assert event["cost"] == round(expected, 6)
    assert usage[-1]["cost"] > 0
    view = StatusView(state=TaskState.DONE)
    view.restore({"total_tokens": usage[-1]["total_tokens"], "cost": usage[-1]["cost"]})
    assert f"· Cost: {dollars(usage[-1]['cost'])}" in view.render("en")  # however small
    assert "· 費用: $" in view.render("ja")


async def test_a_local_model_costs_nothing_and_shows_no_cost(
    tmp_path: Path, stack: contextlib.AsyncExitStack
) -> None:
    harness = await make_harness(tmp_path, stack, llm_settings={"model": "qwen2.5-coder"})
    outcome = await harness.run(ScriptedLLM(script("readme_simple")))
    assert outcome.state is TaskState.DONE
    assert {u["cost"] for u in harness.of(ProgressKind.USAGE)} == {0}
    view = StatusView(state=TaskState.DONE)
    view.restore({"total_tokens": 10, "cost": 0})
    assert "Cost" not in view.render("en")


async def test_the_money_budget_stops_before_a_call_it_cannot_afford(
    tmp_path: Path, stack: contextlib.AsyncExitStack
) -> None:
    # A planning call of about a thousand prompt tokens and its answer cost at least half
    # a cent on gpt-4o: a budget of 0.4 cents cannot pay for it.
    harness = await make_harness(
        tmp_path,
        stack,
        llm_settings={"model": "gpt-4o"},
        planning=planning_settings(budget={"max_cost": 0.004}),
    )
    llm = ScriptedLLM(script("readme_simple"))

    outcome = await harness.run(llm)

    assert outcome.state is TaskState.NEEDS_HUMAN
    assert "planning.budget.max_cost ($0.0040)" in outcome.reason
    assert llm.requests == []
    [help_event] = harness.of(ProgressKind.HUMAN_INTERVENTION)
    assert "planning.budget.max_cost" in help_event["summary"]["recommendations"][0]


async def test_the_operators_price_list_decides_the_cost(
    tmp_path: Path, stack: contextlib.AsyncExitStack
) -> None:
    prices = {"my-model": ModelPrice(input=1000.0, output=1000.0)}  # $1 per thousand tokens
    harness = await make_harness(
        tmp_path,
        stack,
        llm_settings={"model": "my-model", "prices": prices},
        planning=planning_settings(budget={"max_cost": 1.5}),
    )
    llm = ScriptedLLM(script("readme_simple"))

    outcome = await harness.run(llm)

    assert outcome.state is TaskState.NEEDS_HUMAN  # planning's ~1,300 tokens fit; no more
    assert "planning.budget.max_cost ($1.50)" in outcome.reason
    assert len(llm.requests) == 1
