"""The scale-out store: PostgreSQL through psycopg 3 and a connection pool.

Several web and worker replicas share one database. Leasing statements lock the row
they take with ``FOR UPDATE SKIP LOCKED``, so replicas never wait for, nor take, each
other's rows; duplicate deliveries and a second active task per issue are refused by
unique indexes (``ON CONFLICT DO NOTHING``). ``open()`` creates the schema under an
advisory lock, so replicas starting together do not race each other.

Timestamps come from each replica's clock: keep the hosts' clocks in sync (NTP).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from bot.progress import step
from bot.storage import scripts
from bot.storage.base import StoreError
from bot.storage.schema import POSTGRES, render
from bot.storage.scripts import Query, Rows, Script
from bot.storage.sql_store import Clock, SqlStore

T = TypeVar("T")


class PostgresStore(SqlStore):
    def __init__(
        self,
        *,
        dsn: str,
        clock: Clock = time.time,
        min_size: int = 1,
        max_size: int = 10,
        connect_timeout: float = 10.0,
    ) -> None:
        super().__init__(clock=clock)
        self._dsn = dsn
        self._min_size = min_size
        self._max_size = max_size
        self._connect_timeout = connect_timeout
        self._pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]] | None = None
        self.where = _describe(dsn)

    async def open(self) -> None:
        if self._pool is not None:
            return
        await self._create_schema()
        pool = AsyncConnectionPool(
            self._dsn,
            min_size=self._min_size,
            max_size=self._max_size,
            kwargs={"autocommit": True},
            check=AsyncConnectionPool.check_connection,
            name="bot-store",
            open=False,
        )
        try:
            await pool.open(wait=True, timeout=self._connect_timeout)
        except psycopg.Error as exc:
            await pool.close()
            raise StoreError(
                f"cannot open a connection pool to PostgreSQL {self.where}: {exc}"
            ) from exc
        self._pool = pool

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    async def _create_schema(self) -> None:
        """One direct connection first: its error says why the server cannot be reached."""
        try:
            conn = await psycopg.AsyncConnection.connect(
                self._dsn, autocommit=True, connect_timeout=max(1, round(self._connect_timeout))
            )
        except psycopg.Error as exc:
            raise StoreError(f"cannot connect to PostgreSQL {self.where}: {exc}") from exc
        try:
            async with conn.transaction():
                await scripts.run_async(scripts.create_schema(POSTGRES), _executor(conn))
        except psycopg.Error as exc:
            raise StoreError(f"cannot create the schema in PostgreSQL {self.where}: {exc}") from exc
        finally:
            await conn.close()

    async def _run(self, script: Script[T], *, write: bool) -> T:
        pool = self._pool
        if pool is None:
            raise StoreError(f"PostgreSQL store {self.where} is not open")
        try:
            with step("the store (PostgreSQL)"):
                async with pool.connection() as conn, conn.transaction():
                    return await scripts.run_async(script, _executor(conn))
        except psycopg.Error as exc:
            raise StoreError(f"PostgreSQL {self.where}: {exc}") from exc


def _executor(conn: psycopg.AsyncConnection[Any]) -> Callable[[Query], Awaitable[Rows]]:
    async def execute(query: Query) -> Rows:
        async with conn.cursor(row_factory=dict_row) as cursor:
            await cursor.execute(render(POSTGRES, query.sql), query.params)
            return await cursor.fetchall() if cursor.description is not None else []

    return execute


def _describe(dsn: str) -> str:
    """Where the DSN points, without its password (for error messages)."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.Error:
        raise StoreError(
            "the PostgreSQL DSN is not a valid connection string (check BOT_POSTGRES_DSN)"
        ) from None
    host = info.get("host") or "localhost"
    port = info.get("port") or "5432"
    return f"{host}:{port}/{info.get('dbname') or info.get('user') or ''}"
