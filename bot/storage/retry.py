"""A store call retried with backoff; a store that keeps failing stops the work.

``persist(call, what=...)`` runs one store call and retries a ``StoreError`` after 1, 2
and 4 seconds (specification 003, 6: three retries, doubling, at most 4 s): a database
that is locked for a moment, a connection that dropped, a disk that filled and was
cleared. When the last try fails too it raises ``PersistenceFailed``: the worker then
pauses the task with a message and sets the emergency stop, instead of failing tasks
one by one while the store is away (docs/planning.md#run-directory).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from bot.storage.base import StoreError

log = logging.getLogger("bot.storage")

T = TypeVar("T")
DELAYS: Sequence[float] = (1.0, 2.0, 4.0)


class PersistenceFailed(StoreError):
    """The store failed every try: nothing the run does can be kept."""

    def __init__(self, what: str, error: StoreError) -> None:
        super().__init__(f"{what}: the store failed {len(DELAYS) + 1} times: {error}")
        self.what = what
        self.error = error


async def persist(
    call: Callable[[], Awaitable[T]],
    *,
    what: str,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> T:
    """``call()``, retried on a ``StoreError`` after each of ``DELAYS``; then
    ``PersistenceFailed``. A ``PersistenceFailed`` from within is not retried again."""
    for delay in (*DELAYS, None):
        try:
            return await call()
        except PersistenceFailed:
            raise
        except StoreError as exc:
            if delay is None:
                raise PersistenceFailed(what, exc) from exc
            log.warning("%s: the store failed (%s); trying again in %g s", what, exc, delay)
            await sleep(delay)
    raise AssertionError("unreachable")  # the last try returns or raises
