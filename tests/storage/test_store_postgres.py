"""What only the PostgreSQL store has: a server to reach, replicas that start together."""

from __future__ import annotations

import asyncio

import psycopg
import pytest
from pydantic import SecretStr

from bot.config import Settings, StorageSettings, WorkerSettings
from bot.storage.base import StoreError
from bot.storage.factory import open_store
from bot.storage.postgres import PostgresStore
from tests.pg import free_port
from tests.storage.store_support import Clock, opened, request_for


async def test_an_unreachable_server_is_a_clear_error() -> None:
    store = PostgresStore(dsn=f"postgresql://bot:secret-pw@127.0.0.1:{free_port()}/bot")
    with pytest.raises(
        StoreError, match=r"cannot connect to PostgreSQL 127\.0\.0\.1:\d+/bot"
    ) as info:
        await store.open()
    assert "secret-pw" not in str(info.value)
    with pytest.raises(StoreError, match="not open"):
        await store.ping()


def test_a_malformed_dsn_is_refused_without_echoing_it() -> None:
    with pytest.raises(StoreError, match="not a valid connection string") as info:
        PostgresStore(dsn="host=db password=hunter2 this-is-not-key-value")
    assert "hunter2" not in str(info.value)


def test_the_factory_needs_a_dsn_for_postgres() -> None:
    settings = Settings(storage=StorageSettings(backend="postgres"))
    with pytest.raises(StoreError, match="set BOT_POSTGRES_DSN"):
        open_store(settings)


@pytest.mark.postgres
async def test_replicas_starting_together_share_one_schema(pg_test_dsn: str) -> None:
    stores = [PostgresStore(dsn=pg_test_dsn) for _ in range(4)]
    await asyncio.gather(*(store.open() for store in stores))
    try:
        results = await asyncio.gather(*(s.create_task(request_for(1)) for s in stores))
        assert [created for _, created in results].count(True) == 1
    finally:
        await asyncio.gather(*(store.close() for store in stores))


@pytest.mark.postgres
async def test_the_factory_builds_a_working_postgres_store(pg_test_dsn: str) -> None:
    settings = Settings(
        storage=StorageSettings(backend="postgres", postgres_dsn=SecretStr(pg_test_dsn)),
        worker=WorkerSettings(max_workers=2),
    )
    store = open_store(settings, clock=Clock())
    assert isinstance(store, PostgresStore)
    async with opened(store):
        await store.ping()
        assert await store.record_delivery("gh-1", "github", {"n": 1}) is True


@pytest.mark.postgres
async def test_connections_the_server_dropped_are_replaced(pg_dsn: str, pg_test_dsn: str) -> None:
    """After a server restart or failover the pool hands out no broken connection."""
    async with opened(PostgresStore(dsn=pg_test_dsn)) as store:
        await store.ping()
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE pid <> pg_backend_pid() AND datname = current_database()"
            )
        await store.ping()
        assert await store.count_tasks() == 0
