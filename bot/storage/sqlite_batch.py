"""Group commit for webhook deliveries on the event loop's own SQLite connection.

The webhook path writes one small row pair per delivery and must answer in
milliseconds under load. Handing each write to the store's thread costs two
thread wake-ups and a fight for the GIL per request, which dominates its latency.
So deliveries are batched: the first one schedules a flush for the loop's next
turn, every delivery that arrives meanwhile joins it, and the batch commits in one
transaction (bulk inserts) on a second connection used only from the
loop. That connection never waits for SQLite's write lock (``timeout=0``) and
never checkpoints the WAL (``wal_autocheckpoint=0``: no fsync on the loop); when the
lock is taken, the batch goes to the store's thread instead, which waits properly,
and checkpoints run there too. Every caller still returns only after its delivery
is committed.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from bot.storage.base import StoreError
from bot.storage.schema import SQLITE, render
from bot.storage.scripts import Query, Rows

log = logging.getLogger(__name__)

Results = list[bool | Exception]


@dataclass(frozen=True, slots=True)
class Delivery:
    """One delivery to record: its key, forge, inbox payload (JSON text or None), time."""

    key: str
    forge: str
    payload: str | None
    received_at: float


Batch = list[Delivery]
CHECKPOINT_EVERY = 1000  # deliveries between WAL checkpoints (run in the store's thread)


def execute(conn: sqlite3.Connection, query: Query) -> Rows:
    cursor = conn.execute(render(SQLITE, query.sql), query.params or {})
    return [dict(row) for row in cursor.fetchall()]


def record_many(conn: sqlite3.Connection, batch: Batch) -> Results:
    """Record a batch in one write transaction (the bulk form of
    ``scripts.record_delivery``): a key seen before, or earlier in the batch, is a
    duplicate (False) and writes nothing. ``BEGIN IMMEDIATE`` raises before anything
    is written when the write lock cannot be had."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        keys = list({d.key: None for d in batch})
        seen: set[str] = set()
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            marks = ",".join("?" * len(chunk))
            query = f"SELECT delivery_key FROM inbox WHERE delivery_key IN ({marks})"  # noqa: S608 - placeholders only
            seen.update(row[0] for row in conn.execute(query, chunk))
        results: Results = []
        rows: list[tuple[str, str, str | None, str, float, float]] = []
        for d in batch:
            if d.key in seen:
                results.append(False)
                continue
            seen.add(d.key)
            state = "done" if d.payload is None else "pending"
            rows.append((d.key, d.forge, d.payload, state, d.received_at, d.received_at))
            results.append(True)
        conn.executemany(
            "INSERT INTO inbox (delivery_key, forge, payload, state, received_at, available_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            rows,
        )
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return results


class DeliveryBatcher:
    def __init__(
        self,
        path: Path,
        *,
        in_thread: Callable[[Batch], Awaitable[Results]],
        checkpoint: Callable[[], Awaitable[None]],
    ) -> None:
        self.path = path
        self._in_thread = in_thread
        self._checkpoint = checkpoint
        self._conn: sqlite3.Connection | None = None
        self._pending: list[tuple[Delivery, asyncio.Future[bool]]] = []
        self._scheduled = False
        self._since_checkpoint = 0
        self._background: set[asyncio.Task[None]] = set()

    def open(self) -> None:
        """Open the loop's connection (the schema exists: the store's thread made it)."""
        conn = sqlite3.connect(self.path, timeout=0, isolation_level=None, check_same_thread=False)
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA wal_autocheckpoint = 0")
        conn.execute("PRAGMA foreign_keys = ON")
        self._conn = conn

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    async def record(self, delivery: Delivery) -> bool:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        self._pending.append((delivery, future))
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._flush)
        return await future

    def _flush(self) -> None:
        self._scheduled = False
        batch, self._pending = self._pending, []
        if not batch:
            return
        conn = self._conn
        if conn is None:
            self._settle(batch, [StoreError(f"SQLite store {self.path} is not open")] * len(batch))
            return
        try:
            results = record_many(conn, [d for d, _ in batch])
        except sqlite3.OperationalError as exc:
            if not _locked(exc):
                self._settle(
                    batch, [StoreError(f"SQLite database {self.path}: {exc}")] * len(batch)
                )
                return
            self._spawn(self._via_thread(batch))
            return
        except sqlite3.Error as exc:
            self._settle(batch, [StoreError(f"SQLite database {self.path}: {exc}")] * len(batch))
            return
        self._settle(batch, results)
        self._since_checkpoint += len(batch)
        if self._since_checkpoint >= CHECKPOINT_EVERY:
            self._since_checkpoint = 0
            self._spawn(self._run_checkpoint())

    async def _via_thread(self, batch: list[tuple[Delivery, asyncio.Future[bool]]]) -> None:
        try:
            results = await self._in_thread([d for d, _ in batch])
        except Exception as exc:
            error = exc if isinstance(exc, StoreError) else StoreError(str(exc))
            results = [error] * len(batch)
        self._settle(batch, results)

    async def _run_checkpoint(self) -> None:
        try:
            await self._checkpoint()
        except StoreError as exc:
            log.warning("WAL checkpoint failed: %s", exc)

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    @staticmethod
    def _settle(batch: list[tuple[Delivery, asyncio.Future[bool]]], results: Results) -> None:
        for (_, future), result in zip(batch, results, strict=True):
            if future.done():
                continue
            if isinstance(result, BaseException):
                future.set_exception(result)
            else:
                future.set_result(result)


def _locked(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text
