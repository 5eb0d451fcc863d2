"""Upgrades of an existing database's layout, one schema version at a time.

``upgrade(dialect, found)`` gives the statements that take a database at version
``found`` to the current layout; the store runs them in the transaction that
creates the schema, before the ``CREATE ... IF NOT EXISTS`` statements, so an
interrupted upgrade leaves the database as it was.
"""

from __future__ import annotations

from bot.storage.schema import SCHEMA_VERSION, Dialect, schema_statements

_COPY_INBOX = """INSERT INTO inbox_v2 (id, delivery_key, forge, payload, state, received_at,
    available_at, lease_owner, lease_expires, attempts, error)
SELECT id, delivery_key, forge, payload, state, received_at,
    available_at, lease_owner, lease_expires, attempts, error FROM inbox"""

# Version 1 kept the dedup keys in ``deliveries``; version 2 keeps them in the inbox.
_DELIVERIES_INTO_INBOX = """INSERT INTO {inbox} (delivery_key, forge, payload, state,
    received_at, available_at)
SELECT d.key, d.forge, NULL, 'done', d.received_at, d.received_at FROM deliveries d
WHERE NOT EXISTS (SELECT 1 FROM inbox i WHERE i.delivery_key = d.key)"""


def _one_inbox_sqlite(dialect: Dialect) -> list[str]:
    """SQLite cannot drop a constraint: build the new inbox beside the old, then swap."""
    (create,) = [s for s in schema_statements(dialect, inbox="inbox_v2") if "inbox_v2 (" in s]
    return [
        create,
        _COPY_INBOX,
        _DELIVERIES_INTO_INBOX.format(inbox="inbox_v2"),
        "DROP TABLE inbox",
        "DROP TABLE deliveries",
        "ALTER TABLE inbox_v2 RENAME TO inbox",
    ]


def _one_inbox_postgres() -> list[str]:
    return [
        "ALTER TABLE inbox DROP CONSTRAINT IF EXISTS inbox_delivery_key_fkey",
        "ALTER TABLE inbox ALTER COLUMN payload DROP NOT NULL",
        _DELIVERIES_INTO_INBOX.format(inbox="inbox"),
        "DROP TABLE deliveries",
        "DROP INDEX IF EXISTS inbox_by_delivery",
        "ALTER TABLE inbox ADD CONSTRAINT inbox_delivery_key_key UNIQUE (delivery_key)",
    ]


def upgrade(dialect: Dialect, found: int) -> list[str]:
    """The statements from version ``found`` to ``SCHEMA_VERSION`` (none when current)."""
    statements: list[str] = []
    if found < 2:
        statements += (
            _one_inbox_sqlite(dialect) if dialect.name == "sqlite" else _one_inbox_postgres()
        )
    if found < 3:  # a new table: created as it is missing, nothing to move
        statements += [s for s in schema_statements(dialect) if "marks" in s]
    if found < 4:  # a new table, likewise
        statements += [s for s in schema_statements(dialect) if "llm_dialects" in s]
    if found < 5:  # a new table and its indexes, likewise
        statements += [s for s in schema_statements(dialect) if " watches" in s]
    assert found >= SCHEMA_VERSION or statements, f"no upgrade from schema version {found}"
    return statements
