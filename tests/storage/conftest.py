"""Every behavioural store test runs against SQLite and against a real PostgreSQL."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psycopg
import pytest

from bot.storage.postgres import PostgresStore
from bot.storage.sql_store import SqlStore
from bot.storage.sqlite import SqliteStore
from tests.pg import INSTALL_HINT, find_bindir, postgres_server
from tests.storage.store_support import Backend, Clock


@pytest.fixture(scope="session")
def pg_dsn() -> Iterator[str]:
    if find_bindir() is None:
        pytest.skip(INSTALL_HINT)
    with postgres_server() as dsn:
        yield dsn


@pytest.fixture
def pg_test_dsn(pg_dsn: str) -> str:
    """A DSN whose search_path is a fresh schema: every test starts with no tables."""
    schema = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    return psycopg.conninfo.make_conninfo(pg_dsn, options=f"-c search_path={schema}")


@pytest.fixture
def clock() -> Clock:
    return Clock()


def _sqlite_backend(path: Path) -> Backend:
    def execute(sql: str) -> None:
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
