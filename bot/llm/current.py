"""The model a call goes to: the provider in place when the call starts.

``CurrentLLM`` is the ``LLM`` the runtime hands out (to the worker's runs, the health
routes, ``bot run``). Each call goes to the provider in place at that moment, so a
configuration reload that changes the ``llm`` section (``Runtime.reload``) takes effect
call by call, also inside a running task: ``replace`` puts the new provider in place,
the calls already in flight finish on the old one, and the old one is closed once the
last of them ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from bot.llm.base import LLM, HealthReport, LLMRequest, LLMResponse

log = logging.getLogger("bot.llm")


class CurrentLLM:
    """``LLM`` over whichever provider is in place (``provider``)."""

    def __init__(self, provider: LLM) -> None:
        self.provider = provider
        self._in_flight: dict[int, int] = {}  # id(provider) -> its calls now
        self._retired: dict[int, LLM] = {}  # replaced, closed when their calls end
        self._closing: set[asyncio.Task[None]] = set()

    @property
    def name(self) -> str:
        return self.provider.name

    @name.setter
    def name(self, value: str) -> None:
        raise AttributeError("the name is the provider's")

    @property
    def model(self) -> str:
        """The model the provider in place asks for (traces name their model spans by it)."""
        return str(getattr(self.provider, "model", "") or "")

    @property
    def base_url(self) -> str:
        return str(getattr(self.provider, "base_url", "") or "")

    def in_flight(self, provider: LLM) -> int:
        """How many calls ``provider`` is answering now."""
        return self._in_flight.get(id(provider), 0)

    async def complete(self, request: LLMRequest) -> LLMResponse:
        provider = self.provider
        key = id(provider)
        self._in_flight[key] = self._in_flight.get(key, 0) + 1
        try:
            return await provider.complete(request)
        finally:
            left = self._in_flight[key] - 1
            if left:
                self._in_flight[key] = left
            else:
                del self._in_flight[key]
                retired = self._retired.pop(key, None)
                if retired is not None:
                    self._close(retired)

    async def health(self) -> HealthReport:
        return await self.provider.health()

    def replace(self, provider: LLM) -> None:
        """New calls go to ``provider``; the one it replaces is closed once its calls in
        flight have ended (at once when it has none)."""
        old = self.provider
        if provider is old:
            return
        self.provider = provider
        if self.in_flight(old):
            self._retired[id(old)] = old
        else:
            self._close(old)

    def _close(self, provider: LLM) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # replaced outside the event loop (a test): nothing is open yet
            return
        closing = loop.create_task(self._aclose(provider), name="llm-close")
        self._closing.add(closing)
        closing.add_done_callback(self._closing.discard)

    @staticmethod
    async def _aclose(provider: LLM) -> None:
        try:
            await provider.aclose()
        except Exception as exc:  # a failed close must not reach the call that ended
            log.warning("could not close the replaced model provider: %s", exc)

    async def aclose(self) -> None:
        """Close the provider in place and every replaced one (at shutdown)."""
        for provider in [self.provider, *self._retired.values()]:
            await self._aclose(provider)
        self._retired.clear()
        for closing in list(self._closing):
            with contextlib.suppress(asyncio.CancelledError):
                await closing
