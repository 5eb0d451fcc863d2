"""The coordinator end to end: the simple README task and what it leaves behind."""

from __future__ import annotations

import json

from bot.llm.scripted import ScriptedLLM
from bot.record.history import format_timeline, history_path
from bot.record.state import AgentState, Phase, Stage
from bot.run_events import ProgressKind
from bot.storage.base import TaskState
from tests.agent.conftest import Harness, script


async def test_simple_readme_task_plans_executes_and_completes(harness: Harness) -> None:
    llm = ScriptedLLM(script("readme_simple"))

    outcome = await harness.run(llm)

    assert outcome.state is TaskState.DONE, outcome
    assert outcome.summary["goal_achieved"] is True
    assert outcome.summary["tasks_completed"] == 2
    assert [r.phase for r in llm.requests] == ["planning", "execution", "completion"]
    readme = harness.branch_file("README.md")
    assert readme is not None and "## Installation" in readme
    # the default branch is untouched, a draft change request links the issue
    assert (
        "Installation"
        not in harness.forge.repo(harness.repo).branches["main"]["README.md"].decode()
    )
    [change] = harness.forge.repo(harness.repo).change_requests
    assert change.head_branch == harness.built.branch and change.base_branch == "main"
    assert change.draft is True
    title, body = harness.forge.repo(harness.repo).change_request_bodies[change.number]
    assert "#7" in title and "Closes #7" in body and "Add installation steps" in body
    assert "- [x] Add an Installation section" in body
    assert "not run (changes made through the forge API)" in body


async def test_events_tell_the_story_in_order(harness: Harness) -> None:
    await harness.run(ScriptedLLM(script("readme_simple")))

    phases = [d["phase"] for d in harness.of(ProgressKind.PHASE)]
    assert phases == [
        "goal_understanding",
        "task_decomposition",
        "action_planning",
        "execution",
        "completion",
    ]
    [plan] = harness.of(ProgressKind.PLAN)
    assert [s["id"] for s in plan["plan"]["task_decomposition"]["subtasks"]] == ["task_1", "task_2"]
    assert plan["statuses"] == {"task_1": "pending", "task_2": "pending"}
    assert [(a["task_id"], a["status"]) for a in harness.actions()] == [
        ("task_1", "running"),
        ("task_1", "done"),
        ("task_2", "running"),
        ("task_2", "done"),
    ]
    [links] = harness.of(ProgressKind.LINKS)
    assert links["branch"] == harness.built.branch
    assert links["change_request_url"].endswith("/pull/100")
    assert "report_path" not in links  # never a path on the bot's host
    kinds = harness.kinds()
    assert kinds.index(ProgressKind.LINKS) < kinds.index(ProgressKind.COMPLETION)
    usage = harness.of(ProgressKind.USAGE)
    assert [u["phase"] for u in usage] == ["planning", "execution", "completion"]
    assert (
        usage[-1]["total_tokens"]
        == sum(u["prompt_tokens"] for u in usage[-1:]) + usage[-1]["completion_tokens"]
    )
    assert ProgressKind.REFLECTION not in kinds and ProgressKind.REVISION not in kinds


async def test_history_and_checkpoint_are_written(harness: Harness) -> None:
    await harness.run(ScriptedLLM(script("readme_simple")))

    path = history_path(harness.settings.data_dir, harness.task.id)
    entries = [json.loads(line) for line in path.read_text().splitlines()]
    types = [e["type"] for e in entries]
    assert types[0] == "usage" and "plan" in types and types[-1] == "completion"
    assert types.count("action") == 2
    assert all(e["timestamp"].endswith("Z") for e in entries)
    action = next(e for e in entries if e["type"] == "action" and e["key"] == "task_2")
    assert action["tool"] == "github_create_or_update_file" and action["changed"] is True
    timeline = format_timeline(path)
    assert "plan: Add installation steps to README.md (2 actions)" in timeline
    assert "action task_2 github_create_or_update_file: ok" in timeline

    saved = await harness.store.load_checkpoint(harness.task.id)
    assert saved is not None
    state = AgentState.from_dict(saved)
    assert state.stage is Stage.DONE and state.phase() is Phase.COMPLETION
    assert state.outcome is not None and state.outcome["state"] == "done"


async def test_a_finished_task_run_again_returns_its_outcome_without_calls(
    harness: Harness,
) -> None:
    await harness.run(ScriptedLLM(script("readme_simple")))
    again = ScriptedLLM([])

    outcome = await harness.run(again)

    assert outcome.state is TaskState.DONE
    assert again.requests == []
    assert len(harness.forge.repo(harness.repo).change_requests) == 1
