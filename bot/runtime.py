"""The running bot's parts: the current settings, the store, the forges and the LLM.

A plain container: it knows nothing of roles, the worker or the web app (the CLI
wires those around it). ``Runtime.from_settings`` builds the real parts; tests build
a ``Runtime`` with the FakeForge and the scripted LLM directly. Nothing connects
until ``start()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from bot import tracing
from bot.config import (
    ConfigError,
    Settings,
    bot_account,
    disabled_forges,
    load_settings,
    secret_values,
)
from bot.config.user_service import UserConfigService
from bot.config.views import masked_url
from bot.events import ForgeKind
from bot.forges.base import Forge, ForgeError
from bot.llm.base import LLM, HealthReport
from bot.llm.current import CurrentLLM
from bot.llm.http_chat import HttpChatLLM
from bot.storage.base import Store

log = logging.getLogger("bot.runtime")

HEALTH_CACHE_SECONDS = 5.0
ACCOUNT_TIMEOUT = 20.0  # seconds a forge has at start-up to say who the bot is

# Sections whose objects are built at start-up (the listening socket, the store, the
# forge clients). Everything else is read when it is used, so a reload applies it to the
# next webhook, task or action (``worker.max_workers`` only at start-up); the ``llm``
# section's provider is built again (``_reload_llm``).
RESTART_SECTIONS = ("server", "storage", "github", "gitlab", "observability")
# The ``llm`` keys the provider is built from: a change builds a new one. The others
# (prices, token limits, temperature, health intervals) are read at each use.
PROVIDER_KEYS = frozenset(
    {
        "provider",
        "base_url",
        "model",
        "api_key",
        "script_path",
        "request_timeout",
        "max_retries",
        "structured_output",
        "native_tools",
        "prompt_cache",
    }
)


class Runtime:
    def __init__(
        self,
        settings: Settings,
        *,
        store: Store,
        forges: dict[ForgeKind, Forge],
        llm: LLM,
        clock: Callable[[], float] | None = None,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.forges = forges
        self._llm = CurrentLLM(llm)
        self.clock = clock
        self._http = http
        self._health: tuple[float, HealthReport] | None = None
        # People's planning overrides (planning.user_config_api), cached for the process.
        self.user_config = UserConfigService()
        self._traces = False  # this runtime turned traces on (``start_traces``)
        # the bot's account ids the forges told at start-up: (login, id) per forge
        self._bot_ids: dict[ForgeKind, tuple[str, str]] = {}

    @classmethod
    def from_settings(cls, settings: Settings) -> Runtime:
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
        store = open_store(settings)
        return cls(
            settings,
            store=store,
            forges=forges,
            llm=make_llm(settings.llm, http=http, dialects=store),
            http=http,
        )

    @property
    def llm(self) -> LLM:
        """The model, call by call: each call goes to the provider in place when it
        starts (a reload may put another in place)."""
        return self._llm

    @llm.setter
    def llm(self, provider: LLM) -> None:
        """Put ``provider`` in place for new calls (the previous one finishes its calls
        in flight, then is closed)."""
        self._llm.replace(provider)
        self._health = None

    @property
    def provider(self) -> LLM:
        """The provider in place now."""
        return self._llm.provider

    def forge(self, kind: ForgeKind) -> Forge | None:
        return self.forges.get(kind)

    def current_settings(self) -> Settings:
        """The settings now: what the parts built around the runtime are handed (a
        ``CurrentSettings``), so a reload reaches them."""
        return self.settings

    def watch_reload_signal(self, environ: Mapping[str, str]) -> None:
        """Reload the configuration on SIGHUP (``kill -HUP <pid>``)."""
        loop = asyncio.get_running_loop()

        def reload() -> None:
            for line in self.reload(environ):
                log.warning("reload: %s", line)

        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGHUP, reload)

    async def start(self) -> None:
        await self.store.open()
        for line in disabled_forges(self.settings):
            log.warning("%s", line)
        await self.find_bot_accounts()
        self.start_traces(os.environ)

    async def find_bot_accounts(self) -> None:
        """Ask each forge for the bot's account id where the settings leave it empty
        (``bot.github_id`` / ``bot.gitlab_id``), once: what recognises the bot's own
        events, change requests and comments. A forge that does not answer (within
        ``ACCOUNT_TIMEOUT``) leaves it empty: the whole login, compared exactly, decides."""
        for kind, forge in self.forges.items():
            login, known = bot_account(self.settings, kind)
            if known:
                continue
            try:
                found = await asyncio.wait_for(forge.bot_account(), ACCOUNT_TIMEOUT)
            except (ForgeError, OSError, TimeoutError) as exc:
                log.warning("%s: the bot's account id is unknown (%s): set bot.%s_id",
                            kind.value, type(exc).__name__, kind.value)  # fmt: skip
                continue
            if not found.id:
                continue
            if found.login.lower() != login.lower():
                log.warning("%s: the credentials act as %s, the settings say %s (bot.*)",
                            kind.value, found.login, login)  # fmt: skip
            self._bot_ids[kind] = (login, found.id)
        self.settings = self._with_bot_ids(self.settings)

    def _with_bot_ids(self, settings: Settings) -> Settings:
        """``settings`` with the account ids found at start-up, where they name the same
        logins and leave the ids empty."""
        update: dict[str, str] = {}
        for kind, (login, account) in self._bot_ids.items():
            own_login, own_id = bot_account(settings, kind)
            if not own_id and own_login.lower() == login.lower():
                update[f"{kind.value}_id"] = account
        if not update:
            return settings
        return settings.model_copy(update={"bot": settings.bot.model_copy(update=update)})

    def start_traces(self, environ: Mapping[str, str]) -> None:
        """Turn traces on when ``observability.traces.enabled`` says so (docs/traces.md);
        without the OpenTelemetry SDK the bot runs without them and says so."""
        observability = self.settings.observability
        traces = observability.traces
        if not traces.enabled or tracing.enabled():
            return
        options = tracing.TraceOptions(
            endpoint=traces.endpoint,
            protocol=traces.protocol,
            service_name=traces.service_name,
            sample_ratio=traces.sample_ratio,
            capture_content=observability.capture_content,
            secrets=tuple(secret_values(self.settings)),
        )
        said = tracing.start(options, environ)
        self._traces = tracing.enabled()
        (log.info if self._traces else log.error)("%s", said)

    async def stop_traces(self) -> None:
        """Export what is left (within the exporter's timeout, off the event loop) and
        turn traces off, when this runtime turned them on."""
        if self._traces:
            self._traces = False
            await asyncio.to_thread(tracing.stop)

    async def stop(self) -> None:
        await self.stop_traces()
        for forge in self.forges.values():
            await forge.aclose()
        await self.llm.aclose()
        if self._http is not None:
            await self._http.aclose()
        await self.store.close()

    def reload(self, environ: Mapping[str, str]) -> list[str]:
        """Re-read the configuration file and the environment; apply what can change
        while running. Returns what happened, one line each. An invalid file changes
        nothing (the error is returned); sections whose change needs a restart keep
        their running values."""
        try:
            fresh = load_settings(environ, self.settings.source_path)
        except ConfigError as exc:
            return [f"configuration not reloaded: {exc}"]
        lines = []
        kept: dict[str, Any] = {}
        for section in RESTART_SECTIONS:
            if getattr(fresh, section) != getattr(self.settings, section):
                kept[section] = getattr(self.settings, section)
                lines.append(f"{section}: changed, but takes effect only after a restart")
        for section in type(fresh).model_fields:
            live = section not in (*RESTART_SECTIONS, "llm", "source_path")
            if live and getattr(fresh, section) != getattr(self.settings, section):
                lines.append(f"{section}: reloaded")
        lines += self._reload_llm(fresh, kept)
        self.settings = self._with_bot_ids(fresh.model_copy(update=kept))
        return lines or ["configuration unchanged"]

    def _reload_llm(self, fresh: Settings, kept: dict[str, Any]) -> list[str]:
        """A new provider for new calls when the keys it is built from changed; its
        structured-output dialect is probed again (so is the current one's when they did
        not: the server behind the address may have changed too)."""
        old, new = self.settings.llm, fresh.llm
        changed = {key for key in PROVIDER_KEYS if getattr(old, key) != getattr(new, key)}
        if not changed:
            provider = self.provider
            if isinstance(provider, HttpChatLLM):
                provider.forget_dialect()
            return ["llm: reloaded"] if old != new else []
        from bot.llm.factory import make_llm

        try:
            provider = make_llm(new, http=self._http, dialects=self.store)
        except ConfigError as exc:
            kept["llm"] = old
            return [f"llm: not reloaded, the previous model stays in place: {exc}"]
        if isinstance(provider, HttpChatLLM):
            provider.forget_dialect()  # found again, not taken from the store
        self.llm = provider
        return [
            f"llm: reloaded: new calls go to {new.provider} {new.model} at "
            f"{masked_url(new.base_url)} ({', '.join(sorted(changed))} changed); calls in "
            "flight finish on the previous one"
        ]

    async def llm_health(self) -> HealthReport:
        """The LLM endpoint's health, cached briefly: ``/health/ai`` is public and every
        probe is a request to the provider."""
        now = (self.clock or time.monotonic)()
        cached = self._health
        if cached is not None and now - cached[0] < HEALTH_CACHE_SECONDS:
            return cached[1]
        report = await self.llm.health()
        self._health = (now, report)
        return report
