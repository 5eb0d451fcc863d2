"""Failures seen from the issue: reflection and revision comments, the revision limit and
`coding agent help needed`, `/agent retry` with the last attempt's history, secrets and
oversized text in what is posted."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.storage.base import TaskState
from tests.agent import docs
from tests.agent.conftest import script
from tests.e2e.support import (
    GH_BRANCH,
    OWNER,
    assert_no_duplicates,
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

BRANCH = GH_BRANCH
TOKEN = "ghp_" + "a1B2" * 9  # a GitHub token shape, not a configured secret


def missing(task_id: str, path: str) -> dict[str, object]:
    return docs.action(task_id, "github_get_file_contents", arguments={"path": path},
                       purpose=f"Read {path}")  # fmt: skip


def write_notes(task_id: str) -> dict[str, object]:
    return docs.action(task_id, "write_file", arguments={"path": "NOTES.md", "content": "n\n"},
                       purpose="Write NOTES.md")  # fmt: skip


async def test_a_failed_step_is_reflected_on_and_the_plan_revised(
    tmp_path: Path, remote: Remote
) -> None:
    reflect = docs.reflection(
        "task_1", revise=True, reason="CHANGES.md does not exist", updated=[write_notes("task_2")],
        issues=["the file is missing"],
    )  # fmt: skip
    run = [docs.plan([missing("task_1", "CHANGES.md")]), reflect, docs.completion(done=1)]
    async with Harness(tmp_path, script=run) as bot:
        issue = github_repo(bot, remote)
        await bot.send_github("issue_comment", gh_comment("/agent run"))
        await settle(bot)

        [task] = await bot.tasks()
        assert task.state is TaskState.DONE
        [reflection] = of_kind(issue, "reflection")
        assert reflection.startswith(
            "### 🤔 Reflection on a failed step\n**Step:** task_1 — **failure**\n\n"
            "task_1: failure\n\n**Problems found:**\n- the file is missing"
        )
        [revision] = of_kind(issue, "revision")
        assert revision.startswith(
            "### 🔁 Plan revised (1/3)\n**Why:** CHANGES.md does not exist\n\n- change the plan"
        )
        status = status_comment(issue)
        assert "Progress: **1/2** · Tokens:" in status and "· Revisions: 1" in status
        assert "- [ ] ❌ do task_1\n- [x] ✅ Write NOTES.md" in status
        assert [len(of_kind(issue, k)) for k in ("status", "completion")] == [1, 1]
        assert len(bodies(issue)) == 4
        assert remote.show(BRANCH, "NOTES.md") == b"n\n"


async def test_revision_limit_asks_for_help_and_retry_knows_the_last_attempt(
    tmp_path: Path, remote: Remote
) -> None:
    retry_plan = docs.plan([write_notes("task_1")], objective="Write the notes instead")
    run = [*script("three_revisions"), retry_plan, docs.completion(done=1)]
    async with Harness(tmp_path, script=run) as bot:
        issue = github_repo(bot, remote)
        await bot.send_github("issue_comment", gh_comment("/agent run"))
        await settle(bot)

        [first] = await bot.tasks()
        assert first.state is TaskState.NEEDS_HUMAN
        assert issue.labels == ["coding agent help needed"]
        revisions = of_kind(issue, "revision")
        assert [r.splitlines()[0] for r in revisions] == [
            "### 🔁 Plan revised (1/3)",
            "### 🔁 Plan revised (2/3)",
            "### 🔁 Plan revised (3/3)",
        ]
        assert len(of_kind(issue, "reflection")) == 4
        [help_request] = of_kind(issue, "human_intervention")
        assert help_request.startswith(
            "### 🆘 A person needs to take a look\n**Why I stopped:** the plan was revised 3 times"
        )
        assert "**What I tried:**\n- [task_1] github_get_file_contents(path=CHANGELOG.md)" in (
            help_request
        )
        assert "**Please check:**\n- Tell me the name of the changelog file" in help_request
        assert "When it is sorted out, reply `/agent retry`." in help_request
        assert status_comment(issue).startswith("### Coding agent — 🆘 Needs a person\n")

        await bot.send_github("issue_comment", gh_comment("/agent retry write notes instead"))
        await settle(bot)

        tasks = {t.id: t for t in await bot.tasks()}
        [second] = [t for t in tasks.values() if t.id != first.id]
        assert second.request.previous_task_id == first.id
        assert second.request.instructions == "write notes instead"
        assert second.state is TaskState.DONE
        assert issue.labels == ["coding agent done"]
        planning = bot.llm.requests[-2].messages[-1].content
        assert "This is a new attempt at a task that was tried before." in planning
        assert "- failed: github_get_file_contents(" in planning and "NEWS.md" in planning
        assert "- revision 3: try NEWS.md" in planning
        assert "It ended: requires_human_intervention, goal not achieved" in planning
        assert "recommended: Tell me the name of the changelog file" in planning
        # the new attempt has its own status comment; the old one stays as it was
        assert len(of_kind(issue, "status")) == 2
        assert_no_duplicates(issue)


async def test_secrets_are_redacted_and_long_text_is_cut_to_the_limit(
    tmp_path: Path, remote: Remote
) -> None:
    configured = "ghp_" + "T" * 36  # the bot's own GITHUB_TOKEN (tests/harness.py)
    evaluation = f"The config holds {TOKEN} and {configured}. " + "Details follow. " * 6000
    reflect = docs.reflection("task_1", revise=True, reason=f"leaked {TOKEN}",
                              updated=[write_notes("task_2")])  # fmt: skip
    reflect["reflection"]["evaluation"] = evaluation
    run = [docs.plan([missing("task_1", "secrets.env")]), reflect, docs.completion(done=1)]
    async with Harness(tmp_path, script=run) as bot:
        issue = github_repo(bot, remote)
        await bot.send_github("issue_comment", gh_comment(f"/agent run {TOKEN}"))
        await settle(bot)

        [task] = await bot.tasks()
        assert task.state is TaskState.DONE
        for body in bodies(issue):
            assert TOKEN not in body and configured not in body
            assert len(body) <= bot.settings.comments.max_length
        [reflection] = of_kind(issue, "reflection")
        assert "The config holds [REDACTED] and [REDACTED]." in reflection
        kept = bot.settings.data_dir / "runs" / task.id / "comments" / "reflection-1.md"
        assert "… (cut to fit; the full text is in the run report)" in reflection
        assert str(bot.settings.data_dir) not in reflection  # never a path on the bot's host
        assert kept.is_file()  # the whole text is kept in the run directory
        assert len(reflection) > 60_000 and reflection.count("Details follow.") < 6000
        full = kept.read_text()
        assert full.count("Details follow.") == 6000 and TOKEN not in full
        [revision] = of_kind(issue, "revision")
        assert "**Why:** leaked [REDACTED]" in revision
        assert OWNER in task.request.requested_by
