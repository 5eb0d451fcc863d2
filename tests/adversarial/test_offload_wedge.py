"""One task's slow tool call must not wedge the offload workers for every task.

A ``search_files`` over 100,000 empty files kept the only worker busy long after its
caller gave up at 2 s, and a 3,000-character redaction for another task waited 42.6 s
behind it. Now the caller's time-out kills that worker (a new one takes its place), and
text work (redaction) never queues behind tool work."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from bot import offload
from bot.config import SandboxSettings
from bot.sandbox.sandbox import Sandbox
from bot.sandbox.workspace import Workspace
from bot.tools.registry import ToolRegistry, ToolResult
from bot.tools.workspace_tools import workspace_tools

T = TypeVar("T")
FILES = 100_000


def empty_files(root: Path, count: int) -> None:
    for d in range(count // 1000):
        folder = root / f"d{d:03}"
        folder.mkdir(parents=True)
        for f in range(1000):
            os.close(os.open(folder / f"f{f:04}.txt", os.O_CREAT | os.O_WRONLY, 0o644))


async def in_lane(lane: str, call: Callable[[], Awaitable[T]]) -> T:
    offload.join_lane(lane)  # as the worker does for each task it runs
    return await call()


async def timed(call: Awaitable[object], limit: float) -> float:
    """Seconds ``call`` took; ``inf`` when it took more than ``limit``."""
    started = time.monotonic()
    try:
        await asyncio.wait_for(call, limit)
    except TimeoutError:
        return float("inf")
    return time.monotonic() - started


async def test_a_search_over_100000_empty_files_wedges_no_other_task(
    make_workspace: Callable[..., Workspace],
) -> None:
    ws = make_workspace()
    await ws.ensure()
    await asyncio.to_thread(empty_files, ws.path / "many", FILES)
    sandbox = Sandbox(SandboxSettings(timeout=60, max_output_chars=20_000))
    registry = ToolRegistry(workspace_tools(ws, sandbox, max_output_chars=20_000))
    # Both workers started (a cold start is not what this measures).
    await asyncio.gather(*(offload.compute(os.getpid) for _ in range(offload.WORKERS)))

    async def search() -> tuple[ToolResult, float]:
        started = time.monotonic()
        result = await registry.call("search_files", {"pattern": "x"}, timeout=2)
        return result, time.monotonic() - started

    async def redaction() -> float:
        await asyncio.sleep(0.5)  # the search is under way
        return await timed(offload.redact_text("TOKEN " * 500), 10)  # 3,000 characters

    searching = asyncio.create_task(in_lane("task-a", search))
    redacted = await asyncio.create_task(in_lane("task-b", redaction))
    result, searched = await searching

    assert redacted < 1.0, redacted  # was 42.6 s behind the search
    assert not result.ok and "search_files timed out after 2 s" in result.output
    assert searched < 5
    # The search was stopped with its caller: the same task's next call is answered now,
    # not after the search it gave up on.
    again = asyncio.create_task(
        in_lane("task-a", lambda: registry.call("list_directory", {}, timeout=10))
    )
    assert await timed(again, 15) < 5
