"""The running bot: settings, store, forges, LLM and (for worker roles) the worker.

``Runtime.from_settings`` builds the real parts; tests build a ``Runtime`` with the
FakeForge and the scripted LLM directly. Nothing connects until ``start()``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

import httpx

from bot.config import Settings, disabled_forges
from bot.events import ForgeKind
from bot.forges.base import Forge
from bot.llm.base import LLM, HealthReport
from bot.storage.base import Store

if TYPE_CHECKING:
    from bot.worker import Worker

log = logging.getLogger("bot.runtime")

Role = Literal["all", "web", "worker"]


class Runtime:
    def __init__(
        self,
        settings: Settings,
        *,
        store: Store,
        forges: dict[ForgeKind, Forge],
        llm: LLM,
        role: Role = "all",
        clock: Callable[[], float] | None = None,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.forges = forges
        self.llm = llm
        self.role = role
        self.clock = clock
        self._http = http
        self.worker: Worker | None = None

    @classmethod
    def from_settings(cls, settings: Settings, *, role: Role = "all") -> Runtime:
        from bot.llm.factory import make_llm
        from bot.storage.factory import open_store

        http = httpx.AsyncClient(timeout=httpx.Timeout(30.0, connect=10.0))
        forges: dict[ForgeKind, Forge] = {}
        if settings.github.enabled:
            from bot.forges.github import GitHubForge

            forges[ForgeKind.GITHUB] = GitHubForge.from_settings(settings.github, http)
        if settings.gitlab.enabled:
            from bot.forges.gitlab import GitLabForge

            forges[ForgeKind.GITLAB] = GitLabForge.from_settings(settings.gitlab)
        return cls(
            settings,
            store=open_store(settings),
            forges=forges,
            llm=make_llm(settings.llm, http=http),
            role=role,
            http=http,
        )

    def forge(self, kind: ForgeKind) -> Forge | None:
        return self.forges.get(kind)

    async def start(self) -> None:
        await self.store.open()
        for line in disabled_forges(self.settings):
            log.warning("%s", line)
        if self.role in ("all", "worker"):
            from bot.worker import Worker

            self.worker = Worker(self)
            await self.worker.start()

    async def stop(self) -> None:
        if self.worker is not None:
            await self.worker.stop()
            self.worker = None
        for forge in self.forges.values():
            await forge.aclose()
        await self.llm.aclose()
        if self._http is not None:
            await self._http.aclose()
        await self.store.close()

    async def llm_health(self) -> HealthReport:
        return await self.llm.health()
