"""Write pacing: one write at a time per key, a pause between writes, and a turn that
is given back on every path, cancellation during the pacing wait included."""

from __future__ import annotations

import asyncio
import time

import pytest

from bot.forges.base import ForgeError
from bot.forges.retry import WritePacer, WriteSlotTimeout


async def write(pacer: WritePacer, key: str, log: list[str], name: str) -> None:
    async with pacer.slot(key):
        log.append(name)


async def test_a_writer_cancelled_during_its_pacing_wait_gives_its_turn_back() -> None:
    pacer = WritePacer(interval=0.3)
    log: list[str] = []
    await write(pacer, "k", log, "first")
    second = asyncio.create_task(write(pacer, "k", log, "second"))
    await asyncio.sleep(0.05)  # the second writer holds the turn and sleeps out the pause
    second.cancel()
    with pytest.raises(asyncio.CancelledError):
        await second
    await asyncio.wait_for(write(pacer, "k", log, "third"), timeout=2.0)
    assert log == ["first", "third"]


async def test_a_writer_cancelled_while_it_writes_gives_its_turn_back() -> None:
    pacer = WritePacer(interval=0.0)
    entered = asyncio.Event()

    async def stuck() -> None:
        async with pacer.slot("k"):
            entered.set()
            await asyncio.Event().wait()

    holder = asyncio.create_task(stuck())
    await entered.wait()
    holder.cancel()
    with pytest.raises(asyncio.CancelledError):
        await holder
    log: list[str] = []
    await asyncio.wait_for(write(pacer, "k", log, "next"), timeout=1.0)
    assert log == ["next"]


async def test_a_writer_cancelled_while_waiting_for_its_turn_leaves_the_queue_intact() -> None:
    pacer = WritePacer(interval=0.0)
    release = asyncio.Event()
    entered = asyncio.Event()

    async def holder() -> None:
        async with pacer.slot("k"):
            entered.set()
            await release.wait()

    first = asyncio.create_task(holder())
    await entered.wait()
    log: list[str] = []
    waiting = asyncio.create_task(write(pacer, "k", log, "cancelled"))
    behind = asyncio.create_task(write(pacer, "k", log, "behind"))
    await asyncio.sleep(0.01)
    waiting.cancel()
    release.set()
    await asyncio.wait_for(asyncio.gather(first, behind), timeout=1.0)
    assert log == ["behind"]


async def test_a_write_that_cannot_get_its_turn_in_time_fails_clearly() -> None:
    pacer = WritePacer(interval=0.0, slot_timeout=0.2)
    entered = asyncio.Event()

    async def stuck() -> None:
        async with pacer.slot("installation:1"):
            entered.set()
            await asyncio.Event().wait()

    holder = asyncio.create_task(stuck())
    await entered.wait()
    started = time.monotonic()
    with pytest.raises(WriteSlotTimeout, match=r"installation:1 within 0\.2 s") as caught:
        await write(pacer, "installation:1", [], "late")
    assert 0.15 < time.monotonic() - started < 1.0
    assert isinstance(caught.value, ForgeError)  # the task's usual retry handles it
    holder.cancel()
    with pytest.raises(asyncio.CancelledError):
        await holder
    await asyncio.wait_for(write(pacer, "installation:1", [], "after"), timeout=1.0)


async def test_writes_for_one_key_are_paced_and_other_keys_do_not_wait() -> None:
    pacer = WritePacer(interval=0.2)
    log: list[str] = []
    await write(pacer, "a", log, "a1")
    started = time.monotonic()
    await write(pacer, "b", log, "b1")
    assert time.monotonic() - started < 0.1
    await write(pacer, "a", log, "a2")
    assert time.monotonic() - started >= 0.15
    assert log == ["a1", "b1", "a2"]
