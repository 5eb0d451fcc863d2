"""Group commit of webhook deliveries on the event loop's own SQLite connection."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

import pytest

from bot.storage.base import StoreError
from bot.storage.sqlite import SqliteStore


@pytest.fixture
async def store(tmp_path: Path):  # type: ignore[no-untyped-def]
    s = SqliteStore(tmp_path / "bot.sqlite3")
    await s.open()
    yield s
    await s.close()


def count(path: Path, table: str) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])  # noqa: S608
    finally:
        conn.close()


async def test_concurrent_deliveries_commit_together_and_all_land(store: SqliteStore) -> None:
    results = await asyncio.gather(
        *(store.record_delivery(f"k{i}", "github", {"n": i}) for i in range(300))
    )
    assert results == [True] * 300
    assert count(store.path, "inbox") == 300
    assert await store.pending_events() == 300


async def test_a_key_twice_in_one_batch_is_recorded_once(store: SqliteStore) -> None:
    first, second, other = await asyncio.gather(
        store.record_delivery("same", "github", {"n": 1}),
        store.record_delivery("same", "github", {"n": 2}),
        store.record_delivery("other", "gitlab", None),
    )
    assert (first, second, other) == (True, False, True)
    assert await store.pending_events() == 1  # "other" had no payload: recorded, not queued
    event = await store.lease_event("w", 30)
    assert event is not None and event.payload == {"n": 1}


async def test_a_bad_payload_fails_alone(store: SqliteStore) -> None:
    good = asyncio.ensure_future(store.record_delivery("good", "github", {"ok": True}))
    with pytest.raises(StoreError, match="JSON"):
        await store.record_delivery("bad", "github", {"x": object()})
    assert await good is True
    assert count(store.path, "inbox") == 1


async def test_when_another_connection_holds_the_write_lock_the_batch_waits_in_the_thread(
    store: SqliteStore,
) -> None:
    blocker = sqlite3.connect(store.path, isolation_level=None, check_same_thread=False)
    blocker.execute("BEGIN IMMEDIATE")
    released = threading.Timer(0.3, lambda: blocker.execute("COMMIT"))
    released.start()
    try:
        recorded = await asyncio.wait_for(store.record_delivery("k", "github", {"a": 1}), 5)
    finally:
        released.join()
        blocker.close()
    assert recorded is True
    assert await store.pending_events() == 1


async def test_deliveries_after_close_are_refused(tmp_path: Path) -> None:
    s = SqliteStore(tmp_path / "bot.sqlite3")
    await s.open()
    await s.close()
    with pytest.raises(StoreError, match="not open"):
        await s.record_delivery("k", "github", {})
