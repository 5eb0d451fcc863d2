"""Signed webhook -> inbox -> dispatcher -> task / message / reply, with a stand-in coordinator."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.agent.session import TaskContext
from bot.events import ForgeKind, RepoRef, TaskMode, TaskRequest
from bot.forges.base import ForgeError, Permission
from bot.run_events import Outcome, ProgressKind, progress_event
from bot.storage.base import TaskState
from bot.webhooks import github as github_hooks
from bot.worker import dispatcher
from tests.harness import Harness, fixture

OWNER = "Codertocat"


class DoneCoordinator:
    """Stands in for the agent: posts one plan, finishes."""

    async def run(self, ctx: TaskContext) -> Outcome:
        plan = {"task_decomposition": {"subtasks": [{"id": "t1", "description": "Edit"}]}}
        await ctx.emit(progress_event(ProgressKind.PLAN, {"plan": plan}))
        await ctx.emit(progress_event(ProgressKind.ACTION, {"task_id": "t1", "status": "done"}))
        await ctx.emit(
            progress_event(
                ProgressKind.COMPLETION,
                {"summary": {"goal_achieved": True, "tasks_completed": 1, "tasks_failed": 0}},
            )
        )
        return Outcome(TaskState.DONE)


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[Harness]:
    async with Harness(tmp_path, coordinator_factory=DoneCoordinator) as harness:
        repo = harness.github.add_repo("Codertocat/Hello-World", writers=(OWNER,))
        harness.github.add_issue(repo, 1, title="Spelling error in the README file")
        yield harness


def labeled(label: str = "coding agent") -> dict:
    payload = fixture("github", "issues.labeled.json")
    payload["label"]["name"] = label
    payload["issue"]["labels"].append({"name": label})
    return payload


def comment(body: str, sender: str = OWNER) -> dict:
    payload = fixture("github", "issue_comment.created.json")
    payload["comment"]["body"] = body
    payload["comment"]["user"]["login"] = sender
    payload["sender"]["login"] = sender
    return payload


async def test_trigger_label_from_a_writer_runs_a_task(bot: Harness) -> None:
    assert (await bot.send_github("issues", labeled())).status_code == 202
    assert await bot.dispatch_all() == 1
    issue = bot.github.issues[("Codertocat/Hello-World", 1)]
    assert issue.reactions == [(None, "eyes")]
    [task] = await bot.tasks()
    assert task.state is TaskState.QUEUED and task.request.requested_by == OWNER
    await bot.run_queued()
    [task] = await bot.tasks()
    assert task.state is TaskState.DONE
    assert "coding agent done" in issue.labels and "coding agent processing" not in issue.labels
    bodies = [c.body for c in issue.comments]
    assert any("### Coding agent — ✅ Done" in b for b in bodies)
    assert any("### ✅ Done" in b for b in bodies)


async def test_user_without_write_access_gets_one_reply_and_nothing_is_queued(
    bot: Harness,
) -> None:
    await bot.send_github("issue_comment", comment("/agent run", sender="mallory"))
    await bot.dispatch_all()
    assert await bot.tasks() == []
    issue = bot.github.issues[("Codertocat/Hello-World", 1)]
    [reply] = issue.comments
    assert reply.body.startswith("> /agent run")
    assert "write, maintain or admin access" in reply.body
    assert issue.reactions == []


async def test_bots_own_comment_is_not_even_queued(bot: Harness) -> None:
    payload = comment("/agent run", sender="coding-agent[bot]")
    payload["sender"]["type"] = "Bot"
    response = await bot.send_github("issue_comment", payload)
    assert response.json()["message"] == "ignored"
    assert await bot.dispatch_all() == 0


async def test_commands_and_feedback_reach_the_active_task(bot: Harness) -> None:
    await bot.send_github("issue_comment", comment("/agent run"))
    await bot.send_github("issue_comment", comment("Please keep the wording short."))
    await bot.send_github("issue_comment", comment("/agent pause\n/agent status"))
    await bot.dispatch_all()
    [task] = await bot.tasks()
    messages = await bot.store.messages_after(task.id, 0)
    assert [(m.kind, m.payload.get("body") or m.payload.get("name")) for m in messages] == [
        ("feedback", "Please keep the wording short."),
        ("command", "pause"),
    ]
    issue = bot.github.issues[("Codertocat/Hello-World", 1)]
    replies = [c.body for c in issue.comments]
    assert any(r.startswith("> /agent pause") and "Pausing" in r for r in replies)
    assert any(r.startswith("> /agent status") and f"`{task.id}`" in r for r in replies)


async def test_second_trigger_while_running_is_a_polite_reply(bot: Harness) -> None:
    await bot.send_github("issues", labeled())
    await bot.send_github("issue_comment", comment("/agent run"))
    await bot.dispatch_all()
    assert len(await bot.tasks()) == 1
    issue = bot.github.issues[("Codertocat/Hello-World", 1)]
    assert any("already working on this issue" in c.body for c in issue.comments)


def opened_with_label(label: str = "coding agent") -> dict:
    payload = fixture("github", "issues.opened.json")
    payload["issue"]["labels"].append({"name": label})
    return payload


async def test_an_issue_opened_with_the_label_starts_one_task_without_noise(
    bot: Harness,
) -> None:
    # GitHub sends both "opened" (with the label) and "labeled" for one new issue
    await bot.send_github("issues", opened_with_label())
    await bot.send_github("issues", labeled())
    assert await bot.dispatch_all() == 2
    assert len(await bot.tasks()) == 1
    issue = bot.github.issues[("Codertocat/Hello-World", 1)]
    assert issue.reactions == [(None, "eyes")] and issue.comments == []


async def test_a_label_start_that_loses_the_race_stays_silent(
    bot: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other delivery (handled by another worker) creates the task while this one
    looks up the permission: this one neither reacts nor replies."""
    look_up = bot.github.get_permission

    async def racing(repo: RepoRef, user: str) -> Permission:
        request = TaskRequest(issue=bot.github.issues[(repo.full_name, 1)].ref, requested_by=user)
        await bot.store.create_task(request, event_id=None)
        return await look_up(repo, user)

    monkeypatch.setattr(bot.github, "get_permission", racing)
    await bot.send_github("issues", opened_with_label())
    assert await bot.dispatch_all() == 1
    assert len(await bot.tasks()) == 1
    issue = bot.github.issues[("Codertocat/Hello-World", 1)]
    assert issue.reactions == [] and issue.comments == []
    assert await bot.store.pending_events() == 0


GH_REPO = "Codertocat/Hello-World"


def pull_request(bot: Harness, *, author: str, head: str, head_repo: str | None = GH_REPO) -> None:
    repo = bot.github.repos[GH_REPO].ref
    bot.github.add_issue(
        repo,
        2,
        title="Fix the docs",
        author=author,
        change_request=True,
        head_branch=head,
        head_repo=head_repo,
    )


def pr_conversation_comment(body: str) -> dict:
    """A comment in a pull request's conversation: GitHub sends an ``issue_comment`` whose
    issue has a ``pull_request`` key, and no head branch."""
    payload = comment(body)
    payload["issue"]["number"] = 2
    payload["issue"]["pull_request"] = {"url": f"https://api.github.com/repos/{GH_REPO}/pulls/2"}
    return payload


async def test_a_mention_in_the_bots_pull_request_conversation_follows_up_on_it(
    bot: Harness,
) -> None:
    pull_request(bot, author="coding-agent[bot]", head="agent/1-spelling")
    await bot.send_github("issue_comment", pr_conversation_comment("@coding-agent add a test"))
    await bot.dispatch_all()
    [task] = await bot.tasks()
    assert task.request.mode is TaskMode.FOLLOW_UP
    assert task.request.issue.head_branch == "agent/1-spelling"
    assert bot.github.calls_of("get_issue") == [(GH_REPO, 2)]


@pytest.mark.parametrize(
    ("author", "head", "head_repo"),
    [
        ("alice", "agent/1-spelling", GH_REPO),  # a person's branch named like the bot's
        ("coding-agent[bot]", "feature/x", GH_REPO),
        ("coding-agent[bot]", "agent/1-spelling", "mallory/Hello-World"),  # a fork
        ("coding-agent[bot]", "agent/1-spelling", None),  # the fork was deleted
    ],
)
async def test_a_mention_in_another_pull_request_conversation_starts_a_run(
    bot: Harness, author: str, head: str, head_repo: str | None
) -> None:
    pull_request(bot, author=author, head=head, head_repo=head_repo)
    await bot.send_github("issue_comment", pr_conversation_comment("@coding-agent add a test"))
    await bot.dispatch_all()
    [task] = await bot.tasks()
    assert task.request.mode is TaskMode.RUN and task.request.instructions == "add a test"


async def test_a_plain_comment_in_a_pull_request_conversation_needs_no_look_up(
    bot: Harness,
) -> None:
    pull_request(bot, author="coding-agent[bot]", head="agent/1-spelling")
    await bot.send_github("issue_comment", pr_conversation_comment("Looks good, thanks!"))
    await bot.dispatch_all()
    assert await bot.tasks() == []
    assert bot.github.calls_of("get_issue") == []


def on_the_bots_pull_request(name: str, body: str) -> dict:
    payload = fixture("github", f"{name}.json")
    payload["pull_request"]["head"]["ref"] = "agent/1-spelling"
    payload["pull_request"]["user"]["login"] = "coding-agent[bot]"
    payload["review" if name.startswith("pull_request_review.") else "comment"]["body"] = body
    return payload


async def test_the_eyes_go_on_a_line_comment_itself_and_on_the_pull_request_for_a_review(
    bot: Harness,
) -> None:
    line = on_the_bots_pull_request("pull_request_review_comment.created", "Use a table here.")
    await bot.send_github("pull_request_review_comment", line)
    await bot.dispatch_all()
    review = on_the_bots_pull_request("pull_request_review.submitted", "Please add tests.")
    await bot.send_github("pull_request_review", review)
    await bot.dispatch_all()
    assert bot.github.calls_of("add_reaction") == [
        (2, 284312630, "eyes", True),  # POST /pulls/comments/{id}/reactions on GitHub
        (2, None, "eyes", False),  # a review has no reactions of its own
    ]


GL_PROJECT = "gitlab-org/gitlab-test"


def merge_request(bot: Harness, author: str) -> None:
    repo = bot.gitlab.add_repo(GL_PROJECT, writers=("root",))
    bot.gitlab.add_issue(repo, 1, title="Fix the docs", author=author, change_request=True)


def mr_note(body: str, *, line: bool = False, fork: bool = False) -> dict:
    payload = fixture("gitlab", "note-hook-merge-request.json")
    payload["object_attributes"]["note"] = body
    payload["merge_request"]["source_branch"] = "agent/3-fix-the-docs"
    if line:
        payload["object_attributes"].update(type="DiffNote", position={"new_path": "a.md"})
    if fork:
        payload["merge_request"]["source_project_id"] = 77
        payload["merge_request"]["source"]["path_with_namespace"] = "mallory/gitlab-test"
    return payload


async def test_a_line_note_on_the_bots_merge_request_looks_up_its_author(bot: Harness) -> None:
    merge_request(bot, author="coding-agent-bot")
    await bot.send_gitlab("Note Hook", mr_note("Use a table here.", line=True))
    await bot.dispatch_all()
    [task] = await bot.tasks()
    assert task.request.mode is TaskMode.FOLLOW_UP
    assert task.request.instructions == "Use a table here."
    assert task.request.issue.author == "coding-agent-bot"
    # The address under the project's as GitLab's API gives it, not the payload's.
    assert (
        task.request.issue.web_url
        == "https://gitlab.example/gitlab-org/gitlab-test/-/merge_requests/1"
    )
    assert bot.gitlab.calls_of("get_issue") == [(GL_PROJECT, 1)]


async def test_a_line_note_on_a_persons_agent_branch_starts_nothing(bot: Harness) -> None:
    merge_request(bot, author="mallory")
    await bot.send_gitlab("Note Hook", mr_note("Use a table here.", line=True))
    assert await bot.dispatch_all() == 1
    assert await bot.tasks() == []
    assert bot.gitlab.issues[(GL_PROJECT, 1)].reactions == []
    assert await bot.store.pending_events() == 0


async def test_a_fork_or_a_thank_you_on_a_merge_request_needs_no_look_up(bot: Harness) -> None:
    merge_request(bot, author="coding-agent-bot")
    response = await bot.send_gitlab("Note Hook", mr_note("Nit.", line=True, fork=True))
    assert response.json()["message"] == "ignored"
    await bot.send_gitlab("Note Hook", mr_note("Thanks, merging!"))
    await bot.dispatch_all()
    assert await bot.tasks() == []
    assert bot.gitlab.calls_of("get_issue") == [] and bot.gitlab.calls_of("get_permission") == []


async def test_help_and_unknown_commands(bot: Harness) -> None:
    await bot.send_github("issue_comment", comment("/agent help"))
    await bot.send_github("issue_comment", comment("/agent deploy"))
    await bot.dispatch_all()
    issue = bot.github.issues[("Codertocat/Hello-World", 1)]
    help_reply, unknown = (c.body for c in issue.comments)
    assert "`/agent approve`" in help_reply and "`/agent retry`" in help_reply
    assert "I do not know `deploy`" in unknown
    assert await bot.tasks() == []


async def test_forge_failure_keeps_the_event_for_later(bot: Harness) -> None:
    bot.github.fail("get_permission", ForgeError("502 Bad Gateway", status=502))
    await bot.send_github("issue_comment", comment("/agent run"))
    assert await bot.dispatch_all() == 1
    assert await bot.tasks() == []
    assert await bot.store.pending_events() == 1  # given back with a delay, not lost


async def test_permission_lookups_are_cached(bot: Harness) -> None:
    await bot.send_github("issue_comment", comment("/agent help"))
    await bot.send_github("issue_comment", comment("/agent status"))
    await bot.dispatch_all()
    assert len(bot.github.calls_of("get_permission")) == 1


async def test_gitlab_developer_can_start_a_task(bot: Harness) -> None:
    repo = bot.gitlab.add_repo("gitlab-org/gitlab-test", writers=())
    bot.gitlab.repos["gitlab-org/gitlab-test"].permissions["root"] = Permission.WRITE
    bot.gitlab.add_issue(repo, 17, title="New API: create/update/delete file")
    payload = fixture("gitlab", "note-hook-issue.json")
    payload["object_attributes"]["note"] = "/agent run"
    payload["issue"]["state"] = "opened"
    await bot.send_gitlab("Note Hook", payload)
    await bot.dispatch_all()
    [task] = await bot.tasks()
    assert task.request.issue.repo.forge is ForgeKind.GITLAB
    await bot.run_queued()
    issue = bot.gitlab.issues[("gitlab-org/gitlab-test", 17)]
    assert "coding agent done" in issue.labels


async def test_planning_switched_off_still_runs_the_task(tmp_path: Path) -> None:
    # planning.enabled: false is a mode (the open tool loop), not a refusal
    async with Harness(
        tmp_path, coordinator_factory=DoneCoordinator, overrides={"planning": {"enabled": False}}
    ) as bot:
        repo = bot.github.add_repo("Codertocat/Hello-World", writers=(OWNER,))
        bot.github.add_issue(repo, 1, title="Spelling error in the README file")
        await bot.send_github("issues", labeled())
        await bot.dispatch_all()
        await bot.run_queued()
        [task] = await bot.tasks()
        assert task.state is TaskState.DONE


async def test_a_reader_opening_a_labelled_issue_is_answered_once(bot: Harness) -> None:
    # GitHub sends "opened" (with the label) and "labeled": one answer, not two
    for payload in (opened_with_label(), labeled()):
        payload["sender"]["login"] = "triager"
        await bot.send_github("issues", payload)
    await bot.dispatch_all()
    assert await bot.tasks() == []
    issue = bot.github.issues[("Codertocat/Hello-World", 1)]
    assert len(issue.comments) == 1
    assert "write, maintain or admin" in issue.comments[0].body


async def test_the_dispatcher_decides_from_the_intent_the_app_kept(
    bot: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An event is classified once, by the app; its inbox row keeps the intent. The
    dispatcher refines it with what its look-ups find (a pull request's head branch, a
    merge request's author, GitLab's note as stored) and never classifies it again, with
    the same forge calls as before."""

    def classified_again(*args: object) -> None:
        raise AssertionError("the dispatcher classified an event the app had classified")

    monkeypatch.setattr(dispatcher, "classify", classified_again)
    await bot.send_github("issues", labeled())
    await bot.send_github("issue_comment", comment("/agent status"))
    pull_request(bot, author="coding-agent[bot]", head="agent/1-spelling")
    await bot.send_github("issue_comment", pr_conversation_comment("@coding-agent add a test"))
    merge_request(bot, author="coding-agent-bot")
    await bot.send_gitlab("Note Hook", mr_note("Use a table here.", line=True))
    assert await bot.dispatch_all() == 4
    tasks = {(t.request.issue.repo.forge, t.request.issue.number): t for t in await bot.tasks()}
    assert tasks[ForgeKind.GITHUB, 1].request.mode is TaskMode.RUN
    assert tasks[ForgeKind.GITHUB, 2].request.mode is TaskMode.FOLLOW_UP
    assert tasks[ForgeKind.GITHUB, 2].request.issue.head_branch == "agent/1-spelling"
    assert tasks[ForgeKind.GITLAB, 1].request.mode is TaskMode.FOLLOW_UP
    assert tasks[ForgeKind.GITLAB, 1].request.issue.author == "coding-agent-bot"
    assert bot.github.calls_of("get_issue") == [(GH_REPO, 2)]
    assert bot.gitlab.calls_of("get_issue") == [(GL_PROJECT, 1)]
    statuses = [c.body for c in bot.github.issues[(GH_REPO, 1)].comments]
    assert len(statuses) == 1  # the status command was answered


async def test_an_inbox_row_without_a_kept_intent_is_classified_when_dispatched(
    bot: Harness,
) -> None:
    """A row queued by a version that kept no intent (or another door into the inbox)
    is classified by the dispatcher: nothing queued before an upgrade is lost."""
    event = github_hooks.parse_event("issues", "old-row", json.dumps(labeled()).encode())
    assert await bot.store.record_delivery("old-row", "github", event.to_dict())
    assert await bot.dispatch_all() == 1
    [task] = await bot.tasks()
    assert task.request.mode is TaskMode.RUN and task.request.requested_by == OWNER


async def test_a_kept_intent_that_does_not_read_is_classified_again(bot: Harness) -> None:
    """Bad data in a row loses nothing: the event is classified when dispatched."""
    event = github_hooks.parse_event("issues", "garbled", json.dumps(labeled()).encode())
    garbled = {**event.to_dict(), "intent": {"kind": "launch", "commands": 7}}
    assert await bot.store.record_delivery("garbled", "github", garbled)
    assert await bot.dispatch_all() == 1
    [task] = await bot.tasks()
    assert task.request.mode is TaskMode.RUN and task.request.requested_by == OWNER
