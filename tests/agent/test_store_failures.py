"""A store error is retried with backoff (specification 003, 6): a database locked for a
moment by another connection is waited out, and the task goes on; a store that fails
every retry stops the run with ``PersistenceFailed``, kept in errors.log."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from pathlib import Path

import pytest

from bot.llm.scripted import ScriptedLLM
from bot.run_events import ProgressEvent, ProgressKind
from bot.storage import retry
from bot.storage.base import TaskState
from bot.storage.retry import PersistenceFailed
from bot.storage.sqlite import SqliteStore
from tests.agent import docs
from tests.agent.conftest import Harness, make_harness


async def _harness(tmp_path: Path, stack: contextlib.AsyncExitStack) -> Harness:
    store = SqliteStore(tmp_path / "bot.sqlite3", busy_timeout=0.02)  # fails fast when locked
    await store.open()
    stack.push_async_callback(store.close)
    return await make_harness(tmp_path, stack, store=store)


def _script() -> ScriptedLLM:
    return ScriptedLLM([docs.readme_plan(), docs.write_readme(), docs.completion()])


async def test_a_store_locked_for_a_moment_is_waited_out(
    tmp_path: Path,
    stack: contextlib.AsyncExitStack,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(retry, "DELAYS", (0.1, 0.2, 0.4))
    harness = await _harness(tmp_path, stack)
    locker = sqlite3.connect(tmp_path / "bot.sqlite3", isolation_level=None)
    stack.callback(locker.close)

    async def emit(event: ProgressEvent) -> None:
        harness.events.append(event)
        if event.kind is ProgressKind.PLAN and not locker.in_transaction:
            locker.execute("BEGIN EXCLUSIVE")  # another writer holds the database a moment
            asyncio.get_running_loop().call_later(0.15, locker.commit)

    harness.emit = emit  # type: ignore[method-assign]
    with caplog.at_level(logging.WARNING, logger="bot.storage"):
        outcome = await harness.run(_script())

    assert outcome.state is TaskState.DONE, outcome
    retried = [r.getMessage() for r in caplog.records if "trying again" in r.getMessage()]
    assert retried and "database is locked" in retried[0]
    assert "the checkpoint: the store failed" in retried[0]


async def test_a_store_that_keeps_failing_stops_the_run(
    tmp_path: Path, stack: contextlib.AsyncExitStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(retry, "DELAYS", (0.01, 0.02, 0.04))
    harness = await _harness(tmp_path, stack)

    async def emit(event: ProgressEvent) -> None:
        harness.events.append(event)
        if event.kind is ProgressKind.PLAN:
            await harness.store.close()  # the database goes away for good

    harness.emit = emit  # type: ignore[method-assign]
    with pytest.raises(PersistenceFailed, match="the checkpoint: the store failed 4 times"):
        await harness.run(_script())

    errors = (harness.settings.data_dir / "runs" / harness.task.id / "errors.log").read_text()
    assert "[persistence] the checkpoint: the store failed 4 times" in errors
