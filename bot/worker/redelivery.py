"""Ask the forge again for the webhook deliveries the bot missed while it was down.

GitHub does not redeliver by itself. On start and every ``INTERVAL_SECONDS`` the
worker lists the App's deliveries since its last look (the first time, over the last
``worker.redeliver_hours``), picks the original attempts that failed and whose
delivery (guid) never reached the inbox and was never asked for, and asks for each
again, oldest first, at most ``MAX_PER_PASS`` a pass, ``PACE_SECONDS`` apart. The time
of the last look and every guid asked for are marks in the store, so a restart or a
second worker does not ask twice. A forge without a delivery log is left alone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from bot.config import CurrentSettings
from bot.events import ForgeKind
from bot.forges.base import ForgeError, ForgeLookup
from bot.forges.deliveries import Delivery, DeliveryLog, HasDeliveryLog
from bot.storage.base import Inbox, Marks
from bot.webhooks import github as github_hooks

log = logging.getLogger("bot.worker")

INTERVAL_SECONDS = 600.0
MAX_PER_PASS = 10
MAX_LISTED = 1000  # attempts read per pass (ten pages)
PACE_SECONDS = 1.0
OVERLAP_SECONDS = 300.0  # look back past the last look: attempts still under way then


def missed(deliveries: list[Delivery]) -> list[Delivery]:
    """Failed first attempts of deliveries none of whose attempts succeeded, oldest
    first, one per guid. Pure."""
    skip = {d.guid for d in deliveries if not d.failed}  # delivered after all
    chosen = []
    for delivery in sorted(deliveries, key=lambda d: (d.delivered_at, d.id)):
        if delivery.failed and not delivery.redelivery and delivery.guid not in skip:
            skip.add(delivery.guid)
            chosen.append(delivery)
    return chosen


class RedeliveryStore(Inbox, Marks, Protocol):
    """The inbox (was a delivery received?) and the marks (asked for, last look)."""


class Redeliveries:
    def __init__(
        self,
        store: RedeliveryStore,
        *,
        settings: CurrentSettings,
        forges: ForgeLookup,
        clock: Callable[[], float],
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.store = store
        self.settings = settings
        self.forges = forges
        self._clock = clock
        self.sleep = sleep
        self._next = 0.0

    async def run_if_due(self) -> int:
        """One pass when its time has come; how many deliveries were asked for."""
        hours = self.settings().worker.redeliver_hours
        if hours <= 0 or self._clock() < self._next:
            return 0
        self._next = self._clock() + INTERVAL_SECONDS
        forge = self.forges(ForgeKind.GITHUB)
        delivery_log = forge.delivery_log() if isinstance(forge, HasDeliveryLog) else None
        if delivery_log is None:
            return 0
        try:
            return await self._pass(delivery_log, ForgeKind.GITHUB, hours * 3600)
        except ForgeError as exc:  # next pass starts again from the last look
            log.warning("could not check for missed webhook deliveries: %s", exc)
            return 0

    async def _pass(self, delivery_log: DeliveryLog, kind: ForgeKind, window: float) -> int:
        store = self.store
        now = self._clock()
        checked = f"deliveries-checked:{kind.value}"
        last = await store.get_mark(checked)
        since = now - window if last is None else max(now - window, last[1] - OVERLAP_SECONDS)
        listed = await delivery_log.deliveries_since(since, limit=MAX_LISTED)
        asked = 0
        for delivery in missed(listed):
            if asked >= MAX_PER_PASS:  # the next pass looks again from the same time
                return asked
            asked_key = f"redelivery:{kind.value}:{delivery.guid}"
            if await self._received(delivery) or await store.get_mark(asked_key) is not None:
                continue
            if asked:
                await self.sleep(PACE_SECONDS)
            await delivery_log.redeliver(delivery.id)
            await store.put_mark(asked_key, str(delivery.id))
            asked += 1
            log.info("asked GitHub to redeliver %s (%s)", delivery.guid, delivery.event)
        await store.put_mark(checked, "done")
        return asked

    async def _received(self, delivery: Delivery) -> bool:
        app_id = self.settings().github.app_id
        key = github_hooks.delivery_key(delivery.guid, app_id, b"")
        return await self.store.delivery_known(key)
