"""A person's ``planning`` overrides from the user-config service (``user_config_api``).

``GET planning.user_config_api.url`` with ``{user}`` (and ``{forge}``) filled in answers
as in the planning specification (9.3)::

    {"status": "success", "data": {"llm": {...}, "planning": {"strategy": "simple", ...}}}

Only ``data.planning`` is used; ``merge_planning`` bounds it. Answers (404: the person has
no settings) are cached per URL, forge and person for ``cache_ttl`` seconds. A failure
(refused connection, timeout, another status, a body that is not that document) is
logged and means no overrides, and is not cached: the next task asks again.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote

import httpx
from cachetools import TTLCache

from bot.config.planning import UserConfigApiSettings

log = logging.getLogger("bot.user_config")

MAX_BODY_BYTES = 256 * 1024
MAX_DEPTH = 16  # the document's levels; its planning settings take five at most
MAX_CACHED = 4096

Key = tuple[str, str, str]  # (url template, forge, person)


class UserConfigError(Exception):
    """The service's answer is not a usable document."""


def _nesting(value: object, limit: int) -> int:
    """How deep ``value`` nests, counted without recursion, up to ``limit`` + 1."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if not isinstance(item, dict | list):
            continue
        deepest = max(deepest, depth)
        if deepest > limit:
            break
        stack.extend(
            (child, depth + 1) for child in (item.values() if isinstance(item, dict) else item)
        )
    return deepest


def parse_answer(body: bytes) -> Mapping[str, Any]:
    """The ``data.planning`` mapping of an answer (empty when it has none).

    Any answer that does not decode (not UTF-8, not JSON, nested deeper than the
    decoder's stack or than ``MAX_DEPTH``) is a ``UserConfigError``."""
    try:
        document = json.loads(body)
    except (ValueError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise UserConfigError(f"not JSON: {reason}") from None
    if _nesting(document, MAX_DEPTH) > MAX_DEPTH:
        raise UserConfigError(f"the answer nests deeper than {MAX_DEPTH} levels")
    if not isinstance(document, dict) or document.get("status") != "success":
        raise UserConfigError('not {"status": "success", "data": {...}}')
    data = document.get("data")
    if not isinstance(data, dict):
        raise UserConfigError("data is not an object")
    planning = data.get("planning", {})
    if planning is None:
        return {}
    if not isinstance(planning, dict):
        raise UserConfigError("data.planning is not an object")
    return planning


def person_url(template: str, *, forge: str, user: str) -> str:
    return template.replace("{user}", quote(user, safe="")).replace("{forge}", forge)


class UserConfigService:
    """Fetches and caches people's overrides; one per process (``Runtime.user_config``)."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._clock = clock
        self._transport = transport
        self._ttl = -1
        self._cache: TTLCache[Key, Mapping[str, Any]] = self._new_cache(0)
        self.requests = 0  # answers asked of the service (cache misses)

    def _new_cache(self, ttl: int) -> TTLCache[Key, Mapping[str, Any]]:
        self._ttl = ttl
        return TTLCache(maxsize=MAX_CACHED, ttl=max(ttl, 1), timer=self._clock)

    async def planning_for(
        self, api: UserConfigApiSettings, *, forge: str, user: str
    ) -> Mapping[str, Any]:
        """The person's ``planning`` overrides; empty when off, unknown or failing."""
        if not api.enabled or not user:
            return {}
        if api.cache_ttl != self._ttl:
            self._cache = self._new_cache(api.cache_ttl)
        key = (api.url, forge, user)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        try:
            async with asyncio.timeout(api.timeout):  # the whole answer, not each read
                found = await self._fetch(api, person_url(api.url, forge=forge, user=user))
        except (httpx.HTTPError, httpx.InvalidURL, UserConfigError, TimeoutError) as exc:
            reason = str(exc) or type(exc).__name__
            if isinstance(exc, TimeoutError | httpx.TimeoutException):
                reason = f"TimeoutError: no answer within {api.timeout:g} s"
            log.warning(
                "user_config_api: no settings for %s:%s (%s); using the defaults",
                forge, user, reason,
            )  # fmt: skip
            return {}
        if api.cache_ttl > 0:
            self._cache[key] = found
        return found

    async def _fetch(self, api: UserConfigApiSettings, url: str) -> Mapping[str, Any]:
        self.requests += 1
        headers = {"Accept": "application/json"}
        if api.token is not None:
            headers["Authorization"] = f"Bearer {api.token.get_secret_value()}"
        async with (
            httpx.AsyncClient(timeout=api.timeout, transport=self._transport) as client,
            client.stream("GET", url, headers=headers) as response,
        ):
            if response.status_code == 404:
                return {}
            if response.status_code != 200:
                raise UserConfigError(f"HTTP {response.status_code}")
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > MAX_BODY_BYTES:
                    raise UserConfigError(f"the answer is larger than {MAX_BODY_BYTES} bytes")
        return parse_answer(bytes(body))
