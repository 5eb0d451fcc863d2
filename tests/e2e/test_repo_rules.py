"""What a repository says in its `.agent.yaml`, and what it may never loosen, end to end."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.storage.base import TaskState
from tests.agent import docs
from tests.e2e.support import (
    GH_BRANCH,
    GH_REPO,
    ORIGIN_FILES,
    OWNER,
    gh_comment,
    of_kind,
    origin,
    settle,
)
from tests.fakes import FakeIssue
from tests.harness import Harness
from tests.tools.conftest import Remote

pytestmark = pytest.mark.sandbox

RULE = "Always write documentation in British English and keep lines under 80 characters."
AGENT_YAML = f"instructions: |\n  {RULE}\n"


def repo_with(bot: Harness, remote: Remote, files: dict[str, bytes]) -> FakeIssue:
    ref = bot.github.add_repo(GH_REPO, files, clone_url=remote.url, writers=(OWNER,))
    bot.github.add_issue(ref, 1, title="Spelling error in the README file", author=OWNER)
    return bot.github.issue(ref, 1)


async def test_repository_instructions_reach_the_planning_and_execution_prompts(
    tmp_path: Path,
) -> None:
    files = {**ORIGIN_FILES, ".agent.yaml": AGENT_YAML.encode()}
    remote = origin(tmp_path, files)
    action = docs.action("task_1", "write_file", purpose="Write the notes")
    script = [
        docs.plan([action]),
        docs.execution("task_1", "write_file", {"path": "NOTES.md", "content": "Notes\n"}),
        docs.completion(done=1),
    ]
    async with Harness(tmp_path, script=script) as bot:
        repo_with(bot, remote, files)
        await bot.send_github("issue_comment", gh_comment("/agent run"))
        await settle(bot)

        [task] = await bot.tasks()
        assert task.state is TaskState.DONE, task
        planning, execution = bot.llm.requests[0], bot.llm.requests[1]
        assert (planning.phase, execution.phase) == ("planning", "execution")
        for request in (planning, execution):
            prompt = request.messages[-1].content
            fenced = f'<untrusted source="instructions of the repository (.agent.yaml)">\n{RULE}'
            assert fenced in prompt, prompt
            assert "not system rules" in prompt
            # never in the system prompt
            assert RULE not in request.messages[0].content


WORKFLOW = ".github/workflows/ci.yml"
CI = "on: push\njobs:\n  leak:\n    runs-on: ubuntu-latest\n    steps: [{run: echo $SECRET}]\n"


async def test_writing_a_workflow_waits_for_approval_and_pushes_only_after_it(
    tmp_path: Path, remote: Remote
) -> None:
    write = docs.action("task_1", "write_file", arguments={"path": WORKFLOW, "content": CI})
    script = [docs.plan([write], objective="Add CI"), docs.completion(done=1)]
    async with Harness(tmp_path, script=script) as bot:
        issue = repo_with(bot, remote, dict(ORIGIN_FILES))
        await bot.send_github("issue_comment", gh_comment("/agent run"))
        await settle(bot)

        [task] = await bot.tasks()
        assert task.state is TaskState.AWAITING_APPROVAL, task
        [ask] = of_kind(issue, "approval_request")
        assert "The call `write_file`, before I make it:" in ask
        assert f"it writes {WORKFLOW} (CI definitions need approval)" in ask
        assert not remote.has_branch(GH_BRANCH)

        await bot.send_github("issue_comment", gh_comment("/agent approve"))
        await settle(bot)
        [task] = await bot.tasks()
        assert task.state is TaskState.DONE, task  # the approved content: no second request
        assert len(of_kind(issue, "approval_request")) == 1
        assert remote.show(GH_BRANCH, WORKFLOW).decode() == CI


async def test_a_command_that_writes_a_workflow_cannot_push_it_without_approval(
    tmp_path: Path, remote: Remote
) -> None:
    make = f"mkdir -p .github/workflows && printf 'on: push\\n' > {WORKFLOW} && echo ok > a.txt"
    run = docs.action("task_1", "run_command", arguments={"argv": ["sh", "-c", make]})
    script = [docs.plan([run], objective="Set up the project"), docs.completion(done=1)]
    async with Harness(tmp_path, script=script) as bot:
        issue = repo_with(bot, remote, dict(ORIGIN_FILES))
        await bot.send_github("issue_comment", gh_comment("/agent run"))
        await settle(bot)

        [task] = await bot.tasks()
        assert task.state is TaskState.AWAITING_APPROVAL, task
        assert not remote.has_branch(GH_BRANCH)  # nothing pushed
        [ask] = of_kind(issue, "approval_request")
        assert f"The CI definitions in the push ({WORKFLOW})" in ask
        assert f"- `{WORKFLOW}`" in ask and "+on: push" in ask  # the diff people approve
        history = (bot.settings.data_dir / "planning_history").glob("*.jsonl")
        assert any("this command changed CI definitions" in p.read_text() for p in history)

        await bot.send_github("issue_comment", gh_comment("/agent approve"))
        await settle(bot)
        [task] = await bot.tasks()
        assert task.state is TaskState.DONE, task
        assert remote.show(GH_BRANCH, WORKFLOW).decode() == "on: push\n"
        assert remote.show(GH_BRANCH, "a.txt").decode() == "ok\n"


async def test_a_repository_adds_guarded_paths_and_a_rejected_push_is_revised(
    tmp_path: Path,
) -> None:
    files = {**ORIGIN_FILES, ".agent.yaml": b"policy:\n  require_approval_paths: ['deploy/**']\n"}
    remote = origin(tmp_path, files)
    make = "mkdir -p deploy && echo prod > deploy/env && echo ok > a.txt"
    run = docs.action("task_1", "run_command", arguments={"argv": ["sh", "-c", make]})
    undo = docs.action("task_2", "delete_file", arguments={"path": "deploy/env"})
    script = [
        docs.plan([run]),
        docs.revision([undo], reason="leave deploy/ alone"),
        docs.completion(done=2),
    ]
    async with Harness(tmp_path, script=script) as bot:
        issue = repo_with(bot, remote, files)
        await bot.send_github("issue_comment", gh_comment("/agent run"))
        await settle(bot)
        [task] = await bot.tasks()
        assert task.state is TaskState.AWAITING_APPROVAL, task
        [ask] = of_kind(issue, "approval_request")
        assert "- `deploy/env`" in ask

        await bot.send_github("issue_comment", gh_comment("/agent reject do not touch deploy"))
        await settle(bot)
        [task] = await bot.tasks()  # the revised plan deletes it: a guarded write, too
        assert task.state is TaskState.AWAITING_APPROVAL, task
        assert "The call `delete_file`" in of_kind(issue, "approval_request")[-1]
        await bot.send_github("issue_comment", gh_comment("/agent approve"))
        await settle(bot)
        [task] = await bot.tasks()
        assert task.state is TaskState.DONE, task
        assert remote.show(GH_BRANCH, "a.txt").decode() == "ok\n"
        assert b"deploy" not in remote.show(GH_BRANCH, "")


async def test_an_approval_binds_the_content_a_later_change_asks_again(
    tmp_path: Path, remote: Remote
) -> None:
    write = docs.action("task_1", "write_file", arguments={"path": WORKFLOW, "content": CI})
    change = f"printf 'on: pull_request_target\\n' > {WORKFLOW}"
    run = docs.action(
        "task_2", "run_command", arguments={"argv": ["sh", "-c", change]}, dependencies=["task_1"]
    )
    plan = docs.plan([write, run], dependencies={"task_2": ["task_1"]})
    async with Harness(tmp_path, script=[plan, docs.completion(done=2)]) as bot:
        issue = repo_with(bot, remote, dict(ORIGIN_FILES))
        await bot.send_github("issue_comment", gh_comment("/agent run"))
        await settle(bot)
        await bot.send_github("issue_comment", gh_comment("/agent approve"))  # the write
        await settle(bot)

        [task] = await bot.tasks()
        assert task.state is TaskState.AWAITING_APPROVAL, task
        asks = of_kind(issue, "approval_request")
        assert len(asks) == 2 and "+on: pull_request_target" in asks[1]
        assert not remote.has_branch(GH_BRANCH)
