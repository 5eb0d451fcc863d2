"""The run directory as the specification describes it (003, 5-6), end to end: task.json
from the task's start, updated at each state change; errors.log by category."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.config import settings_digest
from bot.storage.base import TaskState
from tests.agent import docs
from tests.e2e.support import SteeredLLM, gh_comment, github_repo, settle, use_llm
from tests.harness import Harness
from tests.tools.conftest import Remote

pytestmark = pytest.mark.sandbox


def _task_json(bot: Harness, task_id: str) -> dict[str, Any]:
    path = bot.settings.data_dir / "runs" / task_id / "task.json"
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _write_plan() -> dict[str, object]:
    action = docs.action("task_1", "write_file", arguments={"path": "NOTES.md", "content": "x\n"})
    return docs.plan([action], objective="Write NOTES.md")


async def test_task_json_is_written_at_the_start_and_follows_each_state(
    tmp_path: Path, remote: Remote
) -> None:
    seen: dict[str, Any] = {}
    async with Harness(tmp_path) as bot:
        github_repo(bot, remote)

        async def first_call() -> None:  # the model's first call: the task is running
            [task] = await bot.tasks()
            seen.update(_task_json(bot, task.id))

        use_llm(bot, SteeredLLM([_write_plan(), docs.completion(done=1)], {1: first_call}))
        await bot.send_github("issue_comment", gh_comment("/agent plan"))
        await settle(bot)
        [task] = await bot.tasks()
        assert task.state is TaskState.AWAITING_APPROVAL
        waiting = _task_json(bot, task.id)
        await bot.send_github("issue_comment", gh_comment("/agent approve"))
        await settle(bot)
        [task] = await bot.tasks()
        done = _task_json(bot, task.id)

    assert seen["state"] == "running" and [s["state"] for s in seen["states"]] == ["running"]
    assert seen["issue"] == "https://github.com/Codertocat/Hello-World/issues/1"
    assert seen["requested_by"] == "Codertocat" and seen["mode"] == "plan"
    assert seen["model"] == {"provider": "scripted", "model": bot.settings.llm.model}
    assert seen["settings_digest"] == settings_digest(bot.settings)
    assert "tokens" not in seen  # the report's facts come at the end
    assert waiting["state"] == "awaiting_approval"
    assert [s["state"] for s in waiting["states"]] == ["running", "awaiting_approval"]
    assert waiting["states"][-1]["reason"] == "waiting for approval of the plan"
    assert task.state is TaskState.DONE
    assert [s["state"] for s in done["states"]] == [
        "running",
        "awaiting_approval",
        "running",
        "done",
    ]
    assert done["state"] == "done" and done["settings_digest"] == seen["settings_digest"]
    assert done["title"] == "Spelling error in the README file" and "tokens" in done


async def test_task_json_carries_the_instruction_text_from_the_start(
    tmp_path: Path, remote: Remote
) -> None:
    """The issue's body and the words given with ``/agent run`` are in task.json before
    the model is first asked, not only in the report at the end."""
    seen: dict[str, Any] = {}
    async with Harness(tmp_path) as bot:
        github_repo(bot, remote)

        async def first_call() -> None:
            [task] = await bot.tasks()
            seen.update(_task_json(bot, task.id))

        use_llm(bot, SteeredLLM([_write_plan(), docs.completion(done=1)], {1: first_call}))
        await bot.send_github("issue_comment", gh_comment("/agent run keep the changelog"))
        await settle(bot)
    assert seen["state"] == "running"
    assert seen["description"] == "It looks like you accidently spelled 'commit' with two 't's."
    assert "keep the changelog" in seen["instructions"]
