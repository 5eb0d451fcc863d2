"""The bot's own pull request after it was opened: its CI fails, one follow-up fixes it,
the checks pass, it is ready for review; or the failure is the base's too; or the fix
rounds run out and a person is asked, naming the checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.events import CheckState, RoundKind, TaskMode
from bot.followup.ci import ci_mark
from bot.storage.base import TaskState
from tests.agent import docs
from tests.e2e.after import (
    BUGGY,
    CI_LOG,
    FIXED,
    actions_check,
    attempt_script,
    bot_with_clock,
    check_run,
    check_suite,
    ended,
    fix_script,
    later,
    opened_pull_request,
    opening_script,
    project,
)
from tests.e2e.support import GH_BRANCH, GH_REPO, of_kind, settle, status_comment

pytestmark = pytest.mark.sandbox  # the quality gate and run_command run in bubblewrap


async def test_a_failed_check_gets_one_fix_round_then_green_and_ready(tmp_path: Path) -> None:
    remote = project(tmp_path)
    script = [*opening_script(), *fix_script()]
    bot = bot_with_clock(tmp_path, script, workspace={"ready_when_green": True})
    async with bot:
        change, first = await opened_pull_request(bot, remote)
        [opening] = await bot.tasks()
        assert opening.state is TaskState.DONE and change.draft

        # GitHub Actions runs the project's tests on the bot's head commit: one fails
        bot.github.set_checks(first, actions_check("test", CheckState.FAILED, 11))
        bot.github.logs["11"] = CI_LOG
        for _ in range(2):  # GitHub may deliver a check run twice, under two delivery ids
            await bot.send_github("check_run", check_run(first, change.number))
        await bot.send_github(
            "check_suite", check_suite(first, change.number, conclusion="failure")
        )
        assert await settle(bot) == []  # nothing decided while the checks may still change
        ran = await later(bot)

        [round_task] = ran
        assert round_task.request.mode is TaskMode.FOLLOW_UP
        assert round_task.request.round is not None
        assert round_task.request.round.kind is RoundKind.CI
        assert round_task.request.round.checks == ("test",)
        assert (await bot.store.get_task(round_task.id)).state is TaskState.DONE  # type: ignore[union-attr]
        planning = bot.llm.requests[2].messages[-1].content
        assert "CI fix round 1 of at most 3" in planning
        assert '<untrusted source="a failed CI check">\nCheck: test\n' in planning
        assert "FAILED tests/test_calc.sh::test_sub: sub 5 3 gave 8, expected 2" in planning
        second = remote.rev(GH_BRANCH)
        assert second != first
        assert remote.show(GH_BRANCH, "calc.sh").decode() == FIXED
        assert len(bot.github.repos[GH_REPO].change_requests) == 1  # the same pull request

        # the fix's head: every check passes
        bot.github.set_checks(second, actions_check("test", CheckState.PASSED, 12))
        await bot.send_github("check_suite", check_suite(second, change.number))
        assert await later(bot) == []  # no round for a green head

        assert bot.github.calls_of("mark_ready_for_review") == [(GH_REPO, change.number)]
        [pull] = bot.github.repos[GH_REPO].change_requests
        assert not pull.draft
        issue = bot.github.issue(bot.github.repos[GH_REPO].ref, 1)
        status = status_comment(issue)
        assert "Checks of `" + second[:7] + "`: ✅ test" in status
        assert "marked ready for review" in status
        assert "CI fix round 1 on `" + first[:7] + "`: ✅ Done" in status
        assert "With the rounds:" in status
        pull = bot.github.issue(bot.github.repos[GH_REPO].ref, change.number)
        [round_status] = of_kind(pull, "status")  # the round's own status comment says which
        assert f"CI fix round 1 on `{first[:7]}`: test" in round_status
        tasks = await bot.tasks()
        assert sorted(ended(tasks)) == [TaskState.DONE, TaskState.DONE]
        for sha in (first, second):  # one decision per head commit, kept by the store
            assert await bot.store.get_mark(ci_mark(f"github:{GH_REPO}", change.number, sha))


async def test_a_failure_the_base_shares_is_reported_and_nothing_is_pushed(
    tmp_path: Path,
) -> None:
    remote = project(tmp_path)
    async with bot_with_clock(tmp_path, opening_script()) as bot:
        change, head = await opened_pull_request(bot, remote)
        bot.github.set_checks(head, actions_check("test", CheckState.FAILED, 11))
        bot.github.set_checks(remote.rev("main"), actions_check("test", CheckState.FAILED, 9))
        await bot.send_github("check_run", check_run(head, change.number))
        assert await later(bot) == []

        assert remote.rev(GH_BRANCH) == head  # no commit
        assert [t.request.mode for t in await bot.tasks()] == [TaskMode.RUN]
        issue = bot.github.issue(bot.github.repos[GH_REPO].ref, 1)
        status = status_comment(issue)
        assert "Failing on the base branch (main) too: test" in status
        assert "no fix attempted" in status
        assert bot.github.calls_of("get_job_log") == []  # nothing to fix: no log read


async def test_three_failing_rounds_end_in_help_needed_naming_the_checks(tmp_path: Path) -> None:
    remote = project(tmp_path)
    script = [*opening_script(), *attempt_script(1), *attempt_script(2), *attempt_script(3)]
    async with bot_with_clock(tmp_path, script) as bot:
        change, head = await opened_pull_request(bot, remote)
        heads = [head]
        for run_id in (11, 12, 13, 14):
            bot.github.set_checks(
                heads[-1],
                actions_check("test", CheckState.FAILED, run_id),
                actions_check("lint", CheckState.PASSED, run_id + 100),
            )
            bot.github.logs[str(run_id)] = CI_LOG
            await bot.send_github("check_run", check_run(heads[-1], change.number, run_id=run_id))
            await later(bot)
            if remote.rev(GH_BRANCH) != heads[-1]:
                heads.append(remote.rev(GH_BRANCH))

        assert len(heads) == 4  # three rounds, three pushes, and no fourth round
        rounds = [t for t in await bot.tasks() if t.request.round is not None]
        assert [t.request.round.number for t in rounds] == [3, 2, 1]  # type: ignore[union-attr]
        pull = bot.github.issue(bot.github.repos[GH_REPO].ref, change.number)
        [help_needed] = of_kind(pull, "ci-help")
        assert "After 3 CI fix rounds these checks still fail on `" + heads[-1][:12] in help_needed
        assert "- test" in help_needed and "- lint" not in help_needed
        assert "coding agent help needed" in pull.labels
        issue = bot.github.issue(bot.github.repos[GH_REPO].ref, 1)
        assert "coding agent help needed" in issue.labels
        opening = [t for t in await bot.tasks() if t.request.round is None]
        assert ended(opening) == [TaskState.NEEDS_HUMAN]
        assert "Still failing after 3 CI fix rounds: test" in status_comment(issue)


def open_fix_script() -> list[object]:
    """Planning off: the opening task writes the buggy calc.sh and finishes; the fix round
    reproduces the failure (it fails, as it should), fixes sub, runs the test again."""
    test = {"argv": ["sh", "tests/test_calc.sh"]}
    return [
        docs.execution("open_loop", "write_file", {"path": "calc.sh", "content": BUGGY}),
        docs.execution("open_loop", "finish", {"summary": "calc.sh has add and sub"}),
        docs.completion(done=1),
        docs.execution("open_loop", "run_command", test),
        docs.execution("open_loop", "write_file", {"path": "calc.sh", "content": FIXED}),
        docs.execution("open_loop", "run_command", test),
        docs.execution("open_loop", "finish", {"summary": "sub subtracts"}),
        docs.completion(done=2, failed=1),
    ]


async def test_without_planning_a_failed_check_gets_a_fix_round_in_the_open_loop(
    tmp_path: Path,
) -> None:
    """``planning.enabled: false``: the CI fix round runs as an open tool loop, told what it
    answers (the round, the failed check's log, fenced) in every step's prompt, and its fix
    reaches the same pull request."""
    remote = project(tmp_path)
    overrides = {"planning": {"enabled": False}}
    async with bot_with_clock(tmp_path, open_fix_script(), **overrides) as bot:
        change, first = await opened_pull_request(bot, remote)
        bot.github.set_checks(first, actions_check("test", CheckState.FAILED, 11))
        bot.github.logs["11"] = CI_LOG
        await bot.send_github("check_run", check_run(first, change.number))
        [round_task] = await later(bot)

        assert round_task.request.round is not None
        assert round_task.request.round.kind is RoundKind.CI
        assert (await bot.store.get_task(round_task.id)).state is TaskState.DONE  # type: ignore[union-attr]
        phases = [r.phase for r in bot.llm.requests]
        assert "planning" not in phases
        assert phases[3:] == ["execution"] * 4 + ["completion"]
        for request in bot.llm.requests[3:7]:  # every step of the round is told what it answers
            prompt = request.messages[-1].content
            assert "without a plan" in prompt
            assert "CI fix round 1 of at most 3" in prompt
            assert '<untrusted source="a failed CI check">\nCheck: test\n' in prompt
            assert "FAILED tests/test_calc.sh::test_sub: sub 5 3 gave 8, expected 2" in prompt
        assert remote.show(GH_BRANCH, "calc.sh").decode() == FIXED
        assert len(bot.github.repos[GH_REPO].change_requests) == 1  # the same pull request
        pull = bot.github.issue(bot.github.repos[GH_REPO].ref, change.number)
        [round_status] = of_kind(pull, "status")
        assert f"CI fix round 1 on `{first[:7]}`: test" in round_status
