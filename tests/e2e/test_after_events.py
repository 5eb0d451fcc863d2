"""One decision per head commit, whatever the events: in any order, twice, late, or not
at all (the poll), through the real app and worker; a check still running is shown,
not decided; ``/agent autofix off`` reports a failure instead of fixing it."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from bot.change_state import Mergeable
from bot.config import RevisionSettings
from bot.events import CheckState, IssueRef, RoundKind, TaskRequest
from bot.followup.ci import ci_mark
from bot.followup.record import ChangeRecord
from bot.run_events import Outcome
from bot.storage.base import TaskState, Watch
from bot.worker import dispatcher
from tests.e2e.after import (
    PROJECT,
    SETTLE,
    actions_check,
    bot_with_clock,
    check_run,
    check_suite,
    on_the_pull_request,
)
from tests.e2e.support import GH_BRANCH, GH_REPO, OWNER, gh_comment, of_kind, status_comment
from tests.harness import Harness, fixture

HEAD = "a" * 40
REPO_KEY = f"github:{GH_REPO}"


async def watched_pull_request(bot: Harness, *, gate: bool = True) -> Any:
    """The bot's draft pull request #100 from issue #1, watched since its task ended (the
    bot's gate passed on ``HEAD`` when ``gate``)."""
    repo = bot.github.add_repo(GH_REPO, dict(PROJECT), writers=(OWNER,))
    bot.github.add_issue(repo, 1, title="Add calc.sh", author=OWNER)
    issue = IssueRef(repo, 1, title="Add calc.sh")
    task, _ = await bot.store.create_task(TaskRequest(issue, OWNER))
    await bot.store.set_state(task.id, TaskState.DONE)
    change = await bot.github.open_change_request(
        repo, head=GH_BRANCH, base="main", title="Add calc.sh (#1)", body="", draft=True
    )
    fake = bot.github.change(repo, change.number)
    fake.head_sha, fake.base_sha, fake.mergeable, fake.commits = (
        HEAD,
        "b" * 40,
        Mergeable.MERGEABLE,
        [],
    )
    pull = IssueRef(
        repo,
        change.number,
        is_change_request=True,
        web_url=change.web_url,
        author="coding-agent[bot]",
        head_branch=GH_BRANCH,
        head_repo=GH_REPO,
    )
    record = ChangeRecord(head_sha=HEAD, gate_sha=HEAD if gate else "")
    await bot.store.add_watch(
        Watch(pull.key, repo.key, GH_BRANCH, task.id, pull, data=record.to_dict())
    )
    return change


def events(number: int) -> dict[str, tuple[str, dict[str, Any]]]:
    return {
        "queued": ("check_run", check_run(HEAD, number, conclusion=None, status="queued")),
        "passed": ("check_run", check_run(HEAD, number, conclusion="success")),
        "lint": (
            "check_run",
            check_run(HEAD, number, name="lint", conclusion="success", run_id=12),
        ),
        "suite": ("check_suite", check_suite(HEAD, number)),
    }


ORDERS = [
    ["queued", "passed", "lint", "suite"],
    ["suite", "lint", "passed", "queued"],  # the queued report arrives last of all
    ["passed", "passed", "suite", "suite"],  # twice each, under new delivery ids
]


@pytest.mark.parametrize("order", ORDERS, ids=["in-order", "reversed", "twice"])
async def test_events_in_any_order_or_twice_make_one_decision(
    tmp_path: Path, order: list[str]
) -> None:
    bot = bot_with_clock(tmp_path, [], workspace={"ready_when_green": True})
    async with bot:
        change = await watched_pull_request(bot)
        bot.github.set_checks(
            HEAD,
            actions_check("test", CheckState.PASSED, 11),
            actions_check("lint", CheckState.PASSED, 12),
        )
        sent = events(change.number)
        for name in order:
            await bot.send_github(*sent[name])
            await bot.dispatch_all()
            bot.clock.advance(5)  # type: ignore[attr-defined]
        assert bot.github.calls_of("get_commit_checks") == []  # the burst is still coming
        bot.clock.advance(SETTLE)  # type: ignore[attr-defined]
        await bot.dispatch_all()
        for name in order:  # the same again, late: the decision was taken
            await bot.send_github(*sent[name])
        await bot.dispatch_all()
        bot.clock.advance(SETTLE + 1)  # type: ignore[attr-defined]
        await bot.dispatch_all()

        assert bot.github.calls_of("mark_ready_for_review") == [(GH_REPO, change.number)]
        assert len(bot.github.calls_of("get_commit_checks")) == 1  # one look, by the last
        assert await bot.store.get_mark(ci_mark(REPO_KEY, change.number, HEAD)) is not None
        assert await bot.store.pending_events() == 0


async def test_ci_results_and_a_push_reach_the_aftercare_as_the_app_classified_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CI results and a push on the bot's branch are classified once, by the app, whoever
    caused them (the bot's own push too); the dispatcher hands them to the aftercare from
    the intent kept with the inbox row, and never classifies them again."""

    def classified_again(*args: object) -> None:
        raise AssertionError("the dispatcher classified an event the app had classified")

    monkeypatch.setattr(dispatcher, "classify", classified_again)
    async with bot_with_clock(tmp_path, []) as bot:
        change = await watched_pull_request(bot)
        pushed = "c" * 40
        sync = on_the_pull_request(fixture("github", "pull_request.synchronize.json"), change)
        sync.update(before=HEAD, after=pushed)
        sync["pull_request"]["head"]["sha"] = pushed
        sync["sender"].update(login="coding-agent[bot]", type="Bot")
        await bot.send_github("pull_request", sync)
        await bot.dispatch_all()
        watch = await bot.store.get_watch(f"{REPO_KEY}#cr/{change.number}")
        assert watch is not None and ChangeRecord.from_dict(watch.data).head_sha == pushed

        fake = bot.github.change(bot.github.repos[GH_REPO].ref, change.number)
        fake.head_sha = pushed
        bot.github.set_checks(pushed, actions_check("test", CheckState.FAILED, 11))
        bot.github.logs["11"] = "FAILED test_sub\n"
        await bot.send_github("check_run", check_run(pushed, change.number))
        await bot.dispatch_all()
        bot.clock.advance(SETTLE + 1)  # type: ignore[attr-defined]
        await bot.dispatch_all()

        [found] = [t.request.round for t in await bot.tasks() if t.request.round is not None]
        assert found.kind is RoundKind.CI and found.head_sha == pushed
        assert await bot.store.pending_events() == 0


async def test_a_failure_in_any_order_starts_exactly_one_round(tmp_path: Path) -> None:
    async with bot_with_clock(tmp_path, []) as bot:
        change = await watched_pull_request(bot)
        bot.github.set_checks(HEAD, actions_check("test", CheckState.FAILED, 11))
        bot.github.logs["11"] = "FAILED test_sub\n"
        failed = ("check_run", check_run(HEAD, change.number))
        suite = ("check_suite", check_suite(HEAD, change.number, conclusion="failure"))
        for sent in itertools.islice(itertools.cycle([failed, suite]), 5):
            await bot.send_github(*sent)
        await bot.dispatch_all()
        bot.clock.advance(SETTLE + 1)  # type: ignore[attr-defined]
        await bot.dispatch_all()
        await bot.worker.maintain()  # and the poll looks too
        await bot.dispatch_all()

        rounds = [t for t in await bot.tasks() if t.request.round is not None]
        assert len(rounds) == 1 and rounds[0].request.round is not None
        assert rounds[0].request.round.kind is RoundKind.CI
        assert rounds[0].state is TaskState.QUEUED  # not run here: counted
        assert bot.github.calls_of("get_job_log") == [(GH_REPO, "11", 65536)]


async def test_without_any_event_the_poll_decides_once(tmp_path: Path) -> None:
    bot = bot_with_clock(tmp_path, [], workspace={"ready_when_green": True})
    async with bot:
        change = await watched_pull_request(bot)
        bot.github.set_checks(HEAD, actions_check("test", CheckState.PASSED, 11))
        for _ in range(3):  # every ci.poll_seconds, the deliveries all lost
            await bot.worker.maintain()
            await bot.dispatch_all()
            bot.clock.advance(bot.settings.ci.poll_seconds + 1)  # type: ignore[attr-defined]
        assert bot.github.calls_of("mark_ready_for_review") == [(GH_REPO, change.number)]
        assert len(bot.github.calls_of("get_change_request_state")) == 3  # a look each time
        assert len(bot.github.calls_of("get_commit_checks")) == 1  # its checks: once
        issue = bot.github.issue(bot.github.repos[GH_REPO].ref, 1)
        assert "marked ready for review" in status_comment(issue)


async def test_checks_still_running_are_shown_and_decided_when_they_end(tmp_path: Path) -> None:
    async with bot_with_clock(tmp_path, []) as bot:
        change = await watched_pull_request(bot, gate=False)
        bot.github.set_checks(
            HEAD,
            actions_check("lint", CheckState.PASSED, 12),
            actions_check("test", CheckState.RUNNING, 11),
        )
        await bot.send_github(
            "check_run",
            check_run(HEAD, change.number, name="lint", conclusion="success", run_id=12),
        )
        await bot.dispatch_all()
        bot.clock.advance(SETTLE + 1)  # type: ignore[attr-defined]
        await bot.dispatch_all()
        issue = bot.github.issue(bot.github.repos[GH_REPO].ref, 1)
        status = status_comment(issue)
        assert "Checks of `aaaaaaa`: ✅ lint · 🔄 test" in status
        assert "⏳ Checks are running." in status
        assert await bot.store.get_mark(ci_mark(REPO_KEY, change.number, HEAD)) is None

        bot.github.set_checks(
            HEAD,
            actions_check("lint", CheckState.PASSED, 12),
            actions_check("test", CheckState.PASSED, 11),
        )
        await bot.send_github("check_run", check_run(HEAD, change.number, conclusion="success"))
        await bot.dispatch_all()
        bot.clock.advance(SETTLE + 1)  # type: ignore[attr-defined]
        await bot.dispatch_all()
        status = status_comment(issue)
        assert "Checks of `aaaaaaa`: ✅ lint · ✅ test" in status
        assert "✅ Every check passed." in status  # the bot's gate did not pass here: not ready
        assert bot.github.calls_of("mark_ready_for_review") == []


async def test_autofix_off_reports_a_failure_and_starts_no_round(tmp_path: Path) -> None:
    async with bot_with_clock(tmp_path, []) as bot:
        change = await watched_pull_request(bot)
        off = gh_comment("/agent autofix off")
        off["issue"].update(number=change.number, pull_request={"url": change.web_url})
        await bot.send_github("issue_comment", off)
        await bot.dispatch_all()
        pull = bot.github.issue(bot.github.repos[GH_REPO].ref, change.number)
        assert any("CI fix rounds are off for this change request" in c.body for c in pull.comments)

        bot.github.set_checks(HEAD, actions_check("test", CheckState.FAILED, 11))
        await bot.send_github("check_run", check_run(HEAD, change.number))
        await bot.dispatch_all()
        bot.clock.advance(SETTLE + 1)  # type: ignore[attr-defined]
        await bot.dispatch_all()

        assert [t.request.round for t in await bot.tasks()] == [None]  # no round
        issue = bot.github.issue(bot.github.repos[GH_REPO].ref, 1)
        assert "CI fix rounds are off here; `/agent autofix on` turns them on." in (
            status_comment(issue)
        )


async def test_a_decision_that_waited_for_a_running_task_is_taken_when_it_ends(
    tmp_path: Path,
) -> None:
    async with bot_with_clock(tmp_path, []) as bot:
        change = await watched_pull_request(bot)
        repo = bot.github.repos[GH_REPO].ref
        pull = IssueRef(
            repo,
            change.number,
            is_change_request=True,
            head_branch=GH_BRANCH,
            head_repo=GH_REPO,
            author="coding-agent[bot]",
        )
        running, _ = await bot.store.create_task(TaskRequest(pull, OWNER))  # e.g. a mention's
        bot.github.set_checks(HEAD, actions_check("test", CheckState.FAILED, 11))
        await bot.send_github("check_run", check_run(HEAD, change.number))
        await bot.dispatch_all()
        bot.clock.advance(SETTLE + 1)  # type: ignore[attr-defined]
        await bot.dispatch_all()
        assert await bot.store.get_mark(ci_mark(REPO_KEY, change.number, HEAD)) is None  # waits

        # the task ends without a push (what the worker hands the aftercare after any task)
        await bot.store.set_state(running.id, TaskState.DONE)
        ended_task = await bot.store.get_task(running.id)
        assert ended_task is not None
        await bot.worker.aftercare.task_ended(ended_task, Outcome(TaskState.DONE))
        await bot.dispatch_all()
        rounds = [t for t in await bot.tasks() if t.request.round is not None]
        assert len(rounds) == 1 and rounds[0].request.round is not None
        assert rounds[0].request.round.kind is RoundKind.CI


async def test_a_check_waiting_for_a_person_is_reported_not_fixed(tmp_path: Path) -> None:
    async with bot_with_clock(tmp_path, []) as bot:
        change = await watched_pull_request(bot)
        waiting = actions_check("deploy", CheckState.WAITING, 13, conclusion="action_required")
        bot.github.set_checks(HEAD, actions_check("test", CheckState.PASSED, 11), waiting)
        await bot.send_github(
            "check_run",
            check_run(HEAD, change.number, name="deploy", conclusion="action_required", run_id=13),
        )
        await bot.dispatch_all()
        bot.clock.advance(SETTLE + 1)  # type: ignore[attr-defined]
        await bot.dispatch_all()
        assert [t.request.round for t in await bot.tasks()] == [None]
        issue = bot.github.issue(bot.github.repos[GH_REPO].ref, 1)
        assert "✋ Waiting for a person: deploy" in status_comment(issue)
        assert bot.github.calls_of("get_job_log") == []


async def test_the_fix_rounds_count_against_the_tasks_revision_limit(tmp_path: Path) -> None:
    """The task that opened the change request used its revisions: the first failure asks
    a person at once, naming the check."""
    bot = bot_with_clock(tmp_path, [])
    bot.settings = bot.runtime.settings = bot.settings.model_copy(
        update={
            "planning": bot.settings.planning.model_copy(
                update={"revision": RevisionSettings(max_revisions=2)}
            )
        }
    )
    async with bot:
        change = await watched_pull_request(bot)
        [opening] = await bot.tasks()
        await bot.store.save_checkpoint(opening.id, {"revisions": 2})
        bot.github.set_checks(HEAD, actions_check("test", CheckState.FAILED, 11))
        await bot.send_github("check_run", check_run(HEAD, change.number))
        await bot.dispatch_all()
        bot.clock.advance(SETTLE + 1)  # type: ignore[attr-defined]
        await bot.dispatch_all()

        assert [t.request.round for t in await bot.tasks()] == [None]  # no round
        pull = bot.github.issue(bot.github.repos[GH_REPO].ref, change.number)
        [asked] = of_kind(pull, "ci-help")
        assert "These checks fail, and no CI fix round is left (the task used its" in asked
        assert "- test" in asked
        assert "coding agent help needed" in pull.labels
        stored = await bot.store.get_task(opening.id)
        assert stored is not None and stored.state is TaskState.NEEDS_HUMAN
