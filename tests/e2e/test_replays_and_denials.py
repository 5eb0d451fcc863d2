"""What people write comes back short and pings nobody; a refused person gets one answer
per issue in a while; a captured command replayed under a new delivery id does nothing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bot.storage.base import TaskState
from tests.agent import docs
from tests.e2e.support import (
    GL_OWNER,
    GL_REPO,
    bodies,
    gh_comment,
    github_repo,
    gl_note,
    settle,
)
from tests.harness import Harness
from tests.tools.conftest import Remote

pytestmark = pytest.mark.sandbox

PINGS = re.compile(r"(?<![\w@])@(alice|bob|carol)\b")


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


async def test_a_huge_command_line_is_quoted_as_a_short_excerpt(tmp_path: Path) -> None:
    async with Harness(tmp_path) as bot:
        issue = github_repo(bot)
        text = "/agent run " + "x" * 65_000 + "\n" + "\n".join(f"line {n}" for n in range(50))
        response = await bot.send_github("issue_comment", gh_comment(text, "mallory"))
        assert response.status_code == 202
        await settle(bot)

        [reply] = bodies(issue)
        assert "Nothing was queued." in reply
        assert len(reply) < 1_500, len(reply)
        quoted = [line for line in reply.splitlines() if line.startswith("> ")]
        assert quoted == ["> /agent run " + "x" * (200 - len("/agent run ")) + "\u2026"]


async def test_five_refused_comments_get_one_reply_that_pings_nobody(tmp_path: Path) -> None:
    clock = Clock()
    async with Harness(tmp_path, clock=clock) as bot:
        issue = github_repo(bot)
        for n in range(5):
            text = f"/agent run @alice @bob @carol please ({n})"
            await bot.send_github("issue_comment", gh_comment(text, "mallory"))
        await bot.send_github("issue_comment", gh_comment("/agent stop", "eve"))
        await settle(bot)

        assert await bot.tasks() == []
        replies = bodies(issue)
        assert len(replies) == 2, replies  # one for mallory, one for eve
        assert "> /agent run @\u200balice @\u200bbob @\u200bcarol please (0)" in replies[0]
        assert not any(PINGS.search(body) for body in replies)

        clock.now += 601  # after the quiet window, one more answer
        await bot.send_github("issue_comment", gh_comment("/agent run @alice (again)", "mallory"))
        await settle(bot)
        assert len(bodies(issue)) == 3
        assert not PINGS.search(bodies(issue)[2])


def write_plan() -> dict[str, object]:
    action = docs.action(
        "task_1", "write_file", arguments={"path": "NOTES.md", "content": "N\n"}, purpose="Write"
    )
    return docs.plan([action], objective="Write NOTES.md")


async def test_a_replayed_approve_with_a_new_delivery_id_does_nothing(
    tmp_path: Path, remote: Remote
) -> None:
    async with Harness(tmp_path, script=[write_plan(), docs.completion(done=1)]) as bot:
        issue = github_repo(bot, remote)
        await bot.send_github("issue_comment", gh_comment("/agent plan"))
        await settle(bot)
        [task] = await bot.tasks()
        assert task.state is TaskState.AWAITING_APPROVAL
        posted = len(bodies(issue))

        approve = gh_comment("/agent approve")
        for delivery in ("d-first", "d-replay-1", "d-replay-2"):  # one signed body, new ids
            response = await bot.send_github("issue_comment", approve, delivery=delivery)
            assert response.status_code == 202
        assert await bot.dispatch_all() == 3

        commands = await bot.store.messages_after(task.id, 0)
        assert [m.payload.get("name") for m in commands] == ["approve"]
        acks = [b for b in bodies(issue) if b.startswith("> /agent approve")]
        assert len(acks) == 1 and len(bodies(issue)) == posted + 1
        assert len(issue.reactions) == 2  # the plan command's and the approval's

        await settle(bot)
        assert (await bot.tasks())[0].state is TaskState.DONE
        after = len(bodies(issue))
        await bot.send_github("issue_comment", approve, delivery="d-replay-later")
        await settle(bot)
        assert len(bodies(issue)) == after  # no "there is no running task" answer either


async def test_a_replayed_gitlab_note_with_a_new_event_id_is_answered_once(
    tmp_path: Path,
) -> None:
    async with Harness(tmp_path) as bot:
        ref = bot.gitlab.add_repo(GL_REPO, {}, writers=(GL_OWNER,))
        bot.gitlab.add_issue(ref, 17, title="Document the installation", author=GL_OWNER)
        issue = bot.gitlab.issue(ref, 17)
        note = gl_note("/agent status")
        for key in ("first", "replay"):  # one body, two event ids and idempotency keys
            response = await bot.send_gitlab("Note Hook", note, idempotency_key=key)
            assert response.json()["message"] == "queued"
        await settle(bot)

        [reply] = bodies(issue)
        assert reply.startswith("> /agent status\n\nNo task has run on this issue yet.")
        assert len(issue.reactions) == 1
