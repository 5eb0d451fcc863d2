"""Text the model chooses (search patterns) and files a repository or a command leaves
in the workspace (FIFOs, huge lines) reach the workspace tools: none may hold the GIL
or a worker thread for long, and each answer says what was wrong."""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Callable
from typing import Any

import pytest

from bot.config import SandboxSettings
from bot.sandbox.sandbox import Sandbox
from bot.sandbox.workspace import Workspace
from bot.tools.registry import ToolRegistry, ToolResult
from bot.tools.workspace_tools import workspace_tools

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")


class Tools:
    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        sandbox = Sandbox(SandboxSettings(timeout=60, max_output_chars=20_000))
        self.registry = ToolRegistry(workspace_tools(ws, sandbox, max_output_chars=20_000))

    async def call(self, name: str, **args: Any) -> ToolResult:
        # Well under the registry's own timeout: a tool that blocks fails the test here.
        return await asyncio.wait_for(self.registry.call(name, args, timeout=60), timeout=10)


@pytest.fixture
async def tools(make_workspace: Callable[..., Workspace]) -> Tools:
    ws = make_workspace()
    await ws.ensure()
    return Tools(ws)


async def test_a_catastrophic_pattern_is_searched_in_linear_time(tools: Tools) -> None:
    (tools.ws.path / "evil.txt").write_text("a" * 27 + "!\n" + "a" * 5_000 + "!\n")
    started = time.perf_counter()
    result = await tools.call("search_files", pattern="(a+)+$")
    assert time.perf_counter() - started < 2.0  # Python's re: 9 s, doubling per character
    assert result.ok and "evil.txt" not in result.output.split("no matches")[0]


async def test_a_pattern_re2_cannot_run_is_refused_with_the_reason(tools: Tools) -> None:
    result = await tools.call("search_files", pattern=r"(\w)\1")
    assert not result.ok and "invalid regular expression" in result.output
    assert "back-references" in result.output
    long = await tools.call("search_files", pattern="a" * 1001)
    assert not long.ok and "at most 1000" in long.output


async def test_a_huge_minified_line_is_searched_and_shown_cut(tools: Tools) -> None:
    (tools.ws.path / "bundle.min.txt").write_text("x" * 19_000 + "NEEDLE" + "y" * 2_000_000)
    result = await tools.call("search_files", pattern="NEEDLE")
    assert result.ok and "bundle.min.txt:1:" in result.output
    assert len(result.output) < 1_000


@needs_bwrap
async def test_a_fifo_made_by_a_command_blocks_no_tool(tools: Tools) -> None:
    made = await tools.call("run_command", argv=["mkfifo", "pipe.txt"])
    assert made.ok, made.output
    assert (tools.ws.path / "pipe.txt").is_fifo()
    read = await tools.call("read_file", path="pipe.txt")
    assert not read.ok and "not a regular file" in read.output
    many = await tools.call("read_many_files", paths=["."])
    assert many.ok and "pipe.txt (not a regular file" in many.output
    search = await tools.call("search_files", pattern="anything")
    assert search.ok
    write = await tools.call("write_file", path="pipe.txt", content="x")
    assert not write.ok and "not a regular file" in write.output


@needs_bwrap
async def test_six_fifos_do_not_exhaust_the_thread_pool(tools: Tools) -> None:
    for n in range(6):
        made = await tools.call("run_command", argv=["mkfifo", f"p{n}"])
        assert made.ok, made.output
    calls = [tools.call("read_many_files", paths=[f"p{n}"]) for n in range(6)]
    calls += [tools.call("search_files", pattern="x") for _ in range(6)]
    results = await asyncio.gather(*calls)
    assert all(isinstance(r, ToolResult) for r in results)
    # the default pool still answers at once (DNS look-ups and new connections use it)
    await asyncio.wait_for(asyncio.to_thread(lambda: None), timeout=1)


@needs_bwrap
async def test_a_command_gets_the_sandbox_time_not_the_action_timeout(
    make_workspace: Callable[..., Workspace],
) -> None:
    """planning.execution.action_timeout (60 s by default) used to cut a command before
    sandbox.timeout (300 s) applied, and its output was lost."""
    ws = make_workspace()
    await ws.ensure()
    sandbox = Sandbox(SandboxSettings(timeout=20, max_output_chars=20_000))
    registry = ToolRegistry(workspace_tools(ws, sandbox, max_output_chars=20_000))
    slow = "import time; print('started', flush=True); time.sleep(2); print('finished')"
    result = await registry.call("run_command", {"argv": ["python3", "-c", slow]}, timeout=0.5)
    assert result.ok, result.output
    assert "started" in result.output and "finished" in result.output
    past = "import time; print('partial', flush=True); time.sleep(60)"
    sandbox_bound = Sandbox(SandboxSettings(timeout=2, max_output_chars=20_000))
    bounded = ToolRegistry(workspace_tools(ws, sandbox_bound, max_output_chars=20_000))
    late = await bounded.call("run_command", {"argv": ["python3", "-c", past]}, timeout=0.5)
    assert not late.ok and late.data.get("timed_out") is True
    assert "partial" in late.output  # its own time-out keeps what it printed
