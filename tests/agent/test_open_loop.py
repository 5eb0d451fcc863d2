"""The open tool loop (``planning.enabled: false``) in the agent: people's feedback reaches
the next step, a completion the record does not bear out sends the model back to work
(counted as a revision), an unusable answer is a failed step, and the loop's calls are
bounded (3 x ``planning.max_subtasks``)."""

from __future__ import annotations

import contextlib
from pathlib import Path

from bot.llm.scripted import ScriptedLLM
from bot.run_events import ProgressEvent, ProgressKind
from bot.storage.base import TaskState
from tests.agent import docs
from tests.agent.conftest import Harness, make_harness, planning_settings

WRITE = {"path": "README.md", "content": docs.README_WITH_INSTALL, "message": "Add"}


def step(tool: str, arguments: dict[str, object]) -> dict[str, object]:
    return docs.execution("open_loop", tool, arguments)


FINISH = step("finish", {})


async def _open(harness: Harness) -> Harness:
    harness.settings = harness.settings.model_copy(
        update={"planning": planning_settings(enabled=False)}
    )
    return harness


async def test_feedback_reaches_the_next_step(harness: Harness) -> None:
    await _open(harness)

    async def emit(event: ProgressEvent) -> None:
        harness.events.append(event)
        if event.kind is ProgressKind.ACTION and harness.actions("done") == [event.data]:
            await harness.feedback("Mention pip too.")  # once, after the first step

    harness.emit = emit  # type: ignore[method-assign]
    read = step("github_get_file_contents", {"path": "README.md"})
    llm = ScriptedLLM([read, step("github_create_or_update_file", WRITE), FINISH,
                       docs.completion(done=2)])  # fmt: skip

    outcome = await harness.run(llm)

    assert outcome.state is TaskState.DONE, outcome
    second = llm.requests[1].messages[-1].content
    assert '<untrusted source="feedback by alice">' in second and "Mention pip too." in second
    assert "Mention pip too." not in llm.requests[2].messages[-1].content  # read once
    [plan] = harness.of(ProgressKind.PLAN)[-1:]
    lines = [s["description"] for s in plan["plan"]["task_decomposition"]["subtasks"]]
    assert lines == ["github_get_file_contents README.md", "github_create_or_update_file README.md"]


async def test_a_completion_the_record_does_not_bear_out_sends_the_model_back(
    harness: Harness,
) -> None:
    await _open(harness)
    missing = step("github_get_file_contents", {"path": "docs/missing.md"})
    llm = ScriptedLLM(
        [
            missing,
            FINISH,  # a failed call and nothing else: the record does not show it done
            docs.completion(done=0),
            step("github_create_or_update_file", WRITE),
            FINISH,
            docs.completion(done=1, failed=1),
        ]
    )

    outcome = await harness.run(llm)

    assert outcome.state is TaskState.DONE, outcome
    assert outcome.summary["revision_attempts"] == 1
    back = llm.requests[3].messages[-1].content
    assert "The work is not done yet" in back and "no action of the plan succeeded" in back
    [revision] = harness.of(ProgressKind.REVISION)
    assert revision["number"] == 1


async def test_an_unusable_answer_is_a_failed_step(harness: Harness) -> None:
    await _open(harness)
    llm = ScriptedLLM(["no idea", "still no idea", step("github_create_or_update_file", WRITE),
                       FINISH, docs.completion(done=1, failed=1)])  # fmt: skip

    outcome = await harness.run(llm)

    assert outcome.state is TaskState.DONE, outcome
    [failed] = harness.actions("failed")
    assert failed["task_id"] == "step_1" and "no valid execution document" in failed["result"]


async def test_the_open_loop_is_bounded(tmp_path: Path, stack: contextlib.AsyncExitStack) -> None:
    harness = await make_harness(
        tmp_path, stack, planning=planning_settings(enabled=False, max_subtasks=1)
    )
    read = step("github_get_file_contents", {"path": "README.md"})
    llm = ScriptedLLM([read, read, read, read])

    outcome = await harness.run(llm)

    assert outcome.state is TaskState.NEEDS_HUMAN, outcome
    assert "the open tool loop made 3 calls" in outcome.reason
    assert any("planning.max_subtasks" in r for r in outcome.summary["recommendations"])
    assert len(llm.requests) == 3
