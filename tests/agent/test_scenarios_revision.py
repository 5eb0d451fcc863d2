"""Seed 13.2 scenarios: failures, reflection, revision, limits, human feedback."""

from __future__ import annotations

import contextlib
from pathlib import Path

from bot.llm.scripted import ScriptedLLM
from bot.record.history import history_path
from bot.run_events import ProgressEvent, ProgressKind
from bot.storage.base import TaskState
from tests.agent import docs
from tests.agent.conftest import Harness, make_harness, planning_settings, script


async def test_tool_failure_is_reflected_on_and_the_revised_plan_succeeds(harness: Harness) -> None:
    llm = ScriptedLLM(script("tool_failure_revision"))

    outcome = await harness.run(llm)

    assert outcome.state is TaskState.DONE, outcome
    assert [r.phase for r in llm.requests] == [
        "planning",
        "reflection",  # on the failed read
        "reflection",  # the revision (a reflection document with the new action plan)
        "execution",
        "completion",
    ]
    revision_prompt = llm.requests[2].messages[-1].content
    assert "The file path needs checking" in revision_prompt
    assert "not found: docs/install.md" in revision_prompt  # what was tried, never separated
    [reflection] = harness.of(ProgressKind.REFLECTION)
    assert reflection["status"] == "failure" and reflection["plan_revision_needed"] is True
    assert "the file path is wrong" in reflection["issues"]
    [revision] = harness.of(ProgressKind.REVISION)
    assert revision["number"] == 1 and revision["limit"] == 3
    assert [a["task_id"] for a in revision["plan"]["action_plan"]["actions"]] == [
        "task_3",
        "task_4",
        "task_5",
    ]
    assert revision["statuses"]["task_1"] == "failed"
    assert "## Installation" in (harness.branch_file("README.md") or "")
    assert outcome.summary["revision_attempts"] == 1
    assert outcome.summary["tasks_failed"] == 1  # a fact from the state


async def test_three_failed_revisions_ask_for_a_person(harness: Harness) -> None:
    llm = ScriptedLLM(script("three_revisions"))

    outcome = await harness.run(llm)

    assert outcome.state is TaskState.NEEDS_HUMAN
    assert "max_revisions" in outcome.reason
    assert len(llm.requests) == len(llm.items)  # the whole script was used
    assert len(harness.of(ProgressKind.REVISION)) == 3
    [help_event] = harness.of(ProgressKind.HUMAN_INTERVENTION)
    summary = help_event["summary"]
    assert summary["goal_achieved"] is False
    assert summary["revision_attempts"] == 3 and summary["tasks_failed"] == 4
    assert summary["recommendations"][0] == "Tell me the name of the changelog file"
    assert summary["current_state"] == "No changelog file was found"
    tried = "\n".join(help_event["tried"])
    for name in ("CHANGELOG.md", "CHANGES.md", "HISTORY.md", "NEWS.md"):
        assert name in tried
    assert ProgressKind.COMPLETION not in harness.kinds()
    assert harness.forge.repo(harness.repo).change_requests == []


async def test_the_same_failure_after_a_revision_stops_at_once(harness: Harness) -> None:
    read = docs.action("task_1", "github_get_file_contents", arguments={"path": "nope.md"})
    again = docs.action("task_2", "github_get_file_contents", arguments={"path": "nope.md"})
    llm = ScriptedLLM(
        [
            docs.plan([read]),
            docs.reflection("task_1", revise=True, updated=[again]),
            docs.intervention("Create nope.md first"),
        ]
    )

    outcome = await harness.run(llm)

    assert outcome.state is TaskState.NEEDS_HUMAN
    assert "the same failure repeated after a plan revision" in outcome.reason
    assert len(llm.requests) == len(llm.items)  # the whole script was used
    [help_event] = harness.of(ProgressKind.HUMAN_INTERVENTION)
    assert help_event["summary"]["recommendations"] == ["Create nope.md first"]


async def test_consecutive_failures_stop_early_without_reflection(
    tmp_path: Path, stack: contextlib.AsyncExitStack
) -> None:
    harness = await make_harness(
        tmp_path,
        stack,
        planning=planning_settings(
            reflection={"enabled": False},
            execution={"early_termination": {"enabled": True, "max_consecutive_failures": 2}},
        ),
    )
    reads = [
        docs.action(f"task_{n}", "github_get_file_contents", arguments={"path": f"missing{n}.md"})
        for n in (1, 2, 3)
    ]
    llm = ScriptedLLM([docs.plan(reads), "not json at all"])

    outcome = await harness.run(llm)

    assert outcome.state is TaskState.NEEDS_HUMAN
    assert outcome.reason == "2 actions failed in a row"
    assert len(harness.actions("failed")) == 2  # the third action never ran
    [help_event] = harness.of(ProgressKind.HUMAN_INTERVENTION)
    # the model's completion answer was garbage: the report comes from the state alone
    assert help_event["summary"]["recommendations"][0].startswith(
        "Check why github_get_file_contents failed: not found: missing1.md"
    )


async def test_invalid_execution_answers_count_as_a_failed_action(harness: Harness) -> None:
    fixed = docs.action(
        "task_3",
        "github_create_or_update_file",
        arguments={"path": "README.md", "content": docs.README_WITH_INSTALL, "message": "Add"},
    )
    llm = ScriptedLLM(
        [
            docs.readme_plan(),
            "I will now write the file!",  # garbage
            "{'still': not json",  # garbage again: the action fails, it does not crash
            docs.reflection(
                "task_2", revise=True, reason="give complete arguments", updated=[fixed]
            ),
            docs.completion(done=2, failed=1),
        ]
    )

    outcome = await harness.run(llm)

    assert outcome.state is TaskState.DONE, outcome
    failed = harness.actions("failed")
    assert [a["task_id"] for a in failed] == ["task_2"]
    assert "no valid execution document" in failed[0]["result"]
    reflection_prompt = llm.requests[3].messages[-1].content
    assert "(error)" in reflection_prompt and "no valid execution document" in reflection_prompt
    assert "## Installation" in (harness.branch_file("README.md") or "")


async def test_an_unreadable_reflection_is_judged_conservatively(harness: Harness) -> None:
    read = docs.action("task_1", "github_get_file_contents", arguments={"path": "docs/x.md"})
    write = docs.action(
        "task_2",
        "github_create_or_update_file",
        arguments={"path": "README.md", "content": docs.README_WITH_INSTALL, "message": "Add"},
    )
    llm = ScriptedLLM(
        [
            docs.plan([read]),
            "garbage",
            "more garbage",  # no evaluation possible: a failure that needs a revision
            docs.revision([write]),
            docs.completion(done=1, failed=1),
        ]
    )

    outcome = await harness.run(llm)

    assert outcome.state is TaskState.DONE, outcome
    [reflection] = harness.of(ProgressKind.REFLECTION)
    assert reflection["status"] == "failure" and reflection["plan_revision_needed"] is True
    assert "evaluation impossible" in reflection["issues"]
    assert len(harness.of(ProgressKind.REVISION)) == 1


async def test_human_feedback_mid_task_changes_the_plan(harness: Harness) -> None:
    async def emit(event: ProgressEvent) -> None:
        harness.events.append(event)
        data = event.data
        if event.kind is ProgressKind.ACTION and (data["status"], data["task_id"]) == (
            "done",
            "task_1",
        ):
            await harness.feedback("Please add a Usage section too.")

    harness.emit = emit  # type: ignore[method-assign]
    llm = ScriptedLLM(script("human_feedback"))

    outcome = await harness.run(llm)

    assert outcome.state is TaskState.DONE, outcome
    assert [r.phase for r in llm.requests] == ["planning", "reflection", "execution", "completion"]
    feedback_prompt = llm.requests[1].messages[-1].content
    assert '<untrusted source="feedback by alice">' in feedback_prompt
    assert "Please add a Usage section too." in feedback_prompt
    [revision] = harness.of(ProgressKind.REVISION)
    assert revision["requested_by_people"] is True and revision["number"] == 0
    readme = harness.branch_file("README.md") or ""
    assert "## Usage" in readme
    assert outcome.summary["revision_attempts"] == 0  # people's revisions do not count
    done_tasks = [a["task_id"] for a in harness.actions("done")]
    assert done_tasks == ["task_1", "task_3"]  # task_2 was replaced, never run
    types = [
        line.split('"type": "')[1].split('"')[0]
        for line in history_path(harness.settings.data_dir, harness.task.id)
        .read_text()
        .splitlines()
    ]
    assert "human_feedback" in types and "revision" in types


async def test_reflection_that_sees_the_criteria_met_completes_early(
    tmp_path: Path, stack: contextlib.AsyncExitStack
) -> None:
    harness = await make_harness(
        tmp_path,
        stack,
        planning=planning_settings(auto_adjust_level=False, reflection={"trigger_interval": 1}),
    )
    write = docs.action(
        "task_1",
        "github_create_or_update_file",
        arguments={"path": "README.md", "content": docs.README_WITH_INSTALL, "message": "Add"},
    )
    comment = docs.action("task_2", "github_add_issue_comment", arguments={"body": "done!"})
    llm = ScriptedLLM(
        [
            docs.plan([write, comment]),
            docs.reflection("task_1", status="success", met=True),
            docs.completion(done=1),
        ]
    )

    outcome = await harness.run(llm)

    assert outcome.state is TaskState.DONE
    assert [a["task_id"] for a in harness.actions("done")] == ["task_1"]
    assert harness.forge.calls_of("create_comment") == []  # task_2 was not needed
    assert ProgressKind.REFLECTION not in harness.kinds()  # successes stay in the history


async def test_a_revision_that_stays_unusable_asks_a_person(harness: Harness) -> None:
    read = docs.action("task_1", "github_get_file_contents", arguments={"path": "nope.md"})
    llm = ScriptedLLM(
        [
            docs.plan([read]),
            docs.reflection("task_1", revise=True, reason="find the file"),
            "garbage",
            "garbage again",  # the first revision attempt: no valid document
            docs.revision([docs.action("task_2", "github_teleport")]),  # valid, but a bad plan
            docs.intervention("Name the file in the issue"),
        ]
    )

    outcome = await harness.run(llm)

    assert outcome.state is TaskState.NEEDS_HUMAN
    assert outcome.reason.startswith("the plan could not be revised: ")
    assert "unknown tool 'github_teleport'" in outcome.reason
    second_attempt = llm.requests[4].messages[-1].content
    assert "Your previous revision was rejected: no valid reflection document" in second_attempt
    assert ProgressKind.REVISION not in harness.kinds()


async def test_a_call_to_a_tool_the_action_does_not_use_fails_the_action(harness: Harness) -> None:
    wrong = docs.execution("task_2", "github_add_issue_comment", {"body": "done, trust me"})
    llm = ScriptedLLM(
        [
            docs.readme_plan(),
            wrong,
            docs.reflection("task_2", revise=False),
            docs.completion(achieved=False, done=1, failed=1),
        ]
    )

    outcome = await harness.run(llm)

    assert outcome.state is TaskState.NEEDS_HUMAN
    [failed] = harness.actions("failed")
    assert "the model called github_add_issue_comment" in failed["result"]
    assert harness.forge.calls_of("create_comment") == []


async def test_a_failed_actions_fallback_reaches_reflection_and_revision(harness: Harness) -> None:
    read = docs.action("task_1", "github_get_file_contents", arguments={"path": "docs/install.md"})
    read["fallback_strategy"] = "Read README.md instead"
    write = docs.action("task_2", "github_create_or_update_file", dependencies=["task_1"])
    plan = docs.plan([read, write], dependencies={"task_2": ["task_1"]})
    revised = docs.action("task_3", "github_get_file_contents", arguments={"path": "README.md"})
    llm = ScriptedLLM(
        [
            plan,
            docs.reflection("task_1", revise=True, reason="the guide is missing"),
            docs.revision([revised], reason="read the README"),
        ]
    )

    await harness.run(llm)

    reflection_prompt = llm.requests[1].messages[-1].content
    assert "The plan's fallback for this action if it fails: Read README.md instead" in (
        reflection_prompt
    )
    assert llm.requests[2].phase == "reflection"  # the revision call
    revision_prompt = llm.requests[2].messages[-1].content
    assert "The plan's fallbacks for the actions that failed" in revision_prompt
    assert "- [task_1] Read README.md instead" in revision_prompt
