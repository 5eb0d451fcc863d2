"""What the after-PR handlers share: the watched change request's forge and the task
that opened it, its status comment, starting a follow-up round, and the rounds a
change request may still have.

A round is a follow-up task on the change request (``TaskMode.FOLLOW_UP`` with a
``FollowUpRound``): the same loop as any task, on the same branch, from its remote
head. It is asked for by the person who started the task that opened the change
request (their planning settings apply), and it is one of the change request's rounds
in its record from the moment it is queued.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from bot.comments.change_status import ChangeReporter
from bot.config import CurrentSettings, Settings
from bot.events import FollowUpRound, TaskMode, TaskRequest
from bot.followup.record import ChangeRecord, RoundRecord
from bot.forges.base import Forge, ForgeError, ForgeLookup
from bot.record.snapshot import status_snapshot
from bot.storage.base import (
    Checkpoints,
    CommentIds,
    Inbox,
    Marks,
    Task,
    Tasks,
    Watch,
    Watches,
)
from bot.worker.watchbook import change_record

log = logging.getLogger("bot.worker")


class AftercareStore(Watches, Tasks, Checkpoints, CommentIds, Inbox, Marks, Protocol):
    """What the aftercare uses of the store: the watches and their records, the tasks (a
    round is one) and their checkpoints, the ids of the status comments it edits, the
    inbox (an event waits its turn there; the poll queues its looks) and the marks (one
    decision per head commit, one round per burst)."""


class RoundDesk:
    def __init__(
        self,
        store: AftercareStore,
        *,
        settings: CurrentSettings,
        forges: ForgeLookup,
        clock: Callable[[], float],
        wake: Callable[[], None],
    ) -> None:
        self.store = store
        self._settings = settings
        self._forges = forges
        self.clock = clock
        self.wake = wake

    @property
    def settings(self) -> Settings:
        """The current settings (they may be reloaded while running)."""
        return self._settings()

    def forge(self, watch: Watch) -> Forge | None:
        return self._forges(watch.issue.repo.forge)

    def reporter(self, forge: Forge) -> ChangeReporter:
        """What writes about the change request on its task's issue and on it."""
        return ChangeReporter(forge, settings=self.settings, comment_ids=self.store)

    async def revisions_left(self, watch: Watch) -> int:
        """What is left of the revision limit of the task that opened the change request
        (``planning.revision.max_revisions``): each CI fix round counts against it."""
        checkpoint = await self.store.load_checkpoint(watch.task_id) or {}
        used = int(checkpoint.get("revisions", 0) or 0)
        return max(0, self.settings.planning.revision.max_revisions - used)

    async def show(self, watch: Watch, record: ChangeRecord, *, base: str = "") -> None:
        """The status comment of the task that opened the change request, with the change
        request's section as ``record`` says; a forge that refuses is logged, not fatal."""
        forge = self.forge(watch)
        origin = await self.store.get_task(watch.task_id)
        if forge is None or origin is None:
            return
        snapshot = status_snapshot(await self.store.load_checkpoint(origin.id))
        try:
            await self.reporter(forge).show(origin, snapshot, record, watch.issue, base=base)
        except ForgeError as exc:
            log.warning("could not show %s on its task's status comment: %s", watch.key, exc)

    async def start_round(
        self, watch: Watch, found: FollowUpRound, *, instructions: str, about: str
    ) -> tuple[Task, ChangeRecord] | None:
        """Queue the round's task and enter it in the record; None when a task is active
        on the change request already (it goes on; nothing is queued)."""
        origin = await self.store.get_task(watch.task_id)
        asked_by = origin.request.requested_by if origin is not None else watch.issue.author
        request = TaskRequest(
            issue=watch.issue,
            requested_by=asked_by,
            mode=TaskMode.FOLLOW_UP,
            instructions=instructions,
            round=found,
        )
        task, created = await self.store.create_task(request)
        if not created:
            return None
        entry = RoundRecord(found.kind, found.number, found.head_sha, task.id, about=about)
        saved = await change_record(self.store, watch.key, lambda r: r.rounds.append(entry))
        self.wake()
        log.info("%s: %s round %d queued as task %s", watch.key, found.kind.value,
                 found.number, task.id)  # fmt: skip
        return (task, saved[1]) if saved is not None else None
