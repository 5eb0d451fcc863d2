"""``bot run ISSUE_URL`` and ``--dry-run``, on the fake forge with the scripted LLM."""

from __future__ import annotations

from pathlib import Path

from bot.events import TaskRequest
from bot.oneshot import plan_once, run_once
from bot.storage.base import TaskState
from tests.agent import docs
from tests.harness import Harness

REPO = "octo/widgets"
README = "# Widgets\n\nA small widget library.\n"
WRITES = (
    "create_comment",
    "edit_comment",
    "add_labels",
    "remove_label",
    "ensure_label",
    "create_branch",
    "commit_files",
    "open_change_request",
    "add_reaction",
)


async def test_dry_run_plans_prints_and_writes_nothing(tmp_path: Path) -> None:
    async with Harness(tmp_path, script=[docs.readme_plan()]) as bot:
        repo = bot.github.add_repo(REPO, {"README.md": README})
        issue = bot.github.add_issue(repo, 5, title="Add installation steps to the README")
        plan = await plan_once(bot.runtime, TaskRequest(issue=issue, requested_by="cli"))
        assert [a["tool"] for a in plan["action_plan"]["actions"]] == [
            "github_get_file_contents",
            "github_create_or_update_file",
        ]
        assert plan["goal_understanding"]["main_objective"]
        assert not [name for name, _ in bot.github.calls if name in WRITES]
        assert await bot.tasks() == []
        assert not (bot.settings.data_dir / "planning_history").exists()
        assert not (bot.settings.data_dir / "runs").exists()


async def test_dry_run_plans_with_the_repositorys_planning_settings(tmp_path: Path) -> None:
    async with Harness(tmp_path, script=[docs.readme_plan()]) as bot:
        files = {"README.md": README, ".agent.yaml": "planning:\n  strategy: hierarchical\n"}
        repo = bot.github.add_repo(REPO, files)
        issue = bot.github.add_issue(repo, 5, title="Add installation steps to the README")
        await plan_once(bot.runtime, TaskRequest(issue=issue, requested_by="cli"))
        [request] = bot.llm.requests
        assert "Method: decompose top-down" in request.messages[-1].content


async def test_dry_run_without_planning_prints_the_open_plan_without_a_model_call(
    tmp_path: Path,
) -> None:
    async with Harness(tmp_path, overrides={"planning": {"enabled": False}}) as bot:
        repo = bot.github.add_repo(REPO, {"README.md": README})
        issue = bot.github.add_issue(repo, 5, title="Add installation steps to the README")
        plan = await plan_once(bot.runtime, TaskRequest(issue=issue, requested_by="cli"))
        assert bot.llm.requests == []
        assert plan["goal_understanding"]["main_objective"] == issue.title
        assert plan["action_plan"]["actions"] == []
        assert "one open tool loop" in plan["task_decomposition"]["reasoning"]


async def test_run_now_does_the_task_and_records_it(tmp_path: Path) -> None:
    script = [docs.readme_plan(), docs.write_readme(), docs.completion()]
    async with Harness(tmp_path, script=script) as bot:
        repo = bot.github.add_repo(REPO, {"README.md": README})
        issue = bot.github.add_issue(repo, 5, title="Add installation steps to the README")
        outcome = await run_once(bot.runtime, TaskRequest(issue=issue, requested_by="cli"))
        assert outcome.state is TaskState.DONE
        [task] = await bot.tasks()
        assert task.state is TaskState.DONE
        branch = "agent/5-add-installation-steps-to-the-readme"
        assert b"## Installation" in bot.github.repos[REPO].branches[branch]["README.md"]
        assert bot.github.repos[REPO].branches["main"]["README.md"] == README.encode()
        [change] = bot.github.repos[REPO].change_requests
        assert change.head_branch == branch and change.draft
