"""The plan cache (docs/planning.md#plan-cache): reuse the plan of an identical or similar task.

The key hashes the normalised task text, the repository, the tool set and the
planning settings that shape a plan. A task with no exact entry may reuse the plan
of a similar one (difflib ratio of the normalised texts >= ``SIMILARITY``) from the
same repository, with the same tools and settings. Entries live in the store (they
survive restarts and are shared by workers) behind an in-process ``TTLCache``; the
caller validates a cached plan against today's tools before using it.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from cachetools import TTLCache

from bot import offload
from bot.config import PlanningSettings
from bot.similarity import most_similar
from bot.similarity import similarity as similarity  # the tests' and callers' name
from bot.storage.base import CachedPlans
from bot.storage.retry import persist
from bot.untrusted import clean_untrusted

SIMILARITY = 0.9
_SPACE = re.compile(r"\s+")
_PUNCT = re.compile(r"[^\w\s]")


def normalise(text: str) -> str:
    """Lower case, no punctuation, single spaces: what "the same task" compares."""
    text = clean_untrusted(text).lower()
    return _SPACE.sub(" ", _PUNCT.sub(" ", text)).strip()


def config_signature(planning: PlanningSettings) -> str:
    """The settings that change what a plan looks like."""
    shaping = {
        "strategy": planning.strategy,
        "max_subtasks": planning.max_subtasks,
        "decomposition_level": planning.decomposition_level,
        "auto_adjust_level": planning.auto_adjust_level,
        "complexity_threshold": planning.complexity_threshold.model_dump(),
    }
    return json.dumps(shaping, sort_keys=True)


def tools_signature(tool_names: Iterable[str]) -> str:
    return ",".join(sorted(set(tool_names)))


def cache_key(text: str, repo_key: str, tool_names: Iterable[str], config: str) -> str:
    material = json.dumps(
        [normalise(text), repo_key, tools_signature(tool_names), config], ensure_ascii=False
    )
    return hashlib.sha256(material.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class CacheHit:
    plan: dict[str, Any]
    key: str
    exact: bool
    score: float


class PlanCache:
    def __init__(
        self,
        store: CachedPlans,
        planning: PlanningSettings,
        *,
        clock: Callable[[], float] = time.time,
        maxsize: int = 256,
    ) -> None:
        self._store = store
        self._enabled = planning.cache.enabled and planning.cache.ttl > 0
        self._ttl = planning.cache.ttl
        self._config = config_signature(planning)
        self._clock = clock
        self._front: TTLCache[str, dict[str, Any]] = TTLCache(
            maxsize=maxsize, ttl=max(self._ttl, 1), timer=clock
        )

    @property
    def enabled(self) -> bool:
        return self._enabled

    def _value(self, plan: dict[str, Any], repo_key: str, tools: str) -> dict[str, Any]:
        return {"plan": plan, "repo": repo_key, "tools": tools, "config": self._config}

    def _matches(self, value: dict[str, Any], repo_key: str, tools: str) -> bool:
        return (
            value.get("repo") == repo_key
            and value.get("tools") == tools
            and value.get("config") == self._config
            and isinstance(value.get("plan"), dict)
        )

    async def lookup(self, text: str, repo_key: str, tool_names: Iterable[str]) -> CacheHit | None:
        """The cached plan of this task, or of the most similar one (same repository only)."""
        if not self._enabled:
            return None
        names = list(tool_names)
        tools = tools_signature(names)
        key = cache_key(text, repo_key, names, self._config)
        value = self._front.get(key)
        if value is None:
            now = self._clock()
            value = await persist(lambda: self._store.cache_get(key, now), what="the plan cache")
        if value is not None and self._matches(value, repo_key, tools):
            self._front[key] = value
            return CacheHit(plan=value["plan"], key=key, exact=True, score=1.0)
        return await self._similar(normalise(text), repo_key, tools)

    async def _similar(self, text: str, repo_key: str, tools: str) -> CacheHit | None:
        now = self._clock()
        rows = await persist(
            lambda: self._store.cache_candidates(repo_key, now), what="the plan cache"
        )
        rows = [row for row in rows if self._matches(row[2], repo_key, tools)]
        if not rows:
            return None
        # Time in the product of the texts' lengths: never on the event loop.
        found = await offload.run(most_similar, text, [other for _, other, _ in rows], SIMILARITY)
        if found is None:
            return None
        key, _, value = rows[found[0]]
        return CacheHit(plan=value["plan"], key=key, exact=False, score=found[1])

    async def put(
        self, text: str, repo_key: str, tool_names: Iterable[str], plan: dict[str, Any]
    ) -> str | None:
        """Remember ``plan`` for this task; returns the key (None when caching is off)."""
        if not self._enabled:
            return None
        names = list(tool_names)
        key = cache_key(text, repo_key, names, self._config)
        value = self._value(plan, repo_key, tools_signature(names))
        expires_at = self._clock() + self._ttl
        await persist(
            lambda: self._store.cache_put(
                key, repo_key=repo_key, text=normalise(text), value=value, expires_at=expires_at
            ),
            what="the plan cache",
        )
        self._front[key] = value
        return key
