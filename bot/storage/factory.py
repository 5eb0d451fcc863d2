"""Build the configured store (not opened: ``await store.open()`` connects)."""

from __future__ import annotations

import time

from bot.config import Settings
from bot.storage.base import Store, StoreError
from bot.storage.sql_store import Clock
from bot.storage.sqlite import DB_FILENAME, SqliteStore


def open_store(settings: Settings, *, clock: Clock = time.time) -> Store:
    """The store ``settings.storage.backend`` names.

    SQLite keeps ``bot.sqlite3`` in ``storage.data_dir`` (created by ``open()``);
    PostgreSQL needs ``storage.postgres_dsn`` (``BOT_POSTGRES_DSN``) and the
    ``postgres`` extra (psycopg, psycopg-pool).
    """
    storage = settings.storage
    if storage.backend == "sqlite":
        return SqliteStore(storage.data_dir / DB_FILENAME, clock=clock)
    if storage.postgres_dsn is None:
        raise StoreError("storage.backend is postgres but no DSN is set: set BOT_POSTGRES_DSN")
    try:
        from bot.storage.postgres import PostgresStore
    except ImportError as exc:
        raise StoreError(
            f"storage.backend is postgres but {exc.name} is not installed: "
            "pip install 'bot[postgres]'"
        ) from exc
    return PostgresStore(
        dsn=storage.postgres_dsn.get_secret_value(),
        clock=clock,
        max_size=settings.worker.max_workers + 8,
    )
