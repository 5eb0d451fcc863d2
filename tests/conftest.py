"""Fixtures shared across test folders: a real PostgreSQL server for the whole session."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator

import psycopg
import pytest

from bot.redact import RedactingFilter
from tests.pg import INSTALL_HINT, find_bindir, postgres_server


@pytest.fixture(autouse=True)
def _no_cli_log_handler_outlives_its_test() -> Iterator[None]:
    """``bot.cli.main`` run in a test puts its own handler on the root logger, writing to
    the stderr of that moment (under ``capsys``, a stream closed after the test). Left
    there, every later log line fails with "I/O operation on closed file" and prints a
    traceback, which slows the tests after it. It goes with the test."""
    yield
    root = logging.getLogger()
    for handler in root.handlers[:]:
        if any(isinstance(f, RedactingFilter) for f in handler.filters):
            root.removeHandler(handler)


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
