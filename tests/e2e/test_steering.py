"""People steer a running task from the issue: stop, pause / resume, feedback."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.events import TaskMode
from bot.storage.base import TaskState
from tests.agent import docs
from tests.e2e.support import (
    GH_BRANCH,
    GH_REPO,
    SteeredLLM,
    assert_no_duplicates,
    bodies,
    gh_comment,
    github_repo,
    of_kind,
    settle,
    status_comment,
    two_writes,
    use_llm,
)
from tests.harness import Harness, fixture
from tests.tools.conftest import Remote

pytestmark = pytest.mark.sandbox

BRANCH = GH_BRANCH


def comment_while_thinking(bot: Harness, body: str, call: int) -> dict[int, object]:
    """A person comments while the model answers the ``call``-th request."""

    async def hook() -> None:
        assert (await bot.send_github("issue_comment", gh_comment(body))).status_code == 202
        assert await bot.dispatch_all() == 1

    return {call: hook}


async def test_stop_mid_task_stops_at_the_next_safe_point(tmp_path: Path, remote: Remote) -> None:
    async with Harness(tmp_path) as bot:
        llm = use_llm(bot, SteeredLLM(two_writes()))
        llm.before.update(comment_while_thinking(bot, "/agent stop", 2))
        issue = github_repo(bot, remote)
        await bot.send_github("issue_comment", gh_comment("/agent run only touch a.txt, b.txt"))
        await settle(bot)

        [task] = await bot.tasks()
        assert task.state is TaskState.STOPPED and task.error == "stopped by Codertocat"
        planning = llm.requests[0].messages[-1].content
        assert (
            '<untrusted source="instructions given with the command">\n'
            "only touch a.txt, b.txt\n</untrusted>"
        ) in planning
        assert issue.labels == ["coding agent stopped"]
        [ack] = [b for b in bodies(issue) if b.startswith("> /agent stop")]
        assert "Stopping at the next safe point, as @Codertocat asked." in ack
        [stopped] = of_kind(issue, "end-stopped")
        assert stopped.startswith("### ⏹️ Stopped\nStopped as asked.")
        status = status_comment(issue)
        assert status.startswith("### Coding agent — ⏹️ Stopped\n")
        assert "Progress: **2/2**" in status  # the action in flight finished, nothing more
        assert of_kind(issue, "completion") == []
        # nothing hidden: the work so far is pushed to a draft marked unfinished
        assert remote.has_branch(BRANCH)
        [change] = bot.github.repos[GH_REPO].change_requests
        title, _body = bot.github.repos[GH_REPO].change_request_bodies[change.number]
        assert change.draft and title.startswith("[unfinished] ")
        assert f"The work so far: Branch: `{BRANCH}` · Change request: {change.web_url}" in stopped
        assert len(llm.requests) == 2


async def test_pause_then_resume_continues_where_it_stopped(tmp_path: Path, remote: Remote) -> None:
    script = [*two_writes(), docs.completion()]
    async with Harness(tmp_path) as bot:
        llm = use_llm(bot, SteeredLLM(script))
        llm.before.update(comment_while_thinking(bot, "/agent pause", 2))
        issue = github_repo(bot, remote)
        await bot.send_github("issue_comment", gh_comment("/agent run"))
        await settle(bot)

        [task] = await bot.tasks()
        assert task.state is TaskState.PAUSED
        assert issue.labels == ["coding agent paused"]
        [paused] = of_kind(issue, "paused")
        assert paused.startswith(
            "### ⏸️ Paused\nPaused as asked by Codertocat. Reply `/agent resume` to continue."
        )
        assert status_comment(issue).startswith("### Coding agent — ⏸️ Paused\n")

        await bot.send_github("issue_comment", gh_comment("/agent resume"))
        await settle(bot)

        [task] = await bot.tasks()
        assert task.state is TaskState.DONE
        assert issue.labels == ["coding agent done"]
        assert [b for b in bodies(issue) if b.startswith("> /agent resume")] == [
            b for b in bodies(issue) if "Resuming." in b
        ]
        assert len(of_kind(issue, "paused")) == 1 and len(of_kind(issue, "completion")) == 1
        assert remote.show(BRANCH, "a.txt") == b"A\n" and remote.show(BRANCH, "b.txt") == b"B\n"
        assert len(llm.requests) == 3  # nothing was asked twice
        assert_no_duplicates(issue)


async def test_feedback_mid_task_reaches_the_next_reflection(
    tmp_path: Path, remote: Remote
) -> None:
    extra = docs.action(
        "task_3", "write_file", arguments={"path": "c.txt", "content": "C\n"}, purpose="Write c"
    )
    follow = {
        "phase": "reflection",
        "reflection": {"action_evaluated": "human feedback", "status": "partial",
                       "evaluation": "they also want c.txt", "plan_revision_needed": True},
        "plan_revision": {"reason": "Codertocat asked for c.txt", "changes": ["write c.txt"],
                          "updated_action_plan": {"actions": [extra]}},
        "comment": "adding c.txt",
    }  # fmt: skip
    script = [*two_writes(), follow, docs.completion(done=3)]
    async with Harness(tmp_path) as bot:
        llm = use_llm(bot, SteeredLLM(script))
        llm.before.update(comment_while_thinking(bot, "Please also write c.txt", 2))
        issue = github_repo(bot, remote)
        await bot.send_github("issue_comment", gh_comment("/agent run"))
        await settle(bot)

        [task] = await bot.tasks()
        assert task.state is TaskState.DONE
        feedback_prompt = llm.requests[2].messages[-1].content
        assert llm.requests[2].phase == "reflection"
        fenced = '<untrusted source="feedback by Codertocat">\nPlease also write c.txt\n'
        assert fenced in feedback_prompt
        [revision] = of_kind(issue, "revision")
        assert revision.startswith("### 🔁 Plan revised (0/3)\n**Why:** Codertocat asked for c.txt")
        feedback_id = gh_comment("Please also write c.txt")["comment"]["id"]
        assert (feedback_id, "eyes") in issue.reactions
        assert remote.show(BRANCH, "c.txt") == b"C\n"
        assert "Progress: **3/3**" in status_comment(issue)


async def test_a_review_comment_on_the_bots_pull_request_follows_up_on_its_branch(
    tmp_path: Path, remote: Remote
) -> None:
    fix = docs.action("task_1", "write_file", arguments={"path": "a.txt", "content": "A2\n"},
                      purpose="Apply the review")  # fmt: skip
    script = [*two_writes(), docs.completion(), docs.plan([fix]), docs.completion(done=1)]
    quiet = {"review": {"quiet_seconds": 0}}  # a review round without waiting for more
    async with Harness(tmp_path, script=script, overrides=quiet) as bot:
        issue = github_repo(bot, remote)
        await bot.send_github("issue_comment", gh_comment("/agent run"))
        await settle(bot)
        [change] = bot.github.repos[GH_REPO].change_requests
        repo = bot.github.repos[GH_REPO].ref
        thread = bot.github.add_thread(
            repo, change.number, ("Codertocat", "a.txt should say A2"), path="a.txt", line=1
        )  # what GitHub holds once the comment is made

        review = fixture("github", "pull_request_review_comment.created.json")
        review["pull_request"].update(number=change.number, html_url=change.web_url)
        review["pull_request"]["head"]["ref"] = BRANCH
        review["pull_request"]["user"]["login"] = bot.settings.bot.github_login  # the bot's PR
        review["comment"].update(body="a.txt should say A2", id=thread.comments[0].id)
        assert (await bot.send_github("pull_request_review_comment", review)).status_code == 202
        await settle(bot)

        follow_up = [t for t in await bot.tasks() if t.request.mode is TaskMode.FOLLOW_UP]
        assert [t.state for t in follow_up] == [TaskState.DONE]
        pull = bot.github.issues[(GH_REPO, change.number)]
        [answered] = bot.github.change(repo, change.number).threads
        assert answered.resolved and answered.comments[-1].body.startswith("Changed in ")
        assert pull.labels == ["coding agent done"] and issue.labels == ["coding agent done"]
        assert remote.show(BRANCH, "a.txt") == b"A2\n" and remote.show(BRANCH, "b.txt") == b"B\n"
        assert len(bot.github.repos[GH_REPO].change_requests) == 1
        assert f"Change request: {change.web_url}" in status_comment(pull)
        assert "Codertocat: a.txt should say A2" in bot.llm.requests[-2].messages[-1].content
