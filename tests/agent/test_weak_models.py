"""Weak and local models do not burn the revision budget (specification 10.2.2, 10.3.1):
a reflection answered with prose on a result the record shows succeeded costs no
revision; a result that cannot be judged and that the bot's own check doubts goes to its
author; an action whose preconditions no longer hold is not run, and people are told the
bot changed course; the coarser re-plan survives a restart."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest

from bot.comments.status import StatusView
from bot.llm.scripted import ScriptedLLM
from bot.record.history import history_path
from bot.record.state import AgentState, Stage
from bot.run_events import ProgressEvent, ProgressKind, WaitKind
from bot.storage.base import TaskState
from tests.agent import docs
from tests.agent.conftest import Harness, make_harness, planning_settings
from tests.agent.test_delivery import bare_remote, git

FILES = {"README.md": "# Widgets\n\nA small widget library.\n"}
NEW_README = FILES["README.md"] + "\n## Installation\n\n    pip install widgets\n"
PROSE = "Looks fine to me, I think the step went well and we can continue with the plan."
# a reflection: the ask and its re-ask, then the second look at the shallowest depth
UNREADABLE = [PROSE, PROSE, PROSE, PROSE]


async def _cloned(
    tmp_path: Path, stack: contextlib.AsyncExitStack, **planning: Any
) -> tuple[Harness, Path]:
    bare = bare_remote(tmp_path / "origin", FILES)
    harness = await make_harness(
        tmp_path, stack, files=FILES, clone_url=f"file://{bare}",
        planning=planning_settings(**planning),
    )  # fmt: skip
    return harness, bare


def _reflections(harness: Harness) -> list[dict[str, Any]]:
    path = history_path(harness.settings.data_dir, harness.task.id)
    entries = [json.loads(line) for line in path.read_text().splitlines()]
    return [e["evaluation"] for e in entries if e["type"] == "reflection"]


def _readme_plan() -> dict[str, Any]:
    read = docs.action("task_1", "read_file", arguments={"path": "README.md"}, expected="text")
    write = docs.action(
        "task_2", "write_file", arguments={"path": "README.md", "content": NEW_README},
        dependencies=["task_1"],
    )  # fmt: skip
    return docs.plan([read, write], dependencies={"task_2": ["task_1"]})


async def test_prose_reflections_on_successful_actions_cost_no_revision(
    tmp_path: Path, stack: contextlib.AsyncExitStack
) -> None:
    # a reflection after every action, and a model that answers every one with prose
    harness, bare = await _cloned(
        tmp_path, stack, auto_adjust_level=False, reflection={"trigger_interval": 1}
    )
    llm = ScriptedLLM([_readme_plan(), *UNREADABLE, *UNREADABLE, docs.completion(done=2)])

    outcome = await harness.run(llm)

    assert outcome.state is TaskState.DONE, outcome
    assert outcome.summary["revision_attempts"] == 0
    assert harness.of(ProgressKind.REVISION) == [] and harness.of(ProgressKind.REFLECTION) == []
    assert git("show", f"{harness.built.branch}:README.md", cwd=bare) == NEW_README.strip()
    assert [r["status"] for r in _reflections(harness)] == ["unjudged", "unjudged"]
    # the second look: at the shallowest depth, with what the bot checked itself
    second_look = llm.requests[7].messages[-1].content
    assert "Judge success or failure only" in second_look
    assert "What the bot checked itself" in second_look
    assert "README.md holds exactly the content written" in second_look
    assert "+## Installation" in second_look  # the diff


async def test_an_unjudged_write_that_changed_nothing_asks_its_author(
    tmp_path: Path, stack: contextlib.AsyncExitStack
) -> None:
    harness, _bare = await _cloned(tmp_path, stack)
    same = {"path": "README.md", "old_text": "# Widgets", "new_text": "# Widgets"}
    edit = docs.action("task_1", "replace_in_file", arguments=same)
    llm = ScriptedLLM([docs.plan([edit]), *UNREADABLE, docs.completion(done=1)])

    asked = await harness.run(llm)

    assert asked.state is TaskState.AWAITING_APPROVAL, asked
    [request] = harness.of(ProgressKind.APPROVAL_REQUEST)
    assert request["subject"] is WaitKind.JUDGEMENT
    assert "README.md, which is unchanged" in request["details"]
    assert "README.md now holds the new text" in request["details"]
    unexpected = llm.requests[1].messages[-1].content
    assert "Why this result looks unexpected: it meant to change README.md" in unexpected
    await harness.command("approve")

    outcome = await harness.run(llm)

    assert outcome.state is TaskState.DONE, outcome
    assert outcome.summary["revision_attempts"] == 0 and harness.of(ProgressKind.REVISION) == []


async def test_unjudged_revise_judges_conservatively(
    tmp_path: Path, stack: contextlib.AsyncExitStack
) -> None:
    harness, _bare = await _cloned(tmp_path, stack, reflection={"unjudged": "revise"})
    same = {"path": "README.md", "old_text": "# Widgets", "new_text": "# Widgets"}
    edit = docs.action("task_1", "replace_in_file", arguments=same)
    write = docs.action("task_2", "write_file", arguments={"path": "README.md",
                                                          "content": NEW_README})  # fmt: skip
    llm = ScriptedLLM([docs.plan([edit]), *UNREADABLE, docs.revision([write]),
                       docs.completion(done=2)])  # fmt: skip

    outcome = await harness.run(llm)

    assert outcome.state is TaskState.DONE, outcome
    [reflection] = harness.of(ProgressKind.REFLECTION)
    assert "evaluation impossible" in reflection["issues"]
    assert outcome.summary["revision_attempts"] == 1


async def test_an_action_whose_dependency_failed_is_not_run_and_people_are_told(
    tmp_path: Path, stack: contextlib.AsyncExitStack
) -> None:
    harness, bare = await _cloned(tmp_path, stack)
    read = docs.action("task_1", "read_file", arguments={"path": "docs/install.md"})
    write = docs.action("task_2", "write_file", arguments={"path": "README.md", "content": "x\n"},
                        dependencies=["task_1"])  # fmt: skip
    fixed = docs.action("task_3", "write_file",
                        arguments={"path": "README.md", "content": NEW_README})  # fmt: skip
    llm = ScriptedLLM(
        [
            docs.plan([read, write], dependencies={"task_2": ["task_1"]}),
            docs.reflection("task_1", status="failure"),  # failed, but no revision asked
            docs.reflection(
                "task_2", revise=True, reason="write without the guide", updated=[fixed]
            ),
            docs.completion(done=1, failed=2),
        ]
    )

    outcome = await harness.run(llm)

    assert outcome.state is TaskState.DONE, outcome
    [course] = harness.of(ProgressKind.COURSE)
    assert course["reason"] == "task_2 was not run: it needs task_1, which failed"
    assert [a["task_id"] for a in harness.actions("done")] == ["task_3"]
    assert git("show", f"{harness.built.branch}:README.md", cwd=bare) == NEW_README.strip()
    view = StatusView()
    for event in harness.events:
        view.apply(event)
    status = view.render("en")
    assert "**Changed course:**" in status
    assert "task_2 was not run: it needs task_1, which failed" in status
    assert "方針を変えました" in view.render("ja")


async def test_the_coarser_replan_survives_a_restart(harness: Harness) -> None:
    failed = {
        "phase": "planning",
        "error": {"type": "decomposition_failed", "message": "the tools cannot split it"},
        "comment": "no",
    }
    write = docs.action("task_1", "github_create_or_update_file",
                        arguments={"path": "README.md", "content": docs.README_WITH_INSTALL,
                                   "message": "Add"})  # fmt: skip
    first = ScriptedLLM([failed, {"error": "unavailable"}])
    paused = await harness.run(first)
    assert paused.state is TaskState.PAUSED, paused

    second = ScriptedLLM([docs.plan([write]), docs.completion(done=1)])
    outcome = await harness.run(second)

    assert outcome.state is TaskState.DONE, outcome
    prompt = second.requests[0].messages[-1].content
    assert "A finer decomposition of this task failed: the tools cannot split it" in prompt
    assert "as few subtasks as possible" in prompt


async def test_a_moderate_task_reflects_every_five_actions(
    tmp_path: Path, stack: contextlib.AsyncExitStack
) -> None:
    body = "Please add installation steps to the README. " + "Explain each option. " * 60
    harness = await make_harness(tmp_path, stack, body=body)
    reads = [docs.action(f"task_{n}", "github_get_file_contents",
                         arguments={"path": "README.md"}) for n in range(1, 7)]  # fmt: skip
    llm = ScriptedLLM(
        [docs.plan(reads), docs.reflection("task_5", status="success"), docs.completion(done=6)]
    )

    outcome = await harness.run(llm)

    assert outcome.state is TaskState.DONE, outcome
    assert [r.phase for r in llm.requests] == ["planning", "reflection", "completion"]
    assert "[task_5]" in llm.requests[1].messages[-1].content  # after five actions, not three


async def test_a_resumed_batch_nobody_can_judge_asks_its_author_and_resumes_on_the_answer(
    tmp_path: Path, stack: contextlib.AsyncExitStack
) -> None:
    # issue 31: the worker died after the batch ran and before it was reflected on; the
    # restarted run reflects on it (stage reflect), cannot judge it, and asks the author.
    harness, _bare = await _cloned(tmp_path, stack)
    same = {"path": "README.md", "old_text": "# Widgets", "new_text": "# Widgets"}
    edit = docs.action("task_1", "replace_in_file", arguments=same)
    llm = ScriptedLLM([docs.plan([edit]), *UNREADABLE, docs.completion(done=1)])

    class Crash(Exception):
        pass

    async def crashing(event: ProgressEvent) -> None:
        harness.events.append(event)
        if event.kind is ProgressKind.ACTION and event.data.get("status") == "done":
            raise Crash("the worker process died")

    harness.emit = crashing  # type: ignore[method-assign]
    with pytest.raises(Crash):
        await harness.run(llm)
    saved = await harness.store.load_checkpoint(harness.task.id)
    assert saved is not None and AgentState.from_dict(saved).batch == ["task_1"]
    assert [r.phase for r in llm.requests] == ["planning"]  # not reflected on yet

    async def normal(event: ProgressEvent) -> None:
        harness.events.append(event)

    harness.emit = normal  # type: ignore[method-assign]
    asked = await harness.run(llm)  # a fresh loop, as after a restart

    assert asked.state is TaskState.AWAITING_APPROVAL, asked
    [request] = harness.of(ProgressKind.APPROVAL_REQUEST)
    assert request["subject"] is WaitKind.JUDGEMENT
    assert "README.md, which is unchanged" in request["details"]
    saved = await harness.store.load_checkpoint(harness.task.id)
    assert saved is not None
    waiting = AgentState.from_dict(saved)
    assert waiting.stage is Stage.WAIT and waiting.batch == []
    assert waiting.waiting is not None and waiting.waiting.kind is WaitKind.JUDGEMENT
    await harness.command("approve")

    outcome = await harness.run(llm)

    assert outcome.state is TaskState.DONE, outcome
    assert outcome.summary["revision_attempts"] == 0 and harness.of(ProgressKind.REVISION) == []
    assert [r.phase for r in llm.requests].count("reflection") == len(UNREADABLE)
