"""Every foreign key's child columns lead an index, on both backends.

Without one, deleting parent rows makes the database scan the whole child table
once per deleted row: quadratic, holding the write lock all along (the daily prune
of old deliveries once did exactly that).
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import psycopg
import pytest

from bot.storage import scripts
from bot.storage.postgres import PostgresStore
from bot.storage.schema import POSTGRES, SQLITE, Dialect, render
from bot.storage.sqlite import SqliteStore


def _unindexed_sqlite(conn: sqlite3.Connection) -> list[str]:
    tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    missing = []
    for table in tables:
        leading: set[tuple[str, ...]] = set()
        for index in conn.execute(f"PRAGMA index_list('{table}')").fetchall():
            columns = [row[2] for row in conn.execute(f"PRAGMA index_info('{index[1]}')")]
            leading.update(tuple(columns[:n]) for n in range(1, len(columns) + 1))
        foreign: dict[int, list[str]] = {}
        for key in conn.execute(f"PRAGMA foreign_key_list('{table}')").fetchall():
            foreign.setdefault(key[0], []).append(key[3])
        missing += [f"{table}{cols}" for cols in foreign.values() if tuple(cols) not in leading]
    return missing


async def test_sqlite_indexes_every_foreign_key(tmp_path: Path) -> None:
    path = tmp_path / "bot.sqlite3"
    store = SqliteStore(path)
    await store.open()
    await store.close()
    conn = sqlite3.connect(path)
    try:
        assert _unindexed_sqlite(conn) == []
        conn.execute("DROP INDEX messages_by_task")  # the check itself can fail
        assert _unindexed_sqlite(conn) == ["messages['task_id']"]
    finally:
        conn.close()


_PG_UNINDEXED = """
SELECT c.conname
FROM pg_constraint c
WHERE c.contype = 'f' AND c.connamespace = current_schema()::regnamespace
AND NOT EXISTS (
    SELECT 1 FROM pg_index i
    WHERE i.indrelid = c.conrelid
    AND (i.indkey::int2[])[0:cardinality(c.conkey) - 1] @> c.conkey
)
ORDER BY 1
"""


@pytest.mark.postgres
async def test_postgres_indexes_every_foreign_key(pg_test_dsn: str) -> None:
    store = PostgresStore(dsn=pg_test_dsn)
    await store.open()
    await store.close()
    with psycopg.connect(pg_test_dsn, autocommit=True) as conn:
        assert conn.execute(_PG_UNINDEXED).fetchall() == []
        conn.execute("DROP INDEX messages_by_task")
        assert conn.execute(_PG_UNINDEXED).fetchall() == [("messages_task_id_fkey",)]


# --- the hourly prune reads only what it deletes ----------------------------------------------


def _prune_statement(dialect: Dialect) -> tuple[str, dict[str, object]]:
    query = next(scripts.prune_deliveries(before=1000.0))
    return render(dialect, query.sql), dict(query.params or {})


async def test_sqlite_prunes_through_the_index_of_handled_events(tmp_path: Path) -> None:
    path = tmp_path / "bot.sqlite3"
    store = SqliteStore(path)
    await store.open()
    await store.close()
    sql, params = _prune_statement(SQLITE)

    def plan() -> str:
        with contextlib.closing(sqlite3.connect(path)) as conn:
            rows = conn.execute(f"EXPLAIN QUERY PLAN {sql}", params).fetchall()
        return " ".join(row[3] for row in rows)

    assert "USING INDEX inbox_done" in plan()
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("DROP INDEX inbox_done")  # without it: a scan of every event kept
    assert "SCAN inbox" in plan()


@pytest.mark.postgres
async def test_postgres_prunes_through_the_index_of_handled_events(pg_test_dsn: str) -> None:
    store = PostgresStore(dsn=pg_test_dsn)
    await store.open()
    await store.close()
    sql, params = _prune_statement(POSTGRES)
    with psycopg.connect(pg_test_dsn, autocommit=True) as conn:
        conn.execute("SET enable_seqscan = off")  # an empty table: ask whether it can
        plan = " ".join(row[0] for row in conn.execute(f"EXPLAIN {sql}", params))
        assert "inbox_done" in plan, plan
