"""Replies that arrive while the task is still running, and a push GitHub refuses."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from bot.agent.loop import AgentLoop
from bot.agent.session import TaskContext
from bot.run_events import Outcome
from bot.storage.base import TaskState
from tests.agent import docs
from tests.agent.conftest import script
from tests.e2e.support import GH_BRANCH, OWNER, gh_comment, github_repo, of_kind, settle
from tests.harness import Harness
from tests.tools.conftest import Remote

pytestmark = pytest.mark.sandbox

BRANCH = GH_BRANCH
NOTES = "# Notes\n"
WORKFLOW = ".github/workflows/ci.yml"


class ReplyAfterTheLastLook:
    """The real coordinator; after its first run (its last read of the messages is
    over) and before the worker stores the state it returned, a person replies."""

    def __init__(self, reply: Callable[[], Awaitable[None]]) -> None:
        self.reply: Callable[[], Awaitable[None]] | None = reply
        self.states: list[TaskState] = []

    def __call__(self) -> ReplyAfterTheLastLook:
        return self

    async def run(self, ctx: TaskContext) -> Outcome:
        outcome = await AgentLoop().run(ctx)
        self.states.append(outcome.state)
        reply, self.reply = self.reply, None
        if reply is not None:
            [task] = await ctx.store.list_tasks(limit=10)
            assert task.state is TaskState.RUNNING  # the dispatcher will not re-queue it
            await reply()
        return outcome


def comment(bot_ref: list[Harness], text: str) -> Callable[[], Awaitable[None]]:
    async def send() -> None:
        bot = bot_ref[0]
        assert (await bot.send_github("issue_comment", gh_comment(text))).status_code == 202
        assert await bot.dispatch_all() == 1

    return send


def write_plan() -> dict[str, object]:
    action = docs.action("task_1", "write_file", arguments={"path": "NOTES.md", "content": NOTES})
    return docs.plan([action], objective="Write NOTES.md")


async def test_an_answer_sent_while_the_question_is_being_stored_is_not_lost(
    tmp_path: Path, remote: Remote
) -> None:
    [unclear] = script("unclear_goal")[:1]
    ref: list[Harness] = []
    coordinator = ReplyAfterTheLastLook(comment(ref, "NOTES.md, please."))
    steps = [unclear, write_plan(), docs.completion(done=1)]
    async with Harness(tmp_path, script=steps, coordinator_factory=coordinator) as bot:
        ref.append(bot)
        github_repo(bot, remote)
        await bot.send_github("issue_comment", gh_comment("/agent run"))
        await settle(bot)

        [task] = await bot.tasks()
        assert coordinator.states == [TaskState.AWAITING_INPUT, TaskState.DONE]
        assert task.state is TaskState.DONE
        replan = bot.llm.requests[1].messages[-1].content
        assert f'<untrusted source="answer by {OWNER}">\nNOTES.md, please.\n' in replan
        assert remote.show(BRANCH, "NOTES.md").decode() == NOTES


async def test_an_approval_sent_while_the_request_is_being_stored_is_not_lost(
    tmp_path: Path, remote: Remote
) -> None:
    ref: list[Harness] = []
    coordinator = ReplyAfterTheLastLook(comment(ref, "/agent approve"))
    steps = [write_plan(), docs.completion(done=1)]
    async with Harness(tmp_path, script=steps, coordinator_factory=coordinator) as bot:
        ref.append(bot)
        issue = github_repo(bot, remote)
        await bot.send_github("issue_comment", gh_comment("/agent plan"))
        await settle(bot)

        [task] = await bot.tasks()
        assert coordinator.states == [TaskState.AWAITING_APPROVAL, TaskState.DONE]
        assert task.state is TaskState.DONE
        assert len(of_kind(issue, "approval_request")) == 1
        assert remote.show(BRANCH, "NOTES.md").decode() == NOTES


async def test_a_waiting_task_whose_checkpoint_saw_every_message_stays_waiting(
    tmp_path: Path, remote: Remote
) -> None:
    async with Harness(tmp_path, script=[write_plan(), docs.completion(done=1)]) as bot:
        github_repo(bot, remote)
        await bot.send_github("issue_comment", gh_comment("/agent plan"))
        await settle(bot)
        await bot.send_github("issue_comment", gh_comment("Looks fine, but wait for Bob."))
        ran = await settle(bot)  # the feedback wakes the task; it reads it and waits again

        [task] = await bot.tasks()
        assert task.state is TaskState.AWAITING_APPROVAL
        assert len(ran) == 1  # no loop of re-queues
        assert not remote.has_branch(BRANCH)


async def test_a_push_github_refuses_asks_for_help_and_keeps_the_work(
    tmp_path: Path, remote: Remote
) -> None:
    hook = remote.bare / "hooks" / "pre-receive"
    hook.write_text(
        "#!/bin/sh\necho 'refusing to allow a GitHub App to create or update workflow "
        f"`{WORKFLOW}` without `workflows` permission' >&2\nexit 1\n"
    )
    hook.chmod(0o755)
    write = docs.action(
        "task_1", "write_file", arguments={"path": WORKFLOW, "content": "on: push\n"}
    )
    steps = [docs.plan([write], objective="Add CI"), docs.intervention("Check the App")]
    async with Harness(tmp_path, script=steps) as bot:
        issue = github_repo(bot, remote)
        await bot.send_github("issue_comment", gh_comment("/agent run"))
        await settle(bot)
        [task] = await bot.tasks()
        assert task.state is TaskState.AWAITING_APPROVAL  # writing a CI definition
        await bot.send_github("issue_comment", gh_comment("/agent approve"))
        await settle(bot)

        [task] = await bot.tasks()
        assert task.state is TaskState.NEEDS_HUMAN, task.error  # not FAILED: internal error
        assert "without `workflows` permission" in (task.error or "")
        assert issue.labels == ["coding agent help needed"]
        [help_request] = of_kind(issue, "human_intervention")
        assert "pre-receive hook declined" in help_request
        assert 'needs the "workflows" permission' in help_request
        assert not remote.has_branch(BRANCH)
        data = bot.settings.data_dir
        assert not (data / "workspaces" / task.id).exists()  # the worker removed it
        kept = data / "runs" / task.id / "artifacts" / WORKFLOW
        assert kept.read_text() == "on: push\n"  # the work is not lost
