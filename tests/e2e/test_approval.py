"""`/agent plan`, then `/agent approve` or `/agent reject <reason>`, end to end on GitHub."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.storage.base import TaskState
from tests.agent import docs
from tests.agent.conftest import script
from tests.e2e.support import (
    GH_BRANCH,
    OWNER,
    bodies,
    gh_comment,
    github_repo,
    of_kind,
    settle,
    status_comment,
)
from tests.harness import Harness
from tests.tools.conftest import Remote

pytestmark = pytest.mark.sandbox

NOTES = "# Notes\n\nInstallation: run make.\n"


def write_plan(path: str = "NOTES.md") -> dict[str, object]:
    action = docs.action(
        "task_1", "write_file", arguments={"path": path, "content": NOTES}, purpose=f"Write {path}"
    )
    return docs.plan([action], objective=f"Write {path}")


async def test_plan_waits_for_approval_then_runs(tmp_path: Path, remote: Remote) -> None:
    script = [write_plan(), docs.completion(done=1)]
    async with Harness(tmp_path, script=script) as bot:
        issue = github_repo(bot, remote, labels=("bug",))
        await bot.send_github("issue_comment", gh_comment("/agent plan"))
        await settle(bot)

        [task] = await bot.tasks()
        assert task.state is TaskState.AWAITING_APPROVAL
        assert issue.labels == ["bug", "coding agent waiting"]
        [ask] = of_kind(issue, "approval_request")
        assert ask.startswith(
            "### ✋ Approval needed\nThe plan, before I run it:\n\nGoal: Write NOTES.md\n"
        )
        assert "- task_1: write_file - Write NOTES.md" in ask
        assert "Reply `/agent approve` to continue or `/agent reject <reason>`" in ask
        assert "I wait up to 1 h." in ask
        status = status_comment(issue)
        assert status.startswith("### Coding agent — ✋ Waiting for your approval\n")
        assert "> **Waiting on you:** your approval of the plan" in status
        assert not remote.has_branch("agent/1-spelling-error-in-the-readme-file")

        await bot.send_github("issue_comment", gh_comment("/agent approve"))
        await settle(bot)

        [task] = await bot.tasks()
        assert task.state is TaskState.DONE
        assert issue.labels == ["bug", "coding agent done"]
        ack = [b for b in bodies(issue) if b.startswith("> /agent approve")]
        assert len(ack) == 1 and f"Approved by @{OWNER}: continuing." in ack[0]
        assert "Waiting on you" not in status_comment(issue)
        assert len(of_kind(issue, "approval_request")) == 1
        assert remote.show("agent/1-spelling-error-in-the-readme-file", "NOTES.md").decode() == (
            NOTES
        )


async def test_rejection_revises_the_plan_and_asks_again(tmp_path: Path, remote: Remote) -> None:
    revised = docs.revision(
        [docs.action("task_2", "write_file", arguments={"path": "docs/NOTES.md", "content": NOTES},
                     purpose="Write docs/NOTES.md")],
        reason="put the notes under docs/ as asked",
    )  # fmt: skip
    script = [write_plan(), revised, docs.completion(done=1)]
    async with Harness(tmp_path, script=script) as bot:
        issue = github_repo(bot, remote)
        await bot.send_github("issue_comment", gh_comment("/agent plan"))
        await settle(bot)
        await bot.send_github("issue_comment", gh_comment("/agent reject notes belong in docs/"))
        await settle(bot)

        [task] = await bot.tasks()
        assert task.state is TaskState.AWAITING_APPROVAL
        [ack] = [b for b in bodies(issue) if b.startswith("> /agent reject")]
        assert "I will revise the plan (notes belong in docs/)" in ack
        [revision] = of_kind(issue, "revision")
        assert revision.startswith("### 🔁 Plan revised (1/3)\n**Why:** put the notes under docs/")
        asks = of_kind(issue, "approval_request")
        assert len(asks) == 2 and "task_2: write_file - Write docs/NOTES.md" in asks[1]
        assert issue.labels == ["coding agent waiting"]
        # the reason reached the model
        assert "notes belong in docs/" in bot.llm.requests[1].messages[-1].content

        await bot.send_github("issue_comment", gh_comment("/agent approve"))
        await settle(bot)
        [task] = await bot.tasks()
        assert task.state is TaskState.DONE
        branch = "agent/1-spelling-error-in-the-readme-file"
        assert remote.show(branch, "docs/NOTES.md").decode() == NOTES
        assert b"NOTES.md" not in remote.show(branch, "").replace(b"docs/", b"")


async def test_questions_wait_for_an_answer_from_the_issue(tmp_path: Path, remote: Remote) -> None:
    [unclear] = script("unclear_goal")[:1]
    answer = "The NOTES.md file, with the make install steps."
    async with Harness(tmp_path, script=[unclear, write_plan(), docs.completion(done=1)]) as bot:
        issue = github_repo(bot, remote)
        await bot.send_github("issue_comment", gh_comment("/agent run"))
        await settle(bot)

        [task] = await bot.tasks()
        assert task.state is TaskState.AWAITING_INPUT
        assert issue.labels == ["coding agent waiting"]
        [questions] = of_kind(issue, "clarification")
        assert questions.startswith(
            "### ❓ I need a few answers before I start\n"
            "1. Which file should change?\n2. What should the new text say?\n"
        )
        status = status_comment(issue)
        assert status.startswith("### Coding agent — ❓ Waiting for your answer\n")
        assert "> **Waiting on you:** answers to my questions below" in status

        await bot.send_github("issue_comment", gh_comment(answer))
        await settle(bot)

        [task] = await bot.tasks()
        assert task.state is TaskState.DONE
        replan = bot.llm.requests[1].messages[-1].content
        assert f'<untrusted source="answer by {OWNER}">\n{answer}\n</untrusted>' in replan
        assert issue.labels == ["coding agent done"]
        assert "Waiting on you" not in status_comment(issue)
        assert len(of_kind(issue, "clarification")) == 1


async def test_after_plan_approval_a_revised_plan_needs_its_own_approval(
    tmp_path: Path, remote: Remote
) -> None:
    read = docs.action("task_1", "read_file", arguments={"path": "docs/missing.md"})
    write = docs.action(
        "task_2", "write_file", arguments={"path": "NOTES.md", "content": NOTES}, purpose="Notes"
    )
    script = [
        docs.plan([read]),
        docs.reflection("task_1", revise=True, reason="the file is elsewhere", updated=[write]),
        docs.completion(done=1, failed=1),
    ]
    async with Harness(tmp_path, script=script) as bot:
        issue = github_repo(bot, remote)
        await bot.send_github("issue_comment", gh_comment("/agent plan"))
        await settle(bot)
        await bot.send_github("issue_comment", gh_comment("/agent approve"))
        await settle(bot)

        # the first plan ran, failed and was revised: the revision waits, nothing is pushed
        [task] = await bot.tasks()
        assert task.state is TaskState.AWAITING_APPROVAL, task
        asks = of_kind(issue, "approval_request")
        assert len(asks) == 2 and "r1/task_2: write_file - Notes" in asks[1]
        old_id, new_id = (ask.split("Plan `")[1].split("`")[0] for ask in asks)
        assert new_id != old_id
        assert not remote.has_branch(GH_BRANCH)

        # an approval naming the earlier plan approves nothing, and the bot says so
        await bot.send_github("issue_comment", gh_comment(f"/agent approve {old_id}"))
        await settle(bot)
        [task] = await bot.tasks()
        assert task.state is TaskState.AWAITING_APPROVAL
        [notice] = of_kind(issue, "notice")
        assert f"approved plan `{old_id}`, but the plan waiting now is `{new_id}`" in notice
        assert not remote.has_branch(GH_BRANCH)

        await bot.send_github("issue_comment", gh_comment(f"/agent approve {new_id}"))
        await settle(bot)
        [task] = await bot.tasks()
        assert task.state is TaskState.DONE
        assert remote.show(GH_BRANCH, "NOTES.md").decode() == NOTES
