"""Tasks stopped at interesting points, for the checkpoint-compatibility test.

Each ``Scenario`` says how a task was brought to a resting point (``capture``: run by
``python -m tests.agent.checkpoints.capture`` with the code of the time, which stores
the task's checkpoint under tests/agent/checkpoints/NAME.json) and how the stored
checkpoint is resumed (``resume``: what people say, what the model answers, and what
must hold at the end). The fixtures are never re-captured by the test: they are the
checkpoints older versions wrote, and every later version must resume them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.events import TaskMode
from bot.llm.scripted import ScriptedLLM
from bot.run_events import ProgressEvent, ProgressKind
from bot.storage.base import TaskState
from tests.agent import docs
from tests.agent.conftest import Harness, make_harness, planning_settings, script

CHECKPOINTS = Path(__file__).with_name("checkpoints")


class Crash(Exception):
    """The worker process died (raised from an emit)."""


def _notes_then_readme() -> list[Any]:
    write_a = docs.action(
        "task_1",
        "github_create_or_update_file",
        arguments={"path": "NOTES.md", "content": "notes\n", "message": "Add notes"},
    )
    write_b = docs.action("task_2", "github_create_or_update_file", dependencies=["task_1"])
    return [docs.plan([write_a, write_b])]


def _early_done() -> list[Any]:
    write = docs.action(
        "task_1",
        "github_create_or_update_file",
        arguments={"path": "README.md", "content": docs.README_WITH_INSTALL, "message": "Add"},
    )
    comment = docs.action("task_2", "github_add_issue_comment", arguments={"body": "done!"})
    return [docs.plan([write, comment]), docs.reflection("task_1", status="success", met=True)]


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    first: Callable[[], list[Any]]  # the model's answers up to the resting point
    then: Callable[[], list[Any]]  # the model's answers after it
    mode: TaskMode = TaskMode.RUN
    planning: dict[str, Any] = field(default_factory=dict)
    crash_on: Callable[[ProgressEvent], bool] | None = None  # the capture run dies here
    advance: float = 0.0  # seconds the clock moves before the capture's second run
    between: tuple[tuple[str, str], ...] = ()  # commands before the capture's second run
    captured_state: TaskState | None = None  # what the capture run returned
    commands: tuple[tuple[str, str], ...] = ()  # (name, args) people send before resuming
    feedback: tuple[str, ...] = ()
    expected: TaskState = TaskState.DONE
    commits: tuple[tuple[str, ...], ...] | None = None  # files of each commit while resuming
    readme_installed: bool = False
    no_calls: bool = False  # the resumed run asks the model nothing
    expected_requests: tuple[str, ...] | None = None


SCENARIOS = [
    Scenario(
        "waiting_for_plan_approval",
        "/agent plan: the plan is posted and waits for approval",
        first=lambda: script("readme_simple")[:1],
        then=lambda: script("readme_simple")[1:],
        mode=TaskMode.PLAN_ONLY,
        captured_state=TaskState.AWAITING_APPROVAL,
        commands=(("approve", ""),),
        readme_installed=True,
        expected_requests=("execution", "completion"),
    ),
    Scenario(
        "approved_plan_paused_llm_down",
        "/agent plan, approved; the model went down at the first execution call",
        first=lambda: [
            *script("readme_simple")[:1],
            {"error": "unavailable", "message": "connection refused"},
        ],
        then=lambda: script("readme_simple")[1:],
        mode=TaskMode.PLAN_ONLY,
        between=(("approve", ""),),
        captured_state=TaskState.PAUSED,
        readme_installed=True,
        expected_requests=("execution", "completion"),
    ),
    Scenario(
        "waiting_for_tool_approval",
        "a write the policy wants approved waits with its call",
        first=lambda: script("readme_simple")[:2],
        then=lambda: script("readme_simple")[2:],
        planning={"security": {"require_approval": ["github_create_or_update_file"]}},
        captured_state=TaskState.AWAITING_APPROVAL,
        commands=(("approve", ""),),
        readme_installed=True,
        expected_requests=("completion",),
    ),
    Scenario(
        "waiting_for_revision_approval",
        "a revised plan waits for approval (require_human_approval)",
        first=docs.failing_then_fixed,
        then=lambda: [docs.completion(done=1, failed=1)],
        planning={"revision": {"require_human_approval": True, "approval_timeout": 600}},
        captured_state=TaskState.AWAITING_APPROVAL,
        commands=(("approve", ""),),
        readme_installed=True,
        commits=(("README.md",),),
    ),
    Scenario(
        "approval_timed_out",
        "nobody answered the revision approval in time: paused; resumed, it asks again",
        first=docs.failing_then_fixed,
        then=list,
        planning={"revision": {"require_human_approval": True, "approval_timeout": 600}},
        advance=601,
        captured_state=TaskState.PAUSED,
        commands=(("resume", ""),),
        expected=TaskState.AWAITING_APPROVAL,
        no_calls=True,
    ),
    Scenario(
        "waiting_for_answers",
        "an unclear goal: the questions are posted and the task waits for answers",
        first=lambda: script("unclear_goal"),
        then=lambda: script("readme_simple"),
        captured_state=TaskState.AWAITING_INPUT,
        feedback=("README.md, with a pip install line.",),
        readme_installed=True,
        expected_requests=("planning", "execution", "completion"),
    ),
    Scenario(
        "paused_llm_down_with_an_unreflected_batch",
        "the model went down mid-batch: paused (announced), the batch not reflected on",
        first=lambda: [
            *_notes_then_readme(),
            {"error": "unavailable", "message": "connection refused"},
        ],
        then=lambda: [docs.write_readme(), docs.completion()],
        captured_state=TaskState.PAUSED,
        commits=(("README.md",),),
        expected_requests=("execution", "completion"),
    ),
    Scenario(
        "crashed_after_a_write_before_reflecting",
        "the worker died right after a write finished: the batch is not reflected on",
        first=_notes_then_readme,
        then=lambda: [docs.write_readme(), docs.completion()],
        crash_on=lambda e: e.kind is ProgressKind.ACTION and e.data.get("status") == "done",
        commits=(("README.md",),),
        expected_requests=("execution", "completion"),
    ),
    Scenario(
        "crashed_after_the_goal_was_met_early",
        "a reflection saw the criteria met; the worker died while delivering",
        first=_early_done,
        then=lambda: [docs.completion(done=1)],
        planning={"auto_adjust_level": False, "reflection": {"trigger_interval": 1}},
        crash_on=lambda e: e.kind is ProgressKind.LINKS,
        expected_requests=("completion",),
    ),
    Scenario(
        "finished_and_announced",
        "a finished task: a re-run returns its outcome and asks nothing",
        first=lambda: script("readme_simple"),
        then=list,
        captured_state=TaskState.DONE,
        no_calls=True,
    ),
]


async def harness_for(
    scenario: Scenario, tmp_path: Path, stack: contextlib.AsyncExitStack
) -> Harness:
    planning = planning_settings(**scenario.planning) if scenario.planning else None
    return await make_harness(tmp_path, stack, planning=planning, mode=scenario.mode)


async def capture(scenario: Scenario, tmp_path: Path) -> dict[str, Any]:
    """Run ``scenario`` to its resting point with the current code; its checkpoint."""
    async with contextlib.AsyncExitStack() as stack:
        harness = await harness_for(scenario, tmp_path, stack)
        llm = ScriptedLLM(scenario.first())
        crash_on = scenario.crash_on
        if crash_on is not None:

            async def crashing(event: ProgressEvent) -> None:
                harness.events.append(event)
                if crash_on(event):
                    raise Crash(scenario.name)

            harness.emit = crashing  # type: ignore[method-assign]
        try:
            outcome = await harness.run(llm)
        except Crash:
            outcome = None
        if scenario.advance or scenario.between:
            harness.clock.advance(scenario.advance)
            for name, args in scenario.between:
                await harness.command(name, args)
            outcome = await harness.run(llm)
        assert outcome is None or outcome.state is scenario.captured_state, (scenario, outcome)
        assert len(llm.requests) == len(llm.items), scenario.name
        saved = await harness.store.load_checkpoint(harness.task.id)
        assert saved is not None
        return saved


async def resume(scenario: Scenario, checkpoint: dict[str, Any], harness: Harness) -> None:
    """Store ``checkpoint`` as the task's, say what people say, run, check the end."""
    await harness.store.save_checkpoint(harness.task.id, checkpoint)
    for name, args in scenario.commands:
        await harness.command(name, args)
    for body in scenario.feedback:
        await harness.feedback(body)
    llm = ScriptedLLM(scenario.then())

    outcome = await harness.run(llm)

    assert outcome.state is scenario.expected, (scenario.name, outcome)
    assert len(llm.requests) == len(llm.items), scenario.name  # every answer was used
    if scenario.no_calls:
        assert llm.requests == []
    if scenario.expected_requests is not None:
        assert tuple(r.phase for r in llm.requests) == scenario.expected_requests
    if scenario.commits is not None:
        commits = harness.forge.repo(harness.repo).commits
        assert tuple(tuple(sorted(files)) for _b, _m, files in commits) == scenario.commits
    if scenario.readme_installed:
        assert "## Installation" in (harness.branch_file("README.md") or "")
    again = await harness.run(ScriptedLLM([]))  # a re-run changes nothing
    assert again.state is outcome.state
