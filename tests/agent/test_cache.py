"""The plan cache (seed 11.1.1) over the real SQLite store."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.agent.cache import PlanCache, cache_key, normalise, similarity
from bot.storage.sqlite import SqliteStore
from tests.agent import docs
from tests.agent.conftest import Clock, planning_settings

TEXT = "Add installation steps to the README.\n\nExplain `pip install widgets`."
TOOLS = ["github_get_file_contents", "github_create_or_update_file"]
PLAN = docs.readme_plan()


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    store = SqliteStore(tmp_path / "bot.sqlite3")
    await store.open()
    yield store
    await store.close()


def test_normalising_ignores_case_punctuation_spacing_and_hidden_text() -> None:
    assert normalise("  Fix   the README!! <!-- x -->\u200b") == "fix the readme"
    assert similarity("fix the readme", "fix the readme") == 1.0


def test_the_key_changes_with_repository_tools_and_settings() -> None:
    base = cache_key(TEXT, "github:acme/w", TOOLS, "cfg")
    assert base == cache_key(TEXT.upper(), "github:acme/w", reversed(TOOLS), "cfg")
    assert base != cache_key(TEXT, "github:acme/other", TOOLS, "cfg")
    assert base != cache_key(TEXT, "github:acme/w", TOOLS[:1], "cfg")
    assert base != cache_key(TEXT, "github:acme/w", TOOLS, "other cfg")


async def test_an_exact_entry_is_found_after_a_restart(store: SqliteStore) -> None:
    clock = Clock()
    await PlanCache(store, planning_settings(), clock=clock).put(TEXT, "github:acme/w", TOOLS, PLAN)

    hit = await PlanCache(store, planning_settings(), clock=clock).lookup(
        TEXT, "github:acme/w", TOOLS
    )

    assert hit is not None and hit.exact and hit.plan == PLAN


async def test_a_similar_task_in_the_same_repository_matches(store: SqliteStore) -> None:
    cache = PlanCache(store, planning_settings(), clock=Clock())
    await cache.put(TEXT, "github:acme/w", TOOLS, PLAN)

    similar = await cache.lookup(TEXT.replace("steps", "step"), "github:acme/w", TOOLS)
    elsewhere = await cache.lookup(TEXT, "github:acme/other", TOOLS)
    different = await cache.lookup("Rewrite the parser in Rust", "github:acme/w", TOOLS)
    other_tools = await cache.lookup(TEXT.replace("steps", "step"), "github:acme/w", TOOLS[:1])

    assert similar is not None and not similar.exact and similar.score >= 0.9
    assert elsewhere is None and different is None and other_tools is None


async def test_entries_expire_and_other_settings_do_not_match(store: SqliteStore) -> None:
    clock = Clock()
    cache = PlanCache(store, planning_settings(cache={"ttl": 100}), clock=clock)
    await cache.put(TEXT, "github:acme/w", TOOLS, PLAN)
    other = PlanCache(store, planning_settings(strategy="simple", cache={"ttl": 100}), clock=clock)

    assert await other.lookup(TEXT, "github:acme/w", TOOLS) is None
    clock.advance(101)
    assert await cache.lookup(TEXT, "github:acme/w", TOOLS) is None


async def test_a_disabled_cache_neither_stores_nor_finds(store: SqliteStore) -> None:
    cache = PlanCache(store, planning_settings(cache={"enabled": False}), clock=Clock())

    assert await cache.put(TEXT, "github:acme/w", TOOLS, PLAN) is None
    assert await cache.lookup(TEXT, "github:acme/w", TOOLS) is None
    assert await store.cache_candidates("github:acme/w", Clock()()) == []


async def test_looking_for_a_similar_long_task_leaves_the_event_loop_alone(
    store: SqliteStore,
) -> None:
    # Texts of the same words in other orders: difflib's cheap bounds let them through,
    # and its ratio takes time in the product of their lengths (about a second each here).
    words = ["fix", "the", "parser", "readme", "add", "tests", "for", "module", "and", "docs"]
    rng = random.Random(7)

    def text() -> str:
        return " ".join(rng.choice(words) for _ in range(1_100))

    cache = PlanCache(store, planning_settings(), clock=Clock())
    for _ in range(2):
        await cache.put(text(), "github:acme/w", TOOLS, PLAN)
    lags: list[float] = []

    async def tick() -> None:
        while True:
            before = time.monotonic()
            await asyncio.sleep(0.01)
            lags.append(time.monotonic() - before - 0.01)

    ticker = asyncio.create_task(tick())
    started = time.monotonic()
    hit = await cache.lookup(text(), "github:acme/w", TOOLS)
    took = time.monotonic() - started
    ticker.cancel()

    assert hit is None  # the same words, not the same task
    # The work took its time, in a worker process (no tick at all: the loop was held).
    assert max(lags, default=took) < 0.25 < took
