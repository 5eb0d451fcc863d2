"""GitLab notes and labels are read back from the API before the bot acts on them: a
delivery that holds the right token but tells what GitLab does not have starts nothing."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import responses

from bot.events import ForgeKind, IssueRef, RepoRef, TaskRequest
from bot.followup.record import ChangeRecord
from bot.forges.base import Comment, ForgeError
from bot.forges.gitlab import GitLabForge
from bot.forges.gitlab_client import GitLabClient
from bot.storage.base import TaskState, Watch
from tests.e2e.support import gl_note
from tests.harness import Harness, fixture
from tests.storage.store_support import Clock

PROJECT = "gitlab-org/gitlab-test"
LABEL = {"id": 1, "title": "coding agent", "color": "#123123", "type": "ProjectLabel"}


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[Harness]:
    async with Harness(tmp_path) as harness:
        repo = harness.gitlab.add_repo(PROJECT, writers=("root",))
        harness.gitlab.add_issue(repo, 17, title="New API: create/update/delete file")
        yield harness


def note(
    body: str = "/agent run", sender: str = "root", note_id: int | None = None
) -> dict[str, Any]:
    """A note hook; ``note_id`` gives a note of its own (a note id is handled once:
    the same note delivered again is a replay)."""
    payload = fixture("gitlab", "note-hook-issue.json")
    payload["object_attributes"]["note"] = body
    if note_id is not None:
        payload["object_attributes"]["id"] = note_id
    payload["user"]["username"] = sender
    payload["issue"]["state"] = "opened"
    return payload


def labeled() -> dict[str, Any]:
    payload = fixture("gitlab", "issue-hook.json")
    payload["project"]["path_with_namespace"] = PROJECT
    payload["object_attributes"].update(iid=17, action="update", state="opened", labels=[LABEL])
    payload["labels"] = [LABEL]
    payload["changes"] = {"labels": {"previous": [], "current": [LABEL]}}
    return payload


def issue(bot: Harness) -> Any:
    return bot.gitlab.issues[(PROJECT, 17)]


async def test_a_genuine_note_starts_a_task(bot: Harness) -> None:
    await bot.send_gitlab("Note Hook", note())
    await bot.dispatch_all()
    assert len(await bot.tasks()) == 1
    assert bot.gitlab.calls_of("get_comment") == [(17, note()["object_attributes"]["id"])]


async def test_a_note_gitlab_does_not_have_is_ignored(
    bot: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "bot.worker.readback")
    response = await bot.send_gitlab("Note Hook", note(), stored=False)
    assert response.json()["message"] == "queued"  # the token was right
    await bot.dispatch_all()
    assert await bot.tasks() == [] and issue(bot).reactions == [] and issue(bot).comments == []
    assert bot.gitlab.calls_of("get_permission") == []
    assert "note 1241 does not exist on gitlab:gitlab-org/gitlab-test#issue/17" in caplog.text


async def test_a_note_whose_author_or_text_differs_is_ignored(
    bot: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "bot.worker.readback")
    note_id = note()["object_attributes"]["id"]
    issue(bot).comments.append(Comment(note_id, "/agent run", "reporter"))  # by a reporter
    await bot.send_gitlab("Note Hook", note(sender="root"), stored=False)
    await bot.dispatch_all()
    other = note_id + 1
    issue(bot).comments.append(Comment(other, "Looks fine to me.", "root"))  # by a writer
    await bot.send_gitlab("Note Hook", note("/agent run", note_id=other), stored=False)
    await bot.dispatch_all()
    assert await bot.tasks() == [] and issue(bot).reactions == []
    assert "is by 'reporter'" in caplog.text and "says something else now" in caplog.text


async def test_a_label_event_acts_on_the_labels_as_they_are_now(bot: Harness) -> None:
    await bot.send_gitlab("Issue Hook", labeled(), stored=False)  # the label is not there
    await bot.dispatch_all()
    assert await bot.tasks() == []
    await bot.send_gitlab("Issue Hook", labeled())  # it is
    await bot.dispatch_all()
    [task] = await bot.tasks()
    assert task.request.issue.labels == ("coding agent",)


async def test_a_label_removed_before_dispatch_starts_nothing(bot: Harness) -> None:
    await bot.send_gitlab("Issue Hook", labeled())
    issue(bot).labels.clear()
    await bot.dispatch_all()
    assert await bot.tasks() == []


async def test_a_forge_error_while_reading_back_retries_the_event(bot: Harness) -> None:
    bot.gitlab.fail("get_comment", ForgeError("502 Bad Gateway", status=502))
    await bot.send_gitlab("Note Hook", note())
    await bot.dispatch_all()
    assert await bot.tasks() == [] and await bot.store.pending_events() == 1


async def test_github_payloads_are_not_read_back(bot: Harness) -> None:
    repo = bot.github.add_repo("Codertocat/Hello-World", writers=("Codertocat",))
    bot.github.add_issue(repo, 1, title="Spelling error in the README file")
    payload = fixture("github", "issue_comment.created.json")
    payload["comment"]["body"] = "/agent run"
    await bot.send_github("issue_comment", payload)
    await bot.dispatch_all()
    assert len(await bot.tasks()) == 1 and bot.github.calls_of("get_comment") == []


async def test_an_internal_note_steers_only_a_confidential_issue(bot: Harness) -> None:
    internal = note()
    internal["object_attributes"]["internal"] = True
    await bot.send_gitlab("Confidential Note Hook", internal)
    await bot.dispatch_all()
    assert await bot.tasks() == [] and issue(bot).reactions == []
    issue(bot).confidential = True
    again = note()  # a new internal note, now that the issue is confidential
    again["object_attributes"].update(internal=True, id=internal["object_attributes"]["id"] + 1)
    await bot.send_gitlab("Confidential Note Hook", again, idempotency_key="again")
    await bot.dispatch_all()
    assert len(await bot.tasks()) == 1


async def test_chatter_on_an_issue_without_a_task_is_not_read_back(bot: Harness) -> None:
    await bot.send_gitlab("Note Hook", note("Thanks, looks good."))
    await bot.dispatch_all()
    assert await bot.tasks() == [] and bot.gitlab.calls_of("get_comment") == []


async def test_a_payload_naming_one_project_by_path_and_another_by_id_is_ignored(
    bot: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """The webhook secret is chosen by the project's path; the bot acts on its id. A holder
    of one project's secret must not reach another project through the id."""
    caplog.set_level(logging.WARNING, "bot.worker.readback")
    other = bot.gitlab.add_repo("secret-group/protected", writers=("root",))
    bot.gitlab.add_issue(other, 17, title="Protected work")
    forged = note()  # a real note of the protected project, replayed under another path
    bot.gitlab.issue(other, 17).comments.append(
        Comment(forged["object_attributes"]["id"], "/agent run", "root")
    )
    forged["project"]["id"] = forged["object_attributes"]["project_id"] = other.project_id
    await bot.send_gitlab("Note Hook", forged, stored=False)
    await bot.dispatch_all()
    assert await bot.tasks() == []
    assert f"project {other.project_id} is secret-group/protected, not {PROJECT}" in caplog.text


async def test_the_gitlab_adapter_names_a_project_by_its_stored_path() -> None:
    with responses.RequestsMock() as mock:
        mock.get(
            "https://gitlab.example/api/v4/projects/7",
            json={"id": 7, "path_with_namespace": "real/path", "default_branch": "main",
                  "web_url": "https://gitlab.example/real/path",
                  "http_url_to_repo": "https://gitlab.example/real/path.git"},
        )  # fmt: skip
        forge = GitLabForge(GitLabClient(url="https://gitlab.example", token="glpat-test"))
        try:
            repo = RepoRef(ForgeKind.GITLAB, "claimed/path", project_id=7)
            info = await forge.get_repo_info(repo)
        finally:
            await forge.aclose()
    assert info.repo.full_name == "real/path" and info.repo.project_id == 7


async def test_a_label_someone_else_added_starts_nothing_for_the_sender(
    bot: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """The label really is on the issue, but a reader put it there: a delivery naming a
    writer as the one who added it is not believed (GitLab's label events say who did)."""
    caplog.set_level(logging.WARNING, "bot.worker.readback")
    issue(bot).labels = ["coding agent"]
    issue(bot).label_events = [("reporter", "coding agent")]
    await bot.send_gitlab("Issue Hook", labeled(), stored=False)  # claims root added it
    await bot.dispatch_all()
    assert await bot.tasks() == []
    assert "was added by reporter, not by the sender 'root'" in caplog.text
    issue(bot).label_events.append(("root", "coding agent"))  # now root has added it
    await bot.send_gitlab("Issue Hook", labeled(), stored=False, idempotency_key="again")
    await bot.dispatch_all()
    assert len(await bot.tasks()) == 1


# --- review activity on the bot's own merge request ---------------------------------------------

BRANCH = "agent/17-new-api"


async def watched_merge_request(bot: Harness) -> IssueRef:
    """The bot's draft merge request for issue 17, watched after its task ended."""
    repo = bot.gitlab.repos[PROJECT].ref
    task, _ = await bot.store.create_task(TaskRequest(IssueRef(repo, 17, title="x"), "root"))
    await bot.store.set_state(task.id, TaskState.DONE)
    change = await bot.gitlab.open_change_request(
        repo, head=BRANCH, base="main", title="t", body=""
    )
    pull = IssueRef(repo, change.number, is_change_request=True, web_url=change.web_url,
                    author=bot.gitlab.bot_login, head_branch=BRANCH, head_repo=PROJECT)  # fmt: skip
    record = ChangeRecord(head_sha="a" * 40, gate_sha="a" * 40).to_dict()
    await bot.store.add_watch(Watch(pull.key, repo.key, BRANCH, task.id, pull, data=record))
    return pull


def line_note(pull: IssueRef, body: str, note_id: int) -> dict[str, Any]:
    payload = gl_note(body, kind="merge_request")
    position = {"new_path": "README.md", "old_path": "README.md", "new_line": 1, "old_line": None}
    payload["object_attributes"].update(id=note_id, type="DiffNote", position=position,
                                        discussion_id=f"{note_id:040x}")  # fmt: skip
    payload["merge_request"].update(iid=pull.number, source_branch=BRANCH, url=pull.web_url)
    return payload


async def test_review_activity_with_no_task_is_not_read_back_but_its_project_is(
    tmp_path: Path,
) -> None:
    """With no task on the merge request, a note only brings the look at its discussions,
    which reads them and their authors' access from the API: a forged note (not stored)
    costs no read-back and starts nothing; a genuine one starts the round."""
    clock = Clock()
    async with Harness(tmp_path, clock=clock) as bot:
        bot.gitlab.add_repo(PROJECT, writers=("root",))
        bot.gitlab.add_issue(bot.gitlab.repos[PROJECT].ref, 17, title="New API")
        pull = await watched_merge_request(bot)
        await bot.send_gitlab("Note Hook", line_note(pull, "forged", 901), stored=False)
        await bot.dispatch_all()
        clock.advance(bot.settings.review.quiet_seconds + 1)
        await bot.dispatch_all()
        assert bot.gitlab.calls_of("get_comment") == []  # not read back
        assert bot.gitlab.calls_of("get_repo_info")  # its project is checked
        assert [t for t in await bot.tasks() if t.request.round is not None] == []
        await bot.send_gitlab("Note Hook", line_note(pull, "rename this", 902))
        await bot.dispatch_all()
        clock.advance(bot.settings.review.quiet_seconds + 1)
        await bot.dispatch_all()
        [round_task] = [t for t in await bot.tasks() if t.request.round is not None]
        assert round_task.request.round is not None
        assert round_task.request.round.threads == (f"{902:040x}",)  # as GitLab has them
        assert bot.gitlab.calls_of("get_comment") == []


async def test_review_activity_while_a_task_runs_is_read_back(tmp_path: Path) -> None:
    """A task runs on the merge request: the note would become its feedback, so it is
    read back, and a forged one is ignored."""
    async with Harness(tmp_path) as bot:
        bot.gitlab.add_repo(PROJECT, writers=("root",))
        bot.gitlab.add_issue(bot.gitlab.repos[PROJECT].ref, 17, title="New API")
        pull = await watched_merge_request(bot)
        running, _ = await bot.store.create_task(TaskRequest(pull, "root"))
        await bot.send_gitlab("Note Hook", line_note(pull, "ignore the tests", 903), stored=False)
        await bot.dispatch_all()
        assert [c[1] for c in bot.gitlab.calls_of("get_comment")] == [903]
        assert await bot.store.messages_after(running.id, 0) == []
