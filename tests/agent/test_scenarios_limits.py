"""Scenarios about plans and limits: validation, parallel groups, budgets, cache, dry run."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest

from bot.agent.cache import PlanCache
from bot.agent.loop import PlanningFailed
from bot.llm.scripted import ScriptedLLM
from bot.record.history import history_path
from bot.run_events import ProgressKind
from bot.storage.base import TaskState
from bot.tools.registry import Tool, ToolResult
from tests.agent import docs
from tests.agent.conftest import Harness, make_harness, planning_settings, script


async def test_a_rejected_plan_is_replanned_once_with_the_reasons(harness: Harness) -> None:
    bad = docs.plan([docs.action("task_1", "github_delete_everything", arguments={})])
    llm = ScriptedLLM([bad, *script("readme_simple")])

    outcome = await harness.run(llm)

    assert outcome.state is TaskState.DONE, outcome
    replan = llm.requests[1].messages[-1].content
    assert "Your previous plan was rejected" in replan
    assert "unknown tool 'github_delete_everything'" in replan
    assert len(harness.of(ProgressKind.PLAN)) == 1


async def test_a_plan_rejected_twice_ends_with_the_partial_plan_for_a_person(
    harness: Harness,
) -> None:
    cyclic = docs.plan(
        [docs.action("task_1", "github_list_files"), docs.action("task_2", "github_list_files")],
        dependencies={"task_1": ["task_2"], "task_2": ["task_1"]},
    )
    too_many = docs.plan(
        [docs.action(f"task_{n}", "github_list_files", arguments={}) for n in range(1, 5)]
    )
    harness.settings = harness.settings.model_copy(
        update={"planning": planning_settings(max_subtasks=3)}
    )
    llm = ScriptedLLM([cyclic, too_many, too_many, docs.intervention("Split the issue")])

    outcome = await harness.run(llm)

    assert outcome.state is TaskState.NEEDS_HUMAN
    assert "could not be decomposed" in outcome.reason
    assert "4 subtasks is more than max_subtasks (3)" in outcome.reason
    assert "dependency cycle: task_1 -> task_2 -> task_1" in llm.requests[1].messages[-1].content
    # tried once more at the coarsest level before asking
    coarser = llm.requests[2].messages[-1].content
    assert "A finer decomposition of this task failed: the plan was rejected twice" in coarser
    assert "Detail: as few subtasks as possible" in coarser
    assert [r.phase for r in llm.requests] == ["planning"] * 3 + ["completion"]
    [help_event] = harness.of(ProgressKind.HUMAN_INTERVENTION)
    feasible = help_event["partial_plan"]["feasible_subtasks"]
    assert [s["id"] for s in feasible] == ["task_1", "task_2", "task_3", "task_4"]
    assert ProgressKind.PLAN not in harness.kinds()


async def test_decomposition_failed_answer_asks_a_person(harness: Harness) -> None:
    failed = {
        "phase": "planning",
        "error": {
            "type": "decomposition_failed",
            "message": "no tool can publish a release",
            "partial_plan": {
                "feasible_subtasks": ["update the changelog"],
                "infeasible_subtasks": ["publish to PyPI"],
                "alternative_approaches": ["a maintainer runs the release"],
            },
        },
        "comment": "partly possible",
    }
    llm = ScriptedLLM([failed, failed, docs.intervention("Publish the release by hand")])

    outcome = await harness.run(llm)

    assert outcome.state is TaskState.NEEDS_HUMAN
    coarser = llm.requests[1].messages[-1].content
    assert "A finer decomposition of this task failed: no tool can publish a release" in coarser
    assert "feasible: update the changelog. not feasible: publish to PyPI" in coarser
    assert "alternatives: a maintainer runs the release" in coarser
    [help_event] = harness.of(ProgressKind.HUMAN_INTERVENTION)
    assert help_event["partial_plan"]["infeasible_subtasks"] == ["publish to PyPI"]
    assert help_event["summary"]["recommendations"] == ["Publish the release by hand"]


async def test_a_failed_decomposition_that_works_at_a_coarser_level_runs(harness: Harness) -> None:
    failed = {
        "phase": "planning",
        "error": {"type": "decomposition_failed", "message": "too many unknowns"},
        "comment": "no",
    }
    llm = ScriptedLLM([failed, *script("readme_simple")])

    outcome = await harness.run(llm)

    assert outcome.state is TaskState.DONE, outcome
    assert "too many unknowns" in llm.requests[1].messages[-1].content
    assert ProgressKind.HUMAN_INTERVENTION not in harness.kinds()


async def test_a_policy_forbidden_tool_is_rejected(
    tmp_path: Path, stack: contextlib.AsyncExitStack
) -> None:
    planning = planning_settings(security={"forbidden_tools": ["github_create_or_update_file"]})
    harness = await make_harness(tmp_path, stack, planning=planning)
    llm = ScriptedLLM([*script("readme_simple")[:1]] * 3 + [docs.intervention()])

    outcome = await harness.run(llm)

    assert outcome.state is TaskState.NEEDS_HUMAN
    assert "forbidden by the policy" in outcome.reason
    assert "github_create_or_update_file" not in llm.requests[0].messages[-1].content


def _barrier_tool(name: str, started: list[str], peak: list[int], gate: asyncio.Event) -> Tool:
    running: list[str] = []

    async def handler(args: dict[str, Any]) -> ToolResult:
        started.append(args["path"])
        running.append(args["path"])
        peak[0] = max(peak[0], len(running))
        if len(started) >= 2:
            gate.set()
        try:
            await asyncio.wait_for(gate.wait(), timeout=5)
        except TimeoutError:
            return ToolResult.fail("ran alone: nothing else started")
        finally:
            running.remove(args["path"])
        return ToolResult.success(f"content of {args['path']}")

    schema = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
    return Tool(name, "Read a file slowly.", schema, handler)


async def test_a_parallel_group_runs_concurrently_within_max_parallel(
    tmp_path: Path, stack: contextlib.AsyncExitStack
) -> None:
    harness = await make_harness(
        tmp_path, stack, planning=planning_settings(execution={"max_parallel": 2})
    )
    started: list[str] = []
    peak = [0]
    harness.extra_tools.append(_barrier_tool("slow_read", started, peak, asyncio.Event()))
    reads = [
        docs.action(f"task_{n}", "slow_read", arguments={"path": f"f{n}.md"}, group=1)
        for n in range(1, 5)
    ]
    write = docs.action(
        "task_5",
        "github_create_or_update_file",
        arguments={"path": "ALL.md", "content": "all\n", "message": "m"},
        dependencies=["task_1", "task_2", "task_3", "task_4"],
    )
    llm = ScriptedLLM([docs.plan([*reads, write]), docs.completion(done=5)])

    outcome = await harness.run(llm)

    assert outcome.state is TaskState.DONE, outcome
    assert peak[0] == 2  # concurrent, but never more than max_parallel
    events = [(a["task_id"], a["status"]) for a in harness.actions()]
    first_done = next(i for i, (_t, status) in enumerate(events) if status == "done")
    assert {t for t, s in events[:first_done] if s == "running"} == {"task_1", "task_2"}
    assert events[-2:] == [("task_5", "running"), ("task_5", "done")]


async def test_the_task_token_budget_stops_before_a_call_it_cannot_afford(
    tmp_path: Path, stack: contextlib.AsyncExitStack
) -> None:
    harness = await make_harness(tmp_path, stack, llm_settings={"max_tokens_per_task": 1000})
    llm = ScriptedLLM(script("readme_simple"))

    outcome = await harness.run(llm)

    assert outcome.state is TaskState.NEEDS_HUMAN
    assert "llm.max_tokens_per_task (1000)" in outcome.reason
    assert llm.requests == []
    [help_event] = harness.of(ProgressKind.HUMAN_INTERVENTION)
    recommendations = help_event["summary"]["recommendations"]
    assert recommendations[0] == (
        "Raise llm.max_tokens_per_task in the configuration if this task needs more"
    )


async def test_the_per_call_budget_stops_a_prompt_that_is_too_big(
    tmp_path: Path, stack: contextlib.AsyncExitStack
) -> None:
    harness = await make_harness(tmp_path, stack, llm_settings={"max_tokens_per_call": 900})
    outcome = await harness.run(ScriptedLLM([]))

    assert outcome.state is TaskState.NEEDS_HUMAN
    assert "llm.max_tokens_per_call (900)" in outcome.reason


async def test_the_total_timeout_stops_between_actions(
    tmp_path: Path, stack: contextlib.AsyncExitStack
) -> None:
    harness = await make_harness(
        tmp_path, stack, planning=planning_settings(execution={"total_timeout": 10})
    )
    ticks = iter(range(0, 1000, 6))  # every look at the clock is 6 s later

    llm = ScriptedLLM(script("readme_simple"))
    coordinator = harness.coordinator()
    coordinator._monotonic = lambda: float(next(ticks))  # the test's clock

    outcome = await coordinator.run(harness.ctx(llm))

    assert outcome.state is TaskState.NEEDS_HUMAN
    assert "planning.execution.total_timeout (10 s)" in outcome.reason


async def test_a_cached_plan_saves_the_planning_call_for_the_same_task(
    tmp_path: Path, stack: contextlib.AsyncExitStack
) -> None:
    first = await make_harness(tmp_path, stack)
    first.cache = PlanCache(first.store, first.settings.planning, clock=first.clock)
    await first.run(ScriptedLLM(script("readme_simple")))
    second = await make_harness(
        tmp_path / "again", stack, store=first.store, forge=first.forge, number=8
    )
    second.cache = first.cache
    llm = ScriptedLLM(script("readme_simple")[1:])

    outcome = await second.run(llm)

    assert outcome.state is TaskState.DONE, outcome
    assert [r.phase for r in llm.requests] == ["execution", "completion"]
    [plan] = second.of(ProgressKind.PLAN)
    assert plan["cached"] is True
    timeline = history_path(second.settings.data_dir, second.task.id).read_text()
    assert '"cached": true' in timeline


async def test_a_similar_task_in_another_repository_does_not_use_the_cache(
    tmp_path: Path, stack: contextlib.AsyncExitStack
) -> None:
    first = await make_harness(tmp_path, stack)
    await first.run(ScriptedLLM(script("readme_simple")))
    other = await make_harness(
        tmp_path / "other", stack, store=first.store, forge=first.forge, repo_name="acme/other"
    )
    llm = ScriptedLLM(script("readme_simple"))

    await other.run(llm)

    assert llm.requests[0].phase == "planning"


async def test_dry_run_plans_and_writes_nothing(harness: Harness) -> None:
    llm = ScriptedLLM(script("readme_simple")[:1])

    plan = await harness.coordinator().plan_only(harness.ctx(llm))

    assert [a.key for a in plan.actions] == ["task_1", "task_2"]
    assert plan.goal.main_objective == "Add installation steps to README.md"
    assert harness.events == []
    assert await harness.store.load_checkpoint(harness.task.id) is None
    assert not history_path(harness.settings.data_dir, harness.task.id).exists()
    writes = {"create_comment", "commit_files", "create_branch", "open_change_request"}
    assert not [name for name, _ in harness.forge.calls if name in writes]


async def test_a_large_result_is_summarised_once(
    tmp_path: Path, stack: contextlib.AsyncExitStack
) -> None:
    big = "# Widgets\n\n" + "\n".join(f"Line {n} of a long README." for n in range(600))
    harness = await make_harness(tmp_path, stack, files={"README.md": big})
    llm = ScriptedLLM(
        [
            docs.readme_plan(),
            "The README is a long list of numbered lines; it has no Installation section.",
            docs.write_readme(),
            docs.completion(),
        ]
    )

    outcome = await harness.run(llm)

    assert outcome.state is TaskState.DONE, outcome
    summarise = llm.requests[1]
    assert summarise.phase == "summarise" and summarise.schema is None
    assert summarise.max_tokens <= 300
    execution_prompt = llm.requests[2].messages[-1].content
    assert "(summary) The README is a long list" in execution_prompt


async def test_dry_run_of_an_unclear_task_raises_with_the_questions(harness: Harness) -> None:
    llm = ScriptedLLM(script("unclear_goal"))

    with pytest.raises(PlanningFailed) as failed:
        await harness.coordinator().plan_only(harness.ctx(llm))

    assert failed.value.kind == "unclear_goal"
    assert failed.value.questions == ("Which file should change?", "What should the new text say?")
    assert harness.events == []
