"""The base branch moves under the bot's pull request until it conflicts: the base is
merged in (never rebased), the agent resolves the conflict, the gate runs, the merge is
pushed, and the commit a person pushed to the bot's branch stays as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.events import RoundKind
from bot.storage.base import TaskState
from tests.agent import docs
from tests.e2e.after import (
    bot_with_clock,
    opened_pull_request,
    opening_script,
    project,
    push_as_person,
)
from tests.e2e.support import GH_BRANCH, GH_REPO, settle, status_comment
from tests.tools.conftest import git

pytestmark = pytest.mark.sandbox

ON_BRANCH = b"# Hello-World\n\nMy first repository, with calc.sh.\n"
ON_MAIN = b"# Hello-World\n\nMy first repository, now with a licence.\n"
RESOLVED = "# Hello-World\n\nMy first repository, with calc.sh, now with a licence.\n"


def resolution_script() -> list[object]:
    write = docs.action(
        "task_1",
        "write_file",
        purpose="Resolve the README conflict",
        arguments={"path": "README.md", "content": RESOLVED},
    )
    return [docs.plan([write], objective="Merge main into the branch"), docs.completion(done=1)]


def is_ancestor(bare: Path, old: str, new: str) -> bool:
    try:
        git("merge-base", "--is-ancestor", old, new, cwd=bare)
    except AssertionError:
        return False
    return True


async def test_a_conflicting_base_is_merged_resolved_gated_and_pushed(tmp_path: Path) -> None:
    remote = project(tmp_path)
    async with bot_with_clock(tmp_path, [*opening_script(), *resolution_script()]) as bot:
        _change, opened = await opened_pull_request(bot, remote)
        persons = push_as_person(
            remote, tmp_path, GH_BRANCH, {"README.md": ON_BRANCH}, "README: mention calc.sh"
        )
        moved = push_as_person(remote, tmp_path, "main", {"README.md": ON_MAIN}, "Licence")

        await bot.worker.maintain()  # the poll: no event tells of a base that moved
        ran = await settle(bot)

        [merge_round] = ran
        assert merge_round.request.round is not None
        assert merge_round.request.round.kind is RoundKind.BASE
        assert (await bot.store.get_task(merge_round.id)).state is TaskState.DONE  # type: ignore[union-attr]
        planning = bot.llm.requests[2].messages[-1].content
        assert "It conflicts with its base branch main." in planning
        assert "git left conflicts in: README.md" in planning

        head = remote.rev(GH_BRANCH)
        parents = git("rev-list", "--parents", "-n", "1", head, cwd=remote.bare).split()[1:]
        assert parents == [persons, moved]  # a merge commit: the branch's head, then main's
        for kept in (opened, persons, moved):  # nothing rewritten, nothing forced over
            assert is_ancestor(remote.bare, kept, head)
        assert remote.show(GH_BRANCH, "README.md").decode() == RESOLVED
        assert "<<<<<<<" not in remote.show(GH_BRANCH, "README.md").decode()
        history = bot.settings.data_dir / "planning_history" / f"{merge_round.id}.jsonl"
        gate_runs = [
            line for line in history.read_text().splitlines() if '"type": "quality"' in line
        ]
        assert len(gate_runs) == 1 and '"passed": true' in gate_runs[0]  # the gate ran again

        issue = bot.github.issue(bot.github.repos[GH_REPO].ref, 1)
        status = status_comment(issue)
        assert "Merge of the base, round 1 on `" + persons[:7] + "`: ✅ Done" in status

        bot.clock.advance(bot.settings.ci.poll_seconds + 1)  # type: ignore[attr-defined]
        await bot.worker.maintain()  # merged: the next look finds nothing to do
        assert await settle(bot) == []
