"""The store's transactions, written once for both databases (sans-I/O).

Each transaction is a generator that yields ``Query`` objects and receives their
rows; it holds every decision (dedup, one active task per issue, leasing) and no
I/O. A driver runs it inside one database transaction: ``run_sync`` for SQLite's
thread, ``run_async`` for psycopg. An exception raised by a script, or by the
database, rolls the whole transaction back.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from bot.storage import migrations, schema
from bot.storage.base import InboxEvent, StoreError, TaskMessage
from bot.storage.rows import dump_json, event_from_row, load_json, message_from_row
from bot.storage.schema import SCHEMA_VERSION, Dialect

T = TypeVar("T")
Rows = list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Query:
    sql: str
    params: Mapping[str, Any] | None = None


Script = Generator[Query, Rows, T]


def run_sync(script: Script[T], execute: Callable[[Query], Rows]) -> T:
    try:
        query = next(script)
        while True:
            query = script.send(execute(query))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def run_async(script: Script[T], execute: Callable[[Query], Awaitable[Rows]]) -> T:
    try:
        query = next(script)
        while True:
            query = script.send(await execute(query))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


# --- schema and health ---------------------------------------------------------------------

_UPSERT_META = """INSERT INTO meta (key, value) VALUES (%(key)s, %(value)s)
ON CONFLICT (key) DO UPDATE SET value = excluded.value"""


def create_schema(dialect: Dialect) -> Script[None]:
    """Create what is missing, upgrading an older database's layout first."""
    if dialect.schema_lock:
        yield Query(dialect.schema_lock)
    yield Query(schema.META_TABLE)
    rows = yield Query("SELECT value FROM meta WHERE key = 'schema_version'")
    found = int(rows[0]["value"]) if rows else SCHEMA_VERSION
    if found > SCHEMA_VERSION:
        raise StoreError(
            f"the database has schema version {found}; this bot knows up to {SCHEMA_VERSION}: "
            "upgrade the bot"
        )
    for statement in migrations.upgrade(dialect, found):
        yield Query(statement)
    for statement in schema.schema_statements(dialect):
        yield Query(statement)
    yield Query(_UPSERT_META, {"key": "schema_version", "value": str(SCHEMA_VERSION)})


def ping(now: float) -> Script[None]:
    yield Query(_UPSERT_META, {"key": "last_ping", "value": repr(now)})


# --- deliveries and the inbox ----------------------------------------------------------------


def record_delivery(
    key: str, forge: str, payload: dict[str, Any] | None, now: float
) -> Script[bool]:
    """One inbox row per delivery key: its unique index is the dedup record. A delivery
    with nothing to handle (no payload) is recorded as already done."""
    rows = yield Query(
        """INSERT INTO inbox (delivery_key, forge, payload, state, received_at, available_at)
        VALUES (%(key)s, %(forge)s, %(payload)s, %(state)s, %(now)s, %(now)s)
        ON CONFLICT (delivery_key) DO NOTHING RETURNING id""",
        {
            "key": key,
            "forge": forge,
            "payload": None if payload is None else dump_json(payload),
            "state": "done" if payload is None else "pending",
            "now": now,
        },
    )
    return bool(rows)


def delivery_known(key: str) -> Script[bool]:
    rows = yield Query("SELECT 1 AS one FROM inbox WHERE delivery_key = %(key)s", {"key": key})
    return bool(rows)


def lease_event(owner: str, expires: float, now: float) -> Script[InboxEvent | None]:
    rows = yield Query(
        """UPDATE inbox SET state = 'leased', lease_owner = %(owner)s,
            lease_expires = %(expires)s, attempts = attempts + 1
        WHERE id = (SELECT id FROM inbox
            WHERE (state = 'pending' AND available_at <= %(now)s)
               OR (state = 'leased' AND lease_expires < %(now)s)
            ORDER BY id LIMIT 1 /*LOCK*/)
        RETURNING id, delivery_key, forge, payload, received_at, attempts""",
        {"owner": owner, "expires": expires, "now": now},
    )
    return event_from_row(rows[0]) if rows else None


def finish_event(event_id: int, error: str | None) -> Script[None]:
    rows = yield Query(
        """UPDATE inbox SET state = 'done', error = %(error)s, lease_owner = NULL,
            lease_expires = NULL
        WHERE id = %(id)s RETURNING id""",
        {"id": event_id, "error": error},
    )
    if not rows:
        raise StoreError(f"no inbox event {event_id}")


def retry_event(event_id: int, error: str, available_at: float) -> Script[None]:
    rows = yield Query(
        """UPDATE inbox SET state = 'pending', error = %(error)s, available_at = %(at)s,
            lease_owner = NULL, lease_expires = NULL
        WHERE id = %(id)s AND state <> 'done' RETURNING id""",
        {"id": event_id, "error": error, "at": available_at},
    )
    if not rows:
        raise StoreError(f"no open inbox event {event_id} to retry")


def pending_events() -> Script[int]:
    rows = yield Query("SELECT COUNT(*) AS n FROM inbox WHERE state <> 'done'")
    return int(rows[0]["n"])


def prune_deliveries(before: float) -> Script[int]:
    """Forget handled deliveries older than ``before`` (the end of the dedup window).
    Pending and leased events are never touched."""
    rows = yield Query(
        "DELETE FROM inbox WHERE state = 'done' AND received_at < %(before)s RETURNING id",
        {"before": before},
    )
    return len(rows)


# --- checkpoints, messages, comment ids, plan cache ----------------------------------------


def save_checkpoint(task_id: str, data: dict[str, Any], now: float) -> Script[None]:
    yield Query(
        """INSERT INTO checkpoints (task_id, data, updated_at) VALUES (%(id)s, %(data)s, %(now)s)
        ON CONFLICT (task_id) DO UPDATE SET data = excluded.data,
            updated_at = excluded.updated_at""",
        {"id": task_id, "data": dump_json(data), "now": now},
    )


def load_checkpoint(task_id: str) -> Script[dict[str, Any] | None]:
    rows = yield Query("SELECT data FROM checkpoints WHERE task_id = %(id)s", {"id": task_id})
    return load_json(rows[0]["data"]) if rows else None


def add_message(
    task_id: str,
    kind: str,
    payload: dict[str, Any],
    *,
    event_id: int | None,
    requeue: bool,
    now: float,
) -> Script[int]:
    if event_id is not None:
        yield from finish_event(event_id, None)
    rows = yield Query(
        """INSERT INTO messages (task_id, kind, payload, created_at)
        VALUES (%(id)s, %(kind)s, %(payload)s, %(now)s) RETURNING seq""",
        {"id": task_id, "kind": kind, "payload": dump_json(payload), "now": now},
    )
    if requeue:
        yield Query(
            """UPDATE tasks SET state = 'queued', wake_at = NULL, updated_at = %(now)s
            WHERE id = %(id)s AND state IN /*WAITING*/""",
            {"id": task_id, "now": now},
        )
    return int(rows[0]["seq"])


def messages_after(task_id: str, seq: int) -> Script[list[TaskMessage]]:
    rows = yield Query(
        "SELECT * FROM messages WHERE task_id = %(id)s AND seq > %(seq)s ORDER BY seq",
        {"id": task_id, "seq": seq},
    )
    return [message_from_row(row) for row in rows]


def get_comment_id(task_id: str, marker: str) -> Script[int | None]:
    rows = yield Query(
        "SELECT comment_id FROM comment_ids WHERE task_id = %(id)s AND marker = %(marker)s",
        {"id": task_id, "marker": marker},
    )
    return int(rows[0]["comment_id"]) if rows else None


def put_comment_id(task_id: str, marker: str, comment_id: int) -> Script[None]:
    yield Query(
        """INSERT INTO comment_ids (task_id, marker, comment_id)
        VALUES (%(id)s, %(marker)s, %(comment_id)s)
        ON CONFLICT (task_id, marker) DO UPDATE SET comment_id = excluded.comment_id""",
        {"id": task_id, "marker": marker, "comment_id": comment_id},
    )


def cache_get(key: str, now: float) -> Script[dict[str, Any] | None]:
    rows = yield Query(
        "SELECT value FROM plan_cache WHERE key = %(key)s AND expires_at > %(now)s",
        {"key": key, "now": now},
    )
    return load_json(rows[0]["value"]) if rows else None


def cache_put(
    key: str, repo_key: str, text: str, value: dict[str, Any], expires_at: float, now: float
) -> Script[None]:
    yield Query("DELETE FROM plan_cache WHERE expires_at <= %(now)s", {"now": now})
    yield Query(
        """INSERT INTO plan_cache (key, repo_key, text, value, expires_at)
        VALUES (%(key)s, %(repo_key)s, %(text)s, %(value)s, %(expires_at)s)
        ON CONFLICT (key) DO UPDATE SET repo_key = excluded.repo_key, text = excluded.text,
            value = excluded.value, expires_at = excluded.expires_at""",
        {
            "key": key,
            "repo_key": repo_key,
            "text": text,
            "value": dump_json(value),
            "expires_at": expires_at,
        },
    )


def cache_candidates(
    repo_key: str, now: float, limit: int
) -> Script[list[tuple[str, str, dict[str, Any]]]]:
    rows = yield Query(
        """SELECT key, text, value FROM plan_cache
        WHERE repo_key = %(repo_key)s AND expires_at > %(now)s
        ORDER BY expires_at DESC, key LIMIT %(limit)s""",
        {"repo_key": repo_key, "now": now, "limit": limit},
    )
    return [(row["key"], row["text"], load_json(row["value"])) for row in rows]
