"""After the change request: the bot's own change requests, from opening to ready to merge.

The dispatcher hands this the events about a change request the bot opened (CI results,
pushes, review activity, ``/agent autofix``); the worker hands it every task that ended
(a task that opened a change request starts its watch; a round's figures, push and
answers go into its record); maintenance asks it to poll. Each event waits its turn:
a burst of events (five check runs, a review's comments, GitLab notes) is ONE piece of
work, done by the burst's last event once ``ci.settle_seconds`` (or
``review.quiet_seconds``) passed without another (the inbox keeps it waiting: the event
is given back with that delay), so any order, any number, or none of them (the poll)
comes to one decision per head commit (``ci_rounds.py``) and one review round per burst
(``review_rounds.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import msgspec.structs

from bot.config import CurrentSettings, Settings
from bot.events import (
    Actor,
    ChecksReport,
    EventKind,
    ForgeEvent,
    IssueRef,
    TaskState,
)
from bot.followup.record import ChangeRecord
from bot.forges.base import ForgeLookup
from bot.record.snapshot import status_snapshot
from bot.run_events import Outcome
from bot.storage.base import ACTIVE_STATES, InboxEvent, Task, Watch
from bot.triggers import ReplyKind
from bot.worker.ci_rounds import CiRounds, change_mark
from bot.worker.permissions import PermissionCache
from bot.worker.review_rounds import ReviewRounds
from bot.worker.round_desk import AftercareStore, RoundDesk
from bot.worker.watchbook import change_record, watch_delivered

log = logging.getLogger("bot.worker")

POLL_EVENT = "poll"  # the name of the inbox items the CI poll queues
POLL_MARK = "ci-poll"  # when the last poll went out (one worker polls per period)


def activity_mark(key: str) -> str:
    """When the review activity on change request ``key`` was last seen, by which item."""
    return f"review-activity:{key}"


def _newer(owner: str, item_id: int) -> bool:
    try:
        return int(owner) > item_id
    except ValueError:
        return False


def poll_event(watch: Watch, head_sha: str, *, review: bool = False) -> ForgeEvent:
    """The inbox item the bot queues itself for one open change request: a look at its
    head's checks (the poll: the head is read again when it runs), or (``review``) at its
    review threads (review activity came while a task ran on it)."""
    issue = watch.issue
    checks = ChecksReport(
        head_sha=head_sha or "0" * 40, branches=(watch.branch,), numbers=(issue.number,)
    )
    return ForgeEvent(
        forge=issue.repo.forge,
        kind=EventKind.REVIEW_SUBMITTED if review else EventKind.CHECKS_CHANGED,
        name=POLL_EVENT,
        action=POLL_EVENT,
        delivery_id=f"poll:{watch.key}",
        actor=Actor(login=POLL_EVENT, is_bot=True),
        repo=issue.repo,
        issue=issue if review else None,
        checks=None if review else checks,
    )


class Aftercare:
    """``settings`` the current settings; ``forges`` the configured forge of a kind;
    ``wake`` tells the worker's slots there is work (a round queued)."""

    def __init__(
        self,
        store: AftercareStore,
        *,
        settings: CurrentSettings,
        forges: ForgeLookup,
        clock: Callable[[], float],
        wake: Callable[[], None],
    ) -> None:
        self.desk = RoundDesk(store, settings=settings, forges=forges, clock=clock, wake=wake)
        self.permissions = PermissionCache()
        self.ci = CiRounds(self.desk)
        self.reviews = ReviewRounds(self.desk, self.permissions)

    @property
    def store(self) -> AftercareStore:
        return self.desk.store

    @property
    def settings(self) -> Settings:
        return self.desk.settings

    async def _finish(self, item: InboxEvent, why: str | None = None) -> None:
        await self.store.finish_event(item.id, error=why)

    async def _turn(self, item: InboxEvent, key: str, quiet: float) -> float | None:
        """Whether ``item`` goes on now: the latest of its burst, with ``quiet`` seconds
        passed since (its date, when it does). An item that is not the latest is
        finished; the latest waits in the inbox until the quiet time is over."""
        store, me, now = self.store, str(item.id), self.desk.clock()
        mark = await store.get_mark(key)
        if mark is not None and mark[0] != me and _newer(mark[0], item.id):
            await self._finish(item, "ignored: a later event of the same burst goes on")
            return None
        if mark is None or mark[0] != me:
            await store.put_mark(key, me)
            mark = (me, now)
        due = mark[1] + quiet
        if now < due:
            await store.retry_event(
                item.id, error=f"waiting for {quiet:g} s without news", delay_seconds=due - now
            )
            return None
        return mark[1]

    async def waiting_turn(self, item: InboxEvent, event: ForgeEvent) -> bool:
        """Review activity that waited its turn (given back): it goes on as the burst's
        last, or ends for a later one. False for activity seen the first time."""
        if event.issue is None:
            return False
        mark = await self.store.get_mark(activity_mark(event.issue.key))
        if mark is None or not (mark[0] == str(item.id) or _newer(mark[0], item.id)):
            return False
        await self.on_review(item, event)
        return True

    async def opened_by_the_bot(self, issue: IssueRef) -> IssueRef | None:
        """``issue`` with its author and head repository when it is a change request the
        bot opened and watches (what a GitLab payload leaves out), else None."""
        watch = await self.store.get_watch(issue.key) if issue.is_change_request else None
        if watch is None or watch.branch != issue.head_branch:
            return None
        return msgspec.structs.replace(
            issue, author=watch.issue.author, head_repo=issue.head_repo or watch.issue.head_repo
        )

    # --- CI results and pushes ----------------------------------------------------------------

    async def _watch_of_checks(self, report: ChecksReport, event: ForgeEvent) -> Watch | None:
        assert event.repo is not None
        for number in report.numbers:
            key = IssueRef(repo=event.repo, number=number, is_change_request=True).key
            watch = await self.store.get_watch(key)
            if watch is not None:
                return watch
        prefix = self.settings.workspace.branch_prefix
        for branch in report.branches:
            if branch.startswith(prefix):
                watch = await self.store.find_watch(event.repo.key, branch)
                if watch is not None:
                    return watch
        return None

    async def on_poll(self, item: InboxEvent, event: ForgeEvent) -> None:
        """An item the bot queued itself (``poll_event``)."""
        if event.kind is EventKind.CHECKS_CHANGED:
            await self.on_checks(item, event)
        else:
            await self.on_review(item, event)

    async def on_checks(self, item: InboxEvent, event: ForgeEvent) -> None:
        report = event.checks
        assert report is not None
        watch = await self._watch_of_checks(report, event)
        forge = self.desk.forge(watch) if watch is not None else None
        if watch is None or forge is None or not watch.is_open:
            await self._finish(item, "ignored: not a change request the bot watches")
            return
        if event.name == POLL_EVENT:  # the head is whatever it is now; no burst to wait for
            await self.ci.decide(str(item.id), watch, forge, sha=None, last_change_at=None)
            await self._finish(item)
            return
        key = change_mark(watch.key, report.head_sha)
        last = await self._turn(item, key, self.settings.ci.settle_seconds)
        if last is None:
            return
        await self.ci.decide(str(item.id), watch, forge, sha=report.head_sha, last_change_at=last)
        await self._finish(item)

    async def on_push(self, item: InboxEvent, event: ForgeEvent) -> None:
        """New commits on the change request: its head, for the record (the checks of the
        new head decide, as they come)."""
        assert event.issue is not None and event.head is not None
        head = event.head.sha

        def keep(record: ChangeRecord) -> None:
            record.head_sha = head

        saved = await change_record(self.store, event.issue.key, keep)
        await self._finish(item, None if saved else "ignored: not a change request the bot watches")

    # --- review activity ----------------------------------------------------------------------

    async def on_review(self, item: InboxEvent, event: ForgeEvent) -> None:
        assert event.issue is not None
        watch = await self.store.get_watch(event.issue.key)
        forge = self.desk.forge(watch) if watch is not None else None
        if watch is None or forge is None or not watch.is_open:
            await self._finish(item, "ignored: not a change request the bot watches")
            return
        quiet = self.settings.review.quiet_seconds
        if await self._turn(item, activity_mark(watch.key), quiet) is None:
            return
        if not await self.reviews.start(str(item.id), watch, forge):
            # a task runs on the change request: when it ends, it looks again
            await self._finish(item, "a task runs on the change request; its end looks again")
            return
        await self._finish(item)

    async def set_autofix(self, issue: IssueRef, enabled: bool) -> ReplyKind:
        if not await self.store.set_autofix(issue.key, enabled):
            return ReplyKind.AUTOFIX_NOT_WATCHED
        return ReplyKind.AUTOFIX_ON if enabled else ReplyKind.AUTOFIX_OFF

    # --- tasks that ended ---------------------------------------------------------------------

    async def task_ended(self, task: Task, outcome: Outcome) -> None:
        """A task ended: watch the change request it opened; or, for a task on one, keep
        what the round did and cost, answer a review round's threads, show it."""
        if outcome.state in ACTIVE_STATES:
            return
        store = self.store
        checkpoint = await store.load_checkpoint(task.id) or {}
        delivery = checkpoint.get("delivery") or {}
        issue = task.request.issue
        watch = await store.get_watch(issue.key) if issue.is_change_request else None
        if watch is None and outcome.state is TaskState.DONE:
            watch = await watch_delivered(store, task, delivery, self.settings)
        if watch is None:
            return
        shown = status_snapshot(checkpoint) or {}
        pushed = delivery.get("head_sha") if isinstance(delivery.get("head_sha"), str) else ""
        quality = delivery.get("quality")
        passed = isinstance(quality, dict) and bool(quality.get("passed"))

        def keep(record: ChangeRecord) -> bool:
            found = record.round_of_task(task.id)
            if found is not None:
                found.state = outcome.state
                found.tokens = int(shown.get("total_tokens", 0))
                found.cost = float(shown.get("cost", 0.0))
                found.pushed_sha = pushed or found.pushed_sha
            if pushed:
                record.head_sha = pushed
                if passed and outcome.state is TaskState.DONE:
                    record.gate_sha = pushed
            return found is not None

        saved = await change_record(store, watch.key, keep)
        if issue.key == watch.key:  # a task on the change request: what waited for it
            await self._look_again(task, saved[0] if saved else watch, pushed=bool(pushed))
        if saved is None or not saved[2]:
            return  # the task that opened it: its status comment is up to date
        watch, record, _ = saved
        if outcome.state is TaskState.DONE:
            unanswered = await self.reviews.answer(task, outcome, watch, delivery)
            if unanswered:  # the status comment tells the threads left without an answer

                def tell(record: ChangeRecord) -> bool:
                    found = record.round_of_task(task.id)
                    if found is not None:
                        found.unanswered = unanswered
                    return found is not None

                saved = await change_record(store, watch.key, tell) or saved
                watch, record, _ = saved
        await self.desk.show(watch, record)

    async def _look_again(self, task: Task, watch: Watch, *, pushed: bool) -> None:
        """What waited while ``task`` ran on the change request: review activity (it joined
        the task as feedback) gets a look at the threads once it is quiet, for the ones
        the task did not hold; a head left as it was (nothing pushed) gets its decision,
        which waited for the task."""
        looks = []
        mark = await self.store.get_mark(activity_mark(watch.key))
        if mark is not None and mark[1] >= task.created_at:
            looks.append(("review", poll_event(watch, "", review=True)))
        if not pushed:
            looks.append(("ci", poll_event(watch, ChangeRecord.from_dict(watch.data).head_sha)))
        for what, event in looks:
            key = f"poll:{what}:{watch.key}:{task.id}"
            if await self.store.record_delivery(key, event.forge.value, event.to_dict()):
                self.desk.wake()

    # --- the poll -----------------------------------------------------------------------------

    async def poll_if_due(self) -> int:
        """Every ``ci.poll_seconds`` (one worker of all): an inbox item per open watched
        change request, to look at its head's checks in case an event was lost."""
        every = float(self.settings.ci.poll_seconds)
        now = self.desk.clock()
        if not await self.store.claim(POLL_MARK, owner=f"{now!r}", window=every):
            return 0
        return await self.poll(period=int(now // every))

    async def poll(self, *, period: int) -> int:
        queued = 0
        for watch in await self.store.open_watches():
            event = poll_event(watch, ChangeRecord.from_dict(watch.data).head_sha)
            key = f"poll:{watch.key}:{period}"
            if await self.store.record_delivery(key, event.forge.value, event.to_dict()):
                queued += 1
        if queued:
            self.desk.wake()
        return queued
