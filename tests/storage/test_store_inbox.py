"""Deliveries and the inbox, on both backends."""

from __future__ import annotations

import asyncio

import pytest

from bot.storage.base import StoreError
from bot.storage.sql_store import SqlStore
from tests.storage.store_support import START, Backend, Clock, opened


async def test_a_redelivery_is_refused_and_writes_nothing(store: SqlStore) -> None:
    assert await store.record_delivery("gh-1", "github", {"n": 1}) is True
    assert await store.record_delivery("gh-1", "github", {"n": 2}) is False

    assert await store.pending_events() == 1
    event = await store.lease_event("dispatcher", 30)
    assert event is not None
    assert event.payload == {"n": 1}
    assert await store.lease_event("dispatcher", 30) is None


async def test_a_delivery_without_payload_is_recorded_but_not_queued(store: SqlStore) -> None:
    assert await store.record_delivery("gl-1", "gitlab", None) is True
    assert await store.pending_events() == 0
    assert await store.record_delivery("gl-1", "gitlab", {"late": True}) is False
    assert await store.pending_events() == 0


async def test_fifty_racing_deliveries_of_one_key_queue_one_event(store: SqlStore) -> None:
    results = await asyncio.gather(
        *(store.record_delivery("same", "github", {"copy": i}) for i in range(50))
    )
    assert results.count(True) == 1
    assert await store.pending_events() == 1


async def test_racing_deliveries_through_two_stores_queue_one_event(
    backend: Backend, clock: Clock, store: SqlStore
) -> None:
    async with opened(backend.make(clock)) as other:
        results = await asyncio.gather(
            *(
                s.record_delivery("same", "github", {"copy": i})
                for i in range(25)
                for s in (store, other)
            )
        )
    assert results.count(True) == 1
    assert await store.pending_events() == 1


async def test_a_leased_event_carries_what_was_delivered(store: SqlStore, clock: Clock) -> None:
    await store.record_delivery("gh-7", "github", {"action": "labeled", "ünï": "cödé"})
    clock.advance(5)
    event = await store.lease_event("dispatcher", 30)
    assert event is not None
    assert (event.delivery_key, event.forge, event.attempts) == ("gh-7", "github", 1)
    assert event.payload == {"action": "labeled", "ünï": "cödé"}
    assert event.received_at == START


async def test_events_are_leased_in_arrival_order(store: SqlStore) -> None:
    for key in ("first", "second", "third"):
        await store.record_delivery(key, "github", {"key": key})
    keys = []
    while (event := await store.lease_event("dispatcher", 30)) is not None:
        keys.append(event.delivery_key)
    assert keys == ["first", "second", "third"]


async def test_a_crashed_dispatchers_event_is_leased_again_after_its_lease(
    store: SqlStore, clock: Clock
) -> None:
    await store.record_delivery("gh-1", "github", {"n": 1})
    first = await store.lease_event("crashed", 30)
    assert first is not None
    clock.advance(29)
    assert await store.lease_event("other", 30) is None
    clock.advance(2)
    again = await store.lease_event("other", 30)
    assert again is not None
    assert (again.id, again.attempts) == (first.id, 2)


async def test_a_finished_event_is_never_leased_again(store: SqlStore, clock: Clock) -> None:
    await store.record_delivery("gh-1", "github", {"n": 1})
    event = await store.lease_event("dispatcher", 30)
    assert event is not None
    await store.finish_event(event.id, error="ignored: not a trigger")
    clock.advance(3600)
    assert await store.lease_event("dispatcher", 30) is None
    assert await store.pending_events() == 0


async def test_a_retried_event_waits_for_its_delay(store: SqlStore, clock: Clock) -> None:
    await store.record_delivery("gh-1", "github", {"n": 1})
    event = await store.lease_event("dispatcher", 300)
    assert event is not None
    await store.retry_event(event.id, error="forge unavailable", delay_seconds=30)
    assert await store.pending_events() == 1
    clock.advance(29)
    assert await store.lease_event("dispatcher", 300) is None
    clock.advance(1)
    again = await store.lease_event("dispatcher", 300)
    assert again is not None
    assert (again.id, again.attempts) == (event.id, 2)


async def test_unknown_or_finished_events_are_refused(store: SqlStore) -> None:
    with pytest.raises(StoreError, match="no inbox event 999"):
        await store.finish_event(999)
    await store.record_delivery("gh-1", "github", {"n": 1})
    event = await store.lease_event("dispatcher", 30)
    assert event is not None
    await store.finish_event(event.id)
    with pytest.raises(StoreError, match=f"no open inbox event {event.id}"):
        await store.retry_event(event.id, error="late", delay_seconds=1)


async def test_two_dispatchers_never_lease_the_same_event(
    backend: Backend, clock: Clock, store: SqlStore
) -> None:
    for i in range(10):
        await store.record_delivery(f"gh-{i}", "github", {"n": i})
    async with opened(backend.make(clock)) as other:
        leased = await asyncio.gather(
            *(s.lease_event(f"owner-{n}", 30) for n, s in enumerate((store, other) * 10))
        )
    ids = [event.id for event in leased if event is not None]
    assert len(ids) == 10
    assert len(set(ids)) == 10


async def test_a_payload_that_is_not_json_is_refused_and_nothing_recorded(
    store: SqlStore,
) -> None:
    with pytest.raises(StoreError, match="not JSON-serialisable"):
        await store.record_delivery("gh-1", "github", {"when": object()})
    assert await store.record_delivery("gh-1", "github", {"n": 1}) is True


async def test_a_lease_must_last_a_positive_time(store: SqlStore) -> None:
    with pytest.raises(ValueError, match="lease_seconds must be positive"):
        await store.lease_event("dispatcher", 0)


async def test_prune_forgets_old_handled_events_and_keeps_pending_ones(
    store: SqlStore, clock: Clock
) -> None:
    assert await store.record_delivery("old-done", "github", {"n": 1})
    assert await store.record_delivery("old-pending", "github", {"n": 2})
    assert await store.record_delivery("old-ignored", "github", None)
    event = await store.lease_event("w", 30)
    assert event is not None and event.delivery_key == "old-done"
    await store.finish_event(event.id)
    clock.advance(8 * 86400)
    assert await store.record_delivery("new", "github", {"n": 3})
    removed = await store.prune(older_than=clock() - 7 * 86400)
    assert removed == 2  # the handled delivery and the one with nothing to handle
    assert await store.pending_events() == 2  # old-pending and new stay
    assert not await store.record_delivery("old-pending", "github", {"n": 2})  # still deduped
    assert await store.record_delivery("old-done", "github", {"n": 1})  # window passed
    assert await store.record_delivery("old-ignored", "github", None)
