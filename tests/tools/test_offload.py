"""Tool work leaves the event loop alone: in worker processes, large redactions too.

One process serves webhooks and runs tasks; bench/ack_under_work.py measures what this
buys (webhook p99 with eight tasks searching and reading files)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from bot import offload
from bot.config import SandboxSettings
from bot.paths import TooLarge
from bot.redact import REDACTED, redact
from bot.sandbox.sandbox import Sandbox
from bot.sandbox.workspace import Workspace
from bot.tools.registry import Tool, ToolRegistry, ToolResult
from bot.tools.workspace_tools import workspace_tools
from tests.e2e.support import wait_until
from tests.tools import offload_probe

T = TypeVar("T")


async def test_eight_tasks_searching_run_in_the_worker_processes_not_the_server(
    make_workspace: Callable[..., Workspace],
) -> None:
    sandbox = Sandbox(SandboxSettings(timeout=60))
    registries = [
        ToolRegistry(workspace_tools(make_workspace(f"ws{n}"), sandbox, max_output_chars=5000))
        for n in range(8)
    ]
    calls = [r.call("search_files", {"pattern": "def"}, timeout=60) for r in registries]
    results = await asyncio.gather(*calls)
    assert all(result.ok and "def" in result.output for result in results), results

    spans = await asyncio.gather(*(offload.run(offload_probe.where, 0.05) for _ in range(8)))
    assert os.getpid() not in {pid for pid, _, _ in spans}
    # However many tasks ask at once, tool work holds at most all workers but one (the
    # one left for text work).
    busiest = max(sum(1 for _, b, e in spans if b < end and e > begin) for _, begin, end in spans)
    assert busiest <= offload.WORKERS - 1
    # ... and yield a core to the server's event loop when both want one.
    assert await offload.run(offload_probe.niceness) == os.nice(0) + offload.NICENESS


async def test_an_exception_in_the_worker_reaches_the_caller_whole() -> None:
    with pytest.raises(TooLarge) as raised:
        await offload.run(offload_probe.too_large)
    assert raised.value.size == 2_000_000
    assert "over the limit of 1000000 bytes" in str(raised.value)


async def test_a_dead_worker_is_replaced_and_later_calls_work() -> None:
    with pytest.raises(offload.WorkerDied, match="ended before it answered"):
        await offload.run(offload_probe.die)
    pid, _, _ = await offload.run(offload_probe.where, 0)
    assert pid != os.getpid()


async def test_a_large_tool_output_is_redacted_in_a_worker_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ran: list[tuple[Callable[..., Any], int]] = []
    real_compute = offload.compute

    async def compute(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        ran.append((fn, len(args[0]) if args and isinstance(args[0], str) else 0))
        return await real_compute(fn, *args, **kwargs)

    monkeypatch.setattr(offload, "compute", compute)
    secret = "hunter2-secret-value"
    outputs = {"small": f"ok {secret}", "large": "TOKEN" * 13_000 + f" {secret}"}

    async def echo(args: dict[str, Any]) -> ToolResult:
        return ToolResult.success(outputs[args["size"]])

    schema = {"type": "object", "properties": {"size": {"type": "string"}}}
    registry = ToolRegistry([Tool("echo", "echo", schema, handler=echo)], secrets=(secret,))

    small = await registry.call("echo", {"size": "small"}, timeout=10)
    assert small.output == f"ok {REDACTED}" and ran == []  # a short text: on the loop
    large = await registry.call("echo", {"size": "large"}, timeout=10)
    assert large.output.endswith(f" {REDACTED}") and secret not in large.output
    assert ran == [(redact, len(outputs["large"]))]  # 65,000 characters: in a worker


KILLED_SERVER = """
import asyncio, os, signal
from bot import offload

async def main():
    print(await offload.run(os.getpid), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)

asyncio.run(main())
"""


def test_a_worker_leaves_when_the_server_that_started_it_is_killed() -> None:
    # A killed server cannot stop its workers; each must not live on without it.
    done = subprocess.run(
        [sys.executable, "-c", KILLED_SERVER], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    worker = int(done.stdout.strip())
    deadline = time.monotonic() + 10 * offload.PARENT_POLL
    while alive(worker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(worker)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_a_caller_that_gives_up_kills_its_worker_and_the_next_call_gets_a_new_one(
    tmp_path: Path,
) -> None:
    held = tmp_path / "pid"
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(offload.run(offload_probe.hold, str(held), 60), timeout=1)
    pid = int(held.read_text())

    async def gone() -> bool:
        return not alive(pid)

    assert await wait_until(gone, 5)  # not left to finish a call nobody waits for
    started = time.monotonic()
    other, _, _ = await offload.run(offload_probe.where, 0)
    assert other != pid and time.monotonic() - started < 10


async def in_lane(lane: str, call: Awaitable[T]) -> T:
    offload.join_lane(lane)  # this asyncio task's context only
    return await call


async def test_text_work_never_waits_behind_tool_work_however_much_there_is() -> None:
    tool_work = [
        asyncio.create_task(in_lane(f"task-{n}", offload.run(offload_probe.where, 3)))
        for n in range(offload.WORKERS + 2)
    ]
    await asyncio.sleep(0.5)
    started = time.monotonic()
    await asyncio.create_task(in_lane("other", offload.compute(offload_probe.where, 0)))
    assert time.monotonic() - started < 2.5  # not after a 3 s call
    for task in tool_work:
        task.cancel()
    await asyncio.gather(*tool_work, return_exceptions=True)


async def test_tasks_take_turns_for_tool_work(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(offload, "WORKERS", 2)  # one worker for tool work
    first = [
        asyncio.create_task(in_lane("task-a", offload.run(offload_probe.where, 0.3)))
        for _ in range(3)
    ]
    await asyncio.sleep(0)
    second = asyncio.create_task(in_lane("task-b", offload.run(offload_probe.where, 0.3)))
    spans = await asyncio.gather(*first)
    _, begun, _ = await second
    begins = sorted(b for _, b, _ in spans)
    assert begins[0] < begun < begins[1]  # b's one call went before a's second


async def test_calls_cancelled_together_leave_every_worker_free(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A task stopping cancels its waiting calls at once: their futures end cancelled
    # before their tasks run again, and the worker freed meanwhile must not go to one.
    monkeypatch.setattr(offload, "WORKERS", 2)
    calls = [
        asyncio.create_task(in_lane(f"task-{n}", offload.run(offload_probe.where, 0.5)))
        for n in range(6)
    ]
    await asyncio.sleep(0.2)
    for call in calls:
        call.cancel()
    results = await asyncio.gather(*calls, return_exceptions=True)
    assert all(isinstance(r, asyncio.CancelledError) for r in results), results
    for _ in range(2):  # one tool worker: each call after the other, none waiting forever
        await asyncio.wait_for(offload.run(offload_probe.where, 0), timeout=15)


async def test_a_stream_of_text_work_does_not_stop_tool_work(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(offload, "WORKERS", 2)

    async def stream() -> None:
        while True:
            await offload.compute(offload_probe.where, 0.05)

    streams = [asyncio.create_task(in_lane(f"writer-{n}", stream())) for n in range(3)]
    await asyncio.sleep(0.3)  # both workers busy with text work, more always waiting
    started = time.monotonic()
    await asyncio.wait_for(in_lane("task", offload.run(offload_probe.where, 0)), timeout=15)
    took = time.monotonic() - started
    for task in streams:
        task.cancel()
    await asyncio.gather(*streams, return_exceptions=True)
    assert took < 2.0
