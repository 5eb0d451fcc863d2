"""Tasks: one active task per issue, the queue, leases and waking, on both backends."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from bot.storage.base import ACTIVE_STATES, StoreError, TaskState
from bot.storage.sql_store import SqlStore
from tests.storage.store_support import (
    REFUSE_TASK_INSERTS,
    START,
    Backend,
    Clock,
    leased_id,
    opened,
    request_for,
    state_of,
)


async def test_a_new_task_is_queued_with_its_request(store: SqlStore) -> None:
    request = request_for(1)
    task, created = await store.create_task(request)
    assert created is True
    assert uuid.UUID(task.id).version == 4
    assert task.request == request
    assert (task.issue_key, task.repo_key) == (request.issue.key, request.issue.repo.key)
    assert (task.state, task.attempts, task.lease_owner) == (TaskState.QUEUED, 0, None)
    assert task.created_at == task.updated_at == START
    assert await store.get_task(task.id) == task
    assert await store.get_task(str(uuid.uuid4())) is None


async def test_an_issue_with_an_active_task_gets_no_second_one(store: SqlStore) -> None:
    first, _ = await store.create_task(request_for(1))
    again, created = await store.create_task(request_for(1))
    assert created is False
    assert again.id == first.id
    other, created = await store.create_task(request_for(2))
    assert created is True
    assert other.id != first.id


async def test_twenty_racing_creations_make_one_task(
    backend: Backend, clock: Clock, store: SqlStore
) -> None:
    async with opened(backend.make(clock)) as other:
        results = await asyncio.gather(
            *(s.create_task(request_for(7)) for _ in range(10) for s in (store, other))
        )
    assert [created for _, created in results].count(True) == 1
    assert len({task.id for task, _ in results}) == 1
    assert await store.count_tasks() == 1


async def test_a_finished_issue_can_get_a_new_task(store: SqlStore, clock: Clock) -> None:
    old, _ = await store.create_task(request_for(1))
    await store.set_state(old.id, TaskState.DONE)
    assert await store.active_task_for(old.issue_key) is None
    clock.advance(1)
    new, created = await store.create_task(request_for(1))
    assert created is True
    assert (await store.active_task_for(old.issue_key)) == new
    assert (await store.latest_task_for(old.issue_key)) == new
    assert await store.latest_task_for("github:nobody/nothing#issue/1") is None


async def test_reviving_a_task_beside_an_active_one_is_refused(store: SqlStore) -> None:
    old, _ = await store.create_task(request_for(1))
    await store.set_state(old.id, TaskState.STOPPED)
    await store.create_task(request_for(1))
    with pytest.raises(StoreError):
        await store.set_state(old.id, TaskState.QUEUED)
    assert await state_of(store, old.id) == TaskState.STOPPED


async def test_creating_a_task_finishes_its_event(store: SqlStore, clock: Clock) -> None:
    await store.record_delivery("gh-1", "github", {"n": 1})
    await store.record_delivery("gh-2", "github", {"n": 2})
    first = await store.lease_event("dispatcher", 30)
    second = await store.lease_event("dispatcher", 30)
    assert first is not None and second is not None
    task, created = await store.create_task(request_for(1), event_id=first.id)
    again, created_again = await store.create_task(request_for(1), event_id=second.id)
    assert (created, created_again, again.id) == (True, False, task.id)
    clock.advance(3600)
    assert await store.pending_events() == 0
    assert await store.lease_event("dispatcher", 30) is None


async def test_a_failed_task_insert_leaves_the_event_pending(
    backend: Backend, store: SqlStore, clock: Clock
) -> None:
    await store.record_delivery("gh-1", "github", {"n": 1})
    event = await store.lease_event("dispatcher", 30)
    assert event is not None
    backend.execute(REFUSE_TASK_INSERTS[backend.name])
    with pytest.raises(StoreError, match="task inserts refused by the test"):
        await store.create_task(request_for(1), event_id=event.id)
    assert await store.count_tasks() == 0
    assert await store.pending_events() == 1
    clock.advance(31)
    retried = await store.lease_event("dispatcher", 30)
    assert retried is not None and retried.id == event.id


async def test_an_unknown_event_rolls_the_new_task_back(store: SqlStore) -> None:
    with pytest.raises(StoreError, match="no inbox event 404"):
        await store.create_task(request_for(1), event_id=404)
    assert await store.count_tasks() == 0


async def test_the_oldest_queued_task_is_leased_first(store: SqlStore, clock: Clock) -> None:
    tasks = []
    for number in (1, 2, 3):
        tasks.append((await store.create_task(request_for(number)))[0])
        clock.advance(1)
    leased = await store.lease_task("worker-a", 30)
    assert leased is not None
    assert leased.id == tasks[0].id
    assert (leased.state, leased.lease_owner, leased.attempts) == (TaskState.RUNNING, "worker-a", 1)
    assert leased.lease_expires == clock() + 30
    assert [await leased_id(store), await leased_id(store)] == [tasks[1].id, tasks[2].id]
    assert await store.lease_task("worker-a", 30) is None


async def test_two_workers_never_lease_the_same_task(
    backend: Backend, clock: Clock, store: SqlStore
) -> None:
    for number in range(10):
        await store.create_task(request_for(number))
    async with opened(backend.make(clock)) as other:
        leased = await asyncio.gather(
            *(s.lease_task(f"worker-{n}", 30) for n, s in enumerate((store, other) * 10))
        )
    taken = [task for task in leased if task is not None]
    assert len(taken) == 10
    assert len({task.id for task in taken}) == 10
    assert await store.count_tasks(states=frozenset({TaskState.RUNNING})) == 10


async def test_only_the_lease_owner_renews_it(store: SqlStore, clock: Clock) -> None:
    await store.create_task(request_for(1))
    task = await store.lease_task("worker-a", 30)
    assert task is not None
    clock.advance(20)
    assert await store.renew_lease(task.id, "worker-b", 30) is False
    assert await store.renew_lease(task.id, "worker-a", 30) is True
    renewed = await store.get_task(task.id)
    assert renewed is not None and renewed.lease_expires == clock() + 30
    await store.set_state(task.id, TaskState.AWAITING_INPUT)
    assert await store.renew_lease(task.id, "worker-a", 30) is False


async def test_expired_leases_go_back_to_the_queue(store: SqlStore, clock: Clock) -> None:
    await store.create_task(request_for(1))
    task = await store.lease_task("crashed", 30)
    assert task is not None
    clock.advance(30)
    assert await store.requeue_expired() == 0
    clock.advance(1)
    assert await store.requeue_expired() == 1
    requeued = await store.get_task(task.id)
    assert requeued is not None
    assert (requeued.state, requeued.lease_owner, requeued.lease_expires) == (
        TaskState.QUEUED,
        None,
        None,
    )
    again = await store.lease_task("worker-b", 30)
    assert again is not None and (again.id, again.attempts) == (task.id, 2)


async def test_a_queued_task_sleeps_until_its_wake_time(store: SqlStore, clock: Clock) -> None:
    task, _ = await store.create_task(request_for(1))
    await store.set_state(task.id, TaskState.QUEUED, wake_at=clock() + 60)
    clock.advance(59)
    assert await store.lease_task("worker", 30) is None
    clock.advance(1)
    leased = await store.lease_task("worker", 30)
    assert leased is not None and leased.id == task.id


async def test_due_tasks_are_the_waiting_ones_whose_time_came(
    store: SqlStore, clock: Clock
) -> None:
    waiting = {}
    for number, (state, wake) in enumerate(
        [
            (TaskState.AWAITING_INPUT, 100.0),
            (TaskState.AWAITING_APPROVAL, 50.0),
            (TaskState.PAUSED, None),
            (TaskState.QUEUED, 10.0),
        ]
    ):
        task, _ = await store.create_task(request_for(number))
        wake_at = None if wake is None else clock() + wake
        await store.set_state(task.id, state, wake_at=wake_at)
        waiting[state] = task.id
    assert await store.due_tasks(clock() + 49) == []
    assert [t.id for t in await store.due_tasks(clock() + 60)] == [
        waiting[TaskState.AWAITING_APPROVAL]
    ]
    assert [t.id for t in await store.due_tasks(clock() + 100)] == [
        waiting[TaskState.AWAITING_APPROVAL],
        waiting[TaskState.AWAITING_INPUT],
    ]


async def test_set_state_keeps_or_drops_what_it_is_told(store: SqlStore, clock: Clock) -> None:
    await store.create_task(request_for(1))
    task = await store.lease_task("worker", 30)
    assert task is not None
    clock.advance(5)
    await store.set_state(task.id, TaskState.RUNNING, phase="execute", release=False)
    running = await store.get_task(task.id)
    assert running is not None
    assert (running.phase, running.lease_owner, running.updated_at) == (
        "execute",
        "worker",
        clock(),
    )
    await store.set_state(task.id, TaskState.FAILED, error="tests keep failing")
    failed = await store.get_task(task.id)
    assert failed is not None
    assert (failed.state, failed.phase, failed.error) == (
        TaskState.FAILED,
        "execute",
        "tests keep failing",
    )
    assert (failed.lease_owner, failed.lease_expires, failed.active) == (None, None, False)
    with pytest.raises(StoreError, match="no task nope"):
        await store.set_state("nope", TaskState.DONE)


async def test_tasks_are_listed_newest_first_and_counted(store: SqlStore, clock: Clock) -> None:
    ids = []
    for number in range(5):
        ids.append((await store.create_task(request_for(number)))[0].id)
        clock.advance(1)
    await store.set_state(ids[1], TaskState.DONE)
    await store.set_state(ids[3], TaskState.FAILED, error="boom")

    assert [t.id for t in await store.list_tasks()] == ids[::-1]
    assert [t.id for t in await store.list_tasks(limit=2)] == [ids[4], ids[3]]
    finished = frozenset({TaskState.DONE, TaskState.FAILED})
    assert [t.id for t in await store.list_tasks(states=finished)] == [ids[3], ids[1]]
    assert [t.id for t in await store.list_tasks(states=ACTIVE_STATES)] == [ids[4], ids[2], ids[0]]
    assert await store.list_tasks(states=frozenset()) == []
    assert await store.count_tasks() == 5
    assert await store.count_tasks(states=finished) == 2
    assert await store.count_tasks(states=frozenset({TaskState.PAUSED})) == 0
    with pytest.raises(ValueError, match="limit must be at least 1"):
        await store.list_tasks(limit=0)


async def test_tasks_created_in_the_same_instant_keep_their_order(store: SqlStore) -> None:
    ids = [(await store.create_task(request_for(number)))[0].id for number in range(4)]
    assert [t.id for t in await store.list_tasks()] == ids[::-1]
    assert await leased_id(store) == ids[0]
