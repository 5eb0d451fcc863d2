"""Checkpoints, messages, comment ids, the plan cache and health, on both backends."""

from __future__ import annotations

import pytest

from bot.storage.base import StoreError, TaskState
from bot.storage.sql_store import SqlStore
from tests.storage.store_support import START, Backend, Clock, request_for, state_of


async def test_a_checkpoint_is_overwritten_and_loaded(store: SqlStore) -> None:
    task, _ = await store.create_task(request_for(1))
    assert await store.load_checkpoint(task.id) is None
    await store.save_checkpoint(task.id, {"step": 1, "plan": ["a", "b"]})
    await store.save_checkpoint(task.id, {"step": 2, "plan": ["a", "b"], "note": "日本語"})
    assert await store.load_checkpoint(task.id) == {
        "step": 2,
        "plan": ["a", "b"],
        "note": "日本語",
    }


async def test_a_checkpoint_of_an_unknown_task_is_refused(store: SqlStore) -> None:
    with pytest.raises(StoreError):
        await store.save_checkpoint("no-such-task", {"step": 1})


async def test_messages_come_back_in_order_after_a_sequence_number(
    store: SqlStore, clock: Clock
) -> None:
    task, _ = await store.create_task(request_for(1))
    other, _ = await store.create_task(request_for(2))
    first = await store.add_message(task.id, "feedback", {"body": "use tabs"})
    await store.add_message(other.id, "command", {"name": "stop"})
    clock.advance(1)
    second = await store.add_message(task.id, "command", {"name": "approve"})
    assert second > first

    messages = await store.messages_after(task.id, 0)
    assert [(m.seq, m.kind, m.payload) for m in messages] == [
        (first, "feedback", {"body": "use tabs"}),
        (second, "command", {"name": "approve"}),
    ]
    assert [m.created_at for m in messages] == [START, START + 1]
    assert [m.seq for m in await store.messages_after(task.id, first)] == [second]
    assert await store.messages_after(task.id, second) == []


async def test_a_message_can_wake_a_waiting_task(store: SqlStore, clock: Clock) -> None:
    task, _ = await store.create_task(request_for(1))
    await store.set_state(task.id, TaskState.AWAITING_INPUT, wake_at=clock() + 3600)
    await store.add_message(task.id, "feedback", {"body": "noted"})
    assert await state_of(store, task.id) == TaskState.AWAITING_INPUT

    await store.add_message(task.id, "feedback", {"body": "go on"}, requeue=True)
    woken = await store.get_task(task.id)
    assert woken is not None
    assert (woken.state, woken.wake_at) == (TaskState.QUEUED, None)
    leased = await store.lease_task("worker", 30)
    assert leased is not None and leased.id == task.id


async def test_a_message_does_not_requeue_a_running_task(store: SqlStore) -> None:
    await store.create_task(request_for(1))
    task = await store.lease_task("worker", 30)
    assert task is not None
    await store.add_message(task.id, "feedback", {"body": "also this"}, requeue=True)
    running = await store.get_task(task.id)
    assert running is not None
    assert (running.state, running.lease_owner) == (TaskState.RUNNING, "worker")


async def test_a_message_finishes_its_event_or_neither_happens(
    store: SqlStore, clock: Clock
) -> None:
    task, _ = await store.create_task(request_for(1))
    await store.record_delivery("gh-1", "github", {"n": 1})
    await store.record_delivery("gh-2", "github", {"n": 2})
    first = await store.lease_event("dispatcher", 30)
    second = await store.lease_event("dispatcher", 30)
    assert first is not None and second is not None

    await store.add_message(task.id, "feedback", {"body": "hi"}, event_id=first.id)
    with pytest.raises(StoreError):
        await store.add_message("no-such-task", "feedback", {"body": "x"}, event_id=second.id)
    assert await store.pending_events() == 1
    clock.advance(31)
    retried = await store.lease_event("dispatcher", 30)
    assert retried is not None and retried.id == second.id
    assert len(await store.messages_after(task.id, 0)) == 1


async def test_comment_ids_are_kept_per_task_and_marker(store: SqlStore) -> None:
    task, _ = await store.create_task(request_for(1))
    big = 2**40 + 7  # forge comment ids outgrow 32 bits
    assert await store.get_comment_id(task.id, "status") is None
    await store.put_comment_id(task.id, "status", 11)
    await store.put_comment_id(task.id, "plan", big)
    await store.put_comment_id(task.id, "status", 12)
    assert await store.get_comment_id(task.id, "status") == 12
    assert await store.get_comment_id(task.id, "plan") == big
    assert await store.get_comment_id(task.id, "summary") is None


async def test_the_plan_cache_expires_entries(store: SqlStore, clock: Clock) -> None:
    now = clock()
    await store.cache_put(
        "k1", repo_key="github:o/r", text="fix the bug", value={"plan": 1}, expires_at=now + 60
    )
    assert await store.cache_get("k1", now) == {"plan": 1}
    assert await store.cache_get("k1", now + 60) is None
    assert await store.cache_get("missing", now) is None
    await store.cache_put(
        "k1", repo_key="github:o/r", text="fix it", value={"plan": 2}, expires_at=now + 120
    )
    assert await store.cache_get("k1", now + 60) == {"plan": 2}


async def test_cache_candidates_are_one_repositorys_live_entries(
    store: SqlStore, clock: Clock
) -> None:
    now = clock()
    entries = [
        ("a", "github:o/r", now + 10),
        ("b", "github:o/r", now + 30),
        ("c", "github:o/r", now + 20),
        ("old", "github:o/r", now - 1),
        ("elsewhere", "gitlab:g/p", now + 30),
    ]
    for key, repo, expires in entries:
        await store.cache_put(
            key, repo_key=repo, text=f"text {key}", value={"key": key}, expires_at=expires
        )
    candidates = await store.cache_candidates("github:o/r", now)
    assert candidates == [
        ("b", "text b", {"key": "b"}),
        ("c", "text c", {"key": "c"}),
        ("a", "text a", {"key": "a"}),
    ]
    assert [key for key, _, _ in await store.cache_candidates("github:o/r", now, limit=1)] == ["b"]
    assert [key for key, _, _ in await store.cache_candidates("github:o/r", now + 15)] == ["b", "c"]
    assert await store.cache_candidates("github:none/none", now) == []


async def test_ping_answers_while_open_and_fails_when_closed(store: SqlStore) -> None:
    await store.ping()
    await store.close()
    with pytest.raises(StoreError, match="not open"):
        await store.ping()


async def test_a_database_from_a_newer_bot_is_refused(backend: Backend, clock: Clock) -> None:
    store = backend.make(clock)
    await store.open()
    await store.close()
    backend.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match=r"schema version 99.*upgrade the bot"):
        await backend.make(clock).open()


async def test_open_is_idempotent_and_keeps_the_data(backend: Backend, clock: Clock) -> None:
    store = backend.make(clock)
    await store.open()
    await store.open()
    task, _ = await store.create_task(request_for(1))
    await store.close()
    await store.close()
    reopened = backend.make(clock)
    await reopened.open()
    try:
        assert await reopened.get_task(task.id) == task
    finally:
        await reopened.close()


async def test_the_llm_dialect_is_kept_per_endpoint_and_model(
    store: SqlStore, clock: Clock
) -> None:
    endpoint = "http://127.0.0.1:8000/v1"
    assert await store.get_llm_dialect(endpoint, "qwen") is None
    await store.put_llm_dialect(endpoint, "qwen", dialect="json_schema", server="vllm")
    clock.advance(5)
    await store.put_llm_dialect(endpoint, "qwen", dialect="guided_json", server="vllm")
    await store.put_llm_dialect(endpoint, "llama", dialect="json_object", server="vllm")
    assert await store.get_llm_dialect(endpoint, "qwen") == ("guided_json", "vllm", clock())
    assert (await store.get_llm_dialect(endpoint, "llama") or ("",))[0] == "json_object"
    assert await store.get_llm_dialect("http://other/v1", "qwen") is None
    clock.advance(30 * 86400)
    await store.prune(older_than=clock() - 14 * 86400)  # not a mark: never pruned
    assert await store.get_llm_dialect(endpoint, "qwen") is not None


async def test_a_row_that_cannot_be_read_back_is_a_store_error(
    backend: Backend, store: SqlStore
) -> None:
    """A stored document of the wrong shape (in SQLite's text: not JSON at all) or a
    column of the wrong type is the store's error, naming what could not be read: never
    a decoder's exception."""
    task, _ = await store.create_task(request_for(1))
    await store.add_message(task.id, "feedback", {"body": "use tabs"})
    if backend.name == "sqlite":
        backend.execute("UPDATE messages SET payload = 'not json'")
    else:
        backend.execute("UPDATE messages SET payload = '[1, 2]'")
    with pytest.raises(StoreError, match="stored JSON"):
        await store.messages_after(task.id, 0)
    if backend.name == "sqlite":  # PostgreSQL's columns keep their types
        backend.execute("UPDATE tasks SET attempts = 'many'")
        with pytest.raises(StoreError, match=f"task {task.id}: the stored row is unreadable"):
            await store.get_task(task.id)
