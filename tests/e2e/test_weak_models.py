"""A weak model through the whole bot: a labelled issue whose every reflection the model
answers with prose still reaches a pull request, without a revision (specification
10.3.1: the bot's own evidence and a second, shallow look decide, not a guess)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config import PlanningSettings
from bot.storage.base import TaskState
from tests.agent import docs
from tests.e2e.support import GH_REPO, gh_labeled, github_repo, kinds, origin, settle
from tests.harness import Harness

pytestmark = pytest.mark.sandbox

NEW_README = "# Hello-World\n\nMy first repository.\n\n## Installation\n\n    make install\n"
PROSE = "I reviewed the step. It seems to have worked, so let us move on to the next one."


async def test_prose_for_every_reflection_still_reaches_a_pull_request(tmp_path: Path) -> None:
    remote = origin(tmp_path)
    base = PlanningSettings()
    every_action = base.reflection.model_copy(update={"trigger_interval": 1})
    overrides = {"planning": {"auto_adjust_level": False, "reflection": every_action}}
    read = docs.action("task_1", "read_file", arguments={"path": "README.md"}, expected="text")
    write = docs.action("task_2", "write_file", dependencies=["task_1"],
                        arguments={"path": "README.md", "content": NEW_README})  # fmt: skip
    plan = docs.plan([read, write], dependencies={"task_2": ["task_1"]})
    script = [plan, *[PROSE] * 8, docs.completion(done=2)]  # two reflections, four answers each
    async with Harness(tmp_path, script=script, overrides=overrides) as bot:
        issue = github_repo(bot, remote, labels=("coding agent",))
        await bot.send_github("issues", gh_labeled())
        await settle(bot)

        [task] = await bot.tasks()
        assert task.state is TaskState.DONE, task
        assert [r.phase for r in bot.llm.requests].count("reflection") == 8
        [change] = bot.github.repos[GH_REPO].change_requests
        branch = change.head_branch
        assert remote.show(branch, "README.md").decode() == NEW_README
        assert kinds(issue) == ["status", "completion"]  # no reflection, no revision posted
