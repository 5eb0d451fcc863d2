"""A labelled GitHub issue becomes a pushed branch and a pull request, seen from the issue."""

from __future__ import annotations

import asyncio
import itertools
import re
import time
from pathlib import Path

import pytest

from bot.config import RevisionSettings
from bot.events import IssueRef
from bot.storage.base import TaskState
from tests.agent import docs
from tests.e2e.support import (
    GH_BRANCH,
    GH_REPO,
    SteeredLLM,
    assert_no_duplicates,
    bodies,
    gh_labeled,
    github_repo,
    of_kind,
    settle,
    status_comment,
    status_edits,
    use_llm,
    wait_until,
)
from tests.harness import Harness
from tests.tools.conftest import Remote

pytestmark = pytest.mark.sandbox  # the quality gate runs `make lint` in bubblewrap

BRANCH = GH_BRANCH
NEW_README = "# Hello-World\n\nMy first repository.\n\n## Installation\n\n    make install\n"
# the labels this task needed, created when first needed (not all seven up front)
NEEDED = ["coding agent processing", "coding agent done"]


def subtask(task_id: str, description: str, tool: str, *after: str) -> dict[str, object]:
    return {
        "id": task_id,
        "description": description,
        "dependencies": list(after),
        "estimated_complexity": "low",
        "required_tools": [tool],
    }


def readme_script() -> list[object]:
    plan = docs.plan(
        [
            docs.action("task_1", "read_file", arguments={"path": "README.md"}, expected="text"),
            docs.action("task_2", "write_file", purpose="Add an Installation section"),
        ],
        dependencies={"task_2": ["task_1"]},
        subtasks=[
            subtask("task_1", "Read README.md", "read_file"),
            subtask("task_2", "Add an Installation section", "write_file", "task_1"),
        ],
    )
    write = docs.execution("task_2", "write_file", {"path": "README.md", "content": NEW_README})
    return [plan, write, docs.completion()]


async def test_labelled_issue_ends_in_a_pushed_branch_and_a_pull_request(
    tmp_path: Path, remote: Remote
) -> None:
    async with Harness(tmp_path, script=readme_script()) as bot:
        issue = github_repo(bot, remote, labels=("bug", "coding agent"))
        response = await bot.send_github("issues", gh_labeled())
        assert response.status_code == 202 and response.json()["message"] == "queued"

        await settle(bot)

        [task] = await bot.tasks()
        assert task.state is TaskState.DONE
        assert issue.reactions == [(None, "eyes")]
        # missing labels were created as needed; only the bot's labels moved, "bug" stayed
        assert [args[1] for args in bot.github.calls_of("ensure_label")] == NEEDED
        assert issue.labels == ["bug", "coding agent done"]
        assert ("remove_label", (1, "coding agent")) in bot.github.calls
        assert bot.github.calls_of("add_labels") == [
            (1, ("coding agent processing",)),
            (1, ("coding agent done",)),
        ]
        # the branch is on the remote, the default branch is untouched
        assert remote.show(BRANCH, "README.md").decode() == NEW_README
        assert remote.show("main", "README.md") == b"# Hello-World\n\nMy first repository.\n"
        [change] = bot.github.repos[GH_REPO].change_requests
        assert (change.head_branch, change.base_branch, change.draft) == (BRANCH, "main", True)
        title, body = bot.github.repos[GH_REPO].change_request_bodies[change.number]
        assert title == "Spelling error in the README file (#1)"
        assert body.startswith("Closes #1 (https://github.com/Codertocat/Hello-World/issues/1)")
        assert "- [x] Read README.md\n- [x] Add an Installation section" in body
        assert "**Quality gate:** passed" in body

        # exactly two comments: the status comment and the completion summary
        assert len(bodies(issue)) == 2
        status = status_comment(issue)
        checkpoint = await bot.store.load_checkpoint(task.id)
        assert checkpoint is not None
        tokens = checkpoint["usage"]["prompt_tokens"] + checkpoint["usage"]["completion_tokens"]
        report = bot.settings.data_dir / "runs" / task.id / "report.md"
        assert status.startswith("### Coding agent — ✅ Done\n")
        assert f"Progress: **2/2** · Tokens: {tokens:,}" in status
        assert "- [x] ✅ Read README.md\n- [x] ✅ Add an Installation section" in status
        links = f"Branch: `{BRANCH}` · Change request: {change.web_url}"
        assert links + "\n" in status and str(report) not in status
        assert "**Quality gate:** ✅ passed\n- lint `make lint`: passed" in status
        assert '<details><summary>Plan (JSON)</summary>\n\n```json\n{\n  "goal_understanding"' in (
            status
        )
        assert "Waiting on you" not in status
        assert status.endswith(f"<!-- coding-agent:task={task.id} kind=status seq=0 -->")
        [done] = of_kind(issue, "completion")
        assert done.startswith("### ✅ Done\nSubtasks completed: **2**, failed: **0**.")
        assert "**Key outcomes:**\n- README.md updated" in done and links in done
        assert "**Success criteria and their evidence:**\n- " in done
        assert "<details><summary>Run report</summary>" in done and str(report) not in done
        assert report.is_file() and "goal achieved" in report.read_text()
        assert_no_duplicates(issue)


def busy_script(reads: int) -> list[object]:
    """Reads whose arguments the model gives one by one (so each read waits for it)."""
    actions = [
        docs.action(f"task_{n}", "read_file", purpose=f"Read {n}", expected="text")
        for n in range(1, reads + 1)
    ]
    calls = [
        docs.execution(f"task_{n}", "read_file", {"path": "README.md"}) for n in range(1, reads + 1)
    ]
    return [docs.plan(actions), *calls, docs.completion(done=reads)]


@pytest.mark.parametrize(("interval", "exactly"), [(3.0, 1), (0.0, None)])
async def test_status_edits_are_coalesced_by_edit_interval(
    tmp_path: Path, remote: Remote, interval: float, exactly: int | None
) -> None:
    async def thinking() -> None:
        # Each read waits 50 ms for the model: longer than a status edit takes here (a read
        # alone, in an offload worker, takes about 2 ms: six could end before one edit).
        await asyncio.sleep(0.05)

    overrides = {"comments": {"edit_interval": interval}}
    async with Harness(tmp_path, overrides=overrides) as bot:
        use_llm(bot, SteeredLLM(busy_script(6), before={n: thinking for n in range(2, 8)}))
        issue = github_repo(bot, remote)
        await bot.send_github("issues", gh_labeled())
        await settle(bot)
        [task] = await bot.tasks()
        assert task.state is TaskState.DONE
        edits = status_edits(bot.github, issue)
        if exactly is not None:
            assert edits == exactly  # quick actions: only the final state is written
        else:
            # No interval: an edit goes out as soon as the one before it is written, so
            # the issue shows the run's progress as it happens, not only its end (how
            # many events each edit takes in depends on how fast the writes are).
            progress = {
                int(found[1])
                for _, body in bot.github.edits
                if (found := re.search(r"Progress: \*\*(\d)/6\*\*", body))
            }
            assert edits >= 3 and progress & {1, 2, 3, 4, 5}, (edits, progress)
        assert "Progress: **6/6**" in status_comment(issue)
        assert len(of_kind(issue, "completion")) == 1


async def test_status_edits_of_a_slow_task_keep_the_interval(
    tmp_path: Path, remote: Remote, monkeypatch: pytest.MonkeyPatch
) -> None:
    interval = 0.3
    writes = [docs.action(f"task_{n}", "write_file", purpose=f"Write {n}.txt") for n in range(1, 5)]
    calls = [
        docs.execution(f"task_{n}", "write_file", {"path": f"{n}.txt", "content": f"{n}\n"})
        for n in range(1, 5)
    ]
    script = [docs.plan(writes), *calls, docs.completion(done=4)]

    async def slow() -> None:
        await asyncio.sleep(0.2)  # the model takes its time

    overrides = {"comments": {"edit_interval": interval}}
    async with Harness(tmp_path, overrides=overrides) as bot:
        use_llm(bot, SteeredLLM(script, before={n: slow for n in range(1, 7)}))
        issue = github_repo(bot, remote)
        edited_at: list[float] = []
        edit = bot.github.edit_comment

        async def timed(issue_ref: IssueRef, comment_id: int, body: str) -> None:
            if "kind=status" in body:
                edited_at.append(time.monotonic())
            await edit(issue_ref, comment_id, body)

        monkeypatch.setattr(bot.github, "edit_comment", timed)
        await bot.send_github("issues", gh_labeled())
        await settle(bot)

        assert (await bot.tasks())[0].state is TaskState.DONE
        gaps = [b - a for a, b in itertools.pairwise(edited_at[:-1])]  # the last: the end
        assert len(edited_at) >= 3, edited_at
        assert min(gaps) >= interval - 0.02, gaps
        assert "Progress: **4/4**" in status_comment(issue)


async def test_a_live_worker_reacts_within_a_second_and_finishes(
    tmp_path: Path, remote: Remote
) -> None:
    async with Harness(tmp_path, script=readme_script()) as bot:
        issue = github_repo(bot, remote)
        await bot.worker.start()

        async def reacted() -> bool:
            return bool(issue.reactions)

        async def finished() -> bool:
            tasks = await bot.tasks()
            return bool(tasks) and tasks[0].state is TaskState.DONE

        try:
            assert (await bot.send_github("issues", gh_labeled())).status_code == 202
            assert await wait_until(reacted, 1.0), "no eyes reaction within a second"
            assert issue.reactions == [(None, "eyes")]
            assert await wait_until(finished, 30.0)
        finally:
            await bot.worker.stop()
        [task] = await bot.tasks()
        assert task.state is TaskState.DONE
        assert "coding agent done" in issue.labels


def false_claim_script() -> list[object]:
    """Both actions fail (invalid arguments); the model then claims success anyway."""
    plan = docs.plan(
        [
            docs.action("task_1", "read_file", arguments={"path": 42}, expected="text"),
            docs.action("task_2", "write_file", arguments={"path": "README.md"}),
        ],
        subtasks=[
            subtask("task_1", "Read README.md", "read_file"),
            subtask("task_2", "Add an Installation section", "write_file"),
        ],
    )
    bad_read = docs.execution("task_1", "read_file", {"path": 42})
    bad_write = docs.execution("task_2", "write_file", {"path": "README.md"})
    claim = docs.completion(achieved=True, done=2)
    return [
        plan,
        bad_read,
        docs.reflection("task_1"),
        bad_write,
        docs.reflection("task_2"),
        claim,
    ]


async def test_a_model_that_claims_success_while_its_actions_failed_is_never_done(
    tmp_path: Path, remote: Remote
) -> None:
    no_revisions = {"revision": RevisionSettings(max_revisions=0)}
    async with Harness(
        tmp_path, script=false_claim_script(), overrides={"planning": no_revisions}
    ) as bot:
        issue = github_repo(bot, remote, labels=("coding agent",))
        await bot.send_github("issues", gh_labeled())

        await settle(bot)

        [task] = await bot.tasks()
        assert task.state is TaskState.NEEDS_HUMAN
        assert "coding agent done" not in issue.labels
        assert "coding agent help needed" in issue.labels
        assert ("add_labels", (1, ("coding agent done",))) not in bot.github.calls
        assert not of_kind(issue, "completion")
        assert "✅ Done" not in "\n".join(bodies(issue))
        [help_needed] = of_kind(issue, "human_intervention")
        assert "the record does not show the goal achieved" in help_needed
        assert "[task_1] read_file failed" in help_needed
        assert "[task_2] write_file failed" in help_needed
        assert "<details><summary>Run report</summary>" in help_needed
        assert str(bot.settings.data_dir) not in "\n".join(bodies(issue))  # no host path


async def test_with_a_public_url_comments_link_the_run_report(
    tmp_path: Path, remote: Remote
) -> None:
    public = {"public_url": "https://bot.example.com/"}
    async with Harness(tmp_path, script=readme_script(), overrides={"server": public}) as bot:
        issue = github_repo(bot, remote, labels=("coding agent",))
        await bot.send_github("issues", gh_labeled())

        await settle(bot)

        [task] = await bot.tasks()
        link = f"[Run report](https://bot.example.com/dashboard/tasks/{task.id})"
        assert link in status_comment(issue)
        [done] = of_kind(issue, "completion")
        assert link in done and str(bot.settings.data_dir) not in done


async def test_a_wrong_fix_fails_the_gate_through_the_fix_rounds_and_asks_for_help(
    tmp_path: Path, remote: Remote
) -> None:
    wrong = "# Greetings\n\nMy first repository.\n"  # `make lint` wants Hello-World in it
    plan = docs.plan(
        [docs.action("task_1", "write_file", arguments={"path": "README.md", "content": wrong})],
        subtasks=[subtask("task_1", "Rewrite README.md", "write_file")],
    )
    arguments = {"path": "README.md", "content": wrong + "More.\n"}
    still_wrong = docs.execution("quality_gate", "write_file", arguments)
    ready = docs.execution("quality_gate", "run_quality_gate", {})
    script = [plan, still_wrong, ready, ready, ready, docs.completion(achieved=True, done=1)]
    no_revisions = {"revision": RevisionSettings(max_revisions=0)}
    async with Harness(tmp_path, script=script, overrides={"planning": no_revisions}) as bot:
        issue = github_repo(bot, remote, labels=("coding agent",))
        await bot.send_github("issues", gh_labeled())

        await settle(bot)

        [task] = await bot.tasks()
        assert task.state is TaskState.NEEDS_HUMAN
        assert "coding agent help needed" in issue.labels
        # the work is on the branch, in the change request with the gate's steps
        assert remote.show(BRANCH, "README.md").decode() == wrong + "More.\n"
        [change] = bot.github.repos[GH_REPO].change_requests
        _title, body = bot.github.repos[GH_REPO].change_request_bodies[change.number]
        assert "**Quality gate:** failed" in body and "- lint `make lint`: failed" in body
        status = status_comment(issue)
        assert "**Quality gate:** ❌ failed\n- lint `make lint`: failed" in status
        [help_needed] = of_kind(issue, "human_intervention")
        assert "the quality gate failed: Lint failed" in help_needed
        assert f"The work so far: Branch: `{BRANCH}` · Change request: {change.web_url}" in (
            help_needed
        )
        assert "<details><summary>Run report</summary>" in help_needed
        assert "## Quality gate\n\nResult: **failed**" in help_needed
        assert str(bot.settings.data_dir) not in "\n".join(bodies(issue))
