"""Fixtures shared across test folders: a real PostgreSQL server for the whole session."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest

from tests.pg import INSTALL_HINT, find_bindir, postgres_server


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
