"""Every behavioural store test runs against SQLite and against a real PostgreSQL."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest

from bot.storage.postgres import PostgresStore
from bot.storage.sql_store import SqlStore
from bot.storage.sqlite import SqliteStore
from tests.storage.store_support import Backend, Clock


@pytest.fixture
def clock() -> Clock:
    return Clock()


def _sqlite_backend(path: Path) -> Backend:
    def execute(sql: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path)
        try:
            conn.executescript(sql)
        finally:
            conn.close()

    return Backend("sqlite", lambda clock: SqliteStore(path, clock=clock), execute)


def _postgres_backend(dsn: str) -> Backend:
    def execute(sql: str) -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.encode())

    return Backend("postgres", lambda clock: PostgresStore(dsn=dsn, clock=clock), execute)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "sqlite":
        return _sqlite_backend(tmp_path / "data" / "bot.sqlite3")
    return _postgres_backend(request.getfixturevalue("pg_test_dsn"))


@pytest.fixture
async def store(backend: Backend, clock: Clock) -> AsyncIterator[SqlStore]:
    store = backend.make(clock)
    await store.open()
    yield store
    await store.close()
