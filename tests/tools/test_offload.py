"""Tool work leaves the event loop alone: few threads, large redactions off the loop.

One process serves webhooks and runs tasks; bench/ack_under_work.py measures what this
buys (webhook p99 with eight tasks searching and reading files)."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from bot import offload
from bot.config import SandboxSettings
from bot.redact import REDACTED
from bot.tools import file_search
from bot.tools.registry import Tool, ToolRegistry, ToolResult
from bot.tools.sandbox import Sandbox
from bot.tools.workspace import Workspace
from bot.tools.workspace_tools import workspace_tools


class Threads:
    """Which threads ran a function, and how many at once at most."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = 0
        self.most = 0
        self.names: set[str] = set()

    def enter(self) -> None:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
            self.names.add(threading.current_thread().name)

    def leave(self) -> None:
        with self.lock:
            self.now -= 1


async def test_eight_tasks_searching_share_the_one_offload_thread(
    make_workspace: Callable[..., Workspace], monkeypatch: pytest.MonkeyPatch
) -> None:
    threads = Threads()
    real_search = file_search.search

    def search(*args: Any, **kwargs: Any) -> str:
        threads.enter()
        try:
            time.sleep(0.05)
            return real_search(*args, **kwargs)
        finally:
            threads.leave()

    monkeypatch.setattr(file_search, "search", search)
    sandbox = Sandbox(SandboxSettings(timeout=60))
    registries = [
        ToolRegistry(workspace_tools(make_workspace(f"ws{n}"), sandbox, max_output_chars=5000))
        for n in range(8)
    ]
    calls = [r.call("search_files", {"pattern": "def"}, timeout=60) for r in registries]
    results = await asyncio.gather(*calls)
    assert all(result.ok for result in results), results
    # The default executor would have run six at once on two cores (cores + 4).
    assert threads.most <= offload.WORKERS == 1
    assert threading.main_thread().name not in threads.names


class RecordingPattern:
    """Stands in for one of redact's patterns and notes the thread that ran it."""

    def __init__(self) -> None:
        self.threads: list[str] = []
        self.inner = re.compile(r"hunter2-secret")

    def sub(self, repl: Any, text: str) -> str:
        self.threads.append(threading.current_thread().name)
        return self.inner.sub(repl, text)


async def test_a_large_tool_output_is_redacted_off_the_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import bot.redact

    pattern = RecordingPattern()
    monkeypatch.setattr(bot.redact, "_PATTERNS", (pattern,))
    outputs = {"small": "ok hunter2-secret", "large": "TOKEN" * 13_000 + " hunter2-secret"}

    async def echo(args: dict[str, Any]) -> ToolResult:
        return ToolResult.success(outputs[args["size"]])

    schema = {"type": "object", "properties": {"size": {"type": "string"}}}
    registry = ToolRegistry([Tool("echo", "echo", schema, handler=echo)])
    loop_thread = threading.current_thread().name

    small = await registry.call("echo", {"size": "small"}, timeout=10)
    assert small.output == f"ok {REDACTED}" and pattern.threads == [loop_thread]
    large = await registry.call("echo", {"size": "large"}, timeout=10)
    assert large.output.endswith(f" {REDACTED}")
    assert pattern.threads[1] != loop_thread  # 65,000 characters: not on the event loop
    assert pattern.threads[1].startswith("bot-offload")
