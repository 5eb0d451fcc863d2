"""``planning.enabled: false`` runs without planning (specification 6, 9.1): one open tool
loop, the model's calls until it calls ``finish``, under the tool policy, the budgets,
set-up, the quality gate, the completion check and the delivery. A labelled issue goes to
a pull request, and the status comment's checklist is the tool calls."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config import PlanningSettings
from bot.storage.base import TaskState
from tests.agent import docs
from tests.e2e.support import (
    GH_REPO,
    ORIGIN_FILES,
    OWNER,
    gh_comment,
    gh_labeled,
    github_repo,
    of_kind,
    origin,
    settle,
    status_comment,
)
from tests.harness import Harness

pytestmark = pytest.mark.sandbox

NEW_README = "# Hello-World\n\nMy first repository.\n\n## Installation\n\n    make install\n"


def open_loop_script() -> list[object]:
    """Read the README, write it, finish; then the completion summary."""
    return [
        docs.execution("open_loop", "read_file", {"path": "README.md"}),
        docs.execution("open_loop", "write_file", {"path": "README.md", "content": NEW_README}),
        docs.execution("open_loop", "finish", {"summary": "README has an Installation section"}),
        docs.completion(done=2),
    ]


async def test_without_planning_a_readme_task_reaches_a_pull_request(tmp_path: Path) -> None:
    remote = origin(tmp_path)
    overrides = {"planning": {"enabled": False}}
    async with Harness(tmp_path, script=open_loop_script(), overrides=overrides) as bot:
        issue = github_repo(bot, remote, labels=("coding agent",))
        await bot.send_github("issues", gh_labeled())
        await settle(bot)

        [task] = await bot.tasks()
        assert task.state is TaskState.DONE, task
        phases = [r.phase for r in bot.llm.requests]
        assert phases == ["execution", "execution", "execution", "completion"]  # no planning
        first = bot.llm.requests[0]
        offered = {f.name for f in first.functions} or set()
        prompt = first.messages[-1].content
        assert "without a plan" in prompt and "Spelling error in the README file" in prompt
        assert "- finish:" in prompt and "- write_file:" in prompt
        assert offered == set() or "finish" in offered
        assert remote.show("agent/1-spelling-error-in-the-readme-file", "README.md").decode() == (
            NEW_README
        )
        [change] = bot.github.repos[GH_REPO].change_requests
        _title, body = bot.github.repos[GH_REPO].change_request_bodies[change.number]
        assert "**Quality gate:** passed" in body  # make lint ran in the sandbox
        status = status_comment(issue)
        assert "Progress: **2/2**" in status
        assert "- [x] ✅ read_file README.md\n- [x] ✅ write_file README.md" in status
        [done] = of_kind(issue, "completion")
        assert "Subtasks completed: **2**" in done


async def test_a_repository_may_switch_planning_off_for_its_tasks(tmp_path: Path) -> None:
    files = {**ORIGIN_FILES, ".agent.yaml": b"planning:\n  enabled: false\n"}
    remote = origin(tmp_path, files)
    async with Harness(tmp_path, script=open_loop_script()) as bot:
        ref = bot.github.add_repo(GH_REPO, files, clone_url=remote.url, writers=(OWNER,))
        bot.github.add_issue(ref, 1, title="Spelling error in the README file", author=OWNER)
        await bot.send_github("issue_comment", gh_comment("/agent run"))
        await settle(bot)

        [task] = await bot.tasks()
        assert task.state is TaskState.DONE, task
        assert "planning" not in [r.phase for r in bot.llm.requests]


async def test_without_planning_the_tool_policy_still_holds(tmp_path: Path) -> None:
    remote = origin(tmp_path)
    security = PlanningSettings().security
    policy = security.model_copy(update={"forbidden_tools": (*security.forbidden_tools,
                                                             "run_command")})  # fmt: skip
    overrides = {"planning": {"enabled": False, "security": policy}}
    script = [
        docs.execution("open_loop", "run_command", {"argv": ["rm", "-rf", "."]}),
        *open_loop_script(),
    ]
    async with Harness(tmp_path, script=script, overrides=overrides) as bot:
        github_repo(bot, remote, labels=("coding agent",))
        await bot.send_github("issues", gh_labeled())
        await settle(bot)

        [task] = await bot.tasks()
        assert task.state is TaskState.DONE, task  # the refused call failed; the rest went on
        prompt = bot.llm.requests[1].messages[-1].content
        assert "- run_command:" not in prompt  # never offered
        assert "[step_1] run_command" in prompt and "failed" in prompt


async def test_plan_only_needs_planning(tmp_path: Path) -> None:
    remote = origin(tmp_path)
    async with Harness(tmp_path, overrides={"planning": {"enabled": False}}) as bot:
        issue = github_repo(bot, remote)
        await bot.send_github("issue_comment", gh_comment("/agent plan"))
        await settle(bot)

        [task] = await bot.tasks()
        assert task.state is TaskState.NEEDS_HUMAN
        [helped] = of_kind(issue, "human_intervention")
        assert "`/agent plan` needs planning" in helped
