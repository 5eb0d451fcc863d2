"""The embedded store: one SQLite file in WAL mode.

One connection per store, used only from the store's own thread, so the event loop
never waits on the disk: each transaction is one hop to that thread. Writing
transactions start with ``BEGIN IMMEDIATE``, which takes SQLite's single write lock
up front (waiting up to ``busy_timeout`` for it), so several processes may share the
file (a web process and a worker process) and leases stay exclusive across them.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from bot.progress import step
from bot.storage import scripts
from bot.storage.base import StoreError
from bot.storage.rows import dump_json
from bot.storage.schema import SQLITE
from bot.storage.scripts import Script
from bot.storage.sql_store import Clock, SqlStore
from bot.storage.sqlite_batch import (
    Batch,
    Delivery,
    DeliveryBatcher,
    Results,
    execute,
    record_many,
)

T = TypeVar("T")

DB_FILENAME = "bot.sqlite3"


class SqliteStore(SqlStore):
    def __init__(
        self, path: str | os.PathLike[str], *, clock: Clock = time.time, busy_timeout: float = 5.0
    ) -> None:
        super().__init__(clock=clock)
        self.path = Path(path)
        self._busy_timeout = busy_timeout
        self._executor: ThreadPoolExecutor | None = None
        self._conn: sqlite3.Connection | None = None
        self._deliveries = DeliveryBatcher(
            self.path, in_thread=self._deliveries_in_thread, checkpoint=self._checkpoint
        )

    async def open(self) -> None:
        if self._executor is not None:
            return
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-store")
        self._executor = executor
        try:
            await self._call(self._connect)
            self._deliveries.open()
        except sqlite3.Error as exc:
            await self.close()
            raise StoreError(f"cannot open the SQLite database {self.path}: {exc}") from exc
        except BaseException:
            self._executor = None
            executor.shutdown(wait=False)
            raise

    async def close(self) -> None:
        executor = self._executor
        if executor is None:
            return
        self._deliveries.close()
        try:
            await self._call(self._disconnect)
        finally:
            self._executor = None
            executor.shutdown(wait=False)

    async def record_delivery(
        self, delivery_key: str, forge: str, payload: dict[str, Any] | None
    ) -> bool:
        """Group commit on the event loop's own connection (see ``sqlite_batch``)."""
        if self._executor is None:
            raise StoreError(f"SQLite store {self.path} is not open")
        text = None if payload is None else dump_json(payload)
        return await self._deliveries.record(Delivery(delivery_key, forge, text, self._clock()))

    async def _deliveries_in_thread(self, batch: Batch) -> Results:
        return await self._call(self._transact_many, batch)

    async def _checkpoint(self) -> None:
        await self._call(self._wal_checkpoint)

    async def _run(self, script: Script[T], *, write: bool) -> T:
        with step("the store (SQLite)"):
            return await self._call(self._transact, script, write)

    async def _call(self, fn: Callable[..., T], *args: object) -> T:
        if self._executor is None:
            raise StoreError(f"SQLite store {self.path} is not open")
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, fn, *args)
        except sqlite3.Error as exc:
            raise StoreError(f"SQLite database {self.path}: {exc}") from exc

    # --- in the store's thread ------------------------------------------------------------------

    def _connect(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"cannot create the data directory {self.path.parent}: {exc.strerror or exc}"
            ) from exc
        try:
            conn = sqlite3.connect(self.path, timeout=self._busy_timeout, isolation_level=None)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the SQLite database {self.path}: {exc}") from exc
        try:
            self._configure(conn)
            self._conn = conn
            self._transact(scripts.create_schema(SQLITE), True)
        except BaseException:
            self._conn = None
            conn.close()
            raise

    def _configure(self, conn: sqlite3.Connection) -> None:
        conn.row_factory = sqlite3.Row  # (connect's timeout already set busy_timeout)
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StoreError(
                f"SQLite database {self.path}: cannot use WAL mode (got {mode!r}); "
                "put data_dir on a local file system"
            )
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")

    def _disconnect(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def _transact(self, script: Script[T], write: bool) -> T:
        conn = self._conn
        if conn is None:
            raise StoreError(f"SQLite store {self.path} is not open")
        conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        try:
            result = scripts.run_sync(script, lambda query: execute(conn, query))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return result

    def _transact_many(self, batch: Batch) -> Results:
        conn = self._conn
        if conn is None:
            raise StoreError(f"SQLite store {self.path} is not open")
        return record_many(conn, batch)

    def _wal_checkpoint(self) -> None:
        if self._conn is not None:
            self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
