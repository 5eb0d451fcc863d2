"""GitLab end to end: a note starts a task that pushes a branch and opens a merge request;
a review note on that merge request makes a review round on the same branch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.events import TaskMode
from bot.forges.base import Permission
from bot.storage.base import TaskState
from tests.agent import docs
from tests.e2e.support import (
    GL_OWNER,
    GL_REPO,
    ORIGIN_FILES,
    assert_no_duplicates,
    bodies,
    gl_note,
    of_kind,
    settle,
    status_comment,
)
from tests.fakes import FakeIssue
from tests.harness import Harness
from tests.tools.conftest import Remote, git

pytestmark = pytest.mark.sandbox

TITLE = "Document the installation"
BRANCH = "agent/17-document-the-installation"


def gitlab_project(bot: Harness, remote: Remote | None = None) -> FakeIssue:
    ref = bot.gitlab.add_repo(GL_REPO, dict(ORIGIN_FILES), clone_url=remote.url if remote else "",
                              writers=(GL_OWNER,))  # fmt: skip
    bot.gitlab.repos[GL_REPO].permissions["reporter"] = Permission.READ
    bot.gitlab.add_issue(ref, 17, title=TITLE, body="Explain `make install`.", author=GL_OWNER)
    return bot.gitlab.issue(ref, 17)


def issue_note(body: str, sender: str = GL_OWNER) -> dict[str, Any]:
    payload = gl_note(body, sender=sender)
    payload["issue"].update(title=TITLE, description="Explain `make install`.")
    return payload


def diff_position(path: str) -> dict[str, Any]:
    """Where a line comment (a ``DiffNote``) sits in a merge request's diff."""
    return {"base_sha": "a" * 40, "start_sha": "a" * 40, "head_sha": "b" * 40,
            "old_path": path, "new_path": path, "position_type": "text",
            "old_line": None, "new_line": 1}  # fmt: skip


def write(path: str, content: str, task_id: str = "task_1") -> dict[str, object]:
    action = docs.action(task_id, "write_file", arguments={"path": path, "content": content},
                         purpose=f"Write {path}")  # fmt: skip
    return docs.plan([action], objective=f"Write {path}")


async def test_a_note_starts_a_task_that_opens_a_merge_request(
    tmp_path: Path, remote: Remote
) -> None:
    script = [write("INSTALL.md", "make install\n"), docs.completion(done=1)]
    async with Harness(tmp_path, script=script) as bot:
        issue = gitlab_project(bot, remote)
        payload = issue_note("/agent run")
        response = await bot.send_gitlab("Note Hook", payload)
        assert response.status_code == 202 and response.json()["message"] == "queued"
        await settle(bot)

        [task] = await bot.tasks()
        assert task.state is TaskState.DONE and task.request.issue.repo.project_id == 5
        assert issue.reactions == [(payload["object_attributes"]["id"], "eyes")]
        assert issue.labels == ["coding agent done"]
        assert remote.show(BRANCH, "INSTALL.md") == b"make install\n"
        [change] = bot.gitlab.repos[GL_REPO].change_requests
        assert (change.head_branch, change.base_branch) == (BRANCH, "main")
        title, body = bot.gitlab.repos[GL_REPO].change_request_bodies[change.number]
        assert title == f"{TITLE} (#17)"
        # the note's url without "#note_..." is the issue's: the body links it
        # formed under the project's address as GitLab's API gives it, not the payload's
        issue_url = "https://gitlab.example/gitlab-org/gitlab-test/-/issues/17"
        assert body.startswith(f"Closes #17 ({issue_url})\n\n**Goal:** Write INSTALL.md")
        status = status_comment(issue)
        assert f"Change request: {change.web_url}" in status and f"Branch: `{BRANCH}`" in status
        assert len(of_kind(issue, "completion")) == 1 and len(bodies(issue)) == 2


async def test_a_review_note_on_the_bots_merge_request_follows_up_on_its_branch(
    tmp_path: Path, remote: Remote
) -> None:
    follow_up = write("INSTALL.md", "make install PREFIX=/usr\n")
    script = [write("INSTALL.md", "make install\n"), docs.completion(done=1), follow_up,
              docs.completion(done=1)]  # fmt: skip
    quiet = {"review": {"quiet_seconds": 0}}  # a review round without waiting for more notes
    async with Harness(tmp_path, script=script, overrides=quiet) as bot:
        gitlab_project(bot, remote)
        await bot.send_gitlab("Note Hook", issue_note("/agent run"))
        await settle(bot)
        [change] = bot.gitlab.repos[GL_REPO].change_requests
        first_head = remote.rev(BRANCH)

        review = gl_note("Please mention PREFIX as well.", kind="merge_request")
        review["object_attributes"].update(type="DiffNote", position=diff_position("INSTALL.md"))
        review["merge_request"].update(iid=change.number, source_branch=BRANCH, url=change.web_url,
                                       target_branch="main", title=f"{TITLE} (#17)")  # fmt: skip
        assert (await bot.send_gitlab("Note Hook", review)).status_code == 202
        await settle(bot)

        tasks = await bot.tasks()
        [second] = [t for t in tasks if t.request.mode is TaskMode.FOLLOW_UP]
        assert second.state is TaskState.DONE
        assert second.request.issue.is_change_request
        assert "root: Please mention PREFIX as well." in second.request.instructions
        merge_request = bot.gitlab.issues[(GL_REPO, change.number)]
        [discussion] = bot.gitlab.change(bot.gitlab.repos[GL_REPO].ref, change.number).threads
        assert discussion.resolved and discussion.comments[-1].author == "coding-agent-bot"
        assert merge_request.labels == ["coding agent done"]
        # the same branch moved on; no second merge request
        assert remote.show(BRANCH, "INSTALL.md") == b"make install PREFIX=/usr\n"
        assert remote.rev(BRANCH) != first_head
        git(
            "merge-base", "--is-ancestor", first_head, BRANCH, cwd=remote.bare
        )  # a new commit on top
        assert len(bot.gitlab.repos[GL_REPO].change_requests) == 1
        assert f"Change request: {change.web_url}" in status_comment(merge_request)
        assert "Please mention PREFIX as well." in bot.llm.requests[2].messages[-1].content
        assert_no_duplicates(merge_request)


async def test_gitlab_reporter_gets_one_reply_and_a_wrong_token_nothing(
    tmp_path: Path,
) -> None:
    async with Harness(tmp_path) as bot:
        issue = gitlab_project(bot)
        wrong = await bot.send_gitlab("Note Hook", issue_note("/agent run"), token="nope")
        assert wrong.status_code == 401
        await bot.send_gitlab("Note Hook", issue_note("/agent run", sender="reporter"))
        await settle(bot)

        assert await bot.tasks() == []
        [reply] = bodies(issue)
        assert reply.startswith("> /agent run\n\nSorry, only project members with the Developer")
        assert "Nothing was queued." in reply
        assert issue.reactions == [] and issue.labels == []
        assert bot.gitlab.calls_of("ensure_label") == []


async def test_a_redelivered_gitlab_hook_is_handled_once(tmp_path: Path, remote: Remote) -> None:
    script = [write("INSTALL.md", "make install\n"), docs.completion(done=1)]
    async with Harness(tmp_path, script=script) as bot:
        issue = gitlab_project(bot, remote)
        payload = issue_note("/agent run")
        first = await bot.send_gitlab("Note Hook", payload, idempotency_key="abc-1")
        again = await bot.send_gitlab("Note Hook", payload, idempotency_key="abc-1")
        assert first.json()["message"] == "queued"
        assert again.json()["message"] == "duplicate delivery: already queued"
        await settle(bot)

        assert len(await bot.tasks()) == 1
        assert len(issue.reactions) == 1 and len(bot.gitlab.repos[GL_REPO].change_requests) == 1
        assert len(of_kind(issue, "status")) == 1
        assert_no_duplicates(issue)
