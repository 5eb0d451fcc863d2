"""What only the SQLite store has: a file on disk, shared by several processes."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from subprocess import PIPE
from typing import Any

import pytest

from bot.config import Settings, StorageSettings
from bot.storage.base import StoreError
from bot.storage.factory import open_store
from bot.storage.sqlite import SqliteStore
from tests.storage.store_support import Clock, opened, request_for

ROOT = Path(__file__).resolve().parents[2]
HELPER = Path(__file__).with_name("store_proc.py")


def _run_processes(path: Path, mode: str, count: int, processes: int = 2) -> list[Any]:
    """Run ``store_proc.py`` in ``processes`` children released at the same moment."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, str(HELPER), str(path), mode, str(count)]
    children = [
        subprocess.Popen(command, stdin=PIPE, stdout=PIPE, stderr=PIPE, text=True, env=env)
        for _ in range(processes)
    ]
    try:
        for child in children:
            assert child.stdout is not None
            if child.stdout.readline().strip() != "ready":
                raise AssertionError(f"helper process failed: {child.communicate()[1]}")
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        outputs = []
        for child in children:
            out, err = child.communicate(timeout=60)
            assert child.returncode == 0, err
            outputs.append(json.loads(out))
        return outputs
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.communicate()


async def test_the_file_uses_wal_and_survives_a_restart(tmp_path: Path, clock: Clock) -> None:
    path = tmp_path / "data" / "bot.sqlite3"
    async with opened(SqliteStore(path, clock=clock)) as store:
        task, _ = await store.create_task(request_for(1))
        await store.record_delivery("gh-1", "github", {"n": 1})
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()
    async with opened(SqliteStore(path, clock=clock)) as store:
        assert await store.get_task(task.id) == task
        assert await store.record_delivery("gh-1", "github", {"n": 1}) is False
        assert await store.pending_events() == 1


async def test_two_processes_delivering_one_key_queue_one_event(
    tmp_path: Path, clock: Clock
) -> None:
    path = tmp_path / "bot.sqlite3"
    async with opened(SqliteStore(path, clock=clock)):
        pass
    counts = _run_processes(path, "deliver", 25)
    assert sum(counts) == 1
    async with opened(SqliteStore(path, clock=clock)) as store:
        assert await store.pending_events() == 1


async def test_two_processes_never_lease_the_same_task(tmp_path: Path) -> None:
    path = tmp_path / "bot.sqlite3"
    async with opened(SqliteStore(path)) as store:
        created = {(await store.create_task(request_for(n)))[0].id for n in range(30)}
    leased = _run_processes(path, "lease", 0)
    first, second = (set(ids) for ids in leased)
    assert not first & second
    assert first | second == created


async def test_an_unusable_data_directory_is_named(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the data directory should go")
    store = SqliteStore(blocker / "data" / "bot.sqlite3")
    with pytest.raises(StoreError, match=r"cannot create the data directory .*not-a-directory"):
        await store.open()
    with pytest.raises(StoreError, match="not open"):
        await store.get_task("x")


async def test_a_file_that_is_not_a_database_is_named(tmp_path: Path) -> None:
    path = tmp_path / "bot.sqlite3"
    path.write_bytes(b"this is not an SQLite database, just some text " * 100)
    with pytest.raises(StoreError, match=r"bot\.sqlite3.*not a database"):
        await SqliteStore(path).open()


async def test_the_factory_puts_the_file_in_the_data_directory(tmp_path: Path) -> None:
    data_dir = tmp_path / "state" / "nested"
    store = open_store(Settings(storage=StorageSettings(data_dir=data_dir)))
    assert isinstance(store, SqliteStore)
    assert store.path == data_dir / "bot.sqlite3"
    assert not data_dir.exists()  # nothing is touched before open()
    async with opened(store):
        assert (data_dir / "bot.sqlite3").is_file()


async def test_the_factory_store_names_an_unwritable_data_dir(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    store = open_store(Settings(storage=StorageSettings(data_dir=blocker / "data")))
    with pytest.raises(StoreError, match=re.escape(str(blocker / "data"))):
        await store.open()
