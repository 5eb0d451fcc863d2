"""When and how long to wait before retrying a forge call; shared by both adapters.

``retry_delay`` is pure: given the HTTP status, the response headers, the attempt
number and the clock, it says how long to wait, or None for "do not retry".
``WritePacer`` serialises mutating calls per installation / token, as GitHub asks
integrators to send writes one at a time and with a pause between them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

from bot.forges.base import ForgeError

BACKOFF = (1.0, 2.0, 4.0)
MAX_WAIT = 60.0
# Longest a write waits for its turn. A turn can be held through a rate-limit wait
# (up to three waits of MAX_WAIT), so the bound sits well above that.
SLOT_TIMEOUT = 300.0


def _header(headers: Mapping[str, str], name: str) -> str | None:
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return None


def retry_delay(
    status: int | None,
    headers: Mapping[str, str],
    attempt: int,
    *,
    now: float,
    max_wait: float = MAX_WAIT,
) -> float | None:
    """Seconds to wait before attempt ``attempt + 1`` (attempt counts from 0), or None.

    ``status`` None means the connection failed or timed out. 429 and 403 responses
    that carry ``retry-after`` or an exhausted ``x-ratelimit-remaining`` wait as told
    (capped at ``max_wait``); 5xx and connection failures back off 1, 2, 4 s.
    """
    if attempt >= len(BACKOFF):
        return None
    if status is not None and status in (403, 429):
        told = _told_wait(headers, now)
        if told is not None:
            return min(max(told, 0.0), max_wait)
        if status == 429:
            return BACKOFF[attempt]
        return None
    if status is None or status >= 500 or status == 408:
        return BACKOFF[attempt]
    return None


def _told_wait(headers: Mapping[str, str], now: float) -> float | None:
    retry_after = _header(headers, "retry-after")
    if retry_after is not None:
        try:
            return float(retry_after)
        except ValueError:
            return None
    remaining = _header(headers, "x-ratelimit-remaining") or _header(headers, "ratelimit-remaining")
    reset = _header(headers, "x-ratelimit-reset") or _header(headers, "ratelimit-reset")
    if remaining == "0" and reset is not None:
        try:
            return float(reset) - now + 1.0
        except ValueError:
            return None
    return None


class WriteSlotTimeout(ForgeError):
    """A write waited longer than its bound for its turn: earlier writes for the same
    installation or token are stuck or far behind. Transient: the task is retried."""


class WritePacer:
    """One mutating call at a time per key, at least ``interval`` seconds apart.

    A write waits at most ``slot_timeout`` seconds for its turn (then
    ``WriteSlotTimeout``), and the turn is given back on every path out of the
    ``async with``: an error, a cancellation during the pacing wait, or the body's end.
    """

    def __init__(self, interval: float = 1.0, *, slot_timeout: float = SLOT_TIMEOUT) -> None:
        self.interval = interval
        self.slot_timeout = slot_timeout
        self._locks: dict[str, asyncio.Lock] = {}
        self._last: dict[str, float] = {}

    @asynccontextmanager
    async def slot(self, key: str) -> AsyncIterator[None]:
        lock = self._locks.setdefault(key, asyncio.Lock())
        try:
            async with asyncio.timeout(self.slot_timeout):
                await lock.acquire()
        except TimeoutError:
            raise WriteSlotTimeout(
                f"no turn to write for {key} within {self.slot_timeout:g} s: "
                "earlier writes for it are stuck or far behind"
            ) from None
        try:  # from here on the lock is ours: every way out releases it
            wait = self._last.get(key, 0.0) + self.interval - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            yield
        finally:
            self._last[key] = time.monotonic()
            lock.release()
